package interop

// Issue 5's benchmarks, on in-process kraftd nodes over 127.0.0.1 with real fsyncs:
//
//	go test ./interop -run '^$' -bench 'Propagation|Heartbeat|BrokerRestart' -benchtime 200x \
//	    -kraftd.partitions 1000
//
// Sizes are flags (-kraftd.partitions, -kraftd.brokers, -kraftd.controllers,
// -kraftd.hb.brokers, -kraftd.hb.duration); each benchmark prints the command that
// reproduces its figures with b.Log.

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

var (
	benchPartitions  = flag.Int("kraftd.partitions", 1000, "partitions in the cluster before measuring (benchmarks)")
	benchBrokers     = flag.Int("kraftd.brokers", 3, "brokers in the propagation and restart benchmarks")
	benchControllers = flag.Int("kraftd.controllers", 3, "controllers (quorum voters) in the benchmarks")
	benchHBBrokers   = flag.Int("kraftd.hb.brokers", 100, "emulated brokers in the heartbeat benchmark")
	benchHBDuration  = flag.Duration("kraftd.hb.duration", 5*time.Second, "how long the emulated brokers heartbeat")
	benchQuiet       = flag.Bool("kraftd.quiet", true, "propagation and restart benchmarks: measure once the nodes' snapshots due after the fill (or the fencing) are written; false: at once")
	benchProfile     = flag.String("kraftd.cpuprofile", "", "write a CPU profile of the measured phase only (after the cluster is filled)")
)

// profileMeasured starts a CPU profile of the measured phase when -kraftd.cpuprofile
// is set, and returns the function that stops it.
func profileMeasured(tb testing.TB) func() {
	if *benchProfile == "" {
		return func() {}
	}
	f, err := os.Create(*benchProfile)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// benchCluster is the test cluster (cluster_test.go) with the timings the
// benchmarks use: looser than the tests' so large operations do not trip
// elections or session expiry, tight enough that failover fits in a run.
type benchCluster = cluster

func newBenchCluster(tb testing.TB, controllers, brokers int, overrides ...app.Setting) *benchCluster {
	opts := []Opt{Controllers(controllers), Brokers(brokers),
		Override("controller.quorum.election.timeout.ms", "500"),
		Override("controller.quorum.fetch.timeout.ms", "1000"),
		Override("broker.heartbeat.interval.ms", "500"),
		Override("broker.session.timeout.ms", "4000")}
	for _, o := range overrides {
		opts = append(opts, Override(o.Key, o.Value))
	}
	return newCluster(tb, opts...)
}

// crash stops a node without a controlled shutdown (its stop context is already done).
func (c *benchCluster) crash(nid int32) {
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.nodes[nid].Stop(dead)
	delete(c.nodes, nid)
}

// snapshotsDue reports whether a running node is writing a metadata snapshot
// or is about to.
func (c *benchCluster) snapshotsDue() bool {
	for _, a := range c.nodes {
		if a.SnapshotDue() {
			return true
		}
	}
	return false
}

func (c *benchCluster) brokerAddrs() []string {
	var out []string
	for nid, p := range c.brokerPorts {
		if c.nodes[nid] != nil {
			out = append(out, fmt.Sprintf("127.0.0.1:%d", p))
		}
	}
	slices.Sort(out)
	return out
}

// activeController waits for the quorum leader and returns its controller address.
func (c *benchCluster) activeController() string {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for nid, p := range c.ctrlPorts {
			if a := c.nodes[nid]; a != nil && a.Quorum() != nil {
				if m := a.Quorum().Metrics(); m.Role == quorum.Leader && m.HighWatermark > 0 {
					return fmt.Sprintf("127.0.0.1:%d", p)
				}
			}
		}
		<-time.After(10 * time.Millisecond)
	}
	c.t.Fatal("no active controller")
	return ""
}

func (c *benchCluster) waitBrokersRunning() {
	c.t.Helper()
	for nid := range c.brokerPorts {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.nodes[nid].Broker().WaitState(ctx, broker.StateRunning)
		cancel()
		if err != nil {
			c.t.Fatalf("broker %d: %v", nid, err)
		}
	}
}

// waitBrokersApplied waits until every broker's replica manager has applied
// the image the broker serves (AppliedOffset, what its heartbeats report,
// reaches the image's offset): Metadata serves an image before the replica
// manager has created its partitions' logs, as Kafka's does, so a visible
// change may still have log creation pending that would delay the next one.
func (c *benchCluster) waitBrokersApplied() {
	c.t.Helper()
	for nid := range c.brokerPorts {
		b := c.nodes[nid].Broker()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := b.WaitApplied(ctx, b.Image().Provenance().Offset)
		cancel()
		if err != nil {
			c.t.Fatalf("broker %d: %v", nid, err)
		}
	}
}

// benchCreateTopics sends one CreateTopics to addr and fails on any topic error.
func benchCreateTopics(ctx context.Context, cl *protocol.Client, addr string, partitions int32, rf int16, names ...string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = 60000
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = n, partitions, rf
		req.Topics = append(req.Topics, t)
	}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return err
	}
	for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create %s: %w", t.Topic, err)
		}
	}
	return nil
}

// fill grows the cluster to about total partitions (topics of up to 1000 partitions,
// up to 50 topics per request) through the active controller.
func fill(tb testing.TB, cl *protocol.Client, ctrl string, total int, rf int16) {
	tb.Helper()
	const perTopic, perRequest = 1000, 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for made, topic := 0, 0; made < total; {
		var names []string
		size := int32(min(perTopic, total-made))
		for len(names) < perRequest && made < total {
			names = append(names, fmt.Sprintf("fill-%06d", topic))
			topic++
			made += int(size)
		}
		if err := benchCreateTopics(ctx, cl, ctrl, size, rf, names...); err != nil {
			tb.Fatal(err)
		}
	}
}

// visible reports whether one broker's Metadata answer has topic.
func visible(ctx context.Context, cl *protocol.Client, addr, topic string) bool {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return false
	}
	mr := resp.(*kmsg.MetadataResponse)
	return len(mr.Topics) == 1 && mr.Topics[0].ErrorCode == 0 && len(mr.Topics[0].Partitions) > 0
}

// floorMs is one fsync (a small write to a file in dir, synced) plus two loopback
// round trips (ApiVersions to addr), each the median of several tries.
func floorMs(tb testing.TB, cl *protocol.Client, dir, addr string) (fsyncMs, fsyncP99Ms, rttMs float64) {
	tb.Helper()
	f, err := os.Create(filepath.Join(dir, "floor-fsync"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var syncs, rtts []time.Duration
	buf := make([]byte, 512)
	for range 100 {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			tb.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			tb.Fatal(err)
		}
		syncs = append(syncs, time.Since(start))
	}
	ctx := context.Background()
	for range 200 {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "bench", "0"
		start := time.Now()
		if _, err := cl.Request(ctx, addr, req); err != nil {
			tb.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return ms(quantile(syncs, 0.5)), ms(quantile(syncs, 0.99)), ms(quantile(rtts, 0.5))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pollPace is the interval between two Metadata polls of one broker while waiting
// for a topic to appear.
const pollPace = 250 * time.Microsecond

// BenchmarkPropagation: per iteration, one CreateTopics (1 partition) to the active
// controller; the commit is marked when its answer arrives (the controller answers
// once the records are committed), and the topic is propagated when every broker's
// Metadata answer has it (one poller per broker, started before the request).
// Reports p50/p99 of commit->visible-everywhere next to the floor (one fsync plus two
// loopback round trips) measured in the same run.
func BenchmarkPropagation(b *testing.B) {
	rf := int16(min(3, *benchBrokers))
	c := newBenchCluster(b, *benchControllers, *benchBrokers)
	c.waitBrokersRunning()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "bench"})
	defer cl.Close()
	ctrl := c.activeController()
	fillStart := time.Now()
	fill(b, cl, ctrl, *benchPartitions, rf)
	addrs := c.brokerAddrs()
	// Wait until every broker has the filled image, so the measurement starts level.
	last := fmt.Sprintf("fill-%06d", (*benchPartitions+999)/1000-1)
	for _, addr := range addrs {
		for !visible(context.Background(), cl, addr, last) {
			<-time.After(20 * time.Millisecond)
		}
	}
	c.waitBrokersApplied()
	b.Logf("cluster of %d partitions (rf %d) built in %v", *benchPartitions, rf, time.Since(fillStart))
	// The fill commits ~75 MB per 1M partitions, so every node then writes
	// snapshots; measure once they are done (-kraftd.quiet=false: at once).
	quiet := time.Now()
	for *benchQuiet && c.snapshotsDue() {
		<-time.After(10 * time.Millisecond)
	}
	b.Logf("waited %v for the nodes' snapshots", time.Since(quiet))
	fsyncMs, fsyncP99Ms, rttMs := floorMs(b, cl, b.TempDir(), addrs[0])
	pollers := make([]*protocol.Client, len(addrs))
	for i := range pollers {
		pollers[i] = protocol.NewClient(protocol.ClientConfig{ClientID: fmt.Sprintf("poller-%d", i)})
		defer pollers[i].Close()
	}
	var prop, create, e2e []time.Duration
	stopProfile := profileMeasured(b)
	b.ResetTimer()
	for i := range b.N {
		topic := fmt.Sprintf("prop-%06d", i)
		seen := make([]time.Time, len(addrs))
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for j, addr := range addrs {
			wg.Go(func() {
				// Polls are paced so that the pollers do not starve the cluster they
				// measure of CPU; the pace bounds the measurement error.
				pace := time.NewTicker(pollPace)
				defer pace.Stop()
				for ctx.Err() == nil {
					if visible(ctx, pollers[j], addr, topic) {
						seen[j] = time.Now()
						return
					}
					<-pace.C
				}
			})
		}
		sent := time.Now()
		err := benchCreateTopics(ctx, cl, ctrl, 1, rf, topic)
		answered := time.Now()
		wg.Wait()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		all := slices.MaxFunc(seen, func(x, y time.Time) int { return x.Compare(y) })
		if all.IsZero() {
			b.Fatalf("%s never visible on every broker", topic)
		}
		prop = append(prop, max(0, all.Sub(answered)))
		create = append(create, answered.Sub(sent))
		e2e = append(e2e, all.Sub(sent))
		// Each create starts level: the last one's partition logs are created
		// on every broker (outside the measurement, as the wait above).
		b.StopTimer()
		c.waitBrokersApplied()
		b.StartTimer()
	}
	b.StopTimer()
	stopProfile()
	floor := fsyncMs + 2*rttMs
	p50, p99 := ms(quantile(prop, 0.5)), ms(quantile(prop, 0.99))
	b.ReportMetric(p50, "prop-p50-ms")
	b.ReportMetric(p99, "prop-p99-ms")
	b.ReportMetric(ms(quantile(e2e, 0.99)), "e2e-p99-ms")
	b.ReportMetric(ms(quantile(create, 0.5)), "create-p50-ms")
	b.ReportMetric(floor, "floor-ms")
	b.ReportMetric(fsyncP99Ms, "fsync-p99-ms")
	b.ReportMetric(p99/floor, "p99/floor")
	b.Logf("partitions=%d brokers=%d controllers=%d topics=%d: propagation p50 %.2f ms p99 %.2f ms; "+
		"floor %.2f ms (fsync %.2f + 2 x rtt %.3f; fsync p99 %.2f); p99/floor %.1f; create p50 %.2f ms; e2e p99 %.2f ms",
		*benchPartitions, len(addrs), *benchControllers, b.N, p50, p99, floor, fsyncMs, rttMs, fsyncP99Ms, p99/floor,
		ms(quantile(create, 0.5)), ms(quantile(e2e, 0.99)))
	b.Logf("reproduce: go test ./interop -run '^$' -bench Propagation -benchtime %dx -kraftd.partitions %d "+
		"-kraftd.brokers %d -kraftd.controllers %d -kraftd.quiet=%t", b.N, *benchPartitions, len(addrs), *benchControllers, *benchQuiet)
}

// emulatedBroker registers over the wire and heartbeats at a fixed interval,
// reporting the controller's high watermark as its applied offset (it is treated as
// caught up). It records every heartbeat's round trip and whether it was ever fenced
// again after its first unfence. Only its own goroutine writes it; the benchmark reads
// it after that goroutine ended.
type emulatedBroker struct {
	id         int32
	epoch      int64
	unfenced   bool
	falseFence int
	failures   int
	rtts       []time.Duration
}

func (e *emulatedBroker) register(ctx context.Context, cl *protocol.Client, ctrl, clusterID string) error {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(-1)
	req.BrokerID, req.ClusterID = e.id, clusterID
	if _, err := rand.Read(req.IncarnationID[:]); err != nil {
		return err
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(20000+e.id)
	req.Listeners = append(req.Listeners, l)
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", broker.DefaultMinMetadataVersion, broker.DefaultMaxMetadataVersion
	req.Features = append(req.Features, f)
	req.PreviousBrokerEpoch = -1
	resp, err := cl.Request(ctx, ctrl, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("broker %d registration: %w", e.id, err)
	}
	e.epoch = r.BrokerEpoch
	return nil
}

func (e *emulatedBroker) heartbeat(ctx context.Context, cl *protocol.Client, ctrl string, applied int64) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(-1)
	req.BrokerID, req.BrokerEpoch = e.id, e.epoch
	req.CurrentMetadataOffset = max(applied, e.epoch)
	start := time.Now()
	resp, err := cl.Request(ctx, ctrl, req)
	if err != nil {
		e.failures++
		return
	}
	e.rtts = append(e.rtts, time.Since(start))
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	switch {
	case r.ErrorCode != 0:
		e.failures++
	case !r.IsFenced:
		e.unfenced = true
	case e.unfenced:
		e.falseFence++
	}
}

// BenchmarkHeartbeats100: -kraftd.hb.brokers emulated brokers (one goroutine and one
// connection each) register with a real controller quorum and heartbeat every 500 ms
// for -kraftd.hb.duration, with the session timeout at Kafka's default 9 s. Goal: no
// false fence, heartbeat p99 under 20 ms.
func BenchmarkHeartbeats100(b *testing.B) {
	const interval = 500 * time.Millisecond
	c := newBenchCluster(b, *benchControllers, 0, app.Setting{Key: "broker.session.timeout.ms", Value: "9000"})
	ctrl := c.activeController()
	var leader *app.App
	for nid, p := range c.ctrlPorts {
		if fmt.Sprintf("127.0.0.1:%d", p) == ctrl {
			leader = c.nodes[nid]
		}
	}
	applied := func() int64 { return leader.Quorum().Metrics().HighWatermark - 1 }
	brokers := make([]*emulatedBroker, *benchHBBrokers)
	ctx, cancel := context.WithTimeout(context.Background(), *benchHBDuration+30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(brokers))
	b.ResetTimer()
	start := time.Now()
	for i := range brokers {
		e := &emulatedBroker{id: int32(1000 + i)}
		brokers[i] = e
		wg.Go(func() {
			cl := protocol.NewClient(protocol.ClientConfig{ClientID: fmt.Sprintf("emulated-%d", e.id)})
			defer cl.Close()
			if err := e.register(ctx, cl, ctrl, c.clusterID); err != nil {
				errs <- err
				return
			}
			// Spread the brokers over the interval, as real ones started at different times are.
			<-time.After(time.Duration(i) * interval / time.Duration(len(brokers)))
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for time.Since(start) < *benchHBDuration {
				e.heartbeat(ctx, cl, ctrl, applied())
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	var all []time.Duration
	var falseFences, failures, neverUnfenced int
	for _, e := range brokers {
		all = append(all, e.rtts...)
		falseFences += e.falseFence
		failures += e.failures
		if !e.unfenced {
			neverUnfenced++
		}
	}
	var regErrs []error
	for err := range errs {
		regErrs = append(regErrs, err)
	}
	if err := errors.Join(regErrs...); err != nil {
		b.Fatal(err)
	}
	p50, p99 := ms(quantile(all, 0.5)), ms(quantile(all, 0.99))
	b.ReportMetric(p50, "hb-p50-ms")
	b.ReportMetric(p99, "hb-p99-ms")
	b.ReportMetric(ms(quantile(all, 1)), "hb-max-ms")
	b.ReportMetric(float64(falseFences), "false-fences")
	b.ReportMetric(float64(failures), "hb-failures")
	b.Logf("%d brokers x %v at %v: %d heartbeats, p50 %.2f ms p99 %.2f ms max %.2f ms; false fences %d, failures %d, never unfenced %d",
		len(brokers), *benchHBDuration, interval, len(all), p50, p99, ms(quantile(all, 1)), falseFences, failures, neverUnfenced)
	b.Logf("reproduce: go test ./interop -run '^$' -bench Heartbeats100 -kraftd.hb.brokers %d -kraftd.hb.duration %v -kraftd.controllers %d",
		len(brokers), *benchHBDuration, *benchControllers)
	if falseFences > 0 || neverUnfenced > 0 {
		b.Errorf("false fences %d, never unfenced %d", falseFences, neverUnfenced)
	}
}

// BenchmarkBrokerRestart: on a cluster of -kraftd.partitions partitions, one broker
// crashes (no controlled shutdown); once the controller has fenced it (its session
// expired: until then Kafka, and kraftd, refuse a new incarnation of the same id with
// DUPLICATE_BROKER_REGISTRATION) it restarts on its data directory. Measured is the
// time from the restart to RUNNING: registered, caught up and unfenced.
func BenchmarkBrokerRestart(b *testing.B) {
	rf := int16(min(3, *benchBrokers))
	c := newBenchCluster(b, *benchControllers, *benchBrokers)
	c.waitBrokersRunning()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "bench"})
	defer cl.Close()
	fill(b, cl, c.activeController(), *benchPartitions, rf)
	victim := slices.Max(slices.Collect(maps.Keys(c.brokerPorts)))
	survivor := fmt.Sprintf("127.0.0.1:%d", c.brokerPorts[slices.Min(slices.Collect(maps.Keys(c.brokerPorts)))])
	var took, caughtUp, fenceWait, quietWait []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		crashed := time.Now()
		c.crash(victim)
		for slices.Contains(listBrokers(survivor), victim) {
			<-time.After(10 * time.Millisecond)
		}
		fenceWait = append(fenceWait, time.Since(crashed))
		// Fencing a broker of a 1M-partition cluster commits ~1M
		// PartitionChangeRecords (~45 MB), after which every other node writes a
		// snapshot (~0.2 s of CPU each). On their own machines that would not
		// touch the restarting broker; packed on 2 shared cores it takes half
		// its CPU, so the restart starts once they are done.
		quiet := time.Now()
		for *benchQuiet && c.snapshotsDue() {
			<-time.After(10 * time.Millisecond)
		}
		quietWait = append(quietWait, time.Since(quiet))
		b.StartTimer()
		stopProfile := func() {}
		if i == 0 {
			stopProfile = profileMeasured(b) // the first restart only, not the fencing
		}
		start := time.Now()
		a := c.start(victim, c.overrides)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := a.Broker().WaitState(ctx, broker.StateRecovery)
		caughtUp = append(caughtUp, time.Since(start))
		if err == nil {
			err = a.Broker().WaitState(ctx, broker.StateRunning)
		}
		cancel()
		stopProfile()
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	p50 := ms(quantile(took, 0.5))
	b.ReportMetric(p50, "unfenced-p50-ms")
	b.ReportMetric(ms(quantile(took, 1)), "unfenced-max-ms")
	b.ReportMetric(ms(quantile(caughtUp, 0.5)), "caught-up-p50-ms")
	b.Logf("partitions=%d: broker restart to unfenced p50 %.1f ms max %.1f ms (caught up, RECOVERY, p50 %.1f ms) "+
		"over %d restarts (crash to fenced p50 %.0f ms, then the other nodes' snapshots p50 %.0f ms)", *benchPartitions, p50, ms(quantile(took, 1)),
		ms(quantile(caughtUp, 0.5)), len(took), ms(quantile(fenceWait, 0.5)), ms(quantile(quietWait, 0.5)))
	b.Logf("reproduce: go test ./interop -run '^$' -bench BrokerRestart -benchtime %dx -kraftd.partitions %d -kraftd.quiet=%t",
		b.N, *benchPartitions, *benchQuiet)
}
