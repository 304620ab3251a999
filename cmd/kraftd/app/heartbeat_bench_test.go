package app

import (
	"context"
	"errors"
	"flag"
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
// second, then creates 100,000 partitions (replication factor 1, through the
// broker, which forwards them) and measures the heartbeats sent while the
// create is in flight. Kafka's controller takes at most 10,000 records (and
// 10,000 partitions) per CreateTopics, so the 100,000 partitions are eleven
// requests sent at once (ten topics of 9,999, one of 10), and the create
// lasts from the first sent to the last answered. Reported: BrokerHeartbeat
// p99 quiet and during the create, pooled over all iterations, their ratio,
// the worst heartbeat during the creates, and the create's own latency.
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
		var reqs []*kmsg.CreateTopicsRequest
		for j, left := 0, 100_000; left > 0; j++ {
			n := min(left, 9_999)
			left -= n
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(7)
			req.TimeoutMillis = 60000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("big-%d-%d", i, j), int32(n), 1
			req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
			reqs = append(reqs, req)
		}
		errs := make([]error, len(reqs))
		var cwg sync.WaitGroup
		c0 := time.Now()
		for j, req := range reqs {
			cwg.Go(func() {
				resp, err := cl.Request(ctx, client, req)
				if err == nil {
					if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
						err = fmt.Errorf("create %s: error %d", req.Topics[0].Topic, code)
					}
				}
				errs[j] = err
			})
		}
		cwg.Wait()
		c1 := time.Now()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
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

var fencePartitions = flag.Int("hb.partitions", 1_000_000, "partitions BenchmarkHeartbeatWhileFencing creates before fencing")

// BenchmarkHeartbeatWhileFencing: a controller (fsync on) holding
// -hb.partitions partitions (topics of 9,999, replication factor 1, on 8
// brokers heartbeating every 10 ms) and a ninth broker, the victim, that
// holds one topic of 1,000 partitions with replication factor 3 next to
// them. Each iteration measures the 8 brokers' heartbeats for one quiet
// second, then stops the victim's heartbeats: its session expires, the
// controller fences it (moving its leaderships and dropping it from the
// ISRs), and the heartbeats sent from just before the expiry until the fence
// is committed are measured; then the victim heartbeats again and is
// unfenced. Reported: BrokerHeartbeat p99 quiet and while fencing, pooled
// over the iterations, and the time from session expiry to the committed
// fence.
//
//	go test -run '^$' -bench HeartbeatWhileFencing -benchtime 5x -timeout 30m ./cmd/kraftd/app
func BenchmarkHeartbeatWhileFencing(b *testing.B) {
	const sessionMs = 1000
	cfg, err := LoadConfig([]Setting{
		{"node.id", "1"}, {"process.roles", "controller"},
		{"listeners", "CONTROLLER://127.0.0.1:0"}, {"controller.listener.names", "CONTROLLER"},
		{"controller.quorum.voters", "1@127.0.0.1:0"},
		{"log.dirs", b.TempDir()}, {"cluster.id", testClusterID},
		{"broker.session.timeout.ms", fmt.Sprint(sessionMs)}, {"broker.heartbeat.interval.ms", "100"},
		// No snapshot while measuring: the comparison is about the fence.
		{"metadata.log.max.record.bytes.between.snapshots", "1000000000000"},
		{"metadata.log.max.snapshot.interval.ms", "0"},
	}, nil)
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
	ctrl := a.Addr("CONTROLLER").String()
	pollWithin(b, "the controller to be active", 20*time.Second, func() bool {
		img, _ := a.Controller().CommittedImage()
		return img.MetadataVersion() > 0
	})
	var s heartbeatSampler
	var wg sync.WaitGroup
	hctx, hcancel := context.WithCancel(ctx)
	defer func() { hcancel(); wg.Wait() }()
	var others []*hbBroker
	for id := int32(101); id <= 108; id++ {
		h := registerBenchBroker(b, ctx, a, ctrl, id)
		defer h.cl.Close()
		others = append(others, h)
		wg.Go(func() { s.run(hctx, h, ctrl, 10*time.Millisecond) })
	}
	waitUnfenced := func(ids ...int32) {
		for _, id := range ids {
			pollWithin(b, fmt.Sprintf("broker %d to be unfenced", id), 30*time.Second, func() bool {
				img, _ := a.Controller().CommittedImage()
				br, ok := img.Broker(id)
				return ok && !br.Fenced
			})
		}
	}
	waitUnfenced(101, 102, 103, 104, 105, 106, 107, 108)
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "bench"})
	defer cl.Close()
	create := func(name string, n int32, rf int16) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.TimeoutMillis = 600000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, rf
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := cl.Request(ctx, ctrl, req)
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			b.Fatalf("create %s: error %d", name, code)
		}
	}
	// Topics of 9,999: 10,000 records, the most one CreateTopics may write
	// (Kafka's MAX_RECORDS_PER_USER_OP, controller.max.records.per.user.op).
	for i, left := 0, *fencePartitions; left > 0; i++ {
		n := min(left, 9_999)
		create(fmt.Sprintf("bulk-%d", i), int32(n), 1)
		left -= n
	}
	victim := registerBenchBroker(b, ctx, a, ctrl, 109)
	defer victim.cl.Close()
	var vwg sync.WaitGroup
	var vs *heartbeatSampler // the victim's current heartbeats
	startVictim := func() context.CancelFunc {
		vctx, vcancel := context.WithCancel(hctx)
		vs = &heartbeatSampler{}
		cur := vs
		vwg.Go(func() { cur.run(vctx, victim, ctrl, 10*time.Millisecond) })
		return vcancel
	}
	stopVictim := startVictim()
	waitUnfenced(109)
	create("victim", 1000, 3)
	img, _ := a.Controller().CommittedImage()
	held, led := len(img.PartitionsWithISRMember(109)), img.LeaderCount(109)
	var quiet, during []time.Duration
	var fences time.Duration
	b.ResetTimer()
	for range b.N {
		q0 := time.Now()
		time.Sleep(time.Second)
		quiet = append(quiet, s.within(q0, time.Now())...)
		stopVictim()
		vwg.Wait()
		stopped := time.Now()
		vs.mu.Lock()
		last := vs.samples[len(vs.samples)-1]
		vs.mu.Unlock()
		// The session expires sessionMs after the last heartbeat arrived.
		expiry := last.sent.Add(last.took + sessionMs*time.Millisecond)
		for {
			img, _ := a.Controller().CommittedImage()
			if br, _ := img.Broker(109); br.Fenced {
				break
			}
			if time.Since(stopped) > 30*time.Second {
				b.Fatal("victim not fenced")
			}
			time.Sleep(time.Millisecond)
		}
		fenced := time.Now()
		fences += fenced.Sub(expiry)
		time.Sleep(20 * time.Millisecond) // heartbeats sent just before the commit get their answers
		during = append(during, s.within(expiry.Add(-100*time.Millisecond), fenced)...)
		stopVictim = startVictim()
		waitUnfenced(109)
	}
	b.StopTimer()
	stopVictim()
	vwg.Wait()
	s.mu.Lock()
	if s.err != nil {
		b.Fatal(s.err)
	}
	s.mu.Unlock()
	pq, pd := p99(quiet), p99(during)
	b.ReportMetric(msOf(pq), "quiet-p99-ms")
	b.ReportMetric(msOf(pd), "fencing-p99-ms")
	b.ReportMetric(msOf(slices.Max(append(during, 0))), "fencing-max-ms")
	b.ReportMetric(msOf(fences)/float64(b.N), "expiry-to-fence-ms")
	b.Logf("%d partitions; victim in %d ISRs, leads %d; heartbeats: %d quiet (p99 %.2f ms), %d while fencing (p99 %.2f ms, max %.2f ms); expiry to committed fence %.0f ms",
		img.NumPartitions(), held, led, len(quiet), msOf(pq), len(during), msOf(pd), msOf(slices.Max(append(during, 0))), msOf(fences)/float64(b.N))
}
