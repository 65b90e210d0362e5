package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestCreatePersistentThenGetReturnsDataAndFreshStat(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	before := time.Now().Add(-time.Minute).UnixMilli()
	p, err := c.Create(root+"/n", []byte("hello"), 0, openACL)
	check(t, err)
	if p != root+"/n" {
		t.Fatalf("Create returned %q, want %q", p, root+"/n")
	}
	data, st, err := c.Get(p)
	check(t, err)
	if string(data) != "hello" {
		t.Fatalf("data = %q, want hello", data)
	}
	if st.Version != 0 || st.Cversion != 0 || st.Aversion != 0 {
		t.Errorf("versions = %d/%d/%d, want 0/0/0", st.Version, st.Cversion, st.Aversion)
	}
	if st.Czxid <= 0 || st.Mzxid != st.Czxid || st.Pzxid != st.Czxid {
		t.Errorf("czxid/mzxid/pzxid = %#x/%#x/%#x, want equal and positive", st.Czxid, st.Mzxid, st.Pzxid)
	}
	if st.Ctime != st.Mtime || st.Ctime < before {
		t.Errorf("ctime/mtime = %d/%d, want equal and recent", st.Ctime, st.Mtime)
	}
	if st.EphemeralOwner != 0 || st.DataLength != 5 || st.NumChildren != 0 {
		t.Errorf("ephemeralOwner/dataLength/numChildren = %#x/%d/%d, want 0/5/0", st.EphemeralOwner, st.DataLength, st.NumChildren)
	}
}

func TestNullDataStaysNullAndEmptyDataStaysEmpty(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, err := c.Create(root+"/null", nil, 0, openACL)
	check(t, err)
	_, err = c.Create(root+"/empty", []byte{}, 0, openACL)
	check(t, err)
	d, st, err := c.Get(root + "/null")
	check(t, err)
	if d != nil || st.DataLength != 0 {
		t.Errorf("null data came back as %#v (dataLength %d), want nil", d, st.DataLength)
	}
	d, st, err = c.Get(root + "/empty")
	check(t, err)
	if d == nil || len(d) != 0 || st.DataLength != 0 {
		t.Errorf("empty data came back as %#v (dataLength %d), want non-nil empty", d, st.DataLength)
	}
}

func TestSetDataBumpsVersionAndMzxidOnly(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.Create(root+"/n", []byte("a"), 0, openACL)
	check(t, err)
	_, st0, err := c.Get(p)
	check(t, err)
	st1, err := c.Set(p, []byte("bb"), 0)
	check(t, err)
	if st1.Version != 1 || st1.DataLength != 2 || st1.Czxid != st0.Czxid || st1.Ctime != st0.Ctime {
		t.Fatalf("after Set: version %d dataLength %d czxid %#x ctime %d; want 1, 2, %#x, %d", st1.Version, st1.DataLength, st1.Czxid, st1.Ctime, st0.Czxid, st0.Ctime)
	}
	if st1.Mzxid <= st0.Mzxid || st1.Mtime < st0.Mtime || st1.Pzxid != st0.Pzxid {
		t.Fatalf("after Set: mzxid %#x (was %#x), mtime %d (was %d), pzxid %#x (was %#x)", st1.Mzxid, st0.Mzxid, st1.Mtime, st0.Mtime, st1.Pzxid, st0.Pzxid)
	}
	// Same data again still counts as a change.
	st2, err := c.Set(p, []byte("bb"), 1)
	check(t, err)
	if st2.Version != 2 {
		t.Fatalf("Set with identical data: version %d, want 2", st2.Version)
	}
	// Version -1 matches any version.
	st3, err := c.Set(p, []byte("c"), -1)
	check(t, err)
	if st3.Version != 3 {
		t.Fatalf("Set with version -1: version %d, want 3", st3.Version)
	}
	data, stg, err := c.Get(p)
	check(t, err)
	if string(data) != "c" || *stg != *st3 {
		t.Fatalf("Get after Set = %q %+v, want %q %+v", data, *stg, "c", *st3)
	}
	_, err = c.Set(p, []byte("d"), 1)
	wantErr(t, "Set with stale version", err, zk.ErrBadVersion)
}

func TestChildCreateAndDeleteUpdateParentStat(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, p0, err := c.Exists(root)
	check(t, err)
	a, err := c.Create(root+"/a", nil, 0, openACL)
	check(t, err)
	_, sa, err := c.Exists(a)
	check(t, err)
	_, p1, err := c.Exists(root)
	check(t, err)
	if p1.Cversion != p0.Cversion+1 || p1.NumChildren != 1 || p1.Pzxid != sa.Czxid {
		t.Fatalf("after child create: cversion %d numChildren %d pzxid %#x; want %d, 1, %#x", p1.Cversion, p1.NumChildren, p1.Pzxid, p0.Cversion+1, sa.Czxid)
	}
	if p1.Version != p0.Version || p1.Mzxid != p0.Mzxid {
		t.Fatalf("child create changed the parent's data version/mzxid")
	}
	_, err = c.Set(a, []byte("x"), -1)
	check(t, err)
	_, p2, err := c.Exists(root)
	check(t, err)
	if p2.Pzxid != p1.Pzxid || p2.Cversion != p1.Cversion {
		t.Fatalf("setData on a child changed the parent's pzxid/cversion")
	}
	check(t, c.Delete(a, -1))
	_, p3, err := c.Exists(root)
	check(t, err)
	if p3.Cversion != p1.Cversion+1 || p3.NumChildren != 0 || p3.Pzxid <= p2.Pzxid {
		t.Fatalf("after child delete: cversion %d numChildren %d pzxid %#x; want %d, 0, > %#x", p3.Cversion, p3.NumChildren, p3.Pzxid, p1.Cversion+1, p2.Pzxid)
	}
}

func TestChildrenListsBareNamesWithParentStat(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	want := []string{"a", "b", "c-d", "e.f"}
	for _, n := range want {
		_, err := c.Create(root+"/"+n, nil, 0, openACL)
		check(t, err)
	}
	_, err := c.Create(root+"/a/grandchild", nil, 0, openACL)
	check(t, err)
	kids, st, err := c.Children(root)
	check(t, err)
	sort.Strings(kids)
	if strings.Join(kids, ",") != strings.Join(want, ",") {
		t.Fatalf("Children = %v, want %v", kids, want)
	}
	if st.NumChildren != int32(len(want)) {
		t.Fatalf("parent stat numChildren = %d, want %d", st.NumChildren, len(want))
	}
	kids, _, err = c.Children(root + "/b")
	check(t, err)
	if len(kids) != 0 {
		t.Fatalf("Children of a leaf = %v, want none", kids)
	}
	_, _, err = c.Children(root + "/missing")
	wantErr(t, "Children of a missing node", err, zk.ErrNoNode)
}

func TestExistsReportsPresenceAndStat(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	ok, _, err := c.Exists(root + "/x")
	if err != nil || ok {
		t.Fatalf("Exists(missing) = %v, %v; want false, nil", ok, err)
	}
	_, err = c.Create(root+"/x", []byte("12345"), 0, openACL)
	check(t, err)
	ok, st, err := c.Exists(root + "/x")
	if err != nil || !ok || st.DataLength != 5 || st.Czxid == 0 {
		t.Fatalf("Exists(present) = %v, %+v, %v; want true with dataLength 5", ok, st, err)
	}
}

func TestDeleteHonoursVersion(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.Create(root+"/n", nil, 0, openACL)
	check(t, err)
	_, err = c.Set(p, []byte("v1"), 0)
	check(t, err)
	wantErr(t, "Delete with stale version", c.Delete(p, 0), zk.ErrBadVersion)
	check(t, c.Delete(p, 1))
	wantErr(t, "Delete twice", c.Delete(p, -1), zk.ErrNoNode)
	q, err := c.Create(root+"/m", nil, 0, openACL)
	check(t, err)
	check(t, c.Delete(q, -1))
}

var seqSuffix = regexp.MustCompile(`^(.*)(\d{10})$`)

func seqOf(t *testing.T, p string) (string, int) {
	t.Helper()
	m := seqSuffix.FindStringSubmatch(p)
	if m == nil {
		t.Fatalf("%q has no 10-digit sequence suffix", p)
	}
	var n int
	fmt.Sscanf(m[2], "%d", &n)
	return m[1], n
}

func TestSequentialCreateAppendsTenDigitCounter(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p0, err := c.Create(root+"/job-", []byte("a"), zk.FlagSequence, openACL)
	check(t, err)
	p1, err := c.Create(root+"/job-", []byte("b"), zk.FlagSequence, openACL)
	check(t, err)
	if p0 != root+"/job-0000000000" || p1 != root+"/job-0000000001" {
		t.Fatalf("sequential names = %q, %q; want %s/job-0000000000 and ...0001", p0, p1, root)
	}
	d, st, err := c.Get(p1)
	check(t, err)
	if string(d) != "b" || st.EphemeralOwner != 0 {
		t.Fatalf("sequential node data %q owner %#x, want b, 0", d, st.EphemeralOwner)
	}
}

// The suffix is the parent's count of child creations (any kind); deletes never free a number.
func TestSequenceNumbersCountAllChildCreationsAndAreNeverReused(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	a, err := c.Create(root+"/plain", nil, 0, openACL)
	check(t, err)
	check(t, c.Delete(a, -1))
	s1, err := c.Create(root+"/s-", nil, zk.FlagSequence, openACL)
	check(t, err)
	if s1 != root+"/s-0000000001" {
		t.Fatalf("after one plain create+delete, sequential name = %q, want %s/s-0000000001", s1, root)
	}
	check(t, c.Delete(s1, -1))
	s2, err := c.Create(root+"/s-", nil, zk.FlagSequence, openACL)
	check(t, err)
	if s2 != root+"/s-0000000002" {
		t.Fatalf("sequential name after deleting the previous one = %q, want %s/s-0000000002", s2, root)
	}
	_, st, err := c.Exists(root)
	check(t, err)
	if st.Cversion != 5 { // 3 creations + 2 deletions
		t.Fatalf("parent cversion = %d, want 5 (3 creates + 2 deletes)", st.Cversion)
	}
}

func TestEphemeralNodeIsOwnedByTheSession(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.Create(root+"/e", []byte("x"), zk.FlagEphemeral, openACL)
	check(t, err)
	_, st, err := c.Exists(p)
	check(t, err)
	if st.EphemeralOwner != c.SessionID() {
		t.Fatalf("ephemeralOwner = %#x, want the session id %#x", st.EphemeralOwner, c.SessionID())
	}
	_, err = c.Create(p+"/child", nil, 0, openACL)
	wantErr(t, "create under an ephemeral", err, zk.ErrNoChildrenForEphemerals)
}

func TestEphemeralSequentialCombinesBothFlags(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	owner := connect(t, shared.addr)
	p, err := owner.Create(root+"/es-", nil, zk.FlagEphemeral|zk.FlagSequence, openACL)
	check(t, err)
	if base, n := seqOf(t, p); base != root+"/es-" || n != 0 {
		t.Fatalf("ephemeral sequential name = %q", p)
	}
	_, st, err := c.Exists(p)
	check(t, err)
	if st.EphemeralOwner != owner.SessionID() {
		t.Fatalf("ephemeralOwner = %#x, want %#x", st.EphemeralOwner, owner.SessionID())
	}
	_, _, ch, err := c.ExistsW(p)
	check(t, err)
	owner.Close()
	expectEvent(t, ch, zk.EventNodeDeleted, p)
}

func TestCreateProtectedEphemeralSequentialNamesNodeWithGUIDPrefix(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.CreateProtectedEphemeralSequential(root+"/lock-", []byte("d"), openACL)
	check(t, err)
	re := regexp.MustCompile("^" + regexp.QuoteMeta(root) + `/_c_[0-9a-f]{32}-lock-\d{10}$`)
	if !re.MatchString(p) {
		t.Fatalf("protected name = %q, want %s/_c_<32 hex>-lock-<10 digits>", p, root)
	}
	_, st, err := c.Exists(p)
	check(t, err)
	if st.EphemeralOwner != c.SessionID() {
		t.Fatalf("protected node ephemeralOwner = %#x, want %#x", st.EphemeralOwner, c.SessionID())
	}
}

func TestContainerIsDeletedOnceItsLastChildGoes(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.CreateContainer(root+"/box", []byte("c"), zk.FlagContainer, openACL)
	check(t, err)
	if p != root+"/box" {
		t.Fatalf("CreateContainer returned %q", p)
	}
	_, st, err := c.Exists(p)
	check(t, err)
	if st.EphemeralOwner != 0 {
		t.Fatalf("container ephemeralOwner = %#x, want 0", st.EphemeralOwner)
	}
	kid, err := c.Create(p+"/item", nil, 0, openACL)
	check(t, err)
	_, _, ch, err := c.ExistsW(p)
	check(t, err)
	check(t, c.Delete(kid, -1))
	// The shared server runs the container reaper every second (znode.container.checkIntervalMs).
	expectEvent(t, ch, zk.EventNodeDeleted, p)
}

func TestTTLNodeExpiresWhenExtendedTypesEnabled(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.CreateTTL(root+"/ttl", []byte("t"), zk.FlagTTL, openACL, 500*time.Millisecond)
	check(t, err)
	if p != root+"/ttl" {
		t.Fatalf("CreateTTL returned %q", p)
	}
	// On a slow machine the reaper may take the 500 ms node before the watch is set.
	found, st, ch, err := c.ExistsW(p)
	check(t, err)
	if found {
		if st.EphemeralOwner != 0 {
			t.Fatalf("TTL node ephemeralOwner = %#x, want 0", st.EphemeralOwner)
		}
		expectEvent(t, ch, zk.EventNodeDeleted, p)
	}

	sp, err := c.CreateTTL(root+"/ttlseq-", nil, zk.FlagPersistentSequentialWithTTL, openACL, time.Hour)
	check(t, err)
	if sp != root+"/ttlseq-0000000001" {
		t.Fatalf("sequential TTL create returned %q, want %s/ttlseq-0000000001", sp, root)
	}
}

func TestTTLOutOfRangeIsBadArguments(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, err := c.CreateTTL(root+"/zero", nil, zk.FlagTTL, openACL, 0)
	wantErr(t, "CreateTTL with ttl 0", err, zk.ErrBadArguments)
	_, err = c.CreateTTL(root+"/huge", nil, zk.FlagTTL, openACL, time.Duration(1<<40)*time.Millisecond)
	wantErr(t, "CreateTTL with ttl 2^40 ms", err, zk.ErrBadArguments)
	if ok, _, _ := c.Exists(root + "/zero"); ok {
		t.Fatal("rejected TTL create left a node behind")
	}
}

func TestCreateErrors(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, err := c.Create(root+"/no/parent", nil, 0, openACL)
	wantErr(t, "create with a missing parent", err, zk.ErrNoNode)
	_, err = c.Create(root+"/dup", nil, 0, openACL)
	check(t, err)
	_, err = c.Create(root+"/dup", nil, 0, openACL)
	wantErr(t, "create of an existing node", err, zk.ErrNodeExists)
	_, err = c.Create(root+"/dup", nil, zk.FlagEphemeral, openACL)
	wantErr(t, "ephemeral create of an existing node", err, zk.ErrNodeExists)
}

func TestMissingNodeOperationsReturnErrNoNode(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	m := root + "/missing"
	_, _, err := c.Get(m)
	wantErr(t, "Get", err, zk.ErrNoNode)
	_, err = c.Set(m, nil, -1)
	wantErr(t, "Set", err, zk.ErrNoNode)
	wantErr(t, "Delete", c.Delete(m, -1), zk.ErrNoNode)
	_, _, err = c.GetACL(m)
	wantErr(t, "GetACL", err, zk.ErrNoNode)
	_, err = c.SetACL(m, openACL, -1)
	wantErr(t, "SetACL", err, zk.ErrNoNode)
	_, _, _, err = c.GetW(m)
	wantErr(t, "GetW", err, zk.ErrNoNode)
	_, _, _, err = c.ChildrenW(m)
	wantErr(t, "ChildrenW", err, zk.ErrNoNode)
}

func TestDeleteOfNodeWithChildrenIsErrNotEmpty(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, err := c.Create(root+"/kid", nil, 0, openACL)
	check(t, err)
	wantErr(t, "Delete parent", c.Delete(root, -1), zk.ErrNotEmpty)
	check(t, c.Delete(root+"/kid", -1))
	check(t, c.Delete(root, -1))
}

func TestServerRejectsBadPathsAndProtectedNodesWithErrBadArguments(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	for _, p := range []string{"/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		wantErr(t, "Delete "+p, c.Delete(p, -1), zk.ErrBadArguments)
	}
	// go-zk's local path check lets these through; the server must reject them (§5.13).
	for _, name := range []string{"emoji-\U0001F600", "private-use-\ue000"} {
		_, err := c.Create(root+"/"+name, nil, 0, openACL)
		wantErr(t, fmt.Sprintf("Create %q", name), err, zk.ErrBadArguments)
	}
	kids, _, err := c.Children(root)
	check(t, err)
	if len(kids) != 0 {
		t.Fatalf("rejected creates left children %v", kids)
	}
}

func TestBuiltInZookeeperNodesExist(t *testing.T) {
	c := connect(t, shared.addr)
	kids, _, err := c.Children("/zookeeper")
	check(t, err)
	sort.Strings(kids)
	if strings.Join(kids, ",") != "config,quota" {
		t.Fatalf("children of /zookeeper = %v, want [config quota]", kids)
	}
	data, _, err := c.Get("/zookeeper/config")
	check(t, err)
	if !isEnsemble() {
		if len(data) != 0 {
			t.Fatalf("/zookeeper/config in standalone = %q, want empty", data)
		}
		return
	}
	// An ensemble publishes its membership as zoo.cfg lists it, then the config version (Apache
	// 3.8: "server.1=127.0.0.1:Q:E:participant\n...\nversion=0").
	want := ensembleServerLines(t, shared)
	lines := strings.Split(string(data), "\n")
	last := lines[len(lines)-1]
	if strings.Join(lines[:len(lines)-1], "\n") != strings.Join(want, "\n") ||
		!regexp.MustCompile(`^version=[0-9a-f]+$`).MatchString(last) {
		t.Fatalf("/zookeeper/config in an ensemble = %q, want %q then version=<hex>", data, want)
	}
}

// ensembleServerLines reads DIR/ensemble.json (tests/ensemble) of an ensemble started by
// tests/zk-server and returns its server.N=host:quorum:election:role lines, in id order.
func ensembleServerLines(t *testing.T, s *zkServer) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.dir, "ensemble.json"))
	check(t, err)
	var layout struct {
		Servers map[string]struct {
			QuorumPort   int    `json:"quorum_port"`
			ElectionPort int    `json:"election_port"`
			Role         string `json:"role"`
		} `json:"servers"`
	}
	check(t, json.Unmarshal(raw, &layout))
	var lines []string
	for id := 1; id <= len(layout.Servers); id++ {
		srv := layout.Servers[strconv.Itoa(id)]
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d:%s", id, srv.QuorumPort, srv.ElectionPort, srv.Role))
	}
	return lines
}

func TestSyncEchoesThePath(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	p, err := c.Sync(root)
	check(t, err)
	if p != root {
		t.Fatalf("Sync returned %q, want %q", p, root)
	}
	// A write by another session is visible after sync.
	other := connect(t, shared.addr)
	_, err = other.Create(root+"/after", []byte("v"), 0, openACL)
	check(t, err)
	_, err = c.Sync(root + "/after")
	check(t, err)
	d, _, err := c.Get(root + "/after")
	if err != nil || !bytes.Equal(d, []byte("v")) {
		t.Fatalf("Get after Sync = %q, %v", d, err)
	}
}
