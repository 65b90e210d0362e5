package e2e

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// barrier makes one round trip on c. Notifications for changes that completed before it was
// issued reach c before its reply (fact sheet §8.8), so afterwards "no event yet" means "none".
func barrier(t *testing.T, c *client) {
	t.Helper()
	if _, _, err := c.Exists("/"); err != nil {
		t.Fatalf("barrier round trip: %v", err)
	}
}

func (w *wireTap) all() []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]notification(nil), w.notifications...)
}

func TestGetWFiresNodeDataChangedOnSet(t *testing.T) {
	w := connect(t, shared.addr, withTap())
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", []byte("a"), 0, openACL)
	check(t, err)
	d, _, ch, err := w.GetW(p)
	check(t, err)
	if string(d) != "a" {
		t.Fatalf("GetW data = %q", d)
	}
	writer := connect(t, shared.addr)
	_, err = writer.Set(p, []byte("b"), -1)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeDataChanged, p)
}

func TestWatchesAreOneShotOnTheServer(t *testing.T) {
	w := connect(t, shared.addr, withTap())
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.GetW(p)
	check(t, err)
	writer := connect(t, shared.addr)
	_, err = writer.Set(p, []byte("1"), -1)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeDataChanged, p)
	_, err = writer.Set(p, []byte("2"), -1)
	check(t, err)
	check(t, writer.Delete(p, -1))
	barrier(t, w)
	if n := w.tap.notificationsFor(p); len(n) != 1 {
		t.Fatalf("server sent %d notifications for %s after one GetW, want exactly 1: %+v", len(n), p, n)
	}
	// Re-arming gives exactly one more.
	_, err = writer.Create(p, nil, 0, openACL)
	check(t, err)
	_, _, ch2, err := w.GetW(p)
	check(t, err)
	_, err = writer.Set(p, []byte("3"), -1)
	check(t, err)
	expectEvent(t, ch2, zk.EventNodeDataChanged, p)
	barrier(t, w)
	if n := w.tap.notificationsFor(p); len(n) != 2 {
		t.Fatalf("server sent %d notifications for %s after two GetW, want 2", len(n), p)
	}
}

func TestGetWFiresNodeDeletedOnDelete(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.GetW(p)
	check(t, err)
	other := connect(t, shared.addr)
	check(t, other.Delete(p, -1))
	expectEvent(t, ch, zk.EventNodeDeleted, p)
}

func TestExistsWOnMissingNodeFiresNodeCreated(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p := root + "/later"
	ok, _, ch, err := w.ExistsW(p)
	check(t, err)
	if ok {
		t.Fatal("node exists before creation")
	}
	other := connect(t, shared.addr)
	_, err = other.Create(p, nil, 0, openACL)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeCreated, p)
}

func TestExistsWOnExistingNodeFiresDataChangedThenDeleted(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	other := connect(t, shared.addr)

	ok, _, ch, err := w.ExistsW(p)
	check(t, err)
	if !ok {
		t.Fatal("ExistsW says missing")
	}
	_, err = other.Set(p, []byte("x"), -1)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeDataChanged, p)

	_, _, ch, err = w.ExistsW(p)
	check(t, err)
	check(t, other.Delete(p, -1))
	expectEvent(t, ch, zk.EventNodeDeleted, p)
}

func TestChildrenWFiresNodeChildrenChangedOnCreateAndDelete(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	other := connect(t, shared.addr)

	_, _, ch, err := w.ChildrenW(root)
	check(t, err)
	kid, err := other.Create(root+"/kid", nil, 0, openACL)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeChildrenChanged, root)

	kids, _, ch, err := w.ChildrenW(root)
	check(t, err)
	if len(kids) != 1 || kids[0] != "kid" {
		t.Fatalf("children = %v, want [kid]", kids)
	}
	check(t, other.Delete(kid, -1))
	expectEvent(t, ch, zk.EventNodeChildrenChanged, root)
}

func TestChildrenWIgnoresChildDataAndGrandchildren(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	kid, err := w.Create(root+"/kid", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.ChildrenW(root)
	check(t, err)
	other := connect(t, shared.addr)
	_, err = other.Set(kid, []byte("data"), -1)
	check(t, err)
	_, err = other.Create(kid+"/grandchild", nil, 0, openACL)
	check(t, err)
	_, err = other.Set(root, []byte("own data"), -1)
	check(t, err)
	barrier(t, w)
	expectNoEvent(t, ch, "child watch after child setData, grandchild create and own setData")
}

func TestChildrenWFiresNodeDeletedWhenTheNodeGoes(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.ChildrenW(p)
	check(t, err)
	other := connect(t, shared.addr)
	check(t, other.Delete(p, -1))
	expectEvent(t, ch, zk.EventNodeDeleted, p)
}

// Create fires NodeCreated on the node before NodeChildrenChanged on the parent; delete fires one
// NodeDeleted per connection (data and child watch together) before the parent's event (§8.4).
func TestOneTxnFiresNodeEventBeforeParentEventAndOncePerConnection(t *testing.T) {
	w := connect(t, shared.addr, withTap())
	root := testRoot(t, w)
	p := root + "/n"
	_, _, existCh, err := w.ExistsW(p)
	check(t, err)
	_, _, parentCh, err := w.ChildrenW(root)
	check(t, err)
	other := connect(t, shared.addr)
	_, err = other.Create(p, nil, 0, openACL)
	check(t, err)
	expectEvent(t, existCh, zk.EventNodeCreated, p)
	expectEvent(t, parentCh, zk.EventNodeChildrenChanged, root)

	_, _, dataCh, err := w.GetW(p)
	check(t, err)
	_, _, childCh, err := w.ChildrenW(p)
	check(t, err)
	_, _, parentCh, err = w.ChildrenW(root)
	check(t, err)
	check(t, other.Delete(p, -1))
	expectEvent(t, dataCh, zk.EventNodeDeleted, p)
	expectEvent(t, childCh, zk.EventNodeDeleted, p)
	expectEvent(t, parentCh, zk.EventNodeChildrenChanged, root)
	barrier(t, w)

	var got []notification
	for _, n := range w.tap.all() {
		if n.path == p || n.path == root {
			got = append(got, n)
		}
	}
	want := []notification{
		{typ: int32(zk.EventNodeCreated), path: p},
		{typ: int32(zk.EventNodeChildrenChanged), path: root},
		{typ: int32(zk.EventNodeDeleted), path: p},
		{typ: int32(zk.EventNodeChildrenChanged), path: root},
	}
	if len(got) != len(want) {
		t.Fatalf("notifications on the wire = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].path != want[i].path || got[i].state != int32(zk.StateSyncConnected) {
			t.Fatalf("notification #%d = %+v, want type %d path %s state 3 (all: %+v)", i, got[i], want[i].typ, want[i].path, got)
		}
	}
}

// A connection that watches a node and changes it itself sees the event before its own reply.
func TestWriterSeesItsOwnNotificationBeforeTheReply(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.GetW(p)
	check(t, err)
	_, err = w.Set(p, []byte("self"), -1)
	check(t, err)
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != p {
			t.Fatalf("event = %+v", ev)
		}
	default:
		t.Fatal("Set returned before the watcher's NodeDataChanged was delivered")
	}
}

func TestSetACLFiresNoWatch(t *testing.T) {
	w := connect(t, shared.addr)
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, dataCh, err := w.GetW(p)
	check(t, err)
	_, _, childCh, err := w.ChildrenW(p)
	check(t, err)
	other := connect(t, shared.addr)
	_, err = other.SetACL(p, zk.WorldACL(zk.PermAll&^zk.PermDelete), -1)
	check(t, err)
	barrier(t, w)
	expectNoEvent(t, dataCh, "data watch after SetACL")
	expectNoEvent(t, childCh, "child watch after SetACL")
}

func TestNotificationCarriesTheTriggeringZxid(t *testing.T) {
	skipOnApache(t, "3.8 sends zxid -1 in notification headers; 3.9.0 sends the triggering txn's zxid (fact sheet §8.1)")
	w := connect(t, shared.addr, withTap())
	root := testRoot(t, w)
	p, err := w.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := w.GetW(p)
	check(t, err)
	other := connect(t, shared.addr)
	st, err := other.Set(p, []byte("z"), -1)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeDataChanged, p)
	n := w.tap.notificationsFor(p)
	if len(n) != 1 || n[0].zxid != st.Mzxid {
		t.Fatalf("notification headers for %s = %+v, want one with zxid %#x (the setData's mzxid)", p, n, st.Mzxid)
	}
}

func TestPersistentWatchesNeedAddWatch(t *testing.T) {
	t.Skip("go-zookeeper v1.0.4, its latest release, has no AddWatch (opcode 106), so persistent and persistent-recursive watches cannot be driven from go-zk")
}
