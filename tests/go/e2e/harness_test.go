// Package e2e is the end-to-end suite for zoolog driven by the real go-zookeeper client.
//
// Every server is started through tests/zk-server, so the same tests run against zoolog
// (ZK_KIND=zoolog, the default) and Apache ZooKeeper (ZK_KIND=apache). Most tests share one
// server started in TestMain; tests that restart, reconfigure or starve a server start their own
// in a t.TempDir().
package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// waitTimeout bounds every wait for an event or a state. It is generous on purpose: it only
// decides how long a broken server takes to fail a test, never whether a healthy one passes.
const waitTimeout = 30 * time.Second

// suiteWatchdog aborts the whole run (with all goroutine stacks) if something hangs.
const suiteWatchdog = 5 * time.Minute

var (
	kind = envOr("ZK_KIND", "zoolog")
	// topology is ZK_TOPOLOGY: standalone (default) or ensemble, where tests/zk-server starts a
	// 3-server ensemble and hands out the client port of its leader or of a follower.
	topology = envOr("ZK_TOPOLOGY", "standalone")
	shared   *zkServer // started by TestMain; extended types on, container reaper every second
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func isApache() bool { return kind == "apache" }

func isEnsemble() bool { return topology == "ensemble" }

// skipOnApache skips a case that checks ZooKeeper 3.9 behaviour which the installed Apache
// ZooKeeper 3.8.0 does not have yet.
func skipOnApache(t *testing.T, reason string) {
	t.Helper()
	if isApache() {
		t.Skipf("ZK_KIND=apache runs ZooKeeper 3.8.0: %s", reason)
	}
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	watchdog := time.AfterFunc(suiteWatchdog, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		fmt.Fprintf(os.Stderr, "e2e: suite still running after %v; goroutines:\n%s\n", suiteWatchdog, buf[:n])
		os.Exit(3)
	})
	defer watchdog.Stop()

	dir, err := os.MkdirTemp("", "zoolog-go-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = startServer(filepath.Join(dir, "shared"),
		"-Dzookeeper.extendedTypesEnabled=true",
		"-Dznode.container.checkIntervalMs=1000")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the shared server:", err)
		return 1
	}
	defer shared.ctl("stop")
	return m.Run()
}

// ---------------------------------------------------------------------------------------------
// Servers, through tests/zk-server.

type zkServer struct {
	dir  string
	addr string
}

func scriptPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "zk-server")
}

func startServer(dir string, args ...string) (*zkServer, error) {
	s := &zkServer{dir: dir}
	port, err := s.ctl("start", args...)
	if err != nil {
		return nil, err
	}
	s.addr = "127.0.0.1:" + port
	return s, nil
}

// ctl runs `tests/zk-server CMD DIR ARGS...` and returns its trimmed stdout.
func (s *zkServer) ctl(cmd string, args ...string) (string, error) {
	c := exec.Command(scriptPath(), append([]string{cmd, s.dir}, args...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("zk-server %s %s: %v\n%s%s", cmd, s.dir, err, out.String(), errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// newServer starts a private server for one test and stops it when the test ends.
func newServer(t *testing.T, args ...string) *zkServer {
	t.Helper()
	s, err := startServer(filepath.Join(t.TempDir(), "zk"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ctl("stop") })
	return s
}

// restart stops the server (SIGTERM) and starts it again with the same config, data and port.
func (s *zkServer) restart(t *testing.T) {
	t.Helper()
	if _, err := s.ctl("stop"); err != nil {
		t.Fatal(err)
	}
	port, err := s.ctl("restart")
	if err != nil {
		t.Fatal(err)
	}
	if want := s.addr[strings.LastIndex(s.addr, ":")+1:]; port != want {
		t.Fatalf("restart moved the server from port %s to %s", want, port)
	}
}

// ---------------------------------------------------------------------------------------------
// Clients.

// sessionLog records every session-state event a go-zk Conn reports, in order.
type sessionLog struct {
	mu      sync.Mutex
	states  []zk.State
	changed chan struct{} // closed and replaced on every append
}

func newSessionLog() *sessionLog { return &sessionLog{changed: make(chan struct{})} }

func (l *sessionLog) callback(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	l.mu.Lock()
	l.states = append(l.states, ev.State)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// mark returns the index of the next state to be recorded.
func (l *sessionLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.states)
}

func (l *sessionLog) snapshot() []zk.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]zk.State(nil), l.states...)
}

// waitState waits until state s is recorded at an index >= from and returns that index.
func (l *sessionLog) waitState(t *testing.T, from int, s zk.State) int {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		l.mu.Lock()
		for i := from; i < len(l.states); i++ {
			if l.states[i] == s {
				l.mu.Unlock()
				return i
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %v within %v; session states since #%d: %v", s, waitTimeout, from, l.snapshot()[from:])
		}
	}
}

type client struct {
	*zk.Conn
	log *sessionLog
	tap *wireTap // nil unless connected with withTap
}

type connOpts struct {
	timeout time.Duration
	tap     bool
}

type connOpt func(*connOpts)

func withSessionTimeout(d time.Duration) connOpt { return func(o *connOpts) { o.timeout = d } }
func withTap() connOpt                           { return func(o *connOpts) { o.tap = true } }

// testLogger forwards go-zk's log lines to t.Logf while the test runs and drops them after.
type testLogger struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (l *testLogger) Printf(format string, args ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("go-zk: "+format, args...)
	}
}

// connect opens a go-zk Conn to addr, waits for StateHasSession and closes it when the test ends.
func connect(t *testing.T, addr string, opts ...connOpt) *client {
	t.Helper()
	o := connOpts{timeout: 10 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	c := &client{log: newSessionLog()}
	logger := &testLogger{t: t}
	dial := zk.Dialer(net.DialTimeout)
	if o.tap {
		c.tap = &wireTap{}
		dial = c.tap.dial
	}
	conn, _, err := zk.Connect([]string{addr}, o.timeout,
		zk.WithLogger(logger), zk.WithEventCallback(c.log.callback), zk.WithDialer(dial))
	if err != nil {
		t.Fatalf("zk.Connect(%s): %v", addr, err)
	}
	c.Conn = conn
	t.Cleanup(func() {
		conn.Close()
		logger.mu.Lock()
		logger.done = true
		logger.mu.Unlock()
	})
	c.log.waitState(t, 0, zk.StateHasSession)
	return c
}

// ---------------------------------------------------------------------------------------------
// Small assertion helpers.

// waitEvent waits for the single event a go-zk watch channel delivers.
func waitEvent(t *testing.T, ch <-chan zk.Event, what string) zk.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed without an event", what)
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no watch event within %v", what, waitTimeout)
	}
	return zk.Event{}
}

func expectEvent(t *testing.T, ch <-chan zk.Event, typ zk.EventType, path string) {
	t.Helper()
	ev := waitEvent(t, ch, fmt.Sprintf("%v on %s", typ, path))
	if ev.Type != typ || ev.Path != path || ev.Err != nil {
		t.Fatalf("watch event = {Type:%v Path:%q Err:%v}, want {Type:%v Path:%q}", ev.Type, ev.Path, ev.Err, typ, path)
	}
	if ev.State != zk.StateSyncConnected {
		t.Fatalf("watch event state = %v, want StateSyncConnected", ev.State)
	}
}

// expectNoEvent checks that a watch has not fired. Call it after a round trip on the watching
// connection that was issued after the change: the server sends a change's notifications before
// any reply that reflects the change (fact sheet §8.8), so the event would already be here.
func expectNoEvent(t *testing.T, ch <-chan zk.Event, what string) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("%s: unexpected watch event {Type:%v Path:%q Err:%v}", what, ev.Type, ev.Path, ev.Err)
	default:
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: err = %v, want %v", what, got, want)
	}
}

// wantCode checks for a server error code that go-zk v1.0.4 has no named error for: it reports
// those as fmt.Errorf("unknown error: <code>").
func wantCode(t *testing.T, what string, got error, code int) {
	t.Helper()
	want := fmt.Sprintf("unknown error: %d", code)
	if got == nil || got.Error() != want {
		t.Fatalf("%s: err = %v, want server error code %d (%q)", what, got, code, want)
	}
}

var (
	openACL = zk.WorldACL(zk.PermAll)
	rootSeq atomic.Int64
)

// testRoot creates a fresh persistent node for one test on the shared server and returns its path.
func testRoot(t *testing.T, c *client) string {
	t.Helper()
	// Unique per run, so -count=N against the one shared server gets fresh roots.
	name := fmt.Sprintf("/%s-%d", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), rootSeq.Add(1))
	p, err := c.Create(name, nil, 0, openACL)
	if err != nil {
		t.Fatalf("create test root %s: %v", name, err)
	}
	return p
}
