package app

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/legacyzk/zktest"
	"github.com/kraftd/kraftd/protocol"
)

// TestGateClientAPIsHoldsRequestsUntilReady: before the legacy broker
// knows its cluster id a Metadata request waits (it is neither answered
// nor cut off); once the real handler is registered and the gate opens,
// the waiting request gets the real handler's answer.
func TestGateClientAPIsHoldsRequestsUntilReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := protocol.NewRegistry()
		ready := make(chan struct{})
		gateClientAPIs(reg, ready)
		for _, key := range []int16{3, 19, 20, 32, 37, 60} {
			if _, _, _, ok := reg.Lookup(key); !ok {
				t.Fatalf("key %d not gated", key)
			}
		}
		_, _, gate, _ := reg.Lookup(3)
		body := kmsg.NewPtrMetadataRequest()
		var got kmsg.Response
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, _ = gate(context.Background(), &protocol.Request{Key: 3, Body: body})
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a gated request was answered before the gate opened")
		default:
		}
		want := kmsg.NewPtrMetadataResponse()
		want.ControllerID = 7
		reg.Register(3, 0, 13, func(context.Context, *protocol.Request) (kmsg.Response, error) { return want, nil })
		close(ready)
		<-done
		if got != want {
			t.Fatalf("answer %+v, want the real handler's", got)
		}
	})
}

// TestGateClientAPIsEndsWithTheConnection: a failed start closes the
// listener; a gated request then ends with its connection.
func TestGateClientAPIsEndsWithTheConnection(t *testing.T) {
	reg := protocol.NewRegistry()
	gateClientAPIs(reg, make(chan struct{}))
	_, _, gate, _ := reg.Lookup(60)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gate(ctx, &protocol.Request{Key: 60, Body: kmsg.NewPtrDescribeClusterRequest()}); err == nil {
		t.Fatal("a gated request outlived its connection")
	}
}

// TestFaultsHandler: POST /faults flips legacyzk's switches by name and
// refuses unknown ones.
func TestFaultsHandler(t *testing.T) {
	mem := legacyzk.NewMemServer()
	lb, err := legacyzk.NewBroker(context.Background(), legacyzk.Config{NodeID: 1, FaultInjection: true,
		Dial: func(context.Context) (legacyzk.Store, error) { return mem.Connect(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	h := faultsHandler(lb)
	post := func(body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/faults", strings.NewReader(body)))
		return rec.Code
	}
	// The broker is the controller of its own store and may push at once, which
	// fires (and disarms) the switch and holds the controller paused: either is armed.
	if code := post("pause-before-push\n"); code != http.StatusNoContent ||
		!(lb.Faults().PauseBeforePush.Load() || lb.Faults().Paused()) {
		t.Fatalf("pause-before-push: %d", code)
	}
	if code := post("clear"); code != http.StatusNoContent || lb.Faults().PauseBeforePush.Load() || lb.Faults().Paused() {
		t.Fatalf("clear: %d", code)
	}
	if code := post("melt-down"); code != http.StatusBadRequest {
		t.Fatalf("unknown switch: %d", code)
	}
}

// TestFaultInjectionNeedsFlagAndLoopback: legacyzk's fault switches are off
// unless kraftd.fault.injection.enable says otherwise, and then only in
// zk-legacy mode and on a loopback metrics.listener.
func TestFaultInjectionNeedsFlagAndLoopback(t *testing.T) {
	zk := func(extra ...Setting) Config {
		return embedded(t, append([]Setting{{"mode", "zk-legacy"}, {"process.roles", ""},
			{"zookeeper.connect", "127.0.0.1:2181"}}, extra...)...)
	}
	if c := zk(); c.FaultInjectionEnable {
		t.Fatal("fault injection on by default")
	}
	cases := map[string]Config{
		"must then bind a loopback address": zk(Setting{"kraftd.fault.injection.enable", "true"},
			Setting{"metrics.listener", "0.0.0.0:9100"}),
		"not \":9100\"":                    zk(Setting{"kraftd.fault.injection.enable", "true"}, Setting{"metrics.listener", ":9100"}),
		"kraft mode has no fault switches": embedded(t, Setting{"kraftd.fault.injection.enable", "true"}),
	}
	for want, c := range cases {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
	for _, addr := range []string{"127.0.0.1:9100", "localhost:9100", "[::1]:9100"} {
		c := zk(Setting{"kraftd.fault.injection.enable", "true"}, Setting{"metrics.listener", addr})
		if err := c.Validate(); err != nil {
			t.Errorf("metrics.listener %s: %v", addr, err)
		}
	}
}

// TestMetricsLoopbackOnly: once an endpoint is loopback-only, the metrics
// server refuses to serve on any other bound address, even when the name
// given looked local.
func TestMetricsLoopbackOnly(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var external string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			external = ipn.IP.String()
			break
		}
	}
	if external == "" {
		t.Skip("no non-loopback IPv4 address to bind")
	}
	m := newMetrics(zap.NewNop())
	m.handleLoopbackOnly("kraftd.fault.injection.enable", "POST /faults", http.NotFoundHandler())
	if err := m.start(net.JoinHostPort(external, "0")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("start on %s: %v", external, err)
	}
	if err := m.start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := m.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestLegacyBrokerServerLimits: the zk-legacy broker binds its listener
// itself, and used to build its socket server with protocol's defaults;
// it now takes max.connections, socket.request.max.bytes and the admin
// record cap from the node's settings, as the KRaft servers do (the
// second connection used to be served at once, the oversized frame read,
// and the 6-partition topic created).
func TestLegacyBrokerServerLimits(t *testing.T) {
	c := embedded(t, Setting{"mode", "zk-legacy"}, Setting{"process.roles", ""},
		Setting{"zookeeper.connect", "127.0.0.1:2181"}, Setting{"listeners", "PLAINTEXT://127.0.0.1:0"},
		Setting{"max.connections", "2"}, Setting{"socket.request.max.bytes", "4096"},
		Setting{"controller.max.records.per.user.op", "6"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	l, _ := c.LegacyListener()
	lc := c.legacyBrokerConfig(l, nil)
	mem := legacyzk.NewMemServer()
	lc.Dial = func(context.Context) (legacyzk.Store, error) { return mem.Connect(), nil }
	lb, err := legacyzk.NewBroker(t.Context(), lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	// The controller (this broker) holds one connection to the listener
	// once it has pushed the broker list to itself.
	pollWithin(t, "an UpdateMetadata from the controller", 5*time.Second, func() bool {
		return len(lb.Image().Brokers()) > 0
	})
	addr, err := net.ResolveTCPAddr("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	first := dialLimit(t, addr)
	first.roundTrip(1)
	second := dialLimit(t, addr)
	second.send(1)
	var ne net.Error
	if err := second.recv(1, 50*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("client connection past max.connections=2: %v, want no answer yet", err)
	}
	// A frame announcing more than socket.request.max.bytes closes the
	// connection before its body is read.
	first.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.nc.Write(binary.BigEndian.AppendUint32(nil, 4097)); err != nil {
		t.Fatal(err)
	}
	if _, err := first.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after an oversized frame: %v, want the connection closed", err)
	}
	if err := second.recv(1, 5*time.Second); err != nil {
		t.Fatalf("second connection not served once the first closed: %v", err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 6, 1
	req.Topics = append(req.Topics, rt)
	resp, err := lb.CreateTopics(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("7 records with controller.max.records.per.user.op=6: error %d %v", got.ErrorCode, got.ErrorMessage)
	}
}

// A restarted zk-legacy broker loads its partition logs before it
// registers in /brokers/ids, as KafkaServer.startup runs
// LogManager.startup before registerBroker: registered first, the broker
// was listed (and counted as back by kraftd bench) while its logs still
// waited for the controller's LeaderAndIsr to open them. The order is read
// from the node's own log: the replica manager's "loaded partition logs"
// (or, before the fix, ApplyAll's "opened partition logs") against
// legacyzk's "registered broker".
func TestLegacyBrokerLoadsLogsBeforeRegistering(t *testing.T) {
	zk := zktest.Run(t)
	dir := t.TempDir()
	settings := func(logger *zap.Logger) Config {
		c, err := LoadConfig(nil, []Setting{{"mode", "zk-legacy"}, {"node.id", "1"},
			{"listeners", "PLAINTEXT://127.0.0.1:0"}, {"log.dirs", dir},
			{"zookeeper.connect", zk.Addr}, {"zookeeper.session.timeout.ms", "4000"},
			{"offsets.topic.replication.factor", "1"}, {"transaction.state.log.replication.factor", "1"},
			{"transaction.state.log.min.isr", "1"}})
		if err != nil {
			t.Fatal(err)
		}
		c.Logger = logger
		return c
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const partitions = 12
	a, err := New(settings(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "order-test"})
	defer cl.Close()
	resp, err := cl.Request(ctx, a.Addr("PLAINTEXT").String(), createTopicsReq("loaded", partitions))
	if err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	for len(a.LegacyReplicas().Hosted()) < partitions {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d partitions hosted", len(a.LegacyReplicas().Hosted()), partitions)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.InfoLevel)
	a, err = New(settings(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	opened, registered := -1, -1
	for i, e := range logs.All() {
		switch {
		case opened < 0 && (e.Message == "loaded partition logs" || e.Message == "opened partition logs") &&
			e.ContextMap()["logs"] == int64(partitions):
			opened = i
		case registered < 0 && e.Message == "registered broker":
			registered = i
		}
	}
	if registered < 0 {
		t.Fatal("no registration logged")
	}
	if opened < 0 || opened > registered {
		t.Fatalf("the %d partition logs were loaded at log entry %d, the broker registered at entry %d: "+
			"registered before its logs were loaded", partitions, opened, registered)
	}
}
