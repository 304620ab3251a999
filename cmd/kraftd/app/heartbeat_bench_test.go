package app

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/protocol"
)

// hbBroker is a synthetic broker that registers with the controller and
// heartbeats over its own connection, as a real broker's lifecycle loop does.
type hbBroker struct {
	id    int32
	epoch int64
	cl    *protocol.Client
}

func registerBenchBroker(tb testing.TB, ctx context.Context, a *App, addr string, id int32) *hbBroker {
	tb.Helper()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: fmt.Sprintf("hb-%d", id)})
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(2)
	req.BrokerID, req.ClusterID = id, a.ClusterID()
	req.IncarnationID = [16]byte{byte(id), 0xb, 0xe, 0x7c}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(40000+id)
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", 1, 20
	req.Features = []kmsg.BrokerRegistrationRequestFeature{f}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		tb.Fatal(err)
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != 0 {
		tb.Fatalf("registering %d: error %d", id, r.ErrorCode)
	}
	return &hbBroker{id: id, epoch: r.BrokerEpoch, cl: cl}
}

// heartbeat sends one caught-up heartbeat and returns how long the answer took.
func (h *hbBroker) heartbeat(ctx context.Context, addr string) (time.Duration, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = h.id, h.epoch, 1<<40
	start := time.Now()
	resp, err := h.cl.Request(ctx, addr, req)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if code := resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode; code != 0 {
		return d, fmt.Errorf("heartbeat of %d: error %d", h.id, code)
	}
	return d, nil
}

// heartbeatSampler runs brokers that heartbeat every intervalMs each,
// recording every latency with the time its heartbeat was sent.
type heartbeatSampler struct {
	mu      sync.Mutex
	samples []hbSample
	err     error
}

type hbSample struct {
	sent time.Time
	took time.Duration
}

func (s *heartbeatSampler) run(ctx context.Context, h *hbBroker, addr string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sent := time.Now()
		took, err := h.heartbeat(ctx, addr)
		s.mu.Lock()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			s.err = err
		default:
			s.samples = append(s.samples, hbSample{sent: sent, took: took})
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// within returns the latencies of heartbeats sent in [from, to).
func (s *heartbeatSampler) within(from, to time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, x := range s.samples {
		if !x.sent.Before(from) && x.sent.Before(to) {
			out = append(out, x.took)
		}
	}
	return out
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, len(s)*99/100)]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkHeartbeatDuringCreate100k: a combined node (controller + broker, fsync
// on) with 8 more brokers heartbeating every 10 ms over their own connections to
// the CONTROLLER listener. Each iteration measures the heartbeats of one quiet
// second, then creates a topic of 100,000 partitions (replication factor 1,
// through the broker, which forwards it) and measures the heartbeats sent while
// the create is in flight. Reported: BrokerHeartbeat p99 quiet and during the
// create, pooled over all iterations, their ratio, the worst heartbeat during the
// creates, and the create's own latency.
//
//	go test -run '^$' -bench HeartbeatDuringCreate100k -benchtime 5x ./cmd/kraftd/app
func BenchmarkHeartbeatDuringCreate100k(b *testing.B) {
	cfg, err := LoadConfig(EmbeddedDefaults(), []Setting{
		{"listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
		{"log.dirs", b.TempDir()},
		{"cluster.id", testClusterID},
		{"controller.quorum.voters", "1@127.0.0.1:0"}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := a.Broker().WaitState(wctx, broker.StateRunning); err != nil {
		b.Fatalf("broker not running: %v", err)
	}
	ctrl, client := a.Addr("CONTROLLER").String(), a.Addr("PLAINTEXT").String()
	var s heartbeatSampler
	var wg sync.WaitGroup
	hctx, hcancel := context.WithCancel(ctx)
	for id := int32(101); id <= 108; id++ {
		h := registerBenchBroker(b, ctx, a, ctrl, id)
		defer h.cl.Close()
		wg.Go(func() { s.run(hctx, h, ctrl, 10*time.Millisecond) })
	}
	defer func() { hcancel(); wg.Wait() }()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "bench"})
	defer cl.Close()
	var quiet, during []time.Duration
	var creates time.Duration
	b.ResetTimer()
	for i := range b.N {
		q0 := time.Now()
		time.Sleep(time.Second) // the quiet window: heartbeats only
		quiet = append(quiet, s.within(q0, time.Now())...)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.TimeoutMillis = 60000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("big-%d", i), 100_000, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		c0 := time.Now()
		resp, err := cl.Request(ctx, client, req)
		c1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			b.Fatalf("create: error %d", code)
		}
		creates += c1.Sub(c0)
		during = append(during, s.within(c0, c1)...)
	}
	b.StopTimer()
	s.mu.Lock()
	if s.err != nil {
		b.Fatal(s.err)
	}
	s.mu.Unlock()
	pq, pd := p99(quiet), p99(during)
	b.ReportMetric(msOf(pq), "quiet-p99-ms")
	b.ReportMetric(msOf(pd), "during-p99-ms")
	b.ReportMetric(msOf(pd)/max(msOf(pq), 0.001), "p99-ratio")
	b.ReportMetric(msOf(slices.Max(append(during, 0))), "during-max-ms")
	b.ReportMetric(msOf(creates)/float64(b.N), "create-ms")
	b.Logf("heartbeats: %d quiet (p99 %.1f ms), %d during creates (p99 %.1f ms, max %.1f ms); create %.0f ms",
		len(quiet), msOf(pq), len(during), msOf(pd), msOf(slices.Max(append(during, 0))), msOf(creates)/float64(b.N))
}
