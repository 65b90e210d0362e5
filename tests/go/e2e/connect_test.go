package e2e

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// go-zk sends the old 44-byte ConnectRequest (no trailing readOnly byte). The server must accept
// it and answer with the old 36-byte ConnectResponse (no readOnly byte) — fact sheet §3.1/§3.2.
func TestConnectWithOldFormConnectRequestGetsSession(t *testing.T) {
	c := connect(t, shared.addr, withTap())

	// go-zk may have needed more than one attempt (e.g. a connection that raced server start-up);
	// every attempt uses the old form, and the one that produced the session is checked.
	hs := c.tap.handshakeList()
	var got *handshake
	for i := range hs {
		if hs[i].reqLen != 44 {
			t.Fatalf("go-zk ConnectRequest payload = %d bytes, want the old 44-byte form (test premise)", hs[i].reqLen)
		}
		if hs[i].respSession != 0 && hs[i].respSession == c.SessionID() {
			got = &hs[i]
		}
	}
	if got == nil {
		t.Fatalf("no ConnectResponse carried go-zk's session id %#x; handshakes %+v", c.SessionID(), hs)
	}
	if got.respLen != 36 {
		t.Fatalf("ConnectResponse payload = %d bytes, want 36 (no readOnly byte for an old-form request)", got.respLen)
	}
	if c.State() != zk.StateHasSession {
		t.Fatalf("State() = %v, want StateHasSession", c.State())
	}
	// The session is usable straight away.
	if _, _, err := c.Get("/"); err != nil {
		t.Fatalf("Get(/) on a fresh session: %v", err)
	}
}

func TestSessionEventsGoConnectingConnectedHasSession(t *testing.T) {
	c := connect(t, shared.addr)
	// go-zk reports Connecting, Connected (TCP up) and HasSession (handshake done) for the
	// attempt that got the session; earlier attempts may have failed while a server was starting.
	states := c.log.snapshot()
	idx := -1
	for i, s := range states {
		if s == zk.StateHasSession {
			idx = i
			break
		}
	}
	want := []zk.State{zk.StateConnecting, zk.StateConnected, zk.StateHasSession}
	if idx < 2 || states[idx-2] != want[0] || states[idx-1] != want[1] {
		t.Fatalf("session states = %v, want %v leading to the session", states, want)
	}
	if c.State() != zk.StateHasSession {
		t.Fatalf("State() = %v, want StateHasSession", c.State())
	}
}

func TestDistinctConnectionsGetDistinctSessions(t *testing.T) {
	a := connect(t, shared.addr)
	b := connect(t, shared.addr)
	if a.SessionID() == 0 || a.SessionID() == b.SessionID() {
		t.Fatalf("session ids %#x and %#x, want distinct and non-zero", a.SessionID(), b.SessionID())
	}
}

// tickTime is 2000 ms in tests/zk-server, so sessions are clamped to [4000, 40000] ms (§3.3).
func TestSessionTimeoutIsClampedToTickTimeBounds(t *testing.T) {
	for _, tc := range []struct {
		ask  time.Duration
		want int32
	}{
		{1 * time.Second, 4000},
		{10 * time.Second, 10000},
		{300 * time.Second, 40000},
	} {
		c := connect(t, shared.addr, withTap(), withSessionTimeout(tc.ask))
		list := c.tap.handshakeList()
		hs := list[len(list)-1]
		if hs.reqTimeout != int32(tc.ask/time.Millisecond) {
			t.Fatalf("go-zk asked for %d ms, want %d (test premise)", hs.reqTimeout, tc.ask/time.Millisecond)
		}
		if hs.respTimeout != tc.want {
			t.Errorf("asked %v: negotiated timeout %d ms, want %d", tc.ask, hs.respTimeout, tc.want)
		}
		c.Close()
	}
}

func TestCloseEndsTheSessionAndItsEphemerals(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	owner := connect(t, shared.addr)
	eph, err := owner.Create(root+"/eph", []byte("x"), zk.FlagEphemeral, openACL)
	check(t, err)
	_, _, ch, err := c.ExistsW(eph)
	check(t, err)
	owner.Close()
	expectEvent(t, ch, zk.EventNodeDeleted, eph)
	if ok, _, err := c.Exists(eph); err != nil || ok {
		t.Fatalf("Exists(%s) after owner closed = %v, %v; want false", eph, ok, err)
	}
}
