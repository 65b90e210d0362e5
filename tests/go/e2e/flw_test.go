package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestFLWRuokAnswersImok(t *testing.T) {
	oks := zk.FLWRuok([]string{shared.addr}, 5*time.Second)
	if len(oks) != 1 || !oks[0] {
		t.Fatalf("FLWRuok = %v, want [true]", oks)
	}
}

// go-zk parses srvr strictly, including the "built on MM/DD/YYYY HH:MM TZ" date style (see the
// fact sheet's appendix).
func TestFLWSrvrParsesServerStats(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, st, err := c.Exists(root)
	check(t, err)

	stats, ok := zk.FLWSrvr([]string{shared.addr}, 5*time.Second)
	if isApache() && (!ok || len(stats) != 1 || stats[0].Error != nil) {
		var why error
		if len(stats) == 1 {
			why = stats[0].Error
		}
		t.Skipf("ZK_KIND=apache runs ZooKeeper 3.8.0, whose srvr first line (\"3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\" in the Debian build) does not fit go-zk's pattern: %v", why)
	}
	if !ok || len(stats) != 1 || stats[0].Error != nil {
		t.Fatalf("FLWSrvr ok=%v stats=%+v", ok, stats)
	}
	s := stats[0]
	if isEnsemble() {
		if s.Mode != zk.ModeLeader && s.Mode != zk.ModeFollower {
			t.Errorf("Mode = %v, want leader or follower (ZK_TOPOLOGY=ensemble)", s.Mode)
		}
	} else if s.Mode != zk.ModeStandalone {
		t.Errorf("Mode = %v, want standalone", s.Mode)
	}
	if s.Version == "" || s.BuildTime.IsZero() {
		t.Errorf("Version %q BuildTime %v, want both set", s.Version, s.BuildTime)
	}
	if s.Connections < 1 {
		t.Errorf("Connections = %d, want >= 1 (this test's session)", s.Connections)
	}
	if s.NodeCount < 5 { // /, /zookeeper, its two children and this test's root at least
		t.Errorf("NodeCount = %d, want >= 5", s.NodeCount)
	}
	if zxid := int64(s.Epoch)<<32 | int64(uint32(s.Counter)); zxid < st.Czxid {
		t.Errorf("srvr Zxid %#x is behind a zxid already seen (%#x)", zxid, st.Czxid)
	}
}

// ZooKeeper lists the 4lw connection itself without session fields, which go-zk's cons pattern
// cannot parse, so FLWCons' ok flag is false against real ZooKeeper too; the sessions it does
// parse are what clients use.
func TestFLWConsListsOurSession(t *testing.T) {
	c := connect(t, shared.addr, withSessionTimeout(12*time.Second))
	_, _, err := c.Get("/")
	check(t, err)
	res, ok := zk.FLWCons([]string{shared.addr}, 5*time.Second)
	if len(res) != 1 {
		t.Fatalf("FLWCons returned %d servers (ok=%v)", len(res), ok)
	}
	var mine *zk.ServerClient
	for _, cl := range res[0].Clients {
		if cl.SessionID == c.SessionID() {
			mine = cl
		}
	}
	if mine == nil {
		t.Fatalf("FLWCons (ok=%v, err=%v) has no entry for session %#x among %d parsed clients", ok, res[0].Error, c.SessionID(), len(res[0].Clients))
	}
	if mine.Timeout != 12000 {
		t.Errorf("cons to=%d, want 12000", mine.Timeout)
	}
	if !strings.HasPrefix(mine.Addr, "127.0.0.1:") {
		t.Errorf("cons address = %q, want 127.0.0.1:<port>", mine.Addr)
	}
	if mine.Received < 1 {
		t.Errorf("cons recved = %d, want >= 1", mine.Received)
	}
}
