package e2e

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------------------------
// wireTap: a go-zk Dialer that passes bytes through untouched and decodes the frames it sees, so
// tests can check what go-zk really sends (the 44-byte ConnectRequest) and what the server
// answers (ConnectResponse size and timeout, notification headers) without another client.

type handshake struct {
	reqLen, respLen int   // payload sizes, excluding the 4-byte length prefix
	reqTimeout      int32 // ConnectRequest.timeOut
	respTimeout     int32 // ConnectResponse.timeOut
	respSession     int64 // ConnectResponse.sessionId
}

type notification struct {
	zxid  int64
	typ   int32
	state int32
	path  string
}

type wireTap struct {
	mu            sync.Mutex
	handshakes    []handshake
	notifications []notification
}

func (w *wireTap) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.handshakes = append(w.handshakes, handshake{reqLen: -1, respLen: -1})
	idx := len(w.handshakes) - 1
	w.mu.Unlock()
	tc := &tapConn{Conn: c}
	tc.out = frameSplitter{onFrame: func(n int, f []byte) { w.clientFrame(idx, n, f) }}
	tc.in = frameSplitter{onFrame: func(n int, f []byte) { w.serverFrame(idx, n, f) }}
	return tc, nil
}

func (w *wireTap) clientFrame(idx, n int, f []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 && len(f) >= 16 { // first frame of a connection: bare ConnectRequest
		w.handshakes[idx].reqLen = len(f)
		w.handshakes[idx].reqTimeout = int32(binary.BigEndian.Uint32(f[12:16]))
	}
}

func (w *wireTap) serverFrame(idx, n int, f []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 { // first frame: bare ConnectResponse
		w.handshakes[idx].respLen = len(f)
		if len(f) >= 16 {
			w.handshakes[idx].respTimeout = int32(binary.BigEndian.Uint32(f[4:8]))
			w.handshakes[idx].respSession = int64(binary.BigEndian.Uint64(f[8:16]))
		}
		return
	}
	if len(f) < 16 || int32(binary.BigEndian.Uint32(f[0:4])) != -1 {
		return
	}
	// ReplyHeader{xid=-1, zxid, err} + WatcherEvent{type, state, path}
	nt := notification{zxid: int64(binary.BigEndian.Uint64(f[4:12]))}
	if len(f) >= 28 {
		nt.typ = int32(binary.BigEndian.Uint32(f[16:20]))
		nt.state = int32(binary.BigEndian.Uint32(f[20:24]))
		l := int(int32(binary.BigEndian.Uint32(f[24:28])))
		if l > 0 && 28+l <= len(f) {
			nt.path = string(f[28 : 28+l])
		}
	}
	w.notifications = append(w.notifications, nt)
}

func (w *wireTap) handshakeList() []handshake {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]handshake(nil), w.handshakes...)
}

// notificationsFor returns the notifications seen so far for path.
func (w *wireTap) notificationsFor(path string) []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []notification
	for _, n := range w.notifications {
		if n.path == path {
			out = append(out, n)
		}
	}
	return out
}

type tapConn struct {
	net.Conn
	out, in frameSplitter
}

func (c *tapConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.feed(p[:n])
	return n, err
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	return n, err
}

// frameSplitter cuts a byte stream into length-prefixed frames. Frames larger than 64 KiB are
// counted but not kept (only their first bytes are passed on).
type frameSplitter struct {
	mu      sync.Mutex
	hdr     []byte
	need    int // bytes still missing from the current frame body; -1 while reading a length
	body    []byte
	count   int
	onFrame func(n int, frame []byte)
}

func (s *frameSplitter) feed(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(p) > 0 {
		if s.hdr == nil || len(s.hdr) < 4 {
			k := min(4-len(s.hdr), len(p))
			s.hdr = append(s.hdr, p[:k]...)
			p = p[k:]
			if len(s.hdr) == 4 {
				s.need = int(binary.BigEndian.Uint32(s.hdr))
				s.body = s.body[:0]
				if s.need == 0 {
					s.emit()
				}
			}
			continue
		}
		k := min(s.need, len(p))
		if len(s.body) < 64<<10 {
			s.body = append(s.body, p[:min(k, 64<<10-len(s.body))]...)
		}
		s.need -= k
		p = p[k:]
		if s.need == 0 {
			s.emit()
		}
	}
}

func (s *frameSplitter) emit() {
	total := int(binary.BigEndian.Uint32(s.hdr))
	f := s.body
	if len(f) > total {
		f = f[:total]
	}
	if total > len(f) { // truncated copy of a large frame: report the real length
		f = append(make([]byte, 0, total), f...)
		f = f[:total]
	}
	s.onFrame(s.count, f)
	s.count++
	s.hdr = s.hdr[:0]
}

// ---------------------------------------------------------------------------------------------
// proxy: a TCP relay between go-zk and the server that a test can cut. While cut, established
// relays are closed and new connections are accepted and closed at once, so the client can
// neither reach the server nor keep its session alive; the server itself keeps running.

type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialing
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cutOff closes every relayed connection and refuses new ones until restore.
func (p *proxy) cutOff() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.cutOff()
	p.wg.Wait()
}
