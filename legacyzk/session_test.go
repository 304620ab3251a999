package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// zkProxy is a TCP proxy in front of the real ZooKeeper that can stop
// carrying bytes (hold: what arrives either way is dropped, so pings and
// requests go unanswered, as over a partitioned network) and cut every
// open connection (the client sees a dropped connection and reconnects).
// Its goroutines end by close.
type zkProxy struct {
	ln      net.Listener
	target  string
	held    atomic.Bool
	dropped atomic.Int64 // bytes dropped while held
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newZkProxy(t testing.TB, target string) *zkProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &zkProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *zkProxy) addr() string { return p.ln.Addr().String() }

func (p *zkProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

func (p *zkProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.held.Load() {
				p.dropped.Add(int64(n))
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every connection open now.
func (p *zkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *zkProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// TestZkDroppedConnectionRetried: a request whose connection drops while
// it is in flight (the proxy swallowed it, then cut the connection) is
// sent again once the client has reconnected within the session timeout,
// as Kafka's retryRequestsUntilConnected does; the session survives.
// Before, the create failed with "closed" and was only logged by callers.
func TestZkDroppedConnectionRetried(t *testing.T) {
	connect := needZk(t)
	servers, chroot, _ := ParseConnect(connect)
	ctx := context.Background()
	// The chroot must exist before the proxied session uses it.
	admin, err := DialZk(ctx, ZkConfig{Connect: connect, SessionTimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	px := newZkProxy(t, servers[0])
	st, err := DialZk(ctx, ZkConfig{Connect: px.addr() + chroot, SessionTimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	session := st.SessionID()
	px.held.Store(true)
	done := make(chan error, 1)
	go func() { // ends when the Create returns; the test waits for it below
		_, err := st.Create(ctx, "/retried", []byte("x"), Persistent)
		done <- err
	}()
	// More than a ping (12 bytes) went into the hole: the create (over 60).
	waitFor(t, 5*time.Second, "the create to be swallowed", func() (bool, string) { return px.dropped.Load() > 40, "nothing sent yet" })
	px.cut()
	px.held.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("create across a dropped connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the create did not return")
	}
	if st.Retries() == 0 || st.SessionID() != session {
		t.Fatalf("retries %d, session %x -> %x", st.Retries(), session, st.SessionID())
	}
	if _, ok, err := admin.Exists(ctx, "/retried", false); err != nil || !ok {
		t.Fatalf("/retried: %v %v", ok, err)
	}
}

// TestZkSessionExpiryReregisters is a real session expiry: broker 3's
// ZooKeeper traffic goes through a proxy that stops carrying it, so its
// session stops heartbeating; ZooKeeper expires it after the session
// timeout (not at once, as a close would) and deletes its registration;
// the controller drops broker 3 from the ISRs. When the network heals the
// client learns of the expiry, and the broker opens a new session and
// registers again with a new broker epoch (Kafka's
// RegisterBrokerAndReelect); the controller takes it back.
func TestZkSessionExpiryReregisters(t *testing.T) {
	connect := needZk(t)
	servers, chroot, _ := ParseConnect(connect)
	c := newZkClusterOn(t, connect, 1)
	c.controller()
	c.start(2)
	px := newZkProxy(t, servers[0])
	const sessionMs = 1000
	b3 := c.startWith(3, func(cfg *Config) {
		zc := ZkConfig{Connect: px.addr() + chroot, SessionTimeoutMs: sessionMs}
		cfg.Dial = func(ctx context.Context) (Store, error) { return DialZk(ctx, zc) }
	})
	ctrl := c.controller()
	if ctrl.ID() == 3 {
		t.Fatal("broker 3 must not be the controller")
	}
	c.createTopic(ctrl, "t", 2, 3)
	c.converged()
	ctx := context.Background()
	epoch := b3.BrokerEpoch()
	px.held.Store(true)
	heldAt := time.Now()
	waitFor(t, 15*time.Second, "ZooKeeper to expire broker 3's session", func() (bool, string) {
		_, ok, err := c.admin.Exists(ctx, BrokerPath(3), false)
		return err == nil && !ok, "still registered"
	})
	if took := time.Since(heldAt); took < sessionMs*time.Millisecond/2 {
		t.Fatalf("registration gone after %v, before the %d ms session could expire", took, sessionMs)
	}
	waitFor(t, 10*time.Second, "broker 3 out of every ISR", func() (bool, string) {
		for p := range int32(2) {
			if s := c.state("t", p); slices.Contains(s.ISR, 3) {
				return false, fmt.Sprint(s.ISR)
			}
		}
		return true, ""
	})
	px.held.Store(false)
	px.cut()
	waitFor(t, 15*time.Second, "broker 3 registered again with a new broker epoch", func() (bool, string) {
		_, st, err := c.admin.Get(ctx, BrokerPath(3), false)
		if errors.Is(err, ErrNoNode) {
			return false, "not registered"
		}
		return err == nil && st.Czxid != epoch && b3.BrokerEpoch() == st.Czxid, "old epoch"
	})
	c.converged()
}
