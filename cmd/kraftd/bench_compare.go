package main

// kraftd bench: KRaft against the ZooKeeper era on the same work in one run
// (issue 17). For each partition count and each mode it starts a cluster of
// separate kraftd processes on 127.0.0.1 (devCluster: 3 controllers and the
// brokers in kraft mode; a ZooKeeper ensemble and the brokers in zk-legacy mode),
// creates the partitions, and measures the scenarios below through the
// Kafka protocol only, as a client would see them. A mode whose run at one
// size takes longer than --cap is stopped and marked "capped" at that size
// and every larger one. The figures go to stdout as one Markdown table per
// scenario and, with the raw samples, to --out as results.md and
// results.json, with one SVG chart per scenario (bench_plot.go). --quick
// asserts the shape (bench_shape.go).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/cmd/kraftd/internal/probe"
	"github.com/kraftd/kraftd/legacyzk/zkserver"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/storage"
)

const compareUsage = `usage: kraftd bench [--partitions 1000,10000,...] [--cap D] [--quick] [--out DIR] [--mode kraft,zk-legacy] [--scenarios S,...] [--zookeeper-servers 3|1] [--override key=value]...

Runs the same work against a KRaft cluster (3 controller and --brokers broker
processes) and a zk-legacy cluster (a 3-server ZooKeeper ensemble with
forceSync=yes and --brokers broker processes) at each partition count, every node its own kraftd process on
127.0.0.1, and prints one table per scenario with both modes side by side:
  create       partitions created per second: until every broker serves
               every partition with a leader (visible), and until every
               broker created the logs of its replicas (logs ready: kraft,
               each broker's metadata_applied_offset, read on its loopback
               metrics listener, reaches the controllers' high watermark
               after the last CreateTopics; zk-legacy, the same as visible,
               since a broker's UpdateMetadata is sent only once it answered
               the LeaderAndIsr that created its logs), and until every
               broker wrote their partition.metadata files (logs durable:
               each broker's partition_metadata_pending_writes gauge is 0);
               every later scenario starts once the logs are ready and
               durable on every running broker
  propagation  a topic create until every broker serves it (p50, p99)
  failover     kill -9 of the active controller: until a new one is known
               (detection) and until a CreateTopics through a broker succeeds
               and every running broker serves the topic (recovery); with the
               longest gap in acknowledged writes of a steady acks=all
               producer (the probe of kraftd bench gap) across it
  pause        the same with SIGSTOP instead of kill -9 (no RST tells the
               others), SIGCONT afterwards
  loss         kill -9 of the broker leading the most partitions: until the
               first and until the last of its partitions is led elsewhere;
               with the steady producer's longest gap on a partition it led
  brokerpause  the same with SIGSTOP, SIGCONT afterwards (and how long until
               the cluster is whole again)
  shutdown     SIGTERM of the broker leading the most partitions: until it
               may exit (kraft: the controller's heartbeat answer with
               ShouldShutdown, SHUTDOWN_NOW, reached it; zk-legacy: the
               controller answered ControlledShutdown with no partition
               remaining; from its node log), until the process exits, and
               the longest time one of its partitions had no other leader
               visible to clients; with the producer's gap as for loss
  restart      a broker stopped (SIGTERM) and started again: from its start
               until another broker lists it (unfenced in kraft, registered
               in zk-legacy) and until it serves every partition with a leader
  join         a fresh broker (new id, empty directory) started: the same
  leaderchange one partition's leader change until every broker serves the
               new leader (p50, p99): ElectLeaders (PREFERRED) moving it back
               to a broker the bench added, shut down and started again once
               before the samples
The create scenario also reads each node's resident memory (VmRSS) before
and after the partitions exist: bytes per partition in a broker and in the
active controller (in zk-legacy, the controller broker).
A mode that needs more than --cap at one size is stopped there and marked
capped for that size and every larger one. Settings are the defaults except
those given with --override (passed to every node of both modes and printed);
every node inherits the bench's environment, and a GOMEMLIMIT, GOGC or
GOMAXPROCS there is printed with the settings too.
--override kraftd.pprof.enable=true serves Go's profiles under /debug/pprof/
on each node's loopback metrics listener (its port is in the node log's
"serving metrics" line), e.g. for a goroutine dump during a fault; nothing
is profiled unless asked.`

// compareOptions are the flags of kraftd bench.
type compareOptions struct {
	partitions  []int
	modes       []string
	brokers     int
	rf          int
	topicSize   int
	samples     int
	rate        int
	capPerRun   time.Duration
	out         string
	overrides   []string
	zkServers   int
	zkForceSync bool
	logLevel    string
	// partitionLines keeps the per-replica log lines (bench_logs.go).
	partitionLines bool
	startTimeout   time.Duration
	quick          bool
	assertShape    bool
	// from are results.json files to render into --out instead of running:
	// a later run's rows replace an earlier one's of the same mode and size.
	from []string
	// createTimeout is CreateTopics' TimeoutMillis (60 s, as kafka-topics.sh
	// and AdminClient send; a hidden flag lets a test make it expire).
	createTimeout time.Duration
	scenarios     []string
	// nodeBinary is the kraftd executable the nodes run ("": this one).
	nodeBinary string
}

// quickPartitions are --quick's sizes: three, a decade apart end to end,
// small enough for both modes to create them on 2 busy cores within the
// budget (zk-legacy creates about 40 partitions/s there).
var quickPartitions = []int{100, 300, 1000}

// benchScenarios are the scenarios in the order they run; create always
// runs (it makes the partitions the others work on).
// The controlled shutdown runs first of the faults: kraftd does not move
// leaders back to their preferred replicas (no auto.leader.rebalance), so
// after a loss the survivors lead everything, and the shut-down broker would
// lead far more than the third (with 3 brokers: all of them in
// kraft, whose controller failovers move no partition leader, half in
// zk-legacy, whose do).
var benchScenarios = []string{"create", "propagation", "shutdown", "failover", "pause", "loss", "brokerpause", "restart", "join", "leaderchange"}

func parseCompareFlags(args []string, stderr io.Writer) (compareOptions, error) {
	var o compareOptions
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(stderr)
	fs.IntSliceVar(&o.partitions, "partitions", []int{1000, 10000}, "partition counts, comma-separated (1000,10000,100000,1000000)")
	fs.StringSliceVar(&o.modes, "mode", []string{string(app.ModeKRaft), string(app.ModeZKLegacy)}, "modes to run, comma-separated")
	fs.IntVar(&o.brokers, "brokers", 3, "broker processes per cluster (3 or more)")
	fs.IntVar(&o.rf, "replication-factor", 3, "replication factor of the created partitions")
	fs.IntVar(&o.topicSize, "topic-partitions", 1000, "partitions per created topic (the count is reached with several topics)")
	fs.IntVar(&o.samples, "samples", 50, "single changes timed for each propagation figure (topic creates; leader changes)")
	fs.IntVar(&o.rate, "rate", 500, "records per second of the steady producer across the failover")
	fs.DurationVar(&o.capPerRun, "cap", 10*time.Minute, "longest time one mode may take at one partition count; past it the mode is stopped and marked capped")
	fs.StringVar(&o.out, "out", "", "results directory (results.md, results.json, node logs); default bench-results/<UTC time>")
	fs.StringArrayVar(&o.overrides, "override", nil, "key=value passed to every node of both modes; repeatable; printed with the results")
	fs.IntVar(&o.zkServers, "zookeeper-servers", 3, "ZooKeeper servers of the zk-legacy mode: 3 (an ensemble, as Kafka runs in production) or 1 (standalone)")
	fs.BoolVar(&o.zkForceSync, "zookeeper-force-sync", true, "ZooKeeper's forceSync (fsync its transaction log before acknowledging a write; yes in production, as kraftd's metadata log always fsyncs)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level of every node; the logs of every run, failed or not, are kept in the results directory's logs/<mode>-<partitions>.log (info has each broker's \"metadata image visible late\" lines with their stage timings, summarized in the run's note)")
	fs.BoolVar(&o.partitionLines, "log-partition-lines", false, "keep the brokers' per-replica \"hosting partition\" log lines (by default counted, not written: millions at 1M partitions)")
	fs.DurationVar(&o.startTimeout, "start-timeout", 2*time.Minute, "how long a cluster has to start")
	fs.StringSliceVar(&o.scenarios, "scenarios", benchScenarios, "scenarios to run, comma-separated (create always runs)")
	fs.BoolVar(&o.quick, "quick", false, "reduced matrix, under 5 minutes: 100,300,1000 partitions, the failover scenario, 5 samples, a 2 minute cap, zookeeper.session.timeout.ms=6000, unless given; asserts only the shape (exit status 1 if KRaft's failover recovery grows with the partitions or zk-legacy's does not)")
	fs.StringSliceVar(&o.from, "from", nil, "results.json files, comma-separated: run nothing, render their runs as one report into --out (a later file's mode and size replaces an earlier one's)")
	fs.DurationVar(&o.createTimeout, "create-timeout", time.Minute, "CreateTopics' timeout (TimeoutMillis)")
	_ = fs.MarkHidden("create-timeout")
	fs.StringVar(&o.nodeBinary, "node-binary", "", "kraftd executable the nodes run (default: this one), so that one bench measures two builds side by side with the same measuring code")
	fs.BoolVar(&o.assertShape, "assert-shape", false, "exit with status 1 unless KRaft's failover recovery after detection is flat across the sizes and zk-legacy's grows (on with --quick)")
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s\n\nFlags:\n%s", compareUsage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.quick {
		if !fs.Changed("assert-shape") {
			o.assertShape = true
		}
		if !fs.Changed("partitions") {
			o.partitions = slices.Clone(quickPartitions)
		}
		if !fs.Changed("scenarios") {
			o.scenarios = []string{"failover"}
		}
		if !fs.Changed("samples") {
			o.samples = 5
		}
		if !fs.Changed("cap") {
			o.capPerRun = 2 * time.Minute
		}
		// Detection is not part of the shape; Kafka's default before 2.5
		// (6 s) keeps three zk-legacy failovers inside the budget. Printed
		// as changed.
		if !slices.ContainsFunc(o.overrides, func(ov string) bool { return strings.HasPrefix(ov, "zookeeper.session.timeout.ms=") }) {
			o.overrides = append(o.overrides, "zookeeper.session.timeout.ms=6000")
		}
	}
	for _, m := range o.modes {
		if m != string(app.ModeKRaft) && m != string(app.ModeZKLegacy) {
			return o, fmt.Errorf("bench: --mode %q: want kraft or zk-legacy", m)
		}
	}
	for _, sc := range o.scenarios {
		if !slices.Contains(benchScenarios, sc) {
			return o, fmt.Errorf("bench: --scenarios %q: want some of %s", sc, strings.Join(benchScenarios, ","))
		}
	}
	for _, p := range o.partitions {
		if p < 1 || p > 10_000_000 {
			return o, fmt.Errorf("bench: --partitions %d: want 1 to 10000000", p)
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	case len(o.partitions) == 0 || len(o.modes) == 0:
		return o, errors.New("bench: need at least one partition count and one mode")
	case o.brokers < 3:
		return o, fmt.Errorf("bench: --brokers %d: want 3 or more", o.brokers)
	case o.rf < 1 || o.rf > o.brokers:
		return o, fmt.Errorf("bench: --replication-factor %d: want 1 to --brokers (%d)", o.rf, o.brokers)
	case o.topicSize < 1 || o.samples < 1 || o.rate < 1 || o.capPerRun <= 0 || o.startTimeout <= 0 || o.createTimeout <= 0:
		return o, errors.New("bench: --topic-partitions, --samples, --rate, --cap and --start-timeout must be positive")
	case o.topicSize > 9999:
		// One topic per CreateTopics: its TopicRecord plus one PartitionRecord
		// each must stay within Kafka's MAX_RECORDS_PER_USER_OP (10000), and
		// its partitions within MAX_PARTITIONS_PER_BATCH (10000, which kraftd's
		// controller enforces).
		return o, fmt.Errorf("bench: --topic-partitions %d: at most 9999, the most one CreateTopics of one topic may create in Kafka's KRaft controller", o.topicSize)
	case o.zkServers != 1 && o.zkServers != 3:
		return o, fmt.Errorf("bench: --zookeeper-servers %d: want 3 (an ensemble) or 1 (standalone)", o.zkServers)
	}
	slices.Sort(o.partitions)
	o.partitions = slices.Compact(o.partitions)
	return o, nil
}

func runBenchCompare(args []string, stdout io.Writer, stderr *os.File) int {
	o, err := parseCompareFlags(args, stderr)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if o.out == "" {
		o.out = filepath.Join("bench-results", time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return report(stderr, exitError, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return report(stderr, exitError, err)
	}
	if o.nodeBinary != "" {
		exe = o.nodeBinary
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b := &comparison{o: o, exe: exe, progress: stderr, ports: newPortPicker(), rep: compareReport{
		Command: "kraftd bench " + strings.Join(args, " "), Started: time.Now().UTC(),
		Versions: benchVersions(), Settings: benchSettings(o), Overrides: o.overrides,
		Brokers: o.brokers, ReplicationFactor: o.rf, CapSeconds: o.capPerRun.Seconds(),
	}}
	if len(o.from) > 0 {
		if b.rep, err = mergeReports(o.from); err != nil {
			return report(stderr, exitError, err)
		}
	} else {
		defer b.finishCleanup() // after the results below
		b.run(ctx)
	}
	if o.assertShape {
		v := b.rep.checkShape()
		b.rep.Shape = &v
	}
	b.rep.Goals = b.rep.goals()
	md := b.rep.markdown()
	fmt.Fprint(stdout, md)
	js, err := json.MarshalIndent(b.rep, "", "  ")
	if err == nil {
		err = errors.Join(os.WriteFile(filepath.Join(o.out, "results.json"), append(js, '\n'), 0o644),
			os.WriteFile(filepath.Join(o.out, "results.md"), []byte(md), 0o644))
	}
	if err == nil {
		_, err = b.rep.writePlots(o.out)
	}
	if err != nil {
		return report(stderr, exitError, err)
	}
	fmt.Fprintf(stderr, "[bench] results in %s (results.md, results.json, one SVG plot per scenario, logs/)\n", o.out)
	if ctx.Err() != nil {
		return exitError
	}
	for _, r := range b.rep.Runs {
		if r.Status == statusFailed {
			return exitError
		}
	}
	if b.rep.Shape != nil && !b.rep.Shape.OK {
		fmt.Fprintln(stderr, "[bench] the shape does not hold (see Shape in results.md)")
		return exitError
	}
	return exitOK
}

// Run statuses.
const (
	statusOK     = "ok"
	statusCapped = "capped"
	statusFailed = "failed"
)

// compareReport is everything a run measured; results.json is this.
type compareReport struct {
	Command           string            `json:"command"`
	Started           time.Time         `json:"started"`
	Versions          map[string]string `json:"versions"`
	Settings          []string          `json:"settings"`
	Overrides         []string          `json:"overrides"`
	Brokers           int               `json:"brokers"`
	ReplicationFactor int               `json:"replication_factor"`
	CapSeconds        float64           `json:"cap_seconds"`
	Runs              []*modeRun        `json:"runs"`
	// Shape is the --quick assertion's outcome (nil when not asked for).
	Shape *shapeVerdict `json:"shape,omitempty"`
	// Goals are issue 17's goals judged on Runs (bench_goals.go).
	Goals []goalRow `json:"goals,omitempty"`
}

// modeRun is one mode at one partition count. Metrics are in milliseconds
// unless their name says otherwise; Samples holds the raw propagation times.
type modeRun struct {
	Mode       string               `json:"mode"`
	Partitions int                  `json:"partitions"`
	Status     string               `json:"status"`
	Note       string               `json:"note,omitempty"`
	Seconds    float64              `json:"seconds"`
	Metrics    map[string]float64   `json:"metrics"`
	Samples    map[string][]float64 `json:"samples,omitempty"`
}

func (r *modeRun) set(name string, v float64) { r.Metrics[name] = v }

func (r *modeRun) setDuration(name string, d time.Duration) {
	r.Metrics[name] = float64(d.Microseconds()) / 1000
}

// comparison runs the matrix.
type comparison struct {
	o        compareOptions
	exe      string
	progress io.Writer
	rep      compareReport
	runNo    int // the run under way, from 1
	// ports hands out every node port of the bench run (none twice).
	ports *portPicker
	// cleanup owns the goroutines removing finished runs' data; run waits
	// for them before it returns.
	cleanup sync.WaitGroup
}

func (b *comparison) progressf(format string, args ...any) {
	fmt.Fprintf(b.progress, "[bench %s run %d/%d] %s\n", time.Now().UTC().Format("15:04:05"), b.runNo, len(b.o.partitions)*len(b.o.modes), fmt.Sprintf(format, args...))
}

// expectedRun guesses how long one mode takes at one size, from what 2 cores
// shared with other builds measured: about 10 s to start a cluster, 50
// (kraft) and 40 (zk-legacy) partitions created per second, per scenario
// about 15 s in kraft and 25 s in zk-legacy (whose kill -9 and SIGSTOP
// scenarios also wait out zookeeper.session.timeout.ms), and per leader
// change sample a topic created and deleted and one election, 0.3 s and
// 0.6 s; capped at --cap. A guess to plan by, printed as one.
func expectedRun(o compareOptions, mode string, partitions int) time.Duration {
	rate, perScenario, perLeaderChange := 50.0, 15*time.Second, 300*time.Millisecond
	if mode == string(app.ModeZKLegacy) {
		rate, perScenario, perLeaderChange = 40, 25*time.Second, 600*time.Millisecond
	}
	d := 10*time.Second + time.Duration(float64(partitions)/rate*float64(time.Second)) + time.Duration(len(o.scenarios))*perScenario
	if slices.Contains(o.scenarios, "leaderchange") {
		d += time.Duration(o.samples) * perLeaderChange
	}
	return min(d, o.capPerRun)
}

// finishCleanup waits for the partition logs' removal and removes the
// emptied data directory. At 1M partitions the removal of ~9M files takes
// a quarter of an hour on this disk, so it runs after the results are
// written, not before.
func (b *comparison) finishCleanup() {
	b.progressf("removing the partition logs under %s (results are written)", filepath.Join(b.o.out, "data"))
	b.cleanup.Wait()
	_ = os.Remove(filepath.Join(b.o.out, "data")) // only if empty
}

func (b *comparison) run(ctx context.Context) {
	var expected time.Duration
	for _, p := range b.o.partitions {
		for _, mode := range b.o.modes {
			expected += expectedRun(b.o, mode, p)
		}
	}
	b.progressf("%d partition counts x %d modes, each run capped at %v: expected to take about %v on 2 busy cores, at most %v; results in %s",
		len(b.o.partitions), len(b.o.modes), b.o.capPerRun, expected.Round(time.Minute), time.Duration(len(b.o.partitions)*len(b.o.modes))*b.o.capPerRun, b.o.out)
	cappedAt := map[string]int{}
	for _, p := range b.o.partitions {
		for _, mode := range b.o.modes {
			b.runNo++
			r := &modeRun{Mode: mode, Partitions: p, Metrics: map[string]float64{}}
			b.rep.Runs = append(b.rep.Runs, r)
			if at, ok := cappedAt[mode]; ok {
				r.Status, r.Note = statusCapped, fmt.Sprintf("not run: capped at %d partitions", at)
				b.progressf("%s %d partitions: %s", mode, p, r.Note)
				continue
			}
			if ctx.Err() != nil {
				r.Status, r.Note = statusFailed, "not run: interrupted"
				continue
			}
			start := time.Now()
			runCtx, cancel := context.WithTimeout(ctx, b.o.capPerRun)
			err := b.runOne(runCtx, r)
			capped := ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded)
			cancel()
			r.Seconds = time.Since(start).Seconds()
			switch {
			case err == nil:
				r.Status = statusOK
			case capped:
				r.Status, r.Note = statusCapped, fmt.Sprintf("stopped at the %v cap: %v. %s", b.o.capPerRun, err, r.Note)
				cappedAt[mode] = p
			default:
				r.Status, r.Note = statusFailed, fmt.Sprintf("%v. %s", err, r.Note)
			}
			b.progressf("%s %d partitions: %s in %.1fs %s", mode, p, r.Status, r.Seconds, r.Note)
		}
	}
}

// runOne starts a cluster of mode, runs every scenario on it and stops it.
func (b *comparison) runOne(ctx context.Context, r *modeRun) error {
	dir := filepath.Join(b.o.out, "data", fmt.Sprintf("%s-%d", r.Mode, r.Partitions))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	defer func() {
		// Partition logs are not results (the node logs are kept); at
		// 10k partitions and more their removal takes a while, so it runs
		// while the next cluster starts (run waits for it).
		b.progressf("%s %d partitions: removing %s in the background", r.Mode, r.Partitions, dir)
		b.cleanup.Go(func() { _ = os.RemoveAll(dir) }) // a leftover directory is no wrong figure
	}()
	if err := os.MkdirAll(filepath.Join(b.o.out, "logs"), 0o755); err != nil {
		return err
	}
	logName := filepath.Join("logs", fmt.Sprintf("%s-%d.log", r.Mode, r.Partitions))
	logf, err := os.Create(filepath.Join(b.o.out, logName))
	if err != nil {
		return err
	}
	defer logf.Close()
	sink := &benchLogSink{w: logf, partitionLines: b.o.partitionLines}
	// After the cluster stopped (deferred below, so run earlier): every
	// line is in.
	defer func() { r.Note += sink.summary(logName) }()
	if need, limit := fdsPerBroker(b.o, r.Partitions); need > limit {
		r.Note += fmt.Sprintf("each broker needs about %d file descriptors (its replicas' open .log files, at most its file cache, 1000 more for connections and the metadata log) but may open %d (RLIMIT_NOFILE): raise the limit. ", need, limit)
		b.progressf("%s %d partitions: warning: %s", r.Mode, r.Partitions, r.Note)
	}
	b.progressf("%s %d partitions: starting the cluster", r.Mode, r.Partitions)
	c, err := b.startCluster(ctx, r, dir, sink)
	if err != nil {
		return err
	}
	defer func() { c.stop(ctx.Err() != nil) }()
	c.logs = sink
	if c.zk != nil {
		if v := zkVersion(c.zk.Servers[0].Addr); v != "" {
			b.rep.Versions["zookeeper"] = v
		}
	}
	steps := []struct {
		name string
		fn   func(context.Context, *modeRun) error
	}{
		{"create", c.populate},
		{"propagation", c.propagation},
		{"shutdown", c.controlledShutdown},
		{"failover", c.failover},
		{"pause", c.pausedController},
		{"loss", c.brokerLoss},
		{"brokerpause", c.pausedBroker},
		{"restart", c.brokerRestart},
		{"join", c.brokerJoin},
		{"leaderchange", c.leaderChange},
	}
	for _, s := range steps {
		if s.name != "create" && !slices.Contains(b.o.scenarios, s.name) {
			continue
		}
		b.progressf("%s %d partitions: %s", r.Mode, r.Partitions, s.name)
		c.progress = func(format string, args ...any) {
			b.progressf("%s %d partitions: %s: %s", r.Mode, r.Partitions, s.name, fmt.Sprintf(format, args...))
		}
		if s.name != "create" {
			// The previous scenario may have left brokers creating or
			// reopening logs (a restart's, a join's, a new leader's):
			// its work would be timed in this one.
			if _, err := c.waitLogsReady(ctx); err != nil {
				return fmt.Errorf("%s: waiting for every broker's logs: %w", s.name, err)
			}
		}
		if err := s.fn(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// benchCluster is one mode's cluster: devCluster's processes plus, in
// zk-legacy mode, the ZooKeeper they use.
type benchCluster struct {
	o        compareOptions
	mode     string
	dc       *devCluster
	zk       *zkserver.Ensemble
	cl       *protocol.Client
	progress func(format string, args ...any)
	// logs is the run's node log sink (nil in tests that start a cluster
	// of their own): the controlled shutdown reads its "may exit" times.
	logs *benchLogSink
	// stopDrain ends drainExits once every node stopped (nil before).
	stopDrain func()
	// forgotID is the highest id of a joining broker forgotten after its
	// port was taken (forgetNode); addBroker never reuses it.
	forgotID int
}

// drainExits takes every node exit dc's waiter goroutines send, so that no
// number of restarts fills dc.exits (a full one blocks a waiter, and
// stopping the cluster then waits for it for ever: a run of 50 leader
// change samples, each restarting a broker, hung so). The returned func
// ends the goroutine; call it after the nodes stopped.
func drainExits(dc *devCluster) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-dc.exits:
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// startBenchZooKeeper starts the ZooKeeper of a zk-legacy run:
// --zookeeper-servers servers (an ensemble of 3 by default, all on this
// machine) with --zookeeper-force-sync, at ZooKeeper's default tickTime.
func startBenchZooKeeper(o compareOptions, dir string) (*zkserver.Ensemble, error) {
	return zkserver.StartEnsemble(zkserver.Config{Dir: filepath.Join(dir, "zookeeper"), TickMs: 2000, HeapMb: 1024,
		ForceSync: o.zkForceSync, StartTimeoutMs: int(o.startTimeout.Milliseconds())}, o.zkServers)
}

// zkSettings describes the ZooKeeper startBenchZooKeeper runs.
func zkSettings(o compareOptions) string {
	shape := "standalone server"
	if o.zkServers > 1 {
		shape = fmt.Sprintf("%d-server ensemble", o.zkServers)
	}
	sync := "no"
	if o.zkForceSync {
		sync = "yes"
	}
	s := fmt.Sprintf("ZooKeeper %s on this machine, forceSync=%s, tickTime=2000 (legacyzk/zkserver)", shape, sync)
	if o.zkServers == 1 || !o.zkForceSync {
		s += "; Kafka's production setting is an ensemble with forceSync=yes"
	}
	return s
}

// startCluster starts r's cluster in dir (empty), again on fresh ports
// and in an emptied dir, up to devPortAttempts starts in all, while a node
// exits at start because another process took its port (errDevPortInUse):
// the ports are only known free when picked, seconds before the nodes bind
// them.
func (b *comparison) startCluster(ctx context.Context, r *modeRun, dir string, logw io.Writer) (*benchCluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := startBenchCluster(ctx, b.o, r.Mode, dir, b.exe, logw, b.ports)
		if err == nil || !errors.Is(err, errDevPortInUse) || attempt == devPortAttempts {
			return c, err
		}
		b.progressf("%s %d partitions: %v; starting the cluster again on other ports", r.Mode, r.Partitions, err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
}

func startBenchCluster(ctx context.Context, o compareOptions, mode, dir, exe string, logw io.Writer, ports *portPicker) (c *benchCluster, err error) {
	do := devOptions{controllers: 3, brokers: o.brokers, dir: dir, mode: mode, logLevel: o.logLevel,
		overrides: o.overrides, startTimeout: o.startTimeout, stopTimeout: 30 * time.Second, ports: ports}
	if mode == string(app.ModeZKLegacy) {
		do.controllers = 0
	}
	dc, err := newDevCluster(do, exe, nil, logw, logw)
	if err != nil {
		return nil, err
	}
	// Every start sends one exit: enough room for the starts before
	// drainExits takes over (the scenarios restart nodes, the leader change
	// once per sample).
	dc.exits = make(chan *devNode, 4*len(dc.nodes))
	if !dc.legacy() {
		// kraft nodes get a loopback metrics listener: the brokers' for
		// waitLogsReady (zk-legacy ones have theirs already), every
		// node's so that --override kraftd.pprof.enable=true, which needs
		// one, starts the controllers too.
		ports, err := devPorts(0, len(dc.nodes), dc.o.ports)
		if err != nil {
			return nil, err
		}
		for i, n := range dc.nodes {
			n.metricsPort = ports[i]
		}
	}
	c = &benchCluster{o: o, mode: mode, dc: dc, progress: func(string, ...any) {},
		cl: protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-bench", DialTimeout: time.Second})}
	defer func() {
		if err != nil {
			c.stop(true)
			c = nil
		}
	}()
	if dc.legacy() {
		if c.zk, err = startBenchZooKeeper(o, dir); err != nil {
			return c, fmt.Errorf("%w: %w", errDevZooKeeper, err)
		}
		dc.zkConnect = c.zk.Addr
	}
	if err = dc.startAll(); err != nil {
		return c, err
	}
	if err = dc.waitReady(); err != nil {
		return c, err
	}
	// waitReady was the last reader of dc.exits.
	c.stopDrain = drainExits(dc)
	if err = c.waitBrokers(ctx); err != nil {
		return c, fmt.Errorf("waiting for every broker to list %d brokers: %w", o.brokers, err)
	}
	return c, nil
}

// stop stops the nodes (SIGKILL when hard), then ZooKeeper.
func (c *benchCluster) stop(hard bool) {
	if hard {
		var started []*devNode
		for _, n := range c.dc.nodes {
			if n.cmd != nil && n.cmd.Process != nil {
				started = append(started, n)
			}
		}
		c.dc.killRest(started, "the run ended early")
		c.dc.wg.Wait()
	} else {
		c.dc.stopAll()
	}
	if c.stopDrain != nil {
		c.stopDrain()
	}
	if c.zk != nil {
		c.zk.Stop()
	}
	c.cl.Close()
}

func (c *benchCluster) brokers() []*devNode {
	var bs []*devNode
	for _, n := range c.dc.nodes {
		if n.broker {
			bs = append(bs, n)
		}
	}
	return bs
}

func (c *benchCluster) running(nodes []*devNode) []*devNode {
	var up []*devNode
	for _, n := range nodes {
		if n.cmd != nil && !n.exited() {
			up = append(up, n)
		}
	}
	return up
}

// poll calls cond every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// partView is a broker's view of one partition.
type partView struct{ leader, isr int32 }

// brokerView is one Metadata answer: the registered brokers, the controller
// id, and per topic its partitions.
type brokerView struct {
	brokers    int
	ids        []int32
	controller int32
	topics     map[string][]partView
}

// metadata asks addr for topics (nil: every topic).
func (c *benchCluster) metadata(ctx context.Context, addr string, topics []string) (brokerView, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, len(topics))
		for i, t := range topics {
			req.Topics[i] = kmsg.NewMetadataRequestTopic()
			req.Topics[i].Topic = kmsg.StringPtr(t)
		}
	}
	raw, err := c.cl.Request(rctx, addr, req)
	if err != nil {
		return brokerView{}, err
	}
	resp := raw.(*kmsg.MetadataResponse)
	v := brokerView{brokers: len(resp.Brokers), controller: resp.ControllerID, topics: map[string][]partView{}}
	for _, b := range resp.Brokers {
		v.ids = append(v.ids, b.NodeID)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			continue
		}
		ps := make([]partView, len(t.Partitions))
		for _, p := range t.Partitions {
			if p.Partition >= 0 && int(p.Partition) < len(ps) {
				ps[p.Partition] = partView{leader: p.Leader, isr: int32(len(p.ISR))}
			}
		}
		v.topics[*t.Topic] = ps
	}
	return v, nil
}

// waitBrokers waits until every running broker lists every broker.
func (c *benchCluster) waitBrokers(ctx context.Context) error {
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, n := range c.running(c.brokers()) {
			v, err := c.metadata(ctx, n.addr(), []string{})
			if err != nil || v.brokers != len(c.brokers()) {
				return false, nil
			}
		}
		return true, nil
	})
}

// createTopic sends one CreateTopics for topic to addr; an existing topic
// counts as created (an earlier attempt may have timed out after it landed).
func (c *benchCluster) createTopic(ctx context.Context, addr, topic string, partitions, rf int, configs map[string]string) error {
	return createTopicWith(ctx, c.cl, addr, topic, partitions, rf, configs, c.o.createTimeout)
}

// createTopicWith is createTopic over the client cl.
func createTopicWith(ctx context.Context, cl *protocol.Client, addr, topic string, partitions, rf int, configs map[string]string, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(timeout.Milliseconds())
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(partitions), int16(rf)
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, cfg)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{t}
	raw, err := cl.Request(rctx, addr, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("CreateTopics %s: %w", topic, err)
	}
	return nil
}

// servedEverywhere reports whether every running broker serves every
// partition of topics with a leader (want partitions in all), and how many
// partitions the slowest broker serves.
func (c *benchCluster) servedEverywhere(ctx context.Context, topics []string, want int, except ...*devNode) (bool, int) {
	least := want
	for _, n := range c.running(c.brokers()) {
		if slices.Contains(except, n) {
			continue
		}
		v, err := c.metadata(ctx, n.addr(), topics)
		if err != nil {
			return false, 0
		}
		led := 0
		for _, ps := range v.topics {
			for _, p := range ps {
				if p.leader >= 0 {
					led++
				}
			}
		}
		least = min(least, led)
	}
	return least == want, least
}

const probeTopic = "bench-probe"

// populate creates the partitions in topics of --topic-partitions and
// times it until every broker serves all of them with a leader; it also
// creates the probe's topic.
func (c *benchCluster) populate(ctx context.Context, r *modeRun) error {
	bs := c.brokers()
	// REQUEST_TIMED_OUT: see below; the probe's topic is waited for last.
	if err := c.createTopic(ctx, bs[0].addr(), probeTopic, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil && !errors.Is(err, kerr.RequestTimedOut) {
		return err
	}
	rssBefore := c.rss()
	timedOut := 0
	var topics []string
	start := time.Now()
	last, lastProgress := start, start
	for left, i := r.Partitions, 0; left > 0; i++ {
		n := min(left, c.o.topicSize)
		topic := fmt.Sprintf("bench-%07d", i)
		// REQUEST_TIMED_OUT says the topic is written but not yet served
		// within the request's timeout (in zk-legacy, Kafka's
		// DelayedCreatePartitions; 1000 partitions against a forceSync
		// ensemble on 2 busy cores took longer than 60 s): it is created,
		// and the wait below times it to the end.
		err := createTopicWith(ctx, c.cl, bs[i%len(bs)].addr(), topic, n, c.o.rf, nil, c.o.createTimeout)
		if errors.Is(err, kerr.RequestTimedOut) {
			timedOut++
			err = nil
		}
		if err != nil {
			return err
		}
		topics = append(topics, topic)
		left -= n
		if time.Since(lastProgress) > 2*time.Second {
			lastProgress = time.Now()
			c.progress("created %s", progressBar(r.Partitions-left, r.Partitions))
		}
	}
	created := time.Since(start)
	// kraft: the controllers' high watermark now covers every
	// CreateTopics' records; the logs are ready once every broker applied
	// it.
	var target int64
	if !c.dc.legacy() {
		var err error
		if target, err = c.committedOffset(ctx); err != nil {
			return err
		}
	}
	if timedOut > 0 {
		c.progress("%d of %d CreateTopics answered REQUEST_TIMED_OUT (written, not yet served); waiting for them", timedOut, len(topics))
		r.set("create_timed_out_requests", float64(timedOut))
	}
	// Each poll asks every broker for every topic: at thousands of
	// partitions that is real work for brokers still creating them, so
	// the interval grows with the wait (a twentieth of it, 20 ms to 1 s;
	// the figure is at most 5% late).
	err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		waited := time.Since(start)
		if next := last.Add(min(max(waited/20, 20*time.Millisecond), time.Second)); time.Now().Before(next) && waited > 20*time.Millisecond {
			return false, nil
		}
		ok, least := c.servedEverywhere(ctx, topics, r.Partitions)
		if time.Since(lastProgress) > 2*time.Second {
			lastProgress = time.Now()
			c.progress("every broker serves %s", progressBar(least, r.Partitions))
		}
		last = time.Now()
		return ok, nil
	})
	if err != nil {
		return err
	}
	served := time.Since(start)
	ready := served
	if !c.dc.legacy() {
		c.progress("visible on every broker after %v; waiting for every broker's logs", served.Round(time.Millisecond))
		if err := c.waitApplied(ctx, target); err != nil {
			return fmt.Errorf("waiting for every broker to create its logs: %w", err)
		}
		ready = time.Since(start)
	}
	c.progress("visible after %v, logs ready after %v; waiting for every broker's partition.metadata writes", served.Round(time.Millisecond), ready.Round(time.Millisecond))
	// The faults measure the steady state: a broker stopped while its
	// background writer still owes new logs their partition.metadata
	// writes them before it exits (10,000 partitions: 9-10 s).
	reported, err := c.waitDurable(ctx)
	if err != nil {
		return fmt.Errorf("waiting for every broker's partition.metadata writes: %w", err)
	}
	if reported {
		durable := time.Since(start)
		r.setDuration("create_logs_durable_ms", durable)
		c.progress("logs durable after %v", durable.Round(time.Millisecond))
	} else {
		r.Note += "The nodes export no " + broker.PendingPartitionFileWritesMetric + " (an older --node-binary): the faults did not wait for the brokers' partition.metadata writes. "
	}
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		ok, _ := c.servedEverywhere(ctx, []string{probeTopic}, 3)
		return ok, nil
	}); err != nil {
		return fmt.Errorf("waiting for every broker to serve %s: %w", probeTopic, err)
	}
	r.setDuration("create_requests_ms", created)
	r.setDuration("create_served_ms", served)
	r.set("create_partitions_per_s", float64(r.Partitions)/served.Seconds())
	r.setDuration("create_logs_ready_ms", ready)
	r.set("create_logs_ready_partitions_per_s", float64(r.Partitions)/ready.Seconds())
	c.memory(ctx, r, rssBefore)
	return nil
}

// committedOffset is the active controller's high watermark (DescribeQuorum;
// the next offset to commit) minus one: the last committed offset (kraft only).
func (c *benchCluster) committedOffset(ctx context.Context) (int64, error) {
	var errs []error
	for _, n := range c.running(c.dc.nodes) {
		if n.broker {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		q, err := describeQuorum(qctx, c.cl, n.addr())
		cancel()
		if err == nil && q.part.LeaderID >= 0 && q.part.HighWatermark > 0 {
			return q.part.HighWatermark - 1, nil
		}
		if err == nil {
			err = fmt.Errorf("controller %d: leader %d, high watermark %d", n.id, q.part.LeaderID, q.part.HighWatermark)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return 0, errors.New("no controller running")
	}
	return 0, fmt.Errorf("no controller answered with a high watermark: %w", errors.Join(errs...))
}

// appliedOffsetMetric is the broker gauge of the metadata offset its image
// and its replica manager both applied (what it reports in
// BrokerHeartbeat): it advances only once the logs of the replicas the
// image added exist.
const appliedOffsetMetric = "kraftd_broker_metadata_applied_offset"

// waitApplied polls until every running broker's appliedOffsetMetric
// reaches target (kraft only). A broker whose metrics do not answer counts as
// behind and is asked again at the next poll: a broker busy creating tens of
// thousands of logs can miss the 2 s read timeout (issue 17 lost a 100k run
// to one "context deadline exceeded"). The last read error is reported if ctx
// ends first.
func (c *benchCluster) waitApplied(ctx context.Context, target int64) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	last := time.Now()
	var lastErr error
	err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		least, behind, unread := int64(math.MaxInt64), 0, 0
		for _, n := range c.running(c.brokers()) {
			v, err := scrapeGauge(ctx, hc, n.metricsAddr(), appliedOffsetMetric)
			if err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				lastErr = fmt.Errorf("broker %d: %w", n.id, err)
				unread++
				continue
			}
			if v < target {
				behind++
				least = min(least, v)
			}
		}
		if behind+unread > 0 && time.Since(last) > 2*time.Second {
			last = time.Now()
			msg := fmt.Sprintf("%d brokers have not applied offset %d", behind, target)
			if behind > 0 {
				msg += fmt.Sprintf(" (least %d)", least)
			}
			if unread > 0 {
				msg += fmt.Sprintf(", %d did not answer (%v)", unread, lastErr)
			}
			c.progress("%s", msg)
		}
		return behind+unread == 0, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w (last metrics read: %v)", err, lastErr)
	}
	return err
}

// waitLogsReady waits until every running broker created the logs the
// committed metadata gives it and wrote their partition.metadata files
// (waitDurable), and returns how long that took: kraft, until
// each broker's applied offset reaches the controllers' committed offset;
// zk-legacy, until every broker serves every partition with a leader (its
// UpdateMetadata comes after its LeaderAndIsr's answer, see compareTables).
func (c *benchCluster) waitLogsReady(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if c.dc.legacy() {
		err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
			var topics []string
			if bs := c.running(c.brokers()); len(bs) > 0 {
				v, err := c.metadata(ctx, bs[0].addr(), nil)
				if err != nil {
					return false, nil
				}
				want := 0
				for t, ps := range v.topics {
					topics = append(topics, t)
					want += len(ps)
				}
				ok, _ := c.servedEverywhere(ctx, topics, want)
				return ok, nil
			}
			return false, errors.New("no broker running")
		})
		if err == nil {
			_, err = c.waitDurable(ctx)
		}
		return time.Since(start), err
	}
	var target int64
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		t, err := c.committedOffset(ctx)
		target = t
		return err == nil, nil
	}); err != nil {
		return 0, err
	}
	if err := c.waitApplied(ctx, target); err != nil {
		return 0, err
	}
	_, err := c.waitDurable(ctx)
	return time.Since(start), err
}

// waitDurable polls until no running broker reports pending
// partition.metadata writes (broker.PendingPartitionFileWritesMetric,
// new logs whose topic id file its background writer has not written
// yet), showing how many are left every 2 s. A broker whose metrics do not
// answer is asked again, as in waitApplied; one that answers without the
// gauge (a --node-binary older than it) counts as done. reported is false
// when no broker has the gauge.
func (c *benchCluster) waitDurable(ctx context.Context) (reported bool, err error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	last := time.Now()
	var lastErr error
	err = poll(ctx, 20*time.Millisecond, func() (bool, error) {
		var pending int64
		behind, unread, missing := 0, 0, 0
		bs := c.running(c.brokers())
		for _, n := range bs {
			v, err := scrapeGauge(ctx, hc, n.metricsAddr(), broker.PendingPartitionFileWritesMetric)
			switch {
			case errors.Is(err, errNoSeries):
				missing++
			case err != nil:
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				lastErr = fmt.Errorf("broker %d: %w", n.id, err)
				unread++
			case v > 0:
				behind++
				pending += v
			}
		}
		reported = missing < len(bs)
		if behind+unread > 0 && time.Since(last) > 2*time.Second {
			last = time.Now()
			msg := fmt.Sprintf("%d partition.metadata writes pending on %d brokers", pending, behind)
			if unread > 0 {
				msg += fmt.Sprintf(", %d did not answer (%v)", unread, lastErr)
			}
			c.progress("%s", msg)
		}
		return behind+unread == 0, nil
	})
	if err != nil && lastErr != nil {
		err = fmt.Errorf("%w (last metrics read: %v)", err, lastErr)
	}
	return reported, err
}

// errNoSeries: a metrics page has no series of the name asked for.
var errNoSeries = errors.New("no such series")

// scrapeGauge reads one gauge from the Prometheus text exposition at
// addr's /metrics (the first series of that name).
func scrapeGauge(ctx context.Context, hc *http.Client, addr, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return 0, fmt.Errorf("%s at %s: %w", name, addr, err)
			}
			return int64(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s/metrics has no %s: %w", addr, name, errNoSeries)
}

// rss is every running node's resident set size in bytes, by node id.
func (c *benchCluster) rss() map[int]float64 {
	out := map[int]float64{}
	for _, n := range c.running(c.dc.nodes) {
		if b, err := processRSS(n.cmd.Process.Pid); err == nil {
			out[n.id] = b
		}
	}
	return out
}

// memory records the resident memory the partitions added, per partition,
// in a broker (the mean over the brokers that are not the zk-legacy
// controller) and in the active controller (a controller process in kraft,
// the controller broker in zk-legacy), and their resident sizes. RSS, not
// the Go heap: it is what the machine pays, GC slack and the index files'
// touched pages included. Without /proc nothing is recorded.
func (c *benchCluster) memory(ctx context.Context, r *modeRun, before map[int]float64) {
	after := c.rss()
	ctrl, _, err := c.activeController(ctx)
	if err != nil {
		return
	}
	var sum, sumRSS float64
	brokers := 0
	for _, n := range c.running(c.brokers()) {
		b0, ok0 := before[n.id]
		b1, ok1 := after[n.id]
		if ok0 && ok1 && n.id != ctrl {
			sum += b1 - b0
			sumRSS += b1
			brokers++
		}
	}
	if brokers > 0 {
		r.set("mem_broker_rss_bytes", sumRSS/float64(brokers))
		r.set("mem_broker_bytes_per_partition", sum/float64(brokers)/float64(r.Partitions))
	}
	if b0, ok := before[ctrl]; ok {
		if b1, ok := after[ctrl]; ok {
			r.set("mem_controller_rss_bytes", b1)
			r.set("mem_controller_bytes_per_partition", (b1-b0)/float64(r.Partitions))
		}
	}
}

// processRSS is VmRSS of /proc/pid/status in bytes.
func processRSS(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb * 1024, err
			}
		}
	}
	return 0, errors.New("no VmRSS line")
}

// progressBar draws done of total as a bar: [=========>          ] 450/1000.
func progressBar(done, total int) string {
	const width = 30
	n := 0
	if total > 0 {
		n = min(width, done*width/total)
	}
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	return fmt.Sprintf("[%s] %d/%d partitions", bar, done, total)
}

// propagation times --samples topic creates (1 partition, RF 3) from the
// request until every broker serves the topic with a leader.
func (c *benchCluster) propagation(ctx context.Context, r *modeRun) error {
	bs := c.brokers()
	var samples []float64
	for i := range c.o.samples {
		topic := fmt.Sprintf("bench-prop-%d", i)
		d, err := c.timePropagation(ctx, bs, topic, func() error {
			return c.createTopic(ctx, bs[i%len(bs)].addr(), topic, 1, min(3, c.o.brokers), nil)
		})
		if err != nil {
			return err
		}
		samples = append(samples, float64(d.Microseconds())/1000)
	}
	r.Samples = mergeSamples(r.Samples, "propagation_ms", samples)
	sorted := slices.Clone(samples)
	sort.Float64s(sorted)
	r.set("propagation_p50_ms", quantile(sorted, 0.50))
	r.set("propagation_p99_ms", quantile(sorted, 0.99))
	return nil
}

// propagationPace is how often each broker is asked for the topic while a
// propagation sample waits for it.
const propagationPace = time.Millisecond

// timePropagation runs change and returns the time from its start until
// every broker in bs serves topic with a leader.
func (c *benchCluster) timePropagation(ctx context.Context, bs []*devNode, topic string, change func() error) (time.Duration, error) {
	return c.timeUntilServed(ctx, bs, topic, func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 }, change)
}

// timeUntilServed runs change and returns the time from its start until
// every broker in bs answers Metadata with topic, each of its partitions
// passing ok. Each broker is polled by a goroutine of its own, on a
// connection of its own, started before the change: polled one after
// another, a round of six Metadata requests on a loaded machine took
// several milliseconds, which the samples then included. The connections
// are opened (dial and ApiVersions) before the clock starts, so that their
// setup on every broker does not run beside the change it measures, nor
// delay the first poll.
func (c *benchCluster) timeUntilServed(ctx context.Context, bs []*devNode, topic string, ok func(kmsg.MetadataResponseTopicPartition) bool, change func() error) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	seen := make([]time.Time, len(bs))
	pollers := make([]*protocol.Client, len(bs))
	var wg sync.WaitGroup
	for j, n := range bs {
		pollers[j] = protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-bench-poll"})
		defer pollers[j].Close()
		wg.Go(func() { _, _ = pollers[j].PeerVersions(pctx, n.addr()) }) // a failure is retried by the first poll
	}
	wg.Wait()
	start := time.Now()
	for j, n := range bs {
		wg.Go(func() {
			cl := pollers[j]
			pace := time.NewTicker(propagationPace)
			defer pace.Stop()
			for pctx.Err() == nil {
				if servesTopic(pctx, cl, n.addr(), topic, ok) {
					seen[j] = time.Now()
					return
				}
				select {
				case <-pace.C:
				case <-pctx.Done():
				}
			}
		})
	}
	err := change()
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err != nil {
		return 0, err
	}
	last := start
	for j, t := range seen {
		if t.IsZero() {
			return 0, fmt.Errorf("broker %d did not serve %s as wanted within a minute: %w", bs[j].id, topic, ctx.Err())
		}
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(start), nil
}

// servesTopic reports whether the broker at addr answers Metadata with topic
// and each of its partitions passing ok.
func servesTopic(ctx context.Context, cl *protocol.Client, addr, topic string, ok func(kmsg.MetadataResponseTopicPartition) bool) bool {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		return false
	}
	resp := raw.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) == 0 {
		return false
	}
	for _, p := range resp.Topics[0].Partitions {
		if !ok(p) {
			return false
		}
	}
	return true
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// activeController is the node id of the active controller and, in kraft
// mode, its epoch: DescribeQuorum on the controllers (kraft), a broker's
// Metadata ControllerID (zk-legacy), not asking the nodes in except. It
// errors while there is none.
func (c *benchCluster) activeController(ctx context.Context, except ...*devNode) (int, int32, error) {
	if c.dc.legacy() {
		for _, n := range c.running(c.brokers()) {
			if slices.Contains(except, n) {
				continue
			}
			v, err := c.metadata(ctx, n.addr(), []string{})
			if err == nil && v.controller >= 0 {
				return int(v.controller), 0, nil
			}
		}
		return 0, 0, errors.New("no broker names a controller")
	}
	var errs []error
	for _, n := range c.running(c.dc.nodes) {
		if n.broker || slices.Contains(except, n) {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		q, err := describeQuorum(qctx, c.cl, n.addr())
		cancel()
		if err == nil && q.part.LeaderID >= 0 {
			return int(q.part.LeaderID), q.part.LeaderEpoch, nil
		}
		errs = append(errs, err)
	}
	return 0, 0, fmt.Errorf("no controller names a leader: %w", errors.Join(errs...))
}

// allBut is every node except n.
func (c *benchCluster) allBut(n *devNode) []*devNode {
	var out []*devNode
	for _, m := range c.dc.nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

func (c *benchCluster) node(id int) *devNode {
	for _, n := range c.dc.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// restart starts a stopped node again.
func (c *benchCluster) restart(n *devNode) error {
	n.done, n.err = make(chan struct{}), nil
	return c.dc.start(n)
}

// failover kills the active controller with SIGKILL while the probe
// produces, times detection and recovery, then restarts it.
func (c *benchCluster) failover(ctx context.Context, r *modeRun) error {
	return c.controllerFault(ctx, r, syscall.SIGKILL, "failover_")
}

// pausedController stops the active controller with SIGSTOP (a killed
// process answers with an instant RST on loopback, which hides detection;
// a paused one answers nothing), times as failover does, then resumes it.
func (c *benchCluster) pausedController(ctx context.Context, r *modeRun) error {
	return c.controllerFault(ctx, r, syscall.SIGSTOP, "pause_")
}

// gapProbe is the steady acks=all producer of kraftd bench gap (the data
// plane's probe) running across a fault; stop ends it once.
type gapProbe struct {
	p          *probe.Probe
	steadyFrom time.Duration
	stopped    bool
}

// startGapProbe starts the probe on topic and returns once it is steady (a
// rate's worth acknowledged, nothing older than 200 ms unacknowledged) and
// half a second more has been acknowledged: the window its gap is taken
// over starts there.
func (c *benchCluster) startGapProbe(ctx context.Context, topic string) (*gapProbe, error) {
	p, err := probe.Start(probe.Config{Bootstrap: addrs(c.running(c.brokers())), Topic: topic, Rate: c.o.rate})
	if err != nil {
		return nil, err
	}
	g := &gapProbe{p: p}
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		return p.Acked() >= c.o.rate && p.Settled(200*time.Millisecond), nil
	}); err != nil {
		g.stop()
		return nil, fmt.Errorf("waiting for the steady producer: %w", err)
	}
	g.steadyFrom = p.Since()
	steadyAcked := p.Acked()
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) { return p.Acked() >= steadyAcked+c.o.rate/2, nil }); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// stop ends the producer if finish has not (a scenario that failed).
func (g *gapProbe) stop() {
	if !g.stopped {
		g.stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g.p.Stop(sctx)
		cancel()
	}
}

// finishGapProbe waits until the producer has had another second's worth
// of records acknowledged after the fault, stops it and records under
// prefix its longest gap in acknowledgements (prefix+"producer_gap_ms").
func (c *benchCluster) finishGapProbe(ctx context.Context, r *modeRun, g *gapProbe, prefix, fault string) error {
	c.progress("waiting for the producer to resume")
	resumed := g.p.Acked()
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) { return g.p.Acked() >= resumed+c.o.rate, nil }); err != nil {
		return fmt.Errorf("waiting for the producer to resume: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	whole := g.p.Stop(sctx)
	cancel()
	g.stopped = true
	res := g.p.Result(g.steadyFrom, whole.Window)
	r.setDuration(prefix+"producer_gap_ms", res.LongestGap)
	return nil
}

// verifyGapProbe reads the stopped producer's records back and records
// under prefix the problems found (lost, duplicated or reordered records; a
// note names them). After a broker fault it runs once the broker is back:
// a paused broker among the seeds would hold the reader's requests.
func (c *benchCluster) verifyGapProbe(ctx context.Context, r *modeRun, g *gapProbe, prefix, fault string) error {
	vctx, cancel := context.WithTimeout(ctx, time.Minute)
	v, err := g.p.Verify(vctx)
	cancel()
	if err != nil {
		return fmt.Errorf("verifying the producer's records: %w", err)
	}
	r.set(prefix+"producer_problems", float64(len(v.Problems)))
	if len(v.Problems) > 0 {
		r.Note += fmt.Sprintf("producer across the %s: %v. ", fault, v)
	}
	return nil
}

// controllerFault applies sig to the active controller while the probe
// produces (to probeTopic, three partitions: in zk-legacy the controller is
// a broker and may lead one of them) and records, under prefix, the
// detection, the recovery and the producer's longest gap; then it brings
// the controller back (restart after SIGKILL, SIGCONT after SIGSTOP) and
// waits until the cluster is whole.
func (c *benchCluster) controllerFault(ctx context.Context, r *modeRun, sig syscall.Signal, prefix string) error {
	g, err := c.startGapProbe(ctx, probeTopic)
	if err != nil {
		return err
	}
	defer g.stop()
	var oldID int
	var oldEpoch int32
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		var err error
		oldID, oldEpoch, err = c.activeController(ctx)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("finding the active controller: %w", err)
	}
	victim := c.node(oldID)
	if victim == nil {
		return fmt.Errorf("active controller %d is no node of the cluster", oldID)
	}
	c.progress("%s to node %d (the active controller)", signalName(sig), oldID)
	start := time.Now()
	if err := victim.cmd.Process.Signal(sig); err != nil {
		return err
	}
	paused := sig == syscall.SIGSTOP
	defer func() {
		if paused {
			_ = victim.cmd.Process.Signal(syscall.SIGCONT) // fails only if it is gone
		}
	}()
	if sig == syscall.SIGKILL {
		select {
		case <-victim.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := poll(ctx, time.Millisecond, func() (bool, error) {
		// The victim is not asked: a paused one would hold each request
		// until its timeout.
		id, epoch, err := c.activeController(ctx, victim)
		return err == nil && id != oldID && (c.dc.legacy() || epoch > oldEpoch), nil
	}); err != nil {
		return fmt.Errorf("waiting for a new controller: %w", err)
	}
	detected := time.Since(start)
	c.progress("new controller after %v; creating a topic", detected.Round(time.Millisecond))
	topic := "bench-" + strings.TrimSuffix(prefix, "_")
	var up []*devNode
	for _, n := range c.running(c.brokers()) {
		if n != victim {
			up = append(up, n)
		}
	}
	attempt := 0
	last := time.Now()
	if err := poll(ctx, 5*time.Millisecond, func() (bool, error) {
		attempt++
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		n := up[attempt%len(up)]
		// Each attempt on a connection of its own: a broker answers a
		// connection's requests in order, so an attempt it still holds
		// (forwarded to the stopped controller) would hold every later
		// request on that connection, the Metadata polls included.
		cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-bench-create", DialTimeout: time.Second})
		defer cl.Close()
		err := createTopicWith(actx, cl, n.addr(), topic, 1, 1, nil, c.o.createTimeout)
		if err != nil && time.Since(last) > 2*time.Second {
			last = time.Now()
			c.progress("CreateTopics through broker %d: %v", n.id, err)
		}
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("CreateTopics after the failover: %w", err)
	}
	c.progress("%s created after %v; waiting for every broker to serve it", topic, time.Since(start).Round(time.Millisecond))
	if err := poll(ctx, time.Millisecond, func() (bool, error) {
		var lagging []string
		for _, n := range c.running(c.brokers()) {
			if n == victim {
				continue
			}
			if ok, _ := c.servedEverywhere(ctx, []string{topic}, 1, c.allBut(n)...); !ok {
				lagging = append(lagging, strconv.Itoa(n.id))
			}
		}
		if len(lagging) > 0 && time.Since(last) > 2*time.Second {
			last = time.Now()
			c.progress("broker(s) %s do not serve %s yet", strings.Join(lagging, ","), topic)
		}
		return len(lagging) == 0, nil
	}); err != nil {
		return fmt.Errorf("waiting for every broker to serve %s: %w", topic, err)
	}
	recovered := time.Since(start)
	r.setDuration(prefix+"detection_ms", detected)
	r.setDuration(prefix+"recovery_ms", recovered)
	r.setDuration(prefix+"after_detection_ms", recovered-detected)
	c.progress("recovered after %v", recovered.Round(time.Millisecond))
	if err := c.finishGapProbe(ctx, r, g, prefix, signalName(sig)+" of the controller"); err != nil {
		return err
	}
	if err := c.verifyGapProbe(ctx, r, g, prefix, signalName(sig)+" of the controller"); err != nil {
		return err
	}
	if paused {
		paused = false
		if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return err
		}
	} else if err := c.restart(victim); err != nil {
		return err
	}
	return c.waitWhole(ctx)
}

// waitWhole waits until the cluster is whole again before the next
// scenario: every broker registered, a controller, and every partition's
// ISR full (a shutdown moves leaders to in-sync followers).
func (c *benchCluster) waitWhole(ctx context.Context) error {
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if err := c.waitBrokers(ctx); err != nil {
			return false, err
		}
		if _, _, err := c.activeController(ctx); err != nil {
			return false, nil
		}
		return c.fullISRs(ctx), nil
	})
}

// fullISRs reports whether a broker shows every partition with a leader
// and a full ISR.
func (c *benchCluster) fullISRs(ctx context.Context) bool {
	bs := c.running(c.brokers())
	if len(bs) == 0 {
		return false
	}
	v, err := c.metadata(ctx, bs[0].addr(), nil)
	if err != nil {
		return false
	}
	for t, ps := range v.topics {
		want := int32(c.o.rf)
		switch {
		case t == "bench-failover" || t == "bench-pause":
			want = 1
		case t == probeTopic || strings.HasPrefix(t, "bench-prop-") || strings.HasPrefix(t, gapTopicPrefix):
			want = int32(min(3, c.o.brokers))
		}
		for _, p := range ps {
			if p.leader < 0 || p.isr < want {
				return false
			}
		}
	}
	return true
}

func addrs(nodes []*devNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.addr()
	}
	return out
}

// leaderMove is what moveLeaders measured: from the signal, when the first
// and the last of the victim's movable partitions showed another leader in a
// surviving broker's Metadata, and when the victim exited (0: it did not).
type leaderMove struct {
	victim                *devNode
	led, movable          int
	firstMoved, lastMoved time.Duration
	exited                time.Duration
	// signaled is when the signal was sent, the start of every duration.
	signaled time.Time
}

// busiestBroker is the running broker leading the most partitions, never
// the zk-legacy controller (whose loss is also a controller failover).
func (c *benchCluster) busiestBroker(ctx context.Context) (*devNode, brokerView, error) {
	bs := c.running(c.brokers())
	if len(bs) == 0 {
		return nil, brokerView{}, errors.New("no broker running")
	}
	v, err := c.metadata(ctx, bs[0].addr(), nil)
	if err != nil {
		return nil, v, err
	}
	controller := -1
	if c.dc.legacy() {
		controller = int(v.controller)
	}
	led := map[int32]int{}
	for _, ps := range v.topics {
		for _, p := range ps {
			led[p.leader]++
		}
	}
	var victim *devNode
	for _, n := range bs {
		if n.id != controller && (victim == nil || led[int32(n.id)] > led[int32(victim.id)]) {
			victim = n
		}
	}
	if victim == nil {
		return nil, v, errors.New("no broker but the controller running")
	}
	return victim, v, nil
}

// gapTopicPrefix names the one-partition topics the steady producer
// writes across a broker fault, led by the broker that goes away.
const gapTopicPrefix = "bench-gap-"

// createLedTopic creates topic with one partition on replicas (the first
// leads it: the preferred replica is elected leader at creation) and
// min.insync.replicas 2, and waits until every running broker serves it
// with that leader and a full ISR.
func (c *benchCluster) createLedTopic(ctx context.Context, topic string, replicas []int32) error {
	rctx, cancel := context.WithTimeout(ctx, c.o.createTimeout+30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(c.o.createTimeout.Milliseconds())
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	t.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
	t.Configs = []kmsg.CreateTopicsRequestTopicConfig{cfg}
	req.Topics = []kmsg.CreateTopicsRequestTopic{t}
	bs := c.running(c.brokers())
	raw, err := c.cl.Request(rctx, bs[0].addr(), req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(err, kerr.RequestTimedOut) {
		return fmt.Errorf("CreateTopics %s on %v: %w", topic, replicas, err)
	}
	return poll(ctx, 5*time.Millisecond, func() (bool, error) {
		for _, n := range c.running(c.brokers()) {
			v, err := c.metadata(ctx, n.addr(), []string{topic})
			if err != nil {
				return false, nil
			}
			ps := v.topics[topic]
			if len(ps) != 1 || ps[0].leader != replicas[0] || ps[0].isr != int32(len(replicas)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// othersThan is up to n running brokers other than victim, in id order.
func (c *benchCluster) othersThan(victim *devNode, n int) []int32 {
	var out []int32
	for _, b := range c.running(c.brokers()) {
		if b != victim && len(out) < n {
			out = append(out, int32(b.id))
		}
	}
	return out
}

// moveLeaders sends sig to victim (whose partitions v shows) and polls the
// surviving brokers' Metadata (in turn) until every partition it led that
// has another in-sync replica shows another leader, and, when wantExit,
// until it exited. A partition whose only in-sync replica is the victim
// (the failover's RF 1 topic) has nowhere to move: it is counted, not
// waited for.
func (c *benchCluster) moveLeaders(ctx context.Context, victim *devNode, v brokerView, sig syscall.Signal, wantExit bool) (leaderMove, error) {
	m := leaderMove{victim: victim}
	type tp struct {
		topic string
		part  int
	}
	pending := map[tp]bool{}
	for t, ps := range v.topics {
		for i, p := range ps {
			if p.leader == int32(victim.id) {
				m.led++
				if p.isr >= 2 {
					pending[tp{t, i}] = true
				}
			}
		}
	}
	m.movable = len(pending)
	var witnesses []*devNode
	for _, n := range c.running(c.brokers()) {
		if n != victim {
			witnesses = append(witnesses, n)
		}
	}
	c.progress("%s to broker %d, leader of %d partitions (%d with another in-sync replica)", signalName(sig), victim.id, m.led, m.movable)
	start := time.Now()
	m.signaled = start
	if err := victim.cmd.Process.Signal(sig); err != nil {
		return m, err
	}
	polls := 0
	last := start
	err := poll(ctx, time.Millisecond, func() (bool, error) {
		if m.exited == 0 && victim.exited() {
			m.exited = time.Since(start)
		}
		if len(pending) > 0 {
			w := witnesses[polls%len(witnesses)]
			polls++
			v, err := c.metadata(ctx, w.addr(), nil)
			if err == nil {
				at := time.Since(start)
				for k := range pending {
					if ps := v.topics[k.topic]; k.part < len(ps) && ps[k.part].leader >= 0 && ps[k.part].leader != int32(victim.id) {
						delete(pending, k)
						if m.firstMoved == 0 {
							m.firstMoved = at
						}
						m.lastMoved = at
					}
				}
			}
			if time.Since(last) > 2*time.Second {
				last = time.Now()
				c.progress("%d of %d partitions still led by broker %d", len(pending), m.movable, victim.id)
			}
		}
		return len(pending) == 0 && (!wantExit || m.exited > 0), nil
	})
	if err != nil {
		return m, fmt.Errorf("broker %d after %s (exited after %v, %d partitions still led by it): %w", victim.id, signalName(sig), m.exited, len(pending), err)
	}
	return m, nil
}

// brokerFault is the common part of the controlled shutdown, the broker
// loss and the paused broker: it picks the busiest broker, gives it the
// leadership of a one-partition topic of its own (gapTopicPrefix+name,
// replicas the victim and two others) on which the steady acks=all producer
// writes, sends sig and times the leaders' move (moveLeaders), then waits
// for the producer to resume and records its longest gap under prefix. The
// producer writes to a partition the victim leads, so its gap is the time
// that partition could take no write; the bench's other partitions take no
// writes. The caller brings the victim back.
func (c *benchCluster) brokerFault(ctx context.Context, r *modeRun, sig syscall.Signal, wantExit bool, name, prefix string) (leaderMove, *gapProbe, error) {
	victim, _, err := c.busiestBroker(ctx)
	if err != nil {
		return leaderMove{}, nil, err
	}
	topic := gapTopicPrefix + name
	replicas := append([]int32{int32(victim.id)}, c.othersThan(victim, 2)...)
	c.progress("steady producer on %s, led by broker %d (replicas %v)", topic, victim.id, replicas)
	if err := c.createLedTopic(ctx, topic, replicas); err != nil {
		return leaderMove{}, nil, fmt.Errorf("the producer's topic: %w", err)
	}
	g, err := c.startGapProbe(ctx, topic)
	if err != nil {
		return leaderMove{}, nil, err
	}
	// The view after the topic exists: its partition is one of the
	// victim's.
	bs := c.running(c.brokers())
	v, err := c.metadata(ctx, bs[0].addr(), nil)
	if err != nil {
		g.stop()
		return leaderMove{}, nil, err
	}
	m, err := c.moveLeaders(ctx, victim, v, sig, wantExit)
	if err == nil {
		err = c.finishGapProbe(ctx, r, g, prefix, signalName(sig)+" of broker "+strconv.Itoa(victim.id))
	}
	if err != nil {
		g.stop()
		return m, nil, err
	}
	return m, g, nil
}

// controlledShutdown sends SIGTERM to the busiest broker and times, from
// the signal, until it may exit (its node log's line, see isMayExit: the
// controller is done with it), until it exits (its own close of every log
// besides) and the longest a partition it led went without another leader
// in a surviving broker's Metadata, with the steady producer's gap on a
// partition it led; then it starts the broker again and waits until the
// cluster is whole.
func (c *benchCluster) controlledShutdown(ctx context.Context, r *modeRun) error {
	m, g, err := c.brokerFault(ctx, r, syscall.SIGTERM, true, "shutdown", "shutdown_")
	if err != nil {
		return err
	}
	if m.victim.err != nil {
		return fmt.Errorf("broker %d exited with %v after SIGTERM", m.victim.id, m.victim.err)
	}
	r.set("shutdown_led_partitions", float64(m.led))
	if c.logs != nil {
		if at, ok := c.logs.mayExitAt(m.victim.id, m.signaled); ok {
			r.setDuration("shutdown_may_exit_ms", max(at.Sub(m.signaled), 0))
		} else {
			r.Note += fmt.Sprintf("broker %d logged no line saying it may exit its controlled shutdown (kraft: SHUTTING_DOWN; zk-legacy: controlled shutdown succeeded): it shut down without the controller's leave. ", m.victim.id)
		}
	}
	r.setDuration("shutdown_exit_ms", m.exited)
	r.setDuration("shutdown_leaderless_max_ms", m.lastMoved)
	// The scenarios after this one want the whole cluster.
	if err := c.restart(m.victim); err != nil {
		return err
	}
	if err := c.waitWhole(ctx); err != nil {
		return err
	}
	return c.verifyGapProbe(ctx, r, g, "shutdown_", "SIGTERM of broker "+strconv.Itoa(m.victim.id))
}

// brokerLoss kills the busiest broker with SIGKILL and times until every
// partition it led shows another leader; the first partition to move marks
// the detection (broker.session.timeout.ms in kraft, the ZooKeeper session
// in zk-legacy). The steady producer writes to a partition it led. The
// broker is restarted and the cluster made whole again.
func (c *benchCluster) brokerLoss(ctx context.Context, r *modeRun) error {
	m, g, err := c.brokerFault(ctx, r, syscall.SIGKILL, true, "loss", "loss_")
	if err != nil {
		return err
	}
	r.set("loss_led_partitions", float64(m.led))
	r.setDuration("loss_first_moved_ms", m.firstMoved)
	r.setDuration("loss_all_moved_ms", m.lastMoved)
	r.setDuration("loss_after_detection_ms", m.lastMoved-m.firstMoved)
	if err := c.restart(m.victim); err != nil {
		return err
	}
	if err := c.waitWhole(ctx); err != nil {
		return err
	}
	return c.verifyGapProbe(ctx, r, g, "loss_", "kill -9 of broker "+strconv.Itoa(m.victim.id))
}

// brokerRejoinWait is how long a paused broker has, after SIGCONT, to be
// whole again before it is killed and restarted (and the run says so).
const brokerRejoinWait = time.Minute

// pausedBroker stops the busiest broker with SIGSTOP (scenario 8: no RST
// tells the others) and times as brokerLoss does, then resumes it with
// SIGCONT: a paused broker that comes back must find its way in (kraft:
// fenced, it catches up and is unfenced; zk-legacy: its ZooKeeper session
// expired). If the cluster is not whole within brokerRejoinWait it is
// killed and restarted, and the note says so.
func (c *benchCluster) pausedBroker(ctx context.Context, r *modeRun) error {
	m, g, err := c.brokerFault(ctx, r, syscall.SIGSTOP, false, "brokerpause", "brokerpause_")
	if m.victim != nil {
		defer func() { _ = m.victim.cmd.Process.Signal(syscall.SIGCONT) }() // fails only if it is gone
	}
	if err != nil {
		return err
	}
	r.set("brokerpause_led_partitions", float64(m.led))
	r.setDuration("brokerpause_first_moved_ms", m.firstMoved)
	r.setDuration("brokerpause_all_moved_ms", m.lastMoved)
	r.setDuration("brokerpause_after_detection_ms", m.lastMoved-m.firstMoved)
	fault := "SIGSTOP of broker " + strconv.Itoa(m.victim.id)
	if err := m.victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	resumed := time.Now()
	wctx, cancel := context.WithTimeout(ctx, brokerRejoinWait)
	err = c.waitWhole(wctx)
	cancel()
	if err == nil {
		r.setDuration("brokerpause_rejoined_ms", time.Since(resumed))
		return c.verifyGapProbe(ctx, r, g, "brokerpause_", fault)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.Note += fmt.Sprintf("broker %d, paused with SIGSTOP, did not make the cluster whole within %v of SIGCONT (exited: %v); killed and restarted. ", m.victim.id, brokerRejoinWait, m.victim.exited())
	c.progress("broker %d not back within %v of SIGCONT; kill -9 and restart", m.victim.id, brokerRejoinWait)
	if !m.victim.exited() {
		_ = m.victim.cmd.Process.Kill() // fails only if it exited meanwhile
		select {
		case <-m.victim.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := c.restart(m.victim); err != nil {
		return err
	}
	if err := c.waitWhole(ctx); err != nil {
		return err
	}
	return c.verifyGapProbe(ctx, r, g, "brokerpause_", fault)
}

// fdsPerBroker estimates the file descriptors a broker holds at partitions
// and returns the limit its processes get: Go raises the soft RLIMIT_NOFILE
// to the hard one.
func fdsPerBroker(o compareOptions, partitions int) (need, limit int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0
	}
	limit = int(min(rl.Max, 1<<30))
	return fdsNeeded(o, partitions, limit), limit
}

// fdsNeeded is fdsPerBroker's estimate under a descriptor limit: one per
// replica the broker hosts (its segment's .log file, created open; the
// .index and .timeindex come with their first entry, as Kafka's LazyIndex,
// and the bench writes to no partition but the probe's), at most the
// partition logs' file cache (storage.FileCacheSizeFor: the cache closes
// the least recently used beyond it), plus 1000 for connections, the
// metadata log and the rest.
func fdsNeeded(o compareOptions, partitions, limit int) int {
	replicas := (partitions*o.rf + o.brokers - 1) / o.brokers
	return min(replicas, storage.FileCacheSizeFor(limit)) + 1000
}

// signalName is how the output names a fault's signal.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "kill -9"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// zkVersion is the version line of ZooKeeper's srvr command ("" if none).
func zkVersion(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second)) // a failed deadline shows as a failed read
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ""
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Zookeeper version: "); ok {
			return v
		}
	}
	return ""
}

// benchVersions names what ran.
func benchVersions() map[string]string {
	v := map[string]string{"kraftd": version, "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH,
		"cpus": strconv.Itoa(runtime.NumCPU())}
	if _, cp, err := zkserver.Find(); err == nil {
		jar := strings.Split(cp, ":")[0]
		if real, err := filepath.EvalSymlinks(jar); err == nil {
			jar = real
		}
		v["zookeeper"] = filepath.Base(jar)
	}
	return v
}

// benchSettings lists the settings that decide the figures: the defaults of
// the timing keys and every override.
func benchSettings(o compareOptions) []string {
	set := map[string]string{}
	for _, k := range app.Keys() {
		set[k.Name] = k.Default
	}
	changed := map[string]bool{}
	for _, ov := range o.overrides {
		if k, v, ok := strings.Cut(ov, "="); ok {
			set[strings.TrimSpace(k)] = strings.TrimSpace(v)
			changed[strings.TrimSpace(k)] = true
		}
	}
	var out []string
	for _, k := range []string{"controller.quorum.append.linger.ms", "controller.quorum.election.timeout.ms",
		"controller.quorum.fetch.timeout.ms", "broker.heartbeat.interval.ms", "broker.session.timeout.ms",
		"zookeeper.session.timeout.ms"} {
		s := k + "=" + set[k]
		if changed[k] {
			s += " (changed)"
		} else {
			s += " (default)"
		}
		out = append(out, s)
	}
	// Every node inherits the bench's environment, so a Go runtime memory
	// or GC setting there (an operator's heap setting, like a Kafka
	// broker's -Xmx) changes every node's figures: print it.
	for _, k := range []string{"GOMEMLIMIT", "GOGC", "GOMAXPROCS"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, fmt.Sprintf("%s=%s (environment of every node)", k, v))
		}
	}
	out = append(out, "kraft: metadata log appends fsynced before they count (kraftd always does)",
		"zk-legacy: "+zkSettings(o),
		fmt.Sprintf("%d brokers, replication factor %d, %d partitions per topic; kraft: 3 controller processes", o.brokers, o.rf, o.topicSize))
	return out
}

// compareTable is one scenario's table.
type compareTable struct {
	title, anchor string
	rows          []compareMetric
}

type compareMetric struct {
	key, label string
	rate       bool // a rate, not a time: higher is better, ratio kraft/zk
	bytes      bool // a size, not a time
	count      bool // a count, not a time: no ratio, no chart
}

var compareTables = []compareTable{
	{"Controller failover (kill -9 of the active controller)",
		"anchor: Kafka's ZooKeeper-era failover, about 63 s (sync) / 17 s (async) for 100k partitions (apache/kafka PR 3765); KIP-500's claim: KRaft's stays flat. " +
			"Detection is bounded by controller.quorum.fetch.timeout.ms (kraft) and zookeeper.session.timeout.ms (zk-legacy); " +
			"in zk-legacy the controller is a broker, so the kill also takes partition leaders away and the producer's gap includes the session timeout",
		[]compareMetric{{key: "failover_detection_ms", label: "detection (a new controller known)"},
			{key: "failover_after_detection_ms", label: "recovery after detection"},
			{key: "failover_recovery_ms", label: "recovery (CreateTopics served by every broker)"},
			{key: "failover_producer_gap_ms", label: "longest gap, steady acks=all producer"}}},
	{"Controller failover (SIGSTOP of the active controller)",
		"a paused process answers nothing, where a killed one answers with an instant RST on loopback; detection as above",
		[]compareMetric{{key: "pause_detection_ms", label: "detection (a new controller known)"},
			{key: "pause_after_detection_ms", label: "recovery after detection"},
			{key: "pause_recovery_ms", label: "recovery (CreateTopics served by every other broker)"},
			{key: "pause_producer_gap_ms", label: "longest gap, steady acks=all producer"}}},
	{"Uncontrolled broker loss (kill -9 of the broker leading the most partitions)",
		"anchor: Confluent's 2M-partition figures, recovery after an uncontrolled shutdown 503 s with ZooKeeper vs 37 s with KRaft. " +
			"Both include the detection, bounded by broker.session.timeout.ms (kraft) and zookeeper.session.timeout.ms (zk-legacy); " +
			"a spread of 0 means every partition moved in one metadata update",
		[]compareMetric{{key: "loss_first_moved_ms", label: "first of its partitions led elsewhere"},
			{key: "loss_all_moved_ms", label: "every partition led elsewhere"},
			{key: "loss_after_detection_ms", label: "spread (last minus first)"},
			{key: "loss_producer_gap_ms", label: "longest gap, steady acks=all producer on a partition it led"},
			{key: "loss_led_partitions", label: "partitions it led", count: true}}},
	{"Paused broker (SIGSTOP of the broker leading the most partitions)",
		"scenario 8: a paused broker answers nothing and sends no RST; detection as for the loss; SIGCONT after, and the time until the cluster is whole again (every broker listed, every ISR full). " +
			"The producer's gap here is bounded by its client, not the cluster: a Produce in flight to the paused leader gets no answer until franz-go's request timeout (10 s, plus its 10 s overhead; Kafka's Java producer: request.timeout.ms, 30 s)",
		[]compareMetric{{key: "brokerpause_first_moved_ms", label: "first of its partitions led elsewhere"},
			{key: "brokerpause_all_moved_ms", label: "every partition led elsewhere"},
			{key: "brokerpause_after_detection_ms", label: "spread (last minus first)"},
			{key: "brokerpause_producer_gap_ms", label: "longest gap, steady acks=all producer on a partition it led"},
			{key: "brokerpause_rejoined_ms", label: "whole again after SIGCONT"},
			{key: "brokerpause_led_partitions", label: "partitions it led", count: true}}},
	{"Controlled shutdown (SIGTERM of the broker leading the most partitions)",
		"anchor: Confluent's 2M-partition figures, 135 s with ZooKeeper vs 32 s with KRaft. " +
			"It runs before the other faults, so the broker leads about 1/brokers of the partitions (a third with 3 brokers; the bench's own topics included); the producer writes to a partition it led",
		[]compareMetric{{key: "shutdown_may_exit_ms", label: "until it may exit (kraft: the controller's SHUTDOWN_NOW; zk-legacy: ControlledShutdown answered, none remaining)"},
			{key: "shutdown_exit_ms", label: "until the process exits (its own close of every log besides)"},
			{key: "shutdown_leaderless_max_ms", label: "longest a led partition had no other leader"},
			{key: "shutdown_producer_gap_ms", label: "longest gap, steady acks=all producer on a partition it led"},
			{key: "shutdown_led_partitions", label: "partitions it led", count: true}}},
	{"Metadata propagation of a topic create to every broker",
		"a single change, request to visible on all brokers",
		[]compareMetric{{key: "propagation_p50_ms", label: "p50"}, {key: "propagation_p99_ms", label: "p99"}}},
	{"Metadata propagation of a leader change to every broker",
		"a single leader change: ElectLeaders (PREFERRED) moving one partition's leadership back to its first replica, a broker the bench added, shut down (SIGTERM) and started again once " +
			"before the samples (kraft: forwarded to the controller, one PartitionChangeRecord; zk-legacy: sent to the controller broker, one state znode, LeaderAndIsr and UpdateMetadata), " +
			"from the request until every broker's Metadata names the new leader",
		[]compareMetric{{key: "leaderchange_p50_ms", label: "p50"}, {key: "leaderchange_p99_ms", label: "p99"}}},
	{"Partition creation",
		"CreateTopics of all partitions until every broker serves them with a leader (visible: brokers answer Metadata before they create the logs, in Kafka's order) " +
			"and until every broker created the logs of its replicas (logs ready: kraft, every broker's metadata_applied_offset, which advances only after the replica manager applied the image, " +
			"reaches the controllers' high watermark read after the last CreateTopics; zk-legacy, the same as visible: the controller sends a broker its UpdateMetadata only after that broker answered " +
			"the LeaderAndIsr, which creates the logs before it answers, one request in flight per broker, as Kafka's RequestSendThread), " +
			"and until every broker wrote its new logs' partition.metadata files (logs durable: every broker's " + broker.PendingPartitionFileWritesMetric + " is 0; " +
			"Kafka writes them on its scheduler too, flush-metadata-file; every later scenario starts only then, so a stopped broker does not write them on its way out)",
		[]compareMetric{{key: "create_partitions_per_s", label: "partitions/s, visible", rate: true},
			{key: "create_served_ms", label: "until visible on every broker"},
			{key: "create_logs_ready_partitions_per_s", label: "partitions/s, logs ready", rate: true},
			{key: "create_logs_ready_ms", label: "until logs ready on every broker"},
			{key: "create_logs_durable_ms", label: "until logs durable on every broker"}}},
	{"Memory per partition",
		"resident memory (VmRSS) the partitions added, divided by their count, read once every broker serves them: " +
			"a broker (mean over those that are not the zk-legacy controller; each hosts replication factor / brokers of the replicas) and the active controller " +
			"(a controller process in kraft, the controller broker in zk-legacy, where ZooKeeper holds the state besides); RSS includes GC slack, so small counts are noisy",
		[]compareMetric{{key: "mem_broker_bytes_per_partition", label: "broker, bytes per partition", bytes: true},
			{key: "mem_controller_bytes_per_partition", label: "controller, bytes per partition", bytes: true},
			{key: "mem_broker_rss_bytes", label: "broker RSS", bytes: true},
			{key: "mem_controller_rss_bytes", label: "controller RSS", bytes: true}}},
	{"Broker restart (SIGTERM, then started again)",
		"from the process's start; kraft: until unfenced (listed by the other brokers) and until it serves every partition with a leader from its replayed metadata; " +
			"zk-legacy: until registered and until the controller's UpdateMetadata reached it",
		[]compareMetric{{key: "restart_listed_ms", label: "listed by every other broker"},
			{key: "restart_full_metadata_ms", label: "serving full metadata"}}},
	{"Fresh broker joining (new id, empty directory)",
		"from the process's start, as for the restart; kraft replays the metadata log (or a snapshot) from the controllers, zk-legacy waits for the controller's UpdateMetadata",
		[]compareMetric{{key: "join_listed_ms", label: "listed by every other broker"},
			{key: "join_full_metadata_ms", label: "serving full metadata"}}},
}

// markdown renders the report: the command, versions and settings, then
// one table per scenario with both modes side by side.
func (rep *compareReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## kraftd bench: KRaft vs zk-legacy\n\n```\n%s\n```\n\n", rep.Command)
	var vs []string
	for k, v := range rep.Versions {
		vs = append(vs, k+" "+v)
	}
	sort.Strings(vs)
	fmt.Fprintf(&b, "Started %s; %s.\n\nSettings:\n", rep.Started.Format(time.RFC3339), strings.Join(vs, ", "))
	for _, s := range rep.Settings {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	if len(rep.Overrides) == 0 {
		b.WriteString("- no setting changed from its default\n")
	}
	fmt.Fprintf(&b, "- each mode capped at %s per partition count\n", time.Duration(rep.CapSeconds*float64(time.Second)))
	b.WriteString("\nOn a small machine every node shares the same cores: the figures measure the machine as much as the design.\n")
	find := func(mode string, p int) *modeRun {
		for _, r := range rep.Runs {
			if r.Mode == mode && r.Partitions == p {
				return r
			}
		}
		return nil
	}
	var sizes []int
	for _, r := range rep.Runs {
		if !slices.Contains(sizes, r.Partitions) {
			sizes = append(sizes, r.Partitions)
		}
	}
	kraft, zk := string(app.ModeKRaft), string(app.ModeZKLegacy)
	for _, t := range compareTables {
		fmt.Fprintf(&b, "\n### %s\n\n%s.\n\n", t.title, t.anchor)
		if _, ok := rep.plot(t); ok {
			fmt.Fprintf(&b, "![%s](%s)\n\n", t.title, plotFile(t))
		}
		b.WriteString("| partitions | measure | kraft | zk-legacy | zk-legacy / kraft |\n|---:|---|---:|---:|---:|\n")
		for _, p := range sizes {
			kr, zr := find(kraft, p), find(zk, p)
			for _, m := range t.rows {
				kv, kok := cell(kr, m)
				zv, zok := cell(zr, m)
				ratio := "-"
				if kok && zok && !m.count {
					a, z := kr.Metrics[m.key], zr.Metrics[m.key]
					if m.rate {
						a, z = z, a
					}
					if a > 0 {
						ratio = fmt.Sprintf("%.3gx", z/a)
					}
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", p, m.label, kv, zv, ratio)
			}
		}
	}
	rep.goalsMarkdown(&b)
	if rep.Shape != nil {
		b.WriteString("\n### Shape (asserted)\n\nKRaft's failover recovery after detection flat across the sizes, zk-legacy's clearly growing (cmd/kraftd/bench_shape.go says how and why).\n\n")
		for _, l := range rep.Shape.Lines {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	var notes []string
	for _, r := range rep.Runs {
		if r.Status != statusOK || r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s at %d partitions: %s (%.0f s) %s", r.Mode, r.Partitions, r.Status, r.Seconds, r.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\nRuns not complete or with notes:\n%s\n", strings.Join(notes, "\n"))
	}
	return b.String()
}

// cell formats one figure, or why there is none.
func cell(r *modeRun, m compareMetric) (string, bool) {
	if r == nil {
		return "not run", false
	}
	v, ok := r.Metrics[m.key]
	if !ok {
		if r.Status == statusOK {
			return "-", false
		}
		return r.Status, false
	}
	if m.rate || m.count {
		return fmt.Sprintf("%.0f", v), true
	}
	if m.bytes {
		switch {
		case math.Abs(v) >= 1<<20:
			return fmt.Sprintf("%.1f MiB", v/(1<<20)), true
		case math.Abs(v) >= 1<<10:
			return fmt.Sprintf("%.1f KiB", v/(1<<10)), true
		}
		return fmt.Sprintf("%.0f B", v), true
	}
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds()), true
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds()), true
	default:
		return fmt.Sprintf("%.1f ms", v), true
	}
}

// brokerRestart stops a broker with SIGTERM (not the zk-legacy controller,
// whose loss is a failover), starts it again and times from the start until
// it is back (brokerBack).
func (c *benchCluster) brokerRestart(ctx context.Context, r *modeRun) error {
	victim, _, err := c.busiestBroker(ctx)
	if err != nil {
		return err
	}
	c.progress("SIGTERM to broker %d, then starting it again", victim.id)
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-victim.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.waitGone(ctx, victim); err != nil {
		return err
	}
	start := time.Now()
	if err := c.restart(victim); err != nil {
		return err
	}
	if err := c.brokerBack(ctx, r, victim, start, "restart_"); err != nil {
		return err
	}
	return c.waitWhole(ctx)
}

// brokerJoin starts a broker that was never part of the cluster (the next
// node id, an empty log directory) and times from its start until it is
// in (brokerBack). It stays in the cluster afterwards, leading nothing.
//
// A broker that exits at start because another process took its port
// (errDevPortInUse) is forgotten and a fresh one (another id) started on
// other ports, up to devPortAttempts starts in all.
func (c *benchCluster) brokerJoin(ctx context.Context, r *modeRun) error {
	for attempt := 1; ; attempt++ {
		n, start, err := c.addBroker()
		if err != nil {
			return err
		}
		err = c.brokerBack(ctx, r, n, start, "join_")
		if errors.Is(err, errDevPortInUse) && attempt < devPortAttempts {
			c.progress("broker %d: %v; starting it again on other ports", n.id, err)
			if err := c.forgetNode(n); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return c.waitWhole(ctx)
	}
}

// forgetNode drops n, a broker addBroker started that has exited, from the
// cluster and removes its directory. The next broker addBroker starts gets
// another id: n may have registered before it failed to bind (the
// listeners start after the broker's components), and a controller refuses
// a second registration of an id until the first one's session expires.
func (c *benchCluster) forgetNode(n *devNode) error {
	c.dc.nodes = slices.DeleteFunc(c.dc.nodes, func(m *devNode) bool { return m == n })
	c.dc.o.brokers--
	c.forgotID = max(c.forgotID, n.id)
	return os.RemoveAll(n.dir)
}

// addBroker starts a broker new to the cluster (the next node id, an empty
// log directory) and returns it with the time it was started.
func (c *benchCluster) addBroker() (*devNode, time.Time, error) {
	ports, err := devPorts(0, 2, c.dc.o.ports)
	if err != nil {
		return nil, time.Time{}, err
	}
	id := c.forgotID
	for _, n := range c.dc.nodes {
		id = max(id, n.id)
	}
	id++
	n := &devNode{id: id, broker: true, port: ports[0], dir: filepath.Join(c.dc.o.dir, "node-"+strconv.Itoa(id)), done: make(chan struct{})}
	n.metricsPort = ports[1] // zk-legacy: fault switches; kraft: waitLogsReady
	c.dc.nodes = append(c.dc.nodes, n)
	c.dc.o.brokers++
	c.progress("starting broker %d, new to the cluster", id)
	start := time.Now()
	return n, start, c.dc.start(n)
}

// waitGone waits until no running broker lists n (kraft fences it on its
// controlled shutdown; zk-legacy drops it when its session closes).
func (c *benchCluster) waitGone(ctx context.Context, n *devNode) error {
	return poll(ctx, 5*time.Millisecond, func() (bool, error) {
		for _, w := range c.running(c.brokers()) {
			v, err := c.metadata(ctx, w.addr(), []string{})
			if err != nil || slices.Contains(v.ids, int32(n.id)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// brokerBack polls, from start (the process's start), until every other
// running broker lists n (prefix+"listed_ms": unfenced in kraft, alive in
// zk-legacy) and until n itself serves every partition another broker
// serves, each with a leader (prefix+"full_metadata_ms").
func (c *benchCluster) brokerBack(ctx context.Context, r *modeRun, n *devNode, start time.Time, prefix string) error {
	var witnesses []*devNode
	for _, w := range c.running(c.brokers()) {
		if w != n {
			witnesses = append(witnesses, w)
		}
	}
	if len(witnesses) == 0 {
		return errors.New("no other broker running")
	}
	wv, err := c.metadata(ctx, witnesses[0].addr(), nil)
	if err != nil {
		return err
	}
	// Every partition the others serve with a leader (one whose only
	// replica is on a stopped broker has none anywhere).
	want := 0
	for _, ps := range wv.topics {
		for _, p := range ps {
			if p.leader >= 0 {
				want++
			}
		}
	}
	var listed, full time.Duration
	seen := map[int]bool{}
	last := time.Now()
	err = poll(ctx, 5*time.Millisecond, func() (bool, error) {
		if n.exited() {
			return false, n.exitError()
		}
		if listed == 0 {
			for _, w := range witnesses {
				if !seen[w.id] {
					if v, err := c.metadata(ctx, w.addr(), []string{}); err == nil && slices.Contains(v.ids, int32(n.id)) {
						seen[w.id] = true
					}
				}
			}
			if len(seen) == len(witnesses) {
				listed = time.Since(start)
			}
		}
		if full == 0 {
			if v, err := c.metadata(ctx, n.addr(), nil); err == nil {
				led := 0
				for _, ps := range v.topics {
					for _, p := range ps {
						if p.leader >= 0 {
							led++
						}
					}
				}
				if led >= want {
					full = time.Since(start)
				} else if time.Since(last) > 2*time.Second {
					last = time.Now()
					c.progress("broker %d serves %s", n.id, progressBar(led, want))
				}
			}
		}
		return listed > 0 && full > 0, nil
	})
	if err != nil {
		return fmt.Errorf("broker %d after its start: %w", n.id, err)
	}
	c.progress("broker %d listed after %v, serving all %d partitions after %v", n.id, listed.Round(time.Millisecond), want, full.Round(time.Millisecond))
	r.setDuration(prefix+"listed_ms", listed)
	r.setDuration(prefix+"full_metadata_ms", full)
	return nil
}

// mergeReports reads results.json files into one report: the first file's
// header (command, versions, settings) with each later command appended,
// and every run, a later file's replacing an earlier one's of the same mode
// and size; runs sorted by size, kraft first.
func mergeReports(files []string) (compareReport, error) {
	var out compareReport
	for i, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return out, err
		}
		var rep compareReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			return out, fmt.Errorf("%s: %w", f, err)
		}
		if i == 0 {
			out = rep
			out.Runs = nil
		} else {
			out.Command += "\n" + rep.Command
		}
		for _, r := range rep.Runs {
			out.Runs = slices.DeleteFunc(out.Runs, func(o *modeRun) bool { return o.Mode == r.Mode && o.Partitions == r.Partitions })
			out.Runs = append(out.Runs, r)
		}
	}
	slices.SortStableFunc(out.Runs, func(a, b *modeRun) int {
		if a.Partitions != b.Partitions {
			return a.Partitions - b.Partitions
		}
		return strings.Compare(a.Mode, b.Mode) // kraft before zk-legacy
	})
	return out, nil
}
