package e2e

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
)

// zk.NewLock from several sessions: at most one holder at a time, and a read-modify-write of a
// shared counter guarded by the lock (with a version check that would expose any overlap) loses
// no increments.
func TestLockRecipeGivesMutualExclusionAcrossSessions(t *testing.T) {
	admin := connect(t, shared.addr)
	root := testRoot(t, admin)
	counter, err := admin.Create(root+"/counter", []byte("0"), 0, openACL)
	check(t, err)
	lockPath := root + "/lock"

	const sessions, rounds = 4, 10
	var holders, maxHolders int32
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		c := connect(t, shared.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				l := zk.NewLock(c.Conn, lockPath, openACL)
				for r := 0; r < rounds; r++ {
					if err := l.Lock(); err != nil {
						return fmt.Errorf("Lock: %w", err)
					}
					h := atomic.AddInt32(&holders, 1)
					for {
						m := atomic.LoadInt32(&maxHolders)
						if h <= m || atomic.CompareAndSwapInt32(&maxHolders, m, h) {
							break
						}
					}
					d, st, err := c.Get(counter)
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(d))
					if _, err := c.Set(counter, []byte(strconv.Itoa(n+1)), st.Version); err != nil {
						return fmt.Errorf("Set under the lock: %w", err)
					}
					atomic.AddInt32(&holders, -1)
					if err := l.Unlock(); err != nil {
						return fmt.Errorf("Unlock: %w", err)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check(t, err)
	}
	if maxHolders != 1 {
		t.Fatalf("at most %d holders seen at once, want 1", maxHolders)
	}
	d, _, err := admin.Get(counter)
	check(t, err)
	if string(d) != strconv.Itoa(sessions*rounds) {
		t.Fatalf("counter = %s, want %d", d, sessions*rounds)
	}
	kids, _, err := admin.Children(lockPath)
	check(t, err)
	if len(kids) != 0 {
		t.Fatalf("lock nodes left behind: %v", kids)
	}
}

// Many goroutines share one Conn, so many requests are outstanding at once; every reply must
// reach the request it answers.
func TestManyConcurrentRequestsOnOneConnGetTheirOwnReplies(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	const workers, each = 32, 40
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() error {
				for i := 0; i < each; i++ {
					p := fmt.Sprintf("%s/w%02d-%03d", root, w, i)
					data := []byte(fmt.Sprintf("payload-%d-%d", w, i))
					got, err := c.Create(p, data, 0, openACL)
					if err != nil || got != p {
						return fmt.Errorf("Create %s = %q, %v", p, got, err)
					}
					d, st, err := c.Get(p)
					if err != nil || !bytes.Equal(d, data) || st.DataLength != int32(len(data)) {
						return fmt.Errorf("Get %s = %q (len %d), %v; want %q", p, d, st.DataLength, err, data)
					}
					st, err = c.Set(p, append(data, '!'), 0)
					if err != nil || st.Version != 1 || st.DataLength != int32(len(data)+1) {
						return fmt.Errorf("Set %s: stat %+v, %v", p, st, err)
					}
					if ok, _, err := c.Exists(p + "/none"); err != nil || ok {
						return fmt.Errorf("Exists %s/none = %v, %v", p, ok, err)
					}
				}
				return nil
			}()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check(t, err)
	}
	kids, st, err := c.Children(root)
	check(t, err)
	if len(kids) != workers*each || st.NumChildren != workers*each {
		t.Fatalf("children = %d (numChildren %d), want %d", len(kids), st.NumChildren, workers*each)
	}
}

// Requests are limited by jute.maxbuffer (0xfffff bytes per frame): data just under 1 MiB works;
// a request over the limit fails without taking the server (or the session) down.
func TestDataNearTheOneMiBLimit(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	big := bytes.Repeat([]byte("0123456789abcdef"), (1<<20-1024)/16) // 1 MiB - 1 KiB
	p, err := c.Create(root+"/big", big, 0, openACL)
	check(t, err)
	d, st, err := c.Get(p)
	check(t, err)
	if !bytes.Equal(d, big) || st.DataLength != int32(len(big)) {
		t.Fatalf("Get of %d bytes returned %d bytes (dataLength %d)", len(big), len(d), st.DataLength)
	}
	big2 := bytes.ToUpper(big)
	_, err = c.Set(p, big2, 0)
	check(t, err)

	other := connect(t, shared.addr)
	tooBig := make([]byte, 1<<20+1)
	_, err = c.Create(root+"/toobig", tooBig, 0, openACL)
	if err == nil {
		t.Fatal("Create with 1 MiB + 1 byte of data succeeded, want an error")
	}
	t.Logf("over-limit create failed with: %v", err)
	_, err = c.Set(p, tooBig, -1)
	if err == nil {
		t.Fatal("Set with 1 MiB + 1 byte of data succeeded, want an error")
	}

	// Nothing was written, other sessions are served, and the same Conn recovers.
	if ok, _, err := other.Exists(root + "/toobig"); err != nil || ok {
		t.Fatalf("Exists(toobig) from another session = %v, %v; want false", ok, err)
	}
	d, st, err = other.Get(p)
	check(t, err)
	if !bytes.Equal(d, big2) || st.Version != 1 {
		t.Fatalf("after the rejected Set the node has %d bytes, version %d; want the previous value, version 1", len(d), st.Version)
	}
	_, err = other.Create(root+"/small", []byte("ok"), 0, openACL)
	check(t, err)
	d, _, err = c.Get(root + "/small")
	check(t, err)
	if string(d) != "ok" {
		t.Fatalf("Get on the Conn that sent the oversized request = %q", d)
	}
}
