package main

// kraftd dev: a whole local cluster in one command. Each node is a separate
// kraftd process (this same executable, re-run with node flags), so a node
// can be killed, restarted or watched on its own exactly as in production,
// and a crash in one node cannot take the others down.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/legacyzk/zkserver"
	"github.com/kraftd/kraftd/protocol"
)

const devUsage = `usage: kraftd dev [--controllers N] [--brokers M] [--base-port P] [--dir DIR] [--mode kraft|zk-legacy] [--dynamic]

Starts a local cluster on 127.0.0.1, one kraftd process per node: controllers
are node ids 1..N, brokers N+1..N+M, and node id i listens on port P+i (with
--base-port 0, on any free ports). With --mode zk-legacy there are no
controller nodes: kraftd dev starts a ZooKeeper on port P (Debian's zookeeper
package; data under DIR/zookeeper) and brokers 1..M, one of which wins
/controller; ZooKeeper stops after the brokers. The brokers run with their
fault switches on (kraftd.fault.injection.enable) and serve them, with their
metrics, on a loopback port each, printed on the "faults:" line (POST a switch
such as drop-update-metadata-to=2 there). Data goes under DIR/node-<id>; without --dir
a temporary directory is used and removed at exit. Once every node answers
ApiVersions the bootstrap and controller addresses are printed; the nodes'
logs follow on stderr, each line prefixed with [node-<id>]. Ctrl-C stops every
node (SIGTERM, then SIGKILL after --stop-timeout) and exits 0.

With --dynamic the controllers form a dynamic quorum (KIP-853): every node finds
it through controller.quorum.bootstrap.servers, controller 1 is formatted
--standalone, the others --no-initial-controllers, and once all answer each is
added as a voter in turn (AddRaftVoter, as kraftd quorum add-controller) before the
addresses are printed.

Flags:
`

// Errors of kraftd dev.
var (
	errDevNodeExited = errors.New("dev: node exited")
	errDevNotReady   = errors.New("dev: node did not answer ApiVersions in time")
	errDevAllExited  = errors.New("dev: every node has exited")
	errDevZooKeeper  = errors.New("dev: cannot start ZooKeeper")
	// errDevSignal ends the run on SIGINT/SIGTERM; it is the normal way to
	// stop, so it is never reported.
	errDevSignal = errors.New("dev: stopped by a signal")
)

// devOptions are the flags of kraftd dev.
type devOptions struct {
	controllers, brokers int
	basePort             int
	dir                  string
	mode                 string
	logLevel             string
	overrides            []string
	startTimeout         time.Duration
	stopTimeout          time.Duration
	// dynamic: a dynamic quorum grown from one standalone controller.
	dynamic bool
	// ports is not a flag: where free ports come from (--base-port 0, the
	// metrics listeners); nil is a picker of the cluster's own. kraftd bench
	// passes one picker to every cluster of its run, so no two of its nodes
	// ever get the same port.
	ports *portPicker
}

func parseDevFlags(args []string, stderr io.Writer) (devOptions, error) {
	var o devOptions
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(stderr)
	fs.IntVar(&o.controllers, "controllers", 3, "number of controller processes (node ids 1..N)")
	fs.IntVar(&o.brokers, "brokers", 3, "number of broker processes (node ids N+1..N+M)")
	fs.IntVar(&o.basePort, "base-port", 19090, "node id i listens on 127.0.0.1:P+i; 0 picks free ports")
	fs.StringVar(&o.dir, "dir", "", "data directory (node-<id> below it); default a temporary one, removed at exit")
	fs.StringVar(&o.mode, "mode", "kraft", "kraft, or zk-legacy (a ZooKeeper and M brokers, no controller nodes)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level of every node: debug, info, warn or error")
	fs.StringArrayVar(&o.overrides, "override", nil, "key=value passed to every node; repeatable")
	fs.DurationVar(&o.startTimeout, "start-timeout", time.Minute, "how long every node has to answer ApiVersions")
	fs.BoolVar(&o.dynamic, "dynamic", false, "a dynamic quorum (KIP-853): controller 1 standalone, the others added as voters")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 20*time.Second, "how long a node has to stop after SIGTERM before SIGKILL")
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s%s", devUsage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	legacy := o.mode == string(app.ModeZKLegacy)
	if legacy {
		if fs.Changed("controllers") && o.controllers != 0 {
			return o, errors.New("dev: zk-legacy mode has no controller nodes (a broker wins /controller); drop --controllers")
		}
		o.controllers = 0
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("dev: unexpected argument %q", fs.Arg(0))
	case !legacy && o.mode != string(app.ModeKRaft):
		return o, fmt.Errorf("dev: --mode %q: want kraft or zk-legacy", o.mode)
	case legacy && o.dynamic:
		return o, errors.New("dev: --dynamic is a KRaft quorum; zk-legacy mode has none")
	case legacy && o.brokers < 1:
		return o, fmt.Errorf("dev: zk-legacy mode needs --brokers >= 1, got %d", o.brokers)
	case !legacy && (o.controllers < 1 || o.brokers < 0):
		return o, fmt.Errorf("dev: need --controllers >= 1 and --brokers >= 0, got %d and %d", o.controllers, o.brokers)
	case o.basePort < 0 || o.basePort+o.controllers+o.brokers > 65535:
		return o, fmt.Errorf("dev: --base-port %d leaves no room for %d nodes", o.basePort, o.controllers+o.brokers)
	}
	return o, nil
}

func runDev(args []string, stdout io.Writer, stderr *os.File) int {
	o, err := parseDevFlags(args, stderr)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	// One channel sees every signal, so the first can stop the cluster
	// gracefully and a second can cut the wait short.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	return report(stderr, exitError, runDevCluster(signals, o, stdout, stderr))
}

// runDevCluster prepares the directory, runs the cluster until a signal,
// and removes a temporary directory afterwards.
func runDevCluster(signals <-chan os.Signal, o devOptions, stdout, stderr io.Writer) (err error) {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "kraftd-dev-"); err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		// The nodes have all exited (run returns only then), so no file is
		// still open in it.
		defer func() { err = errors.Join(err, os.RemoveAll(o.dir)) }()
	}
	c, err := newDevCluster(o, exe, signals, stdout, stderr)
	if err != nil {
		return err
	}
	return c.run()
}

// devNode is one child process.
//
// INVARIANTS: err is written once, by the waiter goroutine, before done is
// closed; nobody reads it before done is closed.
type devNode struct {
	id     int
	broker bool
	port   int
	// metricsPort is the loopback port of a zk-legacy broker's metrics and
	// fault switches; in kraft mode 0 (no metrics listener), except under
	// kraftd bench, which reads its brokers' applied metadata offset there.
	metricsPort int
	dir         string
	cmd         *exec.Cmd
	logs        [2]*linePrefixer // stdout, stderr
	// portInUse: a line of the node's output said a bind failed on
	// EADDRINUSE (set by the output's writers, read once done is closed).
	portInUse atomic.Bool
	done      chan struct{}
	err       error
}

func (n *devNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *devNode) metricsAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.metricsPort))
}

func (n *devNode) role() string {
	if n.broker {
		return "broker"
	}
	return "controller"
}

func (n *devNode) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// devCluster owns the child processes and one waiter goroutine per child.
type devCluster struct {
	o         devOptions
	exe       string
	clusterID string
	voters    string
	// bootstrap is controller.quorum.bootstrap.servers of a --dynamic cluster.
	bootstrap string
	nodes     []*devNode
	stdout    io.Writer
	logs      *lockedWriter
	exits     chan *devNode // one send per started node; buffered for all
	signals   <-chan os.Signal
	forced    bool // a second signal came: stop waiting, kill
	wg        sync.WaitGroup
	// zk is the ZooKeeper `kraftd dev --mode zk-legacy` runs (nil in kraft
	// mode and under kraftd bench, which runs its own ensemble), up from
	// before the first broker until after the last one stopped.
	zk *zkserver.Server
	// zkConnect is the brokers' zookeeper.connect: every server of the
	// ZooKeeper (an ensemble's members, comma-separated).
	zkConnect string
}

func (c *devCluster) legacy() bool { return c.o.mode == string(app.ModeZKLegacy) }

func newDevCluster(o devOptions, exe string, signals <-chan os.Signal, stdout, stderr io.Writer) (*devCluster, error) {
	id, err := app.RandomUUID(nil)
	if err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	n := o.controllers + o.brokers
	if o.ports == nil {
		o.ports = newPortPicker()
	}
	ports, err := devPorts(o.basePort, n, o.ports)
	if err != nil {
		return nil, err
	}
	c := &devCluster{o: o, exe: exe, clusterID: id.String(), stdout: stdout, signals: signals,
		logs: &lockedWriter{w: stderr}, exits: make(chan *devNode, n)}
	var metricsPorts []int
	if o.mode == string(app.ModeZKLegacy) {
		if metricsPorts, err = devPorts(0, n, o.ports); err != nil {
			return nil, err
		}
	}
	var voters, bootstrap []string
	for i := range n {
		node := &devNode{id: i + 1, broker: i >= o.controllers, port: ports[i],
			dir: filepath.Join(o.dir, "node-"+strconv.Itoa(i+1)), done: make(chan struct{})}
		if metricsPorts != nil {
			node.metricsPort = metricsPorts[i]
		}
		c.nodes = append(c.nodes, node)
		if !node.broker {
			voters = append(voters, fmt.Sprintf("%d@%s", node.id, node.addr()))
			bootstrap = append(bootstrap, node.addr())
		}
	}
	c.voters, c.bootstrap = strings.Join(voters, ","), strings.Join(bootstrap, ",")
	return c, nil
}

// devPorts returns port base+i for node id i, or, when base is 0, n free
// ports of picker (never handed out before, below the ephemeral range: see
// portPicker). Another process could still take one before its node binds
// it: the node then exits with errDevPortInUse in waitReady's error, which
// kraftd bench retries and kraftd dev reports.
func devPorts(base, n int, picker *portPicker) ([]int, error) {
	if base == 0 {
		return picker.ports(n)
	}
	ports := make([]int, n)
	for i := range ports {
		ports[i] = base + i + 1
	}
	return ports, nil
}

// run starts every node, waits until all answer, prints the addresses, and
// supervises until a signal comes or every node has exited; then it stops
// the nodes that are left and waits for all of them.
func (c *devCluster) run() error {
	if c.legacy() {
		if err := c.startZooKeeper(); err != nil {
			return err
		}
		defer c.zk.Stop()
	}
	err := c.startAll()
	if err == nil {
		err = c.waitReady()
	}
	if err == nil && c.o.dynamic {
		err = c.addControllers()
	}
	if err == nil {
		c.printReady()
		err = c.supervise()
	}
	if errors.Is(err, errDevSignal) {
		c.logs.printf("[dev] stopping the nodes, brokers first (a second Ctrl-C kills them)\n")
		err = nil
	}
	c.stopAll()
	return err
}

func (c *devCluster) startAll() error {
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			return err
		}
	}
	return nil
}

// startZooKeeper runs ZooKeeper on port base (a free one with base 0),
// data under DIR/zookeeper.
func (c *devCluster) startZooKeeper() error {
	zk, err := zkserver.Start(zkserver.Config{Dir: filepath.Join(c.o.dir, "zookeeper"), Port: c.o.basePort,
		TickMs: 500, StartTimeoutMs: int(c.o.startTimeout.Milliseconds())})
	if err != nil {
		return fmt.Errorf("%w: %w", errDevZooKeeper, err)
	}
	c.zk, c.zkConnect = zk, zk.Addr
	c.logs.printf("[dev] ZooKeeper serving on %s (log %s)\n", zk.Addr, zk.LogPath())
	return nil
}

// legacyNodeArgs are the flags of a zk-legacy broker; its cluster id comes
// from ZooKeeper's /cluster/id, which the first broker creates.
func (c *devCluster) legacyNodeArgs(n *devNode) []string {
	args := []string{
		"--mode", string(app.ModeZKLegacy), "--node-id", strconv.Itoa(n.id),
		"--listeners", "PLAINTEXT://" + n.addr(), "--log-dirs", n.dir,
		"--zookeeper-connect", c.zkConnect, "--log-format", "console", "--log-level", c.o.logLevel,
		// A dev cluster is where one tries the ZooKeeper era's divergence cases
		// out: fault switches on, served on loopback only.
		"--metrics-listener", n.metricsAddr(), "--kraftd-fault-injection-enable", "true",
	}
	for _, ov := range c.o.overrides {
		args = append(args, "--override", ov)
	}
	return args
}

// nodeArgs are the flags of one node, named after the Kafka properties.
func (c *devCluster) nodeArgs(n *devNode) []string {
	if c.legacy() {
		return c.legacyNodeArgs(n)
	}
	listener := "CONTROLLER://" + n.addr()
	if n.broker {
		listener = "PLAINTEXT://" + n.addr()
	}
	args := []string{
		"--node-id", strconv.Itoa(n.id), "--process-roles", n.role(),
		"--listeners", listener, "--controller-listener-names", "CONTROLLER",
		"--log-dirs", n.dir,
		"--cluster-id", c.clusterID, "--log-format", "console", "--log-level", c.o.logLevel,
	}
	if c.o.dynamic {
		args = append(args, "--controller-quorum-bootstrap-servers", c.bootstrap)
	} else {
		args = append(args, "--controller-quorum-voters", c.voters)
	}
	if n.metricsPort != 0 {
		args = append(args, "--metrics-listener", n.metricsAddr())
	}
	if n.broker && c.o.brokers < 3 {
		// Fewer brokers than Kafka's default offsets.topic.replication.factor
		// (3): __consumer_offsets could never be created and consumer
		// groups would get COORDINATOR_NOT_AVAILABLE forever.
		args = append(args, "--offsets-topic-replication-factor", strconv.Itoa(c.o.brokers))
	}
	for _, ov := range c.o.overrides {
		args = append(args, "--override", ov)
	}
	return args
}

func (c *devCluster) start(n *devNode) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	prefix := fmt.Sprintf("[node-%d] ", n.id)
	watch := func(line []byte) {
		if isAddrInUse(line) {
			n.portInUse.Store(true)
		}
	}
	n.logs = [2]*linePrefixer{{prefix: prefix, out: c.logs, watch: watch}, {prefix: prefix, out: c.logs, watch: watch}}
	if c.o.dynamic {
		if err := c.formatDynamic(n); err != nil {
			close(n.done)
			return err
		}
	}
	n.cmd = exec.Command(c.exe, c.nodeArgs(n)...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs[0], n.logs[1]
	n.cmd.SysProcAttr = devSysProcAttr()
	if err := n.cmd.Start(); err != nil {
		close(n.done)
		return fmt.Errorf("dev: starting node %d: %w", n.id, err)
	}
	c.wg.Go(func() {
		n.err = n.cmd.Wait()
		n.logs[0].flush()
		n.logs[1].flush()
		close(n.done)
		c.exits <- n
	})
	return nil
}

// waitReady polls ApiVersions on every node until each has answered once.
// A node exiting, the deadline or a signal end the wait.
func (c *devCluster) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.startTimeout)
	defer cancel()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-dev", DialTimeout: time.Second})
	defer cl.Close()
	pending := append([]*devNode(nil), c.nodes...)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	probe := answers
	if c.legacy() {
		// A zk-legacy broker answers ApiVersions as soon as it listens (it
		// must bind before it can register its port in ZooKeeper) but
		// holds client requests until it has read /cluster/id: wait for
		// an answer to one.
		probe = answersMetadata
	}
	for len(pending) > 0 {
		if probe(ctx, cl, pending[0].addr()) {
			pending = pending[1:]
			continue
		}
		select {
		case n := <-c.exits:
			return n.exitError()
		case <-c.signals:
			return errDevSignal
		case <-ctx.Done():
			return fmt.Errorf("%w: node %d on %s after %v", errDevNotReady, pending[0].id, pending[0].addr(), c.o.startTimeout)
		case <-tick.C:
		}
	}
	return nil
}

// exitError says that n exited during start-up; it wraps errDevPortInUse
// too when n's output said its port was taken. n has exited.
func (n *devNode) exitError() error {
	if n.portInUse.Load() {
		return fmt.Errorf("%w during start-up: node %d (%s) on %s: %v: %w", errDevNodeExited, n.id, n.role(), n.addr(), n.err, errDevPortInUse)
	}
	return fmt.Errorf("%w during start-up: node %d (%s): %v", errDevNodeExited, n.id, n.role(), n.err)
}

// answers reports whether addr answers an ApiVersions request.
func answers(ctx context.Context, cl *protocol.Client, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Version 0 has no client software fields to fill in (v3+ requires
	// them) and every Kafka server answers it.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	resp, err := cl.Request(ctx, addr, req)
	return err == nil && resp.(*kmsg.ApiVersionsResponse).ErrorCode == 0
}

// answersMetadata reports whether addr answers a Metadata request (for no
// topics) with a cluster id.
func answersMetadata(ctx context.Context, cl *protocol.Client, addr string) bool {
	_, ok := metadataClusterID(ctx, cl, addr)
	return ok
}

func metadataClusterID(ctx context.Context, cl *protocol.Client, addr string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(-1)
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil || resp.(*kmsg.MetadataResponse).ClusterID == nil {
		return "", false
	}
	return *resp.(*kmsg.MetadataResponse).ClusterID, true
}

// printReady prints the lines a user (or a test) needs to connect.
func (c *devCluster) printReady() {
	var brokers, controllers []string
	for _, n := range c.nodes {
		if n.broker {
			brokers = append(brokers, n.addr())
		} else {
			controllers = append(controllers, n.addr())
		}
	}
	clusterID := c.clusterID
	if c.legacy() {
		clusterID = c.legacyClusterID(brokers)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "cluster id: %s\ndata: %s\n", clusterID, c.o.dir)
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "node-%d: %s %s pid %d\n", n.id, n.role(), n.addr(), n.cmd.Process.Pid)
	}
	if len(brokers) > 0 {
		fmt.Fprintf(&b, "bootstrap: %s\n", strings.Join(brokers, ","))
	}
	if c.legacy() {
		fmt.Fprintf(&b, "zookeeper: %s\n", c.zkConnect)
		faults := make([]string, len(c.nodes))
		for i, n := range c.nodes {
			faults[i] = "http://" + n.metricsAddr() + "/faults"
		}
		fmt.Fprintf(&b, "faults: %s\n", strings.Join(faults, ","))
	} else {
		fmt.Fprintf(&b, "controllers: %s\n", strings.Join(controllers, ","))
	}
	_, _ = c.stdout.Write(b.Bytes()) // nothing useful to do if stdout is gone
}

// legacyClusterID asks a broker for the cluster id it read from
// /cluster/id ("unknown" if none answers in time).
func (c *devCluster) legacyClusterID(brokers []string) string {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-dev", DialTimeout: time.Second})
	defer cl.Close()
	for _, addr := range brokers {
		if id, ok := metadataClusterID(context.Background(), cl, addr); ok {
			return id
		}
	}
	return "unknown"
}

// supervise reports nodes that exit while the cluster runs. The others keep
// running, since a dev cluster is also where one tries failures out; when
// none is left, it gives up.
func (c *devCluster) supervise() error {
	left := len(c.nodes)
	for {
		select {
		case <-c.signals:
			return errDevSignal
		case n := <-c.exits:
			left--
			c.logs.printf("[dev] node %d (%s) exited unexpectedly: %v\n", n.id, n.role(), exitText(n.err))
			if left == 0 {
				return errDevAllExited
			}
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stopAll stops the brokers first, then the controllers: a broker that
// stops after the quorum has gone would wait for controllers that are no
// longer there.
func (c *devCluster) stopAll() {
	var brokers, controllers []*devNode
	for _, n := range c.nodes {
		if n.broker {
			brokers = append(brokers, n)
		} else {
			controllers = append(controllers, n)
		}
	}
	c.stopGroup(brokers)
	c.stopGroup(controllers)
	c.wg.Wait()
}

// stopGroup sends SIGTERM to each live node of the group, and SIGKILL to
// those still running after stopTimeout, or at once after a second signal.
func (c *devCluster) stopGroup(group []*devNode) {
	var nodes []*devNode // the started ones; a failed start leaves the rest unstarted
	for _, n := range group {
		if n.cmd != nil && n.cmd.Process != nil {
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		if !n.exited() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM) // fails only if it just exited
		}
	}
	deadline := time.NewTimer(c.o.stopTimeout)
	defer deadline.Stop()
	for _, n := range nodes {
		if c.forced {
			c.killRest(nodes, "a second signal came")
			return
		}
		select {
		case <-n.done:
		case <-c.signals:
			c.forced = true
			c.killRest(nodes, "a second signal came")
			return
		case <-deadline.C:
			c.killRest(nodes, fmt.Sprintf("it did not stop in %v", c.o.stopTimeout))
			return
		}
	}
}

func (c *devCluster) killRest(nodes []*devNode, why string) {
	for _, n := range nodes {
		if !n.exited() {
			c.logs.printf("[dev] killing node %d: %s\n", n.id, why)
			_ = n.cmd.Process.Kill() // fails only if it just exited
		}
	}
	for _, n := range nodes {
		<-n.done
	}
}

// lockedWriter serializes whole lines from many children onto one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(p) // a closed stderr must not stop the cluster
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.write(fmt.Appendf(nil, format, args...))
}

// linePrefixer is a child's stdout or stderr: it buffers a partial line
// and writes each complete line, prefixed, in one locked write, so lines of
// different nodes never interleave mid-line. exec.Cmd calls Write from one
// goroutine per stream, and flush runs after Wait, when that goroutine has
// finished; so the buffer needs no lock of its own.
type linePrefixer struct {
	prefix string
	out    *lockedWriter
	buf    []byte
	// watch, if not nil, sees every complete line (without the prefix).
	watch func(line []byte)
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.emit(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) == 0 {
		p.buf = nil // let a large drained buffer go
	}
	return len(b), nil
}

func (p *linePrefixer) emit(line []byte) {
	if p.watch != nil {
		p.watch(line)
	}
	out := make([]byte, 0, len(p.prefix)+len(line))
	p.out.write(append(append(out, p.prefix...), line...))
}

// flush writes a last line that had no newline.
func (p *linePrefixer) flush() {
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = nil
	}
}

// formatDynamic formats n for a --dynamic cluster with `kraftd storage format`:
// controller 1 --standalone, the other controllers --no-initial-controllers, the
// brokers plainly. A directory formatted before (a --dir reused) is kept.
func (c *devCluster) formatDynamic(n *devNode) error {
	if _, err := os.Stat(filepath.Join(n.dir, app.MetaPropertiesFile)); err == nil {
		return nil
	}
	args := append([]string{"storage", "format"}, c.nodeArgs(n)...)
	switch {
	case n.broker:
	case n.id == 1:
		args = append(args, "--standalone")
	default:
		args = append(args, "--no-initial-controllers")
	}
	cmd := exec.Command(c.exe, args...)
	cmd.Stdout, cmd.Stderr = n.logs[0], n.logs[1]
	err := cmd.Run()
	n.logs[0].flush()
	n.logs[1].flush()
	if err != nil {
		return fmt.Errorf("dev: formatting node %d: %w", n.id, err)
	}
	return nil
}

// addControllers makes controllers 2..N voters of a --dynamic cluster's quorum, one
// at a time, as `kraftd quorum add-controller` run on each would: AddRaftVoter to
// the leader (found through controller 1), retried while the new controller has not
// caught up. A node exiting, a signal or --start-timeout end it.
func (c *devCluster) addControllers() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.startTimeout)
	// The watcher turns a signal into cancel; it ends with ctx, and the function
	// waits for it (the deferred cancel runs before the Wait).
	var watcher sync.WaitGroup
	var signaled atomic.Bool
	defer watcher.Wait()
	defer cancel()
	watcher.Go(func() {
		select {
		case <-c.signals:
			signaled.Store(true)
			cancel()
		case <-ctx.Done():
		}
	})
	for _, n := range c.nodes[1:c.o.controllers] {
		m, err := app.ReadMetaProperties(n.dir)
		if err != nil {
			return fmt.Errorf("dev: node %d: %w", n.id, err)
		}
		dir, err := app.ParseUUID(m.DirectoryID)
		if err != nil {
			return fmt.Errorf("dev: node %d: directory.id: %w", n.id, err)
		}
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.TimeoutMillis = int32(c.o.startTimeout.Milliseconds())
		req.VoterID, req.VoterDirectoryID, req.AckWhenCommitted = int32(n.id), dir, true
		req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: "127.0.0.1", Port: uint16(n.port)}}
		if err := sendVoterChange(ctx, c.nodes[0].addr(), req); err != nil {
			if signaled.Load() {
				return errDevSignal
			}
			return fmt.Errorf("dev: adding controller %d: %w", n.id, err)
		}
		c.logs.printf("[dev] controller %d is a voter (directory id %s)\n", n.id, m.DirectoryID)
	}
	if signaled.Load() {
		return errDevSignal
	}
	return nil
}
