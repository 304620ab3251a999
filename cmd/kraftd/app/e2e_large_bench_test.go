package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// benchLarge adds the 1,000,000-partition size to the end-to-end
// benchmarks below; without it they run at 100,000 only.
var benchLarge = flag.Bool("bench.large", false, "run the end-to-end benchmarks at 1,000,000 partitions too")

// e2eDump prints every series' changes after each run (where the time goes).
var e2eDump = flag.Bool("e2e.dump", false, "print the polled series of the end-to-end benchmarks")

// e2eProfile writes a CPU profile of the measured part only (not the
// setup) of the end-to-end benchmarks to this file.
var e2eProfile = flag.String("e2e.cpuprofile", "", "write a CPU profile of the measured part of the end-to-end benchmarks")

// e2eLog also writes every node's log at info and above to stderr (where a
// run went wrong: elections, resignations, refused requests).
var e2eLog = flag.Bool("e2e.log", false, "write the nodes' logs (info and above) to stderr")

// profileStart starts the measured part's CPU profile, if asked for; the
// returned func stops it.
func profileStart(b *testing.B, name string) func() {
	if *e2eProfile == "" {
		return func() {}
	}
	f, err := os.Create(*e2eProfile + "." + name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { pprof.StopCPUProfile(); f.Close() }) }
	b.Cleanup(stop)
	return stop
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func e2eSizes() []int {
	if *benchLarge {
		return []int{100_000, 1_000_000}
	}
	return []int{100_000}
}

// logStamps is a zap core that remembers when each watched message was
// first logged after arm; every other entry is dropped. The benchmarks
// read production events (the controller's fencing decision) from it
// without any hook in the code they measure.
type logStamps struct {
	mu    sync.Mutex
	watch map[string]bool
	at    map[string][]time.Time
}

func newLogStamps(msgs ...string) *logStamps {
	s := &logStamps{watch: map[string]bool{}, at: map[string][]time.Time{}}
	for _, m := range msgs {
		s.watch[m] = true
	}
	return s
}

func (s *logStamps) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (s *logStamps) With([]zapcore.Field) zapcore.Core { return s }
func (s *logStamps) Sync() error                       { return nil }
func (s *logStamps) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if s.watch[e.Message] {
		return ce.AddCore(e, s)
	}
	return ce
}

func (s *logStamps) Write(e zapcore.Entry, _ []zapcore.Field) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[e.Message] = append(s.at[e.Message], e.Time)
	return nil
}

// arm forgets every stamp.
func (s *logStamps) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.at)
}

func (s *logStamps) when(msg string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.at[msg]; len(ts) > 0 {
		return ts[0], true
	}
	return time.Time{}, false
}

// all is every time msg was logged since arm.
func (s *logStamps) all(msg string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at[msg])
}

// snapshotsNote says how many metadata snapshots were written between from
// and to (on any node), and when: a snapshot of a million-partition image
// competes for the same two cores.
func (s *logStamps) snapshotsNote(from, to time.Time) string {
	var at []string
	for _, t := range s.all(msgSnapshot) {
		if !t.Before(from) && !t.After(to) {
			at = append(at, fmt.Sprintf("%.0f", msOf(t.Sub(from))))
		}
	}
	return fmt.Sprintf("%d metadata snapshots written meanwhile (at ms: %s)", len(at), strings.Join(at, ","))
}

// e2eCluster is three controllers (production App, controller role: quorum
// Node with its FileStorage, fsync on, on loopback) and three brokers
// (App, broker role: observer Node, lifecycle, publisher and image; no
// replica manager, see brokerWithoutReplicas), in this process.
type e2eCluster struct {
	ctrls   map[int32]*App // node ids 1-3
	brokers map[int32]*App // node ids 4-6
	stamps  *logStamps
	cl      *protocol.Client
	watched *App // the active controller watch was given
}

const (
	msgFencing  = "fencing broker because its session has timed out"
	msgSnapshot = "metadata snapshot written"
)

// newE2ECluster starts the cluster with broker.session.timeout.ms
// sessionMs and creates partitions partitions. The session is long for the
// controlled shutdown (on a loaded 2-core machine a broker waiting for a
// million records to commit must not be fenced meanwhile) and only as short
// as it must be for the broker loss, whose detection is not measured.
func newE2ECluster(b *testing.B, partitions int, sessionMs int) *e2eCluster {
	b.Helper()
	c := &e2eCluster{ctrls: map[int32]*App{}, brokers: map[int32]*App{}, stamps: newLogStamps(msgFencing, msgSnapshot)}
	var voters []string
	ports := map[int32]int{}
	for id := int32(1); id <= 3; id++ {
		ports[id] = testport.App.Port(b)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, ports[id]))
	}
	common := []Setting{
		{"controller.listener.names", "CONTROLLER"},
		{"controller.quorum.voters", strings.Join(voters, ",")},
		{"cluster.id", testClusterID},
		{"broker.session.timeout.ms", fmt.Sprint(sessionMs)}, {"broker.heartbeat.interval.ms", "1000"},
	}
	start := func(id int32, settings []Setting) *App {
		cfg, err := LoadConfig(append(slices.Clone(common), settings...), nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Logger = zap.New(c.stamps)
		if *e2eLog {
			enc := zap.NewDevelopmentEncoderConfig()
			cfg.Logger = zap.New(zapcore.NewTee(c.stamps, zapcore.NewCore(zapcore.NewConsoleEncoder(enc),
				zapcore.Lock(os.Stderr), zapcore.InfoLevel)))
		}
		cfg.brokerWithoutReplicas = true
		a, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		return a
	}
	for id := int32(1); id <= 3; id++ {
		c.ctrls[id] = start(id, []Setting{{"node.id", fmt.Sprint(id)}, {"process.roles", "controller"},
			{"listeners", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", ports[id])}, {"log.dirs", b.TempDir()}})
	}
	for id := int32(4); id <= 6; id++ {
		c.brokers[id] = start(id, []Setting{{"node.id", fmt.Sprint(id)}, {"process.roles", "broker"},
			{"listeners", "PLAINTEXT://127.0.0.1:0"}, {"log.dirs", b.TempDir()}})
	}
	c.cl = protocol.NewClient(protocol.ClientConfig{ClientID: "e2e-bench"})
	for _, a := range c.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := a.Broker().WaitState(ctx, broker.StateRunning)
		cancel()
		if err != nil {
			c.stop()
			b.Fatalf("broker not running: %v", err)
		}
	}
	c.create(b, partitions)
	return c
}

// leader is the active controller's App.
func (c *e2eCluster) leader() *App {
	for _, a := range c.ctrls {
		if a.Quorum().Metrics().Role == quorum.Leader {
			return a
		}
	}
	return nil
}

// create makes partitions partitions in topics of 1,000 at RF 3 (9 topics
// per CreateTopics: 9,009 records, the most Kafka's controller takes in one
// request is 10,000 records and 10,000 partitions), sent one after the other
// to the active controller, and waits until every broker's image holds them
// all.
func (c *e2eCluster) create(b *testing.B, partitions int) {
	const perTopic, perReq = 1000, 9
	epoch := func() int32 { return c.ctrls[1].Quorum().Metrics().Epoch }
	start, epoch0 := time.Now(), epoch()
	defer func() {
		b.Logf("created %d partitions in %v; quorum epoch %d -> %d (a leader per epoch)", partitions,
			time.Since(start).Round(time.Millisecond), epoch0, epoch())
	}()
	for t := 0; t*perTopic < partitions; t += perReq {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.TimeoutMillis = 600_000
		for i := t; i < t+perReq && i*perTopic < partitions; i++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("t%05d", i), perTopic, 3
			req.Topics = append(req.Topics, rt)
		}
		// A retry after NOT_CONTROLLER may find some of its topics created:
		// the old leader's records can commit after it answered. Those are
		// TOPIC_ALREADY_EXISTS; the count checked below says whether every
		// partition exists.
		retried := false
		for {
			l := c.leader()
			if l == nil {
				time.Sleep(10 * time.Millisecond) // no leader yet; the election is not what this measures
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			resp, err := c.cl.Request(ctx, l.Addr("CONTROLLER").String(), req)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			again := false
			for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
				switch {
				case rt.ErrorCode == 0, rt.ErrorCode == 36 && retried: // TOPIC_ALREADY_EXISTS
				case rt.ErrorCode == 41: // NOT_CONTROLLER: the leader moved; ask again
					again = true
				default:
					b.Fatalf("create %s: error %d", rt.Topic, rt.ErrorCode)
				}
			}
			if !again {
				break
			}
			retried = true
		}
	}
	for id, a := range c.brokers {
		pollWithin(b, fmt.Sprintf("broker %d to hold %d partitions", id, partitions), 30*time.Minute, func() bool {
			return a.Broker().Image().NumPartitions() == partitions && !a.Broker().Fenced()
		})
	}
}

func (c *e2eCluster) stop() {
	c.cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, a := range c.brokers {
		a.Kill() // no controlled shutdown of a million partitions at the end
	}
	for _, a := range c.ctrls {
		_ = a.Stop(ctx)
	}
}

// sample is one observed value of a series, kept only when it changed.
type sample struct {
	at time.Time
	v  int64
}

// series is one polled figure: an offset on some node, a leader count.
type series struct {
	name string
	get  func() int64
	ev   []sample
}

// timeline polls a set of series every pollEvery on its own goroutine,
// from start until stop, keeping the changes.
type timeline struct {
	ss   []*series
	done chan struct{}
	wg   sync.WaitGroup
}

const pollEvery = 250 * time.Microsecond

func (tl *timeline) add(name string, get func() int64) {
	tl.ss = append(tl.ss, &series{name: name, get: get})
}

func (tl *timeline) start() {
	tl.done = make(chan struct{})
	tl.poll(time.Now())
	tl.wg.Go(func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-tl.done:
				return
			case now := <-t.C:
				tl.poll(now)
			}
		}
	})
}

func (tl *timeline) poll(now time.Time) {
	for _, s := range tl.ss {
		v := s.get()
		if n := len(s.ev); n == 0 || s.ev[n-1].v != v {
			s.ev = append(s.ev, sample{at: now, v: v})
		}
	}
}

func (tl *timeline) stop() {
	close(tl.done)
	tl.wg.Wait()
}

// dump logs every change of every series, in ms from t0.
func (tl *timeline) dump(b *testing.B, t0 time.Time) {
	if !*e2eDump {
		return
	}
	var sb strings.Builder
	for _, s := range tl.ss {
		if strings.HasPrefix(s.name, "process.") {
			continue
		}
		fmt.Fprintf(&sb, "\n%s:", s.name)
		for _, x := range s.ev {
			fmt.Fprintf(&sb, " %.1f=%d", msOf(x.at.Sub(t0)), x.v)
		}
	}
	b.Log(sb.String())
}

func (tl *timeline) get(name string) *series {
	for _, s := range tl.ss {
		if s.name == name {
			return s
		}
	}
	panic("no series " + name)
}

// reached is when name first held a value >= v (zero if never).
func (tl *timeline) reached(name string, v int64) time.Time {
	for _, x := range tl.get(name).ev {
		if x.v >= v {
			return x.at
		}
	}
	return time.Time{}
}

// valueAt is name's value at t: its last sample at or before t.
func (tl *timeline) valueAt(name string, t time.Time) int64 {
	var v int64
	for _, x := range tl.get(name).ev {
		if x.at.After(t) {
			break
		}
		v = x.v
	}
	return v
}

// firstChange is when name first changed after from.
func (tl *timeline) firstChange(name string, from time.Time) time.Time {
	ev := tl.get(name).ev
	for i := 1; i < len(ev); i++ {
		if ev[i].at.After(from) {
			return ev[i].at
		}
	}
	return time.Time{}
}

// watch adds the series of the scenario whose victim is broker victim:
// the active controller's log end, high watermark and delivered offsets,
// the other voters' log ends, and for each surviving broker its observer's
// log end and delivered offsets, its visible image's offset (and, read from
// the same image, whether it still has the victim as a leader), and the
// offset its heartbeats report.
func (c *e2eCluster) watch(tl *timeline, leader *App, victim int32) {
	c.watched = leader
	// The process's CPU time (all six nodes), in microseconds: on a shared
	// machine it says what the work cost when wall time says how busy the
	// machine was.
	tl.add("process.cpu-us", func() int64 { return processCPU().Microseconds() })
	tl.add("leader.leo", func() int64 { return leader.Quorum().Metrics().LogEndOffset })
	tl.add("leader.hw", func() int64 { return leader.Quorum().Metrics().HighWatermark })
	tl.add("leader.delivered", func() int64 { return leader.Quorum().Metrics().AppliedOffset })
	for id, a := range c.ctrls {
		if a != leader {
			tl.add(fmt.Sprintf("voter%d.leo", id), func() int64 { return a.Quorum().Metrics().LogEndOffset })
		}
	}
	for id, a := range c.brokers {
		if id == victim {
			continue
		}
		br := a.Broker()
		tl.add(fmt.Sprintf("b%d.leo", id), func() int64 { return a.Quorum().Metrics().LogEndOffset })
		tl.add(fmt.Sprintf("b%d.delivered", id), func() int64 { return a.Quorum().Metrics().AppliedOffset })
		// The image offset, negated while the victim still leads in that
		// image: one read, so the two cannot come from different images.
		tl.add(fmt.Sprintf("b%d.served", id), func() int64 {
			img := br.Image()
			if img.LeaderCount(victim) > 0 {
				return -1
			}
			return img.Provenance().Offset
		})
		tl.add(fmt.Sprintf("b%d.visible", id), func() int64 { return br.Image().Provenance().Offset })
		tl.add(fmt.Sprintf("b%d.applied", id), func() int64 { return br.AppliedOffset() })
	}
}

// stages turns a finished timeline into the stage times from t0, with
// target the offset of the image in which every survivor first served the
// new leaders (the lowest such offset among them): the leader's first
// append after t0, its log end, high watermark and delivery past target,
// then per surviving broker the fetch, delivery, visible image, new
// leaders served and heartbeat-reported offsets.
func (c *e2eCluster) stages(b *testing.B, tl *timeline, t0 time.Time, victim int32) (map[string]time.Duration, []string) {
	target := int64(-1)
	for id := range c.brokers {
		if id == victim {
			continue
		}
		off := tl.reached(fmt.Sprintf("b%d.served", id), 0)
		var v int64
		for _, x := range tl.get(fmt.Sprintf("b%d.served", id)).ev {
			if x.at.Equal(off) {
				v = x.v
			}
		}
		if target < 0 || v < target {
			target = v
		}
	}
	out := map[string]time.Duration{}
	var order []string
	put := func(name string, at time.Time) {
		if at.IsZero() {
			b.Errorf("stage %s never reached (target offset %d)", name, target)
			return
		}
		out[name] = at.Sub(t0)
		order = append(order, name)
	}
	put("leader-first-append", tl.firstChange("leader.leo", t0))
	put("leader-appended", tl.reached("leader.leo", target+1))
	for id, a := range c.ctrls {
		if a != c.watched {
			put(fmt.Sprintf("voter%d-fetched", id), tl.reached(fmt.Sprintf("voter%d.leo", id), target+1))
		}
	}
	put("leader-committed", tl.reached("leader.hw", target+1))
	put("leader-delivered", tl.reached("leader.delivered", target+1))
	for _, id := range []int32{4, 5, 6} {
		if id == victim {
			continue
		}
		put(fmt.Sprintf("b%d-fetched", id), tl.reached(fmt.Sprintf("b%d.leo", id), target+1))
		put(fmt.Sprintf("b%d-delivered", id), tl.reached(fmt.Sprintf("b%d.delivered", id), target+1))
		put(fmt.Sprintf("b%d-visible", id), tl.reached(fmt.Sprintf("b%d.visible", id), target))
		put(fmt.Sprintf("b%d-served", id), tl.reached(fmt.Sprintf("b%d.served", id), target))
		put(fmt.Sprintf("b%d-applied", id), tl.reached(fmt.Sprintf("b%d.applied", id), target))
	}
	return out, order
}

// waitFor polls cond every millisecond for up to timeout; on a timeout it
// prints the timeline (from t0) before failing, so a stuck run shows where.
func waitFor(b *testing.B, tl *timeline, t0 time.Time, what string, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tl.stop()
			*e2eDump = true
			tl.dump(b, t0)
			b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}

// cpuBetween is the process CPU time spent between from and to, as polled.
func cpuBetween(tl *timeline, from, to time.Time) time.Duration {
	return time.Duration(tl.valueAt("process.cpu-us", to)-tl.valueAt("process.cpu-us", from)) * time.Microsecond
}

// report prints the stages in order and reports each as a metric.
func reportStages(b *testing.B, title string, st map[string]time.Duration, order []string, extra ...string) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s:", title)
	for _, e := range extra {
		fmt.Fprintf(&sb, " %s;", e)
	}
	for _, name := range order {
		fmt.Fprintf(&sb, "\n  %-22s %9.1f ms", name, msOf(st[name]))
		b.ReportMetric(msOf(st[name]), name+"-ms")
	}
	b.Log(sb.String())
}

// BenchmarkControlledShutdownEndToEnd: broker 4 of 3 brokers (it leads a
// third of all partitions, every broker is in every ISR) shuts down
// cleanly through its production path (App.Stop: heartbeats with
// WantShutDown until the controller answers ShouldShutdown). Reported: the
// time from the start of the shutdown until the broker may exit
// (may-exit-ms), until both other brokers serve the new leaders
// (served-ms), and each stage on the way (see stages). Setup (creating the
// partitions, every broker applying them) is outside the timer; each size
// builds its cluster once per iteration, so run it with -benchtime 1x.
//
//	go test -run '^$' -bench ControlledShutdownEndToEnd -benchtime 1x -timeout 60m ./cmd/kraftd/app [-bench.large]
func BenchmarkControlledShutdownEndToEnd(b *testing.B) {
	for _, n := range e2eSizes() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				c := newE2ECluster(b, n, 60_000)
				const victim = 4
				leader := c.leader()
				if led := c.brokers[victim].Broker().Image().LeaderCount(victim); led < n/4 {
					c.stop()
					b.Fatalf("broker %d leads %d of %d", victim, led, n)
				}
				var tl timeline
				c.watch(&tl, leader, victim)
				vb := c.brokers[victim].Broker()
				tl.add("victim.state", func() int64 { return int64(vb.State()) })
				tl.add("victim.applied", func() int64 { return vb.AppliedOffset() })
				for id := range c.brokers {
					tl.add(fmt.Sprintf("b%d.fenced", id), func() int64 {
						img, _ := leader.Controller().CommittedImage()
						if br, _ := img.Broker(id); br.Fenced {
							return 1
						}
						return 0
					})
				}
				tl.start()
				c.stamps.arm()
				prof := profileStart(b, fmt.Sprintf("shutdown-%d", n))
				b.StartTimer()
				t0 := time.Now()
				stopped := make(chan error, 1)
				go func() { stopped <- c.brokers[victim].Stop(context.Background()) }()
				for _, id := range []int32{5, 6} {
					waitFor(b, &tl, t0, "new leaders served", 5*time.Minute, func() bool {
						return c.brokers[id].Broker().Image().LeaderCount(victim) == 0
					})
				}
				waitFor(b, &tl, t0, "the victim released", 5*time.Minute, func() bool {
					return vb.State() >= broker.StateShuttingDown
				})
				b.StopTimer()
				prof()
				time.Sleep(50 * time.Millisecond) // the poller catches the last offsets (heartbeat-reported) after the images
				tl.stop()
				if err := <-stopped; err != nil {
					b.Errorf("stop: %v", err)
				}
				tl.dump(b, t0)
				st, order := c.stages(b, &tl, t0, victim)
				exit := tl.reached("victim.state", int64(broker.StateShuttingDown)).Sub(t0)
				served := max(st["b5-served"], st["b6-served"])
				st["may-exit"], st["served"] = exit, served
				order = append(order, "may-exit", "served")
				st["cpu-until-served"] = cpuBetween(&tl, t0, t0.Add(served))
				order = append(order, "cpu-until-served")
				reportStages(b, fmt.Sprintf("controlled shutdown at %d partitions", n), st, order,
					c.stamps.snapshotsNote(t0, t0.Add(exit)))
				c.stop()
			}
		})
	}
}

// BenchmarkBrokerLossEndToEnd: broker 4 of 3 brokers (leading a third of
// all partitions, in every ISR) is killed (App.Kill: no controlled
// shutdown, heartbeats stop); its session expires after
// broker.session.timeout.ms and the active controller fences it. Measured
// from the controller's fencing decision (its log line "fencing broker
// because its session has timed out") until both other brokers serve the
// new leaders (served-ms), with each stage (see stages). Detection (the
// session timeout, 15 s here) is reported apart (detect-ms).
//
//	go test -run '^$' -bench BrokerLossEndToEnd -benchtime 1x -timeout 60m ./cmd/kraftd/app [-bench.large]
func BenchmarkBrokerLossEndToEnd(b *testing.B) {
	for _, n := range e2eSizes() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				c := newE2ECluster(b, n, 15_000)
				const victim = 4
				leader := c.leader()
				if led := c.brokers[victim].Broker().Image().LeaderCount(victim); led < n/4 {
					c.stop()
					b.Fatalf("broker %d leads %d of %d", victim, led, n)
				}
				var tl timeline
				c.watch(&tl, leader, victim)
				tl.start()
				c.stamps.arm()
				killed := time.Now()
				c.brokers[victim].Kill()
				prof := profileStart(b, fmt.Sprintf("loss-%d", n))
				b.StartTimer()
				for _, id := range []int32{5, 6} {
					waitFor(b, &tl, killed, "new leaders served", 5*time.Minute, func() bool {
						return c.brokers[id].Broker().Image().LeaderCount(victim) == 0
					})
				}
				b.StopTimer()
				prof()
				time.Sleep(50 * time.Millisecond) // the poller catches the last offsets (heartbeat-reported) after the images
				tl.stop()
				t0, ok := c.stamps.when(msgFencing)
				if !ok {
					b.Fatal("no fencing decision logged")
				}
				tl.dump(b, t0)
				st, order := c.stages(b, &tl, t0, victim)
				st["served"] = max(st["b5-served"], st["b6-served"])
				st["cpu-until-served"] = cpuBetween(&tl, t0, t0.Add(st["served"]))
				order = append(order, "served", "cpu-until-served")
				reportStages(b, fmt.Sprintf("broker loss at %d partitions", n), st, order,
					fmt.Sprintf("detection %.0f ms after the kill", msOf(t0.Sub(killed))),
					c.stamps.snapshotsNote(t0, t0.Add(st["served"])))
				c.stop()
			}
		})
	}
}
