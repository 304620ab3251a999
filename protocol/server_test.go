package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKgoSeesApiVersions(t *testing.T) {
	s := startTestServer(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
	want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 5}}
	if !slices.EqualFunc(resp.ApiKeys, want, sameRange) {
		t.Fatalf("ApiKeys %+v, want %+v", resp.ApiKeys, want)
	}
}

func sameRange(a, b kmsg.ApiVersionsResponseApiKey) bool {
	return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
}

// TestApiVersionsEveryVersion checks the exact bytes at v0-v5: header v0
// (no tag byte even when flexible) and the full registry in the body.
func TestApiVersionsEveryVersion(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-test", "1.0.0"
		c.send(req, int32(100+v))
		got, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		want.ApiKeys = s.reg.Versions()
		wantFrame := appendResponse(nil, int32(100+v), want)[4:]
		if !bytes.Equal(got, wantFrame) {
			t.Fatalf("v%d: got % x\nwant % x", v, got, wantFrame)
		}
		if v >= 3 && got[6] != 3 { // corr, error code, then compact array len n+1 = 3
			t.Fatalf("v%d: body not where header v0 puts it: % x", v, got)
		}
	}
}

// TestApiVersionsUnsupportedVersion is KIP-511: a too-new version gets a v0
// body with UNSUPPORTED_VERSION and our ApiVersions range; the body of the
// request is not parsed and the connection stays usable.
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	payload := append(rawHeader(18, 127, 7), 0, 0xde, 0xad, 0xbe, 0xef) // junk body
	c.write(append(frameOf(payload), payload...))
	req := kmsg.NewPtrApiVersionsRequest() // v0 decoder: the body must be v0
	resp := c.recv(req, 7).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want 35", resp.ErrorCode)
	}
	want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 5}}
	if !slices.EqualFunc(resp.ApiKeys, want, sameRange) {
		t.Fatalf("ApiKeys %+v, want %+v", resp.ApiKeys, want)
	}
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "a", "b"
	if r := c.roundTrip(req, 8).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) != 2 {
		t.Fatalf("follow-up ApiVersions: %+v", r)
	}
}

func TestApiVersionsValidation(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	cases := []struct {
		name          string
		version       int16
		swName, swVer string
		clusterID     *string
		nodeID        int32
		wantCode      int16
	}{
		{"ok", 3, "kraftd", "1.2.3", nil, -1, 0},
		{"dash inside", 4, "a-b.c", "1-x", nil, -1, 0},
		{"empty name", 3, "", "1", nil, -1, 42},
		{"space", 3, "bad name", "1", nil, -1, 42},
		{"trailing dot", 3, "kraftd", "1.", nil, -1, 42},
		{"leading dash", 4, "-k", "1", nil, -1, 42},
		{"v5 both", 5, "k", "1", kmsg.StringPtr("c"), 1, 0},
		{"v5 cluster only", 5, "k", "1", kmsg.StringPtr("c"), -1, 42},
		{"v5 node only", 5, "k", "1", nil, 3, 42},
		{"v2 ignores names", 2, "bad name", "", nil, -1, 0},
	}
	for i, tc := range cases {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(tc.version)
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.swName, tc.swVer
		req.ClusterID, req.NodeID = tc.clusterID, tc.nodeID
		resp := c.roundTrip(req, int32(i)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != tc.wantCode {
			t.Errorf("%s: error code %d, want %d", tc.name, resp.ErrorCode, tc.wantCode)
		}
	}
}

func TestApiVersionsHook(t *testing.T) {
	s := startTestServer(t, nil)
	s.reg.SetApiVersionsHook(func(req *Request, resp *kmsg.ApiVersionsResponse) {
		resp.FinalizedFeaturesEpoch = 42
		if req.Listener != "PLAINTEXT" {
			resp.ErrorCode = kerr.UnknownServerError.Code
		}
	})
	c := dialRaw(t, s.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "k", "1"
	resp := c.roundTrip(req, 1).(*kmsg.ApiVersionsResponse)
	if resp.FinalizedFeaturesEpoch != 42 || resp.ErrorCode != 0 {
		t.Fatalf("hook not applied: %+v", resp)
	}
}

// TestBadInputClosesOnlyThatConnection sends each kind of bad input on its
// own connection and checks that it is closed with one log line while a
// healthy connection keeps working.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	s := startTestServer(t, func(cfg *ServerConfig, reg *Registry) {
		cfg.MaxRequestBytes = 1024
		reg.Register(60, 0, 1, func(context.Context, *Request) (kmsg.Response, error) {
			return nil, errors.New("boom")
		})
		reg.Register(32, 0, 4, func(context.Context, *Request) (kmsg.Response, error) {
			panic("handler bug")
		})
		reg.Register(19, 0, 7, func(_ context.Context, req *Request) (kmsg.Response, error) {
			return kmsg.NewPtrMetadataResponse(), nil // wrong key
		})
	})
	good := dialRaw(t, s.addr)
	truncatedTopics := append(rawHeader(3, 1, 1), 0, 0, 0, 5, 0, 3, 'a') // 5 topics, 1 short
	describeCluster := kmsg.NewPtrDescribeClusterRequest()
	describeConfigs := kmsg.NewPtrDescribeConfigsRequest()
	createTopics := kmsg.NewPtrCreateTopicsRequest()
	vote := kmsg.NewPtrVoteRequest()
	cases := []struct {
		name  string
		bytes []byte
		log   string
	}{
		{"size zero", []byte{0, 0, 0, 0}, "bad frame"},
		{"size negative", []byte{0xff, 0xff, 0xff, 0xff}, "bad frame"},
		{"size too big", []byte{0, 0, 4, 1}, "bad frame"},
		{"header too short", append(frameOf([]byte{0, 3, 0}), 0, 3, 0), "bad request"},
		{"unknown key", withFrame(rawHeader(9999, 0, 1)), "bad request"},
		{"key not on listener", kmsg.NewRequestFormatter().AppendRequest(nil, vote, 1), "bad request"},
		{"unsupported version", withFrame(rawHeader(3, 13, 1)), "bad request"},
		{"negative version", withFrame(rawHeader(3, -1, 1)), "bad request"},
		{"truncated body", withFrame(truncatedTopics), "bad request"},
		{"handler error", kmsg.NewRequestFormatter().AppendRequest(nil, describeCluster, 1), "not handled"},
		{"handler panic", kmsg.NewRequestFormatter().AppendRequest(nil, describeConfigs, 1), "not handled"},
		{"wrong response key", kmsg.NewRequestFormatter().AppendRequest(nil, createTopics, 1), "not handled"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := countLogs(s.logs, tc.log)
			bad := dialRaw(t, s.addr)
			bad.write(tc.bytes)
			bad.expectClosed()
			waitFor(t, "log line", func() bool { return countLogs(s.logs, tc.log) == before+1 })
			name := fmt.Sprintf("t%d", i)
			checkEcho(t, good.roundTrip(metadataReq(9, name), int32(i)), name)
		})
	}
}

func withFrame(payload []byte) []byte { return append(frameOf(payload), payload...) }

// TestTrailingBytesTolerated documents the decode policy: bytes after a
// complete body are ignored, as kmsg and Kafka do.
func TestTrailingBytesTolerated(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	req := metadataReq(1, "x")
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 5)
	frame = append(frame, 1, 2, 3)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	c.write(frame)
	checkEcho(t, c.recv(req, 5), "x")
}

func TestPipelined1000(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	const n = 1000
	var all []byte
	reqs := make([]*kmsg.MetadataRequest, n)
	for i := range n {
		reqs[i] = metadataReq(int16(i%13), fmt.Sprint("topic-", i))
		all = append(all, c.f.AppendRequest(nil, reqs[i], int32(i))...) // AppendRequest needs an empty dst
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.write(all) }) // may exceed socket buffers: write while reading
	for i := range n {
		checkEcho(t, c.recv(reqs[i], int32(i)), fmt.Sprint("topic-", i))
	}
	wg.Wait()
}

func TestManyConnections(t *testing.T) {
	s := startTestServer(t, nil)
	const conns = 200
	conn := make([]*rawConn, conns)
	for i := range conns {
		conn[i] = dialRaw(t, s.addr)
	}
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i, c := range conn {
		wg.Go(func() {
			for j := range 5 {
				name := fmt.Sprint(i, "/", j)
				req := metadataReq(9, name)
				c.nc.Write(c.f.AppendRequest(nil, req, int32(j)))
				b, err := c.readFrame()
				if err != nil || int32(binary.BigEndian.Uint32(b)) != int32(j) || !bytes.Contains(b, []byte(name)) {
					errs <- fmt.Errorf("conn %d req %d: %v", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStalledPeersDoNotBlockOthers: half a frame on one connection and a
// blocked handler on another do not delay a third.
func TestStalledPeersDoNotBlockOthers(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			close(entered)
			<-release
			return req.Body.ResponseKind(), nil
		})
	})
	defer close(release)
	half := dialRaw(t, s.addr)
	half.write([]byte{0, 0, 0, 100, 0, 3, 0, 1})
	blocked := dialRaw(t, s.addr)
	blocked.send(kmsg.NewPtrDescribeClusterRequest(), 1)
	<-entered
	c := dialRaw(t, s.addr)
	start := time.Now()
	for i := range 100 {
		checkEcho(t, c.roundTrip(metadataReq(4, "x"), int32(i)), "x")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("100 round trips took %v", d)
	}
}

func TestIdleTimeout(t *testing.T) {
	const idle = 100 * time.Millisecond
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.IdleTimeout = idle })
	quiet := dialRaw(t, s.addr)
	half := dialRaw(t, s.addr)
	start := time.Now()
	checkEcho(t, quiet.roundTrip(metadataReq(1, "q"), 1), "q")
	half.write([]byte{0, 0, 0, 50, 0, 3})
	quiet.expectClosed()
	half.expectClosed()
	if d := time.Since(start); d < idle {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
	if countLogs(s.logs, "idle timeout") != 2 {
		t.Fatalf("want 2 idle timeout log lines, got %d", countLogs(s.logs, "idle timeout"))
	}
}

// TestIdleTimeoutNever: a negative IdleTimeout (connections.max.idle.ms=-1)
// keeps idle connections open instead of falling back to the 10-minute
// default: a connection idle for longer than another server's timeout (which
// closed its own) still answers.
func TestIdleTimeoutNever(t *testing.T) {
	never := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.IdleTimeout = IdleTimeoutNever })
	if never.cfg.IdleTimeout >= 0 {
		t.Fatalf("IdleTimeout -1 became %v", never.cfg.IdleTimeout)
	}
	short := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.IdleTimeout = 50 * time.Millisecond })
	kept, closed := dialRaw(t, never.addr), dialRaw(t, short.addr)
	checkEcho(t, kept.roundTrip(metadataReq(1, "a"), 1), "a")
	checkEcho(t, closed.roundTrip(metadataReq(1, "b"), 1), "b")
	closed.expectClosed() // at least 50 ms of idleness have passed
	checkEcho(t, kept.roundTrip(metadataReq(1, "c"), 2), "c")
	if countLogs(never.logs, "idle timeout") != 0 {
		t.Fatal("a server that never times out logged an idle timeout")
	}
}

// TestGracefulShutdown: Shutdown stops accepting, lets the in-flight slow
// request finish and be answered, then closes the connection.
func TestGracefulShutdown(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			close(entered)
			<-release
			return req.Body.ResponseKind(), nil
		})
	})
	c := dialRaw(t, s.addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	c.send(req, 9)
	<-entered
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		done <- s.Shutdown(ctx)
	})
	waitFor(t, "listener to close", func() bool {
		nc, err := net.Dial("tcp", s.addr)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	close(release)
	c.recv(req, 9)
	c.expectClosed()
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestShutdownDeadline: a handler that never finishes is canceled once the
// Shutdown ctx expires, and Shutdown reports the expiry.
func TestShutdownDeadline(t *testing.T) {
	entered := make(chan struct{})
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(60, 0, 1, func(ctx context.Context, req *Request) (kmsg.Response, error) {
			close(entered)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	})
	c := dialRaw(t, s.addr)
	c.send(kmsg.NewPtrDescribeClusterRequest(), 1)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
	c.expectClosed()
}

func TestControlKey(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	s.ControlKey(3, func(req *Request) (kmsg.Response, error, bool) {
		topic := *req.Body.(*kmsg.MetadataRequest).Topics[0].Topic
		switch topic {
		case "drop":
			return nil, nil, true
		case "replace":
			resp := kmsg.NewPtrMetadataResponse()
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr("replaced")
			resp.Topics = append(resp.Topics, rt)
			return resp, nil, true
		case "kill":
			return nil, errors.New("injected"), true
		}
		return nil, nil, false
	})
	c.send(metadataReq(9, "drop"), 1)
	checkEcho(t, c.roundTrip(metadataReq(9, "pass"), 2), "pass") // 1 never answered
	checkEcho(t, c.roundTrip(metadataReq(9, "replace"), 3), "replaced")
	c.send(metadataReq(9, "kill"), 4)
	c.expectClosed()
	s.ControlKey(3, nil)
	c2 := dialRaw(t, s.addr)
	checkEcho(t, c2.roundTrip(metadataReq(9, "kill"), 1), "kill")
}

func TestMultipleListeners(t *testing.T) {
	ctrl := NewRegistry()
	ctrl.Register(55, 0, 2, func(_ context.Context, req *Request) (kmsg.Response, error) {
		return req.Body.ResponseKind(), nil
	})
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) {
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "CONTROLLER", Addr: "127.0.0.1:0", Registry: ctrl})
	})
	cc := dialRaw(t, s.Addr("CONTROLLER").String())
	cc.roundTrip(kmsg.NewPtrDescribeQuorumRequest(), 1)
	cc.send(metadataReq(1, "x"), 2) // Metadata is not served on CONTROLLER
	cc.expectClosed()
	pc := dialRaw(t, s.addr)
	pc.send(kmsg.NewPtrDescribeQuorumRequest(), 1) // nor DescribeQuorum on PLAINTEXT
	pc.expectClosed()
	if s.Addr("nope") != nil {
		t.Fatal("Addr of unknown listener")
	}
}

func TestNewServerValidation(t *testing.T) {
	bad := []ServerConfig{
		{},
		{Listeners: []ListenerConfig{{Name: "A", Addr: "127.0.0.1:0"}}},
		{Listeners: []ListenerConfig{{Name: "A", Registry: NewRegistry()}, {Name: "A", Registry: NewRegistry()}}},
	}
	for i, cfg := range bad {
		if _, err := NewServer(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("config %d: err %v", i, err)
		}
	}
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	done := make(chan struct{})
	if !b.acquire(6, done) || !b.acquire(4, done) {
		t.Fatal("acquire within budget failed")
	}
	got := make(chan bool, 1)
	var wg sync.WaitGroup
	wg.Go(func() { got <- b.acquire(5, done) })
	select {
	case <-got:
		t.Fatal("acquire beyond budget did not block")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(6)
	if !<-got {
		t.Fatal("acquire after release failed")
	}
	wg.Wait()
	b.release(9)
	if !b.acquire(100, done) { // oversized but alone: admitted
		t.Fatal("oversized acquire on empty budget failed")
	}
	wg.Go(func() { got <- b.acquire(1, done) })
	close(done)
	wg.Wait()
	if <-got {
		t.Fatal("acquire succeeded after done")
	}
}

// TestPreBoundListener: a listener bound before Start (to learn an ephemeral
// port without releasing it) is served as it is, and a Server shut down
// without having started closes it.
func TestPreBoundListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(ServerConfig{Listeners: []ListenerConfig{{Name: "A", Addr: ln.Addr().String(), Listener: ln, Registry: fuzzRegistry()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start with the port held by its own pre-bound listener: %v", err)
	}
	if got := s.Addr("A").String(); got != ln.Addr().String() {
		t.Fatalf("serving %s, want the pre-bound %s", got, ln.Addr())
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()

	unused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := NewServer(ServerConfig{Listeners: []ListenerConfig{{Name: "A", Addr: unused.Addr().String(), Listener: unused, Registry: fuzzRegistry()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := unused.Accept(); err == nil {
		t.Fatal("the pre-bound listener of a server never started is still open")
	}
}
