package e2e

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The server is restarted under live sessions. Session A reaches the server through a proxy that
// stays cut until B has changed some of A's watched nodes, so A reconnects late: go-zk re-sends
// its watches with SetWatches, the server must fire the missed changes at once (§5.15) and keep
// the others armed for changes made after the reconnect. Sessions and their ephemerals survive
// the restart, as in ZooKeeper.
func TestWatchesAndSessionSurviveServerRestart(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	px := newProxy(t, srv.addr)
	a := connect(t, px.addr(), withSessionTimeout(30*time.Second))
	b := connect(t, srv.addr, withSessionTimeout(30*time.Second))
	root := testRoot(t, b)
	for _, n := range []string{"later", "changed", "deleted", "parent"} {
		_, err := b.Create(root+"/"+n, []byte("0"), 0, openACL)
		check(t, err)
	}
	eph, err := a.Create(root+"/a-eph", nil, zk.FlagEphemeral, openACL)
	check(t, err)

	_, _, chLater, err := a.GetW(root + "/later")
	check(t, err)
	_, _, chChanged, err := a.GetW(root + "/changed")
	check(t, err)
	_, _, chDeleted, err := a.GetW(root + "/deleted")
	check(t, err)
	_, _, chCreated, err := a.ExistsW(root + "/created")
	check(t, err)
	_, _, chKids, err := a.ChildrenW(root + "/parent")
	check(t, err)
	sidA, sidB := a.SessionID(), b.SessionID()

	markA, markB := a.log.mark(), b.log.mark()
	px.cutOff()
	srv.restart(t)
	b.log.waitState(t, markB, zk.StateHasSession)
	if b.SessionID() != sidB {
		t.Fatalf("B's session changed across the restart: %#x -> %#x", sidB, b.SessionID())
	}

	// Changes made while A is disconnected.
	_, err = b.Set(root+"/changed", []byte("1"), -1)
	check(t, err)
	check(t, b.Delete(root+"/deleted", -1))
	_, err = b.Create(root+"/created", nil, 0, openACL)
	check(t, err)
	_, err = b.Create(root+"/parent/kid", nil, 0, openACL)
	check(t, err)
	if ok, st, err := b.Exists(eph); err != nil || !ok || st.EphemeralOwner != sidA {
		t.Fatalf("A's ephemeral after restart: exists=%v owner=%#x err=%v; want present, owned by %#x", ok, st.EphemeralOwner, err, sidA)
	}

	px.restore()
	a.log.waitState(t, markA, zk.StateHasSession)
	if a.SessionID() != sidA {
		t.Fatalf("A's session changed across the restart: %#x -> %#x", sidA, a.SessionID())
	}
	expectEvent(t, chChanged, zk.EventNodeDataChanged, root+"/changed")
	expectEvent(t, chDeleted, zk.EventNodeDeleted, root+"/deleted")
	expectEvent(t, chCreated, zk.EventNodeCreated, root+"/created")
	expectEvent(t, chKids, zk.EventNodeChildrenChanged, root+"/parent")

	// The untouched watch was re-registered, not fired, and fires on a change after reconnect.
	barrier(t, a)
	expectNoEvent(t, chLater, "watch on a node nobody changed")
	_, err = b.Set(root+"/later", []byte("1"), -1)
	check(t, err)
	expectEvent(t, chLater, zk.EventNodeDataChanged, root+"/later")
}

// A connection drop that is shorter than the session timeout keeps the session, its ephemerals
// and its watches.
func TestShortDisconnectKeepsSessionEphemeralsAndWatches(t *testing.T) {
	px := newProxy(t, shared.addr)
	a := connect(t, px.addr(), withSessionTimeout(30*time.Second))
	b := connect(t, shared.addr)
	root := testRoot(t, b)
	eph, err := a.Create(root+"/eph", nil, zk.FlagEphemeral, openACL)
	check(t, err)
	_, _, ch, err := a.GetW(root)
	check(t, err)
	sid := a.SessionID()
	mark := a.log.mark()
	px.cutOff()
	a.log.waitState(t, mark, zk.StateDisconnected)
	px.restore()
	a.log.waitState(t, mark, zk.StateHasSession)
	if a.SessionID() != sid {
		t.Fatalf("session changed across a short disconnect: %#x -> %#x", sid, a.SessionID())
	}
	if ok, _, err := b.Exists(eph); err != nil || !ok {
		t.Fatalf("ephemeral after a short disconnect: exists=%v err=%v", ok, err)
	}
	_, err = b.Set(root, []byte("x"), -1)
	check(t, err)
	expectEvent(t, ch, zk.EventNodeDataChanged, root)
}

// The client's network is cut (through the proxy) while the server keeps running: the server
// must expire the session after its timeout, delete its ephemerals (seen by another client), and
// answer the client's late reconnect with the expired handshake, which go-zk reports as
// StateExpired before it starts a new session.
func TestSessionExpiryRemovesEphemeralsAndReportsStateExpired(t *testing.T) {
	t.Parallel()
	px := newProxy(t, shared.addr)
	a := connect(t, px.addr(), withSessionTimeout(4*time.Second))
	observer := connect(t, shared.addr)
	root := testRoot(t, observer)
	eph, err := a.Create(root+"/eph", []byte("mine"), zk.FlagEphemeral, openACL)
	check(t, err)
	seq, err := a.Create(root+"/eseq-", nil, zk.FlagEphemeralSequential, openACL)
	check(t, err)
	_, _, ephGone, err := observer.ExistsW(eph)
	check(t, err)
	_, _, seqGone, err := observer.ExistsW(seq)
	check(t, err)
	_, _, kidsGone, err := observer.ChildrenW(root)
	check(t, err)
	_, _, aWatch, err := a.GetW(root)
	check(t, err)
	oldSid := a.SessionID()
	mark := a.log.mark()

	px.cutOff()
	expectEvent(t, ephGone, zk.EventNodeDeleted, eph)
	expectEvent(t, seqGone, zk.EventNodeDeleted, seq)
	expectEvent(t, kidsGone, zk.EventNodeChildrenChanged, root)
	kids, _, err := observer.Children(root)
	check(t, err)
	if len(kids) != 0 {
		t.Fatalf("children after expiry = %v, want none", kids)
	}

	px.restore()
	i := a.log.waitState(t, mark, zk.StateExpired)
	ev := waitEvent(t, aWatch, "expired session's watch")
	if ev.Type != zk.EventNotWatching || ev.Err != zk.ErrSessionExpired {
		t.Fatalf("expired session's watch got %+v, want EventNotWatching with ErrSessionExpired", ev)
	}
	a.log.waitState(t, i, zk.StateHasSession)
	if a.SessionID() == oldSid || a.SessionID() == 0 {
		t.Fatalf("after expiry go-zk has session %#x, want a new one (old %#x)", a.SessionID(), oldSid)
	}
	if ok, _, err := a.Exists(eph); err != nil || ok {
		t.Fatalf("Exists(ephemeral of the expired session) = %v, %v; want false", ok, err)
	}
}

// Auth is per connection: go-zk re-sends its AddAuth credentials (with a normal xid) after a
// reconnect, and the server must accept them so the session keeps its identity.
func TestDigestAuthIsRestoredAfterReconnect(t *testing.T) {
	px := newProxy(t, shared.addr)
	a := connect(t, px.addr(), withSessionTimeout(30*time.Second))
	check(t, a.AddAuth("digest", []byte("erin:pw")))
	admin := connect(t, shared.addr)
	root := testRoot(t, admin)
	p, err := a.Create(root+"/private", []byte("v"), 0, zk.DigestACL(zk.PermAll, "erin", "pw"))
	check(t, err)
	_, _, ch, err := a.GetW(p)
	check(t, err)

	mark := a.log.mark()
	px.cutOff()
	a.log.waitState(t, mark, zk.StateDisconnected)
	px.restore()
	a.log.waitState(t, mark, zk.StateHasSession)

	st, err := a.Set(p, []byte("after reconnect"), -1)
	if err != nil {
		t.Fatalf("Set on a digest-protected node after reconnect: %v (auth not restored?)", err)
	}
	if st.Version != 1 {
		t.Fatalf("version after Set = %d, want 1", st.Version)
	}
	expectEvent(t, ch, zk.EventNodeDataChanged, p)
	_, _, err = admin.Get(p)
	wantErr(t, "Get by a session without the digest", err, zk.ErrNoAuth)
}
