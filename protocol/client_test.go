package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTestClient(t *testing.T, tweak func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{ClientID: "kraftd-test", BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	c := NewClient(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestClientPipelining: many concurrent requests share one connection and
// each gets its own answer.
func TestClientPipelining(t *testing.T) {
	var (
		mu      sync.Mutex
		remotes = map[string]bool{}
		ids     = map[string]bool{}
	)
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(3, 0, 12, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			mu.Lock()
			remotes[req.RemoteAddr.String()] = true
			ids[*req.ClientID] = true
			mu.Unlock()
			return echoMetadata(ctx, req)
		})
	})
	c := newTestClient(t, nil)
	ctx := testCtx(t)
	const n = 500
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprint("t", i)
			req := metadataReq(-1, name)
			resp, err := c.Request(ctx, s.addr, req)
			if err != nil {
				errs <- err
				return
			}
			m := resp.(*kmsg.MetadataResponse)
			if req.GetVersion() != 12 || m.Version != 12 || len(m.Topics) != 1 || *m.Topics[0].Topic != name {
				errs <- fmt.Errorf("request %s: got %+v at v%d", name, m.Topics, req.GetVersion())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(remotes) != 1 || !ids["kraftd-test"] || len(ids) != 1 {
		t.Fatalf("want one connection with our client id, got remotes %v ids %v", remotes, ids)
	}
}

// TestClientDroppedResponse: a response the server never sends times out
// that request only; the connection and later requests are fine.
func TestClientDroppedResponse(t *testing.T) {
	s := startTestServer(t, nil)
	s.ControlKey(3, func(req *Request) (kmsg.Response, error, bool) {
		return nil, nil, *req.Body.(*kmsg.MetadataRequest).Topics[0].Topic == "drop"
	})
	c := newTestClient(t, nil)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Request(short, s.addr, metadataReq(-1, "drop")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dropped request: %v, want deadline exceeded", err)
	}
	for i := range 3 {
		resp, err := c.Request(testCtx(t), s.addr, metadataReq(-1, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		checkEcho(t, resp, fmt.Sprint(i))
	}
}

func TestClientDeadline(t *testing.T) {
	release := make(chan struct{})
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			<-release
			return req.Body.ResponseKind(), nil
		})
	})
	defer close(release)
	c := newTestClient(t, func(cfg *ClientConfig) { cfg.RequestTimeout = 50 * time.Millisecond })
	start := time.Now()
	_, err := c.Request(context.Background(), s.addr, kmsg.NewPtrDescribeClusterRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("deadline honoured after %v", d)
	}
}

// TestClientReconnect: after the server restarts on the same address the
// client redials on next use.
func TestClientReconnect(t *testing.T) {
	s1 := startTestServer(t, nil)
	c := newTestClient(t, nil)
	if _, err := c.Request(testCtx(t), s1.addr, metadataReq(-1, "a")); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2 := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.Listeners[0].Addr = s1.addr })
	var lastErr error
	waitFor(t, "request after restart", func() bool {
		resp, err := c.Request(testCtx(t), s2.addr, metadataReq(-1, "b"))
		lastErr = err
		return err == nil && *resp.(*kmsg.MetadataResponse).Topics[0].Topic == "b"
	})
	if lastErr != nil {
		t.Fatal(lastErr)
	}
}

func TestClientDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	c := newTestClient(t, nil)
	for range 3 {
		if _, err := c.Request(testCtx(t), addr, metadataReq(-1, "x")); err == nil {
			t.Fatal("request to a closed port succeeded")
		}
	}
	p, _ := c.peer(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failures != 3 {
		t.Fatalf("failures %d, want 3", p.failures)
	}
}

func TestClientBackoff(t *testing.T) {
	c := NewClient(ClientConfig{BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	defer c.Close()
	for failures, want := range []time.Duration{0, 10, 20, 40, 40, 40} {
		want *= time.Millisecond
		for range 20 {
			if got := c.backoff(failures); got < want/2 || got > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", failures, got, want/2, want)
			}
		}
	}
}

// TestClientDialDelayCountsFromLastFailure: the reconnect backoff runs from
// the last failed dial, as Kafka's reconnect.backoff.ms, so a peer that
// failed longer ago than its backoff is dialed at once.
func TestClientDialDelayCountsFromLastFailure(t *testing.T) {
	c := NewClient(ClientConfig{BackoffMin: time.Minute, BackoffMax: time.Minute})
	defer c.Close()
	now := time.Now()
	p := &peer{addr: "x"}
	if d := c.dialDelay(p, now); d != 0 {
		t.Fatalf("no failure: delay %v, want 0", d)
	}
	p.failures, p.failedAt = 3, now
	if d := c.dialDelay(p, now); d < 30*time.Second || d > time.Minute {
		t.Fatalf("failed just now: delay %v, want in [30s, 1m]", d)
	}
	if d := c.dialDelay(p, now.Add(20*time.Second)); d < 10*time.Second || d > 40*time.Second {
		t.Fatalf("failed 20 s ago: delay %v, want in [10s, 40s]", d)
	}
	if d := c.dialDelay(p, now.Add(2*time.Minute)); d != 0 {
		t.Fatalf("failed 2 min ago: delay %v, want 0 (the backoff is over)", d)
	}
}

// TestClientVersionNegotiation: the server advertises Metadata only up to
// v4, so a negotiated request goes out at v4; pinned versions are checked.
func TestClientVersionNegotiation(t *testing.T) {
	seen := make(chan int16, 10)
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(3, 1, 4, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			seen <- req.Version
			return echoMetadata(ctx, req)
		})
	})
	c := newTestClient(t, nil)
	ctx := testCtx(t)
	req := metadataReq(-1, "x")
	resp, err := c.Request(ctx, s.addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if v := <-seen; v != 4 || req.GetVersion() != 4 || resp.GetVersion() != 4 {
		t.Fatalf("server saw v%d, request v%d, response v%d; want 4", v, req.GetVersion(), resp.GetVersion())
	}
	if _, err := c.Request(ctx, s.addr, metadataReq(2, "y")); err != nil {
		t.Fatalf("pinned v2: %v", err)
	}
	if v := <-seen; v != 2 {
		t.Fatalf("pinned v2 sent as v%d", v)
	}
	for _, bad := range []kmsg.Request{metadataReq(0, "z"), metadataReq(5, "z"), kmsg.NewPtrVoteRequest()} {
		if _, err := c.Request(ctx, s.addr, bad); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("%s v%d: err %v, want ErrUnsupportedVersion", kmsg.NameForKey(bad.Key()), bad.GetVersion(), err)
		}
	}
	vs, err := c.PeerVersions(ctx, s.addr)
	if err != nil || vs[3] != [2]int16{1, 4} || vs[18] != [2]int16{0, 5} {
		t.Fatalf("PeerVersions = %v, %v", vs, err)
	}
}

// TestClientApiVersionsFallback: a peer that serves ApiVersions only up to
// v2 answers our v3 with UNSUPPORTED_VERSION; the client retries at v2.
func TestClientApiVersionsFallback(t *testing.T) {
	seen := make(chan int16, 4)
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(18, 0, 2, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			seen <- req.Version
			return reg.handleApiVersions(ctx, req)
		})
	})
	c := newTestClient(t, nil)
	vs, err := c.PeerVersions(testCtx(t), s.addr)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := <-seen, <-seen; a != 3 || b != 2 {
		t.Fatalf("ApiVersions sent at v%d then v%d, want v3 then v2", a, b)
	}
	if vs[18] != [2]int16{0, 2} || vs[3] != [2]int16{0, 12} {
		t.Fatalf("versions %v", vs)
	}
}

// TestClientClose: pending requests fail with ErrClosed, later ones too.
func TestClientClose(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			entered <- struct{}{}
			<-release
			return req.Body.ResponseKind(), nil
		})
	})
	defer close(release)
	c := NewClient(ClientConfig{})
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := c.Request(testCtx(t), s.addr, kmsg.NewPtrDescribeClusterRequest())
		errc <- err
	})
	<-entered
	c.Close()
	wg.Wait()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending request: %v, want ErrClosed", err)
	}
	if _, err := c.Request(testCtx(t), s.addr, metadataReq(-1, "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v, want ErrClosed", err)
	}
	c.Close() // idempotent
}

// TestClientServerClosesConn: when the server kills the connection, the
// in-flight request fails with ErrConnClosed rather than hanging.
func TestClientServerClosesConn(t *testing.T) {
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(context.Context, *Request) (kmsg.Response, error) {
			return nil, errors.New("refuse")
		})
	})
	c := newTestClient(t, nil)
	_, err := c.Request(testCtx(t), s.addr, kmsg.NewPtrDescribeClusterRequest())
	if !errors.Is(err, ErrConnClosed) {
		t.Fatalf("err %v, want ErrConnClosed", err)
	}
}

func TestChooseVersion(t *testing.T) {
	vs := map[int16][2]int16{3: {0, 20}}
	req := metadataReq(-1)
	if err := chooseVersion(req, vs); err != nil || req.GetVersion() != req.MaxVersion() {
		t.Fatalf("negotiate against a newer peer: v%d, %v", req.GetVersion(), err)
	}
	req.SetVersion(100)
	if err := chooseVersion(req, vs); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("pin above kmsg max: %v", err)
	}
}

// TestClientIdleCloseIsNotAFailure: a connection the server reaps for
// idleness is redialed on next use without backoff.
func TestClientIdleCloseIsNotAFailure(t *testing.T) {
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.IdleTimeout = 30 * time.Millisecond })
	c := newTestClient(t, func(cfg *ClientConfig) { cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour })
	if _, err := c.Request(testCtx(t), s.addr, metadataReq(-1, "a")); err != nil {
		t.Fatal(err)
	}
	p, _ := c.peer(s.addr)
	waitFor(t, "idle close", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cc == nil
	})
	if _, err := c.Request(testCtx(t), s.addr, metadataReq(-1, "b")); err != nil {
		t.Fatalf("redial after idle close: %v", err) // an hour of backoff would time out
	}
}

// TestClientFailsFastWhileBackingOff: with FailWhileBackingOff, a request to
// a peer whose dial just failed fails at once with ErrBackingOff instead of
// waiting out the reconnect backoff (a raft observer then asks another
// voter); once the backoff has passed, the next request dials again. The
// default client still waits the backoff out inside the request.
func TestClientFailsFastWhileBackingOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: dials are refused

	fast := newTestClient(t, func(cfg *ClientConfig) {
		cfg.BackoffMin, cfg.BackoffMax, cfg.FailWhileBackingOff = 200*time.Millisecond, 200*time.Millisecond, true
	})
	if _, err := fast.Request(testCtx(t), addr, metadataReq(-1, "a")); err == nil || errors.Is(err, ErrBackingOff) {
		t.Fatalf("first request to a closed port: %v, want the dial's error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := fast.Request(ctx, addr, metadataReq(-1, "b")); !errors.Is(err, ErrBackingOff) {
		t.Fatalf("request during the backoff: %v, want ErrBackingOff at once", err)
	}
	// The default waits the backoff (100-200 ms) out before it dials, past
	// this request's 50 ms.
	slow := newTestClient(t, func(cfg *ClientConfig) { cfg.BackoffMin, cfg.BackoffMax = 200*time.Millisecond, 200*time.Millisecond })
	_, _ = slow.Request(testCtx(t), addr, metadataReq(-1, "a"))
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	if _, err := slow.Request(sctx, addr, metadataReq(-1, "b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("default client during the backoff: %v, want the ctx deadline", err)
	}

	// A server comes up at the address: after the backoff the fast client dials it.
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.Listeners[0].Addr = addr })
	waitFor(t, "a request through after the backoff", func() bool {
		_, err := fast.Request(testCtx(t), s.addr, metadataReq(-1, "c"))
		return err == nil
	})
}
