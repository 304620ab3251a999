package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

func TestLinePrefixerKeepsLinesWhole(t *testing.T) {
	var out bytes.Buffer
	lw := &lockedWriter{w: &out}
	a := &linePrefixer{prefix: "[node-1] ", out: lw}
	b := &linePrefixer{prefix: "[node-2] ", out: lw}
	a.Write([]byte("hel"))
	b.Write([]byte("one\ntw"))
	a.Write([]byte("lo\nwor"))
	b.Write([]byte("o\n"))
	a.Write([]byte("ld"))
	a.flush()
	b.flush()
	want := "[node-2] one\n[node-1] hello\n[node-2] two\n[node-1] world\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestLinePrefixerConcurrentWriters(t *testing.T) {
	var out bytes.Buffer
	lw := &lockedWriter{w: &out}
	var wg sync.WaitGroup
	for i := range 4 {
		p := &linePrefixer{prefix: fmt.Sprintf("[node-%d] ", i), out: lw}
		wg.Go(func() {
			for range 200 {
				p.Write([]byte("abc"))
				p.Write([]byte("def\n"))
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !regexp.MustCompile(`^\[node-\d\] abcdef$`).MatchString(l) {
			t.Fatalf("torn line %q", l)
		}
	}
}

func TestDevFlags(t *testing.T) {
	o, err := parseDevFlags([]string{"--controllers", "1", "--brokers", "0", "--base-port", "0"}, os.Stderr)
	if err != nil || o.controllers != 1 || o.brokers != 0 || o.basePort != 0 || o.mode != "kraft" {
		t.Fatalf("%+v %v", o, err)
	}
	bad := map[string][]string{
		"no controller nodes":     {"--mode", "zk-legacy", "--controllers", "1"},
		"needs --brokers >= 1":    {"--mode", "zk-legacy", "--brokers", "0"},
		`--mode "raft"`:           {"--mode", "raft"},
		"need --controllers >= 1": {"--controllers", "0"},
		"leaves no room":          {"--base-port", "65530", "--controllers", "3", "--brokers", "3"},
		"unexpected argument":     {"extra"},
		"zk-legacy mode has none": {"--mode", "zk-legacy", "--dynamic"},
	}
	for want, args := range bad {
		if _, err := parseDevFlags(args, os.Stderr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", args, err, want)
		}
	}
	o, err = parseDevFlags([]string{"--mode", "zk-legacy", "--brokers", "2"}, os.Stderr)
	if err != nil || o.controllers != 0 || o.brokers != 2 || o.mode != "zk-legacy" {
		t.Fatalf("zk-legacy: %+v %v", o, err)
	}
	ports, err := devPorts(19090, 3, nil)
	if err != nil || fmt.Sprint(ports) != "[19091 19092 19093]" {
		t.Errorf("node id i gets base+i: %v %v", ports, err)
	}
	ports, err = devPorts(0, 4, newPortPicker())
	if err != nil || len(ports) != 4 {
		t.Fatalf("free ports: %v %v", ports, err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("free ports %v: bad or repeated", ports)
		}
		seen[p] = true
	}
}

// fakeListener is a net.Listener bound to nothing, at a given port.
type fakeListener struct{ port int }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.port} }

// TestPortPickerNeverRepeats: a picker hands out the free ports of its span
// (skipping those something listens on), never one twice across calls (the
// nodes' ports, then their metrics listeners', then a joining broker's), and
// once the span is used up the kernel's picks, again never one handed out
// before.
func TestPortPickerNeverRepeats(t *testing.T) {
	kernel := []int{40001, 32002, 40001, 40003} // the kernel repeats one, and picks one of the span
	p := &portPicker{lo: 32000, hi: 32004, handed: map[int]bool{}, rand: rand.New(rand.NewPCG(1, 2)),
		listen: func(addr string) (net.Listener, error) {
			switch addr {
			case "127.0.0.1:32001":
				return nil, syscall.EADDRINUSE // something else listens there
			case "127.0.0.1:0":
				port := kernel[0]
				kernel = kernel[1:]
				return fakeListener{port}, nil
			}
			_, port, _ := net.SplitHostPort(addr)
			n, _ := strconv.Atoi(port)
			return fakeListener{n}, nil
		}}
	first, err := p.ports(2)
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.ports(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(append(first, second...))); !slices.Equal(got, []int{32000, 32002, 32003}) {
		t.Fatalf("span ports %v %v, want 32000, 32002 and 32003 (32001 is taken)", first, second)
	}
	third, err := p.ports(2)
	if err != nil || !slices.Equal(third, []int{40001, 40003}) {
		t.Fatalf("past the span: %v %v, want the kernel's 40001 and 40003 (not 32002 again, nor 40001 twice)", third, err)
	}
}

// TestDevNodeExitOnTakenPort: a node whose output says its bind failed on
// EADDRINUSE (Go's own error text, produced here by binding a port twice)
// makes waitReady fail with errDevPortInUse, which kraftd bench retries on
// other ports; a node that exits for another reason does not.
func TestDevNodeExitOnTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, bindErr := net.Listen("tcp", ln.Addr().String())
	if bindErr == nil || !isAddrInUse([]byte(bindErr.Error())) {
		t.Fatalf("second bind: %v, not recognised as EADDRINUSE", bindErr)
	}
	for _, tc := range []struct {
		say   string
		taken bool
	}{{bindErr.Error(), true}, {"some other failure", false}} {
		// A node that prints the line, without a newline, and exits.
		exe := filepath.Join(t.TempDir(), "node")
		script := "#!/bin/sh\nprintf '%s' 'kraftd: " + tc.say + "' >&2\nexit 1\n"
		if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		c, err := newDevCluster(devOptions{controllers: 1, dir: t.TempDir(), mode: "kraft", logLevel: "info",
			startTimeout: 30 * time.Second}, exe, nil, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = c.startAll()
		if err == nil {
			err = c.waitReady()
		}
		c.wg.Wait()
		if !errors.Is(err, errDevNodeExited) || errors.Is(err, errDevPortInUse) != tc.taken {
			t.Errorf("%q: %v, want a node exit, port taken %v", tc.say, err, tc.taken)
		}
	}
}

// devProc is a running `kraftd dev`.
type devProc struct {
	cmd      *exec.Cmd
	out, err *syncBuffer
	done     chan error
	exited   *atomic.Bool
}

func startDev(t *testing.T, bin string, args ...string) *devProc {
	t.Helper()
	p := &devProc{out: &syncBuffer{}, err: &syncBuffer{}}
	p.cmd = exec.Command(bin, append([]string{"dev"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done, p.exited = waitInBackground(p.cmd)
	t.Cleanup(func() {
		if !p.exited.Load() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLine waits until stdout has a line starting with prefix and returns
// the rest of it; it fails if the process exits first.
func (p *devProc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `(.*)$`)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kraftd dev exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", err, prefix, p.out.String(), p.err.String())
		default:
		}
		waitABit()
	}
	t.Fatalf("no %q line\nstdout:\n%s\nstderr:\n%s", prefix, p.out.String(), p.err.String())
	return ""
}

// waitErrLine waits until stderr has a line matching re.
func (p *devProc) waitErrLine(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !re.MatchString(p.err.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr has no line matching %s:\n%s", re, p.err.String())
		}
		waitABit()
	}
}

func (p *devProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("kraftd dev did not exit\nstderr:\n%s", p.err.String())
		return nil
	}
}

// processAlive reports whether pid is still a process (our children are reaped by
// kraftd dev, so an exited one is gone, not a zombie).
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestProcessDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	p := startDev(t, bin, "--controllers", "3", "--brokers", "1", "--base-port", "0",
		"--override", "controller.quorum.election.timeout.ms=300",
		"--override", "controller.quorum.fetch.timeout.ms=600",
		"--override", "controller.quorum.election.backoff.max.ms=200")
	controllers := strings.Split(p.waitLine(t, "controllers: "), ",")
	bootstrap := p.waitLine(t, "bootstrap: ")
	dataDir := p.waitLine(t, "data: ")
	if len(controllers) != 3 || strings.Count(bootstrap, ",") != 0 {
		t.Fatalf("controllers %v bootstrap %q", controllers, bootstrap)
	}
	pids := map[int]int{}
	for _, m := range regexp.MustCompile(`(?m)^node-(\d+): (controller|broker) 127\.0\.0\.1:\d+ pid (\d+)$`).FindAllStringSubmatch(p.out.String(), -1) {
		id, _ := strconv.Atoi(m[1])
		pids[id], _ = strconv.Atoi(m[3])
	}
	if len(pids) != 4 {
		t.Fatalf("want 4 node lines:\n%s", p.out.String())
	}
	if err := tryApiVersions(bootstrap); err != nil {
		t.Fatalf("broker %s: %v", bootstrap, err)
	}
	// Only the quorum is asserted: what a broker serves beyond ApiVersions
	// is not kraftd dev's business.
	waitQuorumLeader(t, bin, controllers, p.err)

	// A node that dies is reported; the others keep running.
	if err := syscall.Kill(pids[4], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.waitErrLine(t, regexp.MustCompile(`(?m)^\[dev\] node 4 \(broker\) exited unexpectedly: signal: killed$`))
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("temporary data dir: %v", err)
	}

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("kraftd dev after SIGINT: %v\nstderr:\n%s", err, p.err.String())
	}
	for id, pid := range pids {
		if processAlive(pid) {
			t.Errorf("node %d (pid %d) outlived kraftd dev", id, pid)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("temporary data dir %s not removed: %v", dataDir, err)
	}
	for _, prefix := range []string{"[node-1] ", "[node-2] ", "[node-3] ", "[node-4] "} {
		if !strings.Contains(p.err.String(), "\n"+prefix) {
			t.Errorf("no log lines prefixed %q", prefix)
		}
	}
}

// waitQuorumLeader polls `kraftd quorum describe --status` on each
// controller in turn until one reports a leader that has committed
// something.
func waitQuorumLeader(t *testing.T, bin string, controllers []string, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for i := 0; time.Now().Before(deadline); i++ {
		out, err := exec.Command(bin, "quorum", "describe", "--status", "--timeout", "2s",
			"--bootstrap-controller", controllers[i%len(controllers)]).CombinedOutput()
		last = string(out)
		if err == nil {
			st := map[string]string{}
			for _, line := range strings.Split(last, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					st[k] = strings.TrimSpace(v)
				}
			}
			id, _ := strconv.Atoi(st["LeaderId"])
			hw, _ := strconv.Atoi(st["HighWatermark"])
			if id >= 1 && id <= len(controllers) && hw > 0 {
				return
			}
		}
		waitABit()
	}
	t.Fatalf("no quorum leader; last answer:\n%s\nlogs:\n%s", last, logs.String())
}

func TestProcessDevStartFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startDev(t, bin, "--controllers", "1", "--brokers", "1", "--base-port", "0", "--dir", dir,
		"--override", "no.such.key=1")
	err := p.wait(t)
	if exitCode(err) != exitError {
		t.Fatalf("exit %v, want %d\nstderr:\n%s", err, exitError, p.err.String())
	}
	if !strings.Contains(p.err.String(), "kraftd: dev: node exited during start-up: node ") ||
		!strings.Contains(p.err.String(), `unknown key "no.such.key"`) {
		t.Errorf("stderr:\n%s", p.err.String())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("--dir %s must be kept: %v", dir, err)
	}
}

// startSmallDev starts one controller and one broker and returns the
// running dev process with the node pids by id.
func startSmallDev(t *testing.T, bin string, args ...string) (*devProc, map[int]int) {
	t.Helper()
	p := startDev(t, bin, append([]string{"--controllers", "1", "--brokers", "1", "--base-port", "0"}, args...)...)
	p.waitLine(t, "controllers: ")
	pids := map[int]int{}
	for _, m := range regexp.MustCompile(`(?m)^node-(\d+): \S+ \S+ pid (\d+)$`).FindAllStringSubmatch(p.out.String(), -1) {
		id, _ := strconv.Atoi(m[1])
		pids[id], _ = strconv.Atoi(m[2])
	}
	if len(pids) != 2 {
		t.Fatalf("want 2 node lines:\n%s", p.out.String())
	}
	return p, pids
}

// A node that ignores SIGTERM (here: stopped with SIGSTOP) is killed once
// --stop-timeout has passed, and kraftd dev still exits 0.
func TestProcessDevKillsAfterStopTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	p, pids := startSmallDev(t, buildBinary(t), "--stop-timeout", "300ms")
	if err := syscall.Kill(pids[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.err.String())
	}
	if !strings.Contains(p.err.String(), "[dev] killing node 1: it did not stop in 300ms\n") {
		t.Errorf("stderr:\n%s", p.err.String())
	}
	for id, pid := range pids {
		if processAlive(pid) {
			t.Errorf("node %d (pid %d) outlived kraftd dev", id, pid)
		}
	}
}

// A second Ctrl-C does not wait for the stop timeout.
func TestProcessDevSecondSignalKills(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	p, pids := startSmallDev(t, buildBinary(t), "--stop-timeout", "1h")
	if err := syscall.Kill(pids[2], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.waitErrLine(t, regexp.MustCompile(`(?m)^\[dev\] stopping the nodes`))
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.err.String())
	}
	if !strings.Contains(p.err.String(), "[dev] killing node 2: a second signal came\n") {
		t.Errorf("stderr:\n%s", p.err.String())
	}
	for id, pid := range pids {
		if processAlive(pid) {
			t.Errorf("node %d (pid %d) outlived kraftd dev", id, pid)
		}
	}
}

// TestProcessDevDynamic: `kraftd dev --dynamic` grows a dynamic quorum from one
// standalone controller: when it prints the addresses, DescribeQuorum lists the
// three controllers as voters with their directory ids, and the broker (which
// found the quorum through controller.quorum.bootstrap.servers) creates a topic.
func TestProcessDevDynamic(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	p := startDev(t, bin, "--controllers", "3", "--brokers", "1", "--base-port", "0", "--dynamic",
		"--override", "controller.quorum.election.timeout.ms=300",
		"--override", "controller.quorum.fetch.timeout.ms=600")
	controllers := strings.Split(p.waitLine(t, "controllers: "), ",")
	bootstrap := p.waitLine(t, "bootstrap: ")
	dataDir := p.waitLine(t, "data: ")
	var want []string
	for id := 1; id <= 3; id++ {
		m, err := app.ReadMetaProperties(filepath.Join(dataDir, fmt.Sprintf("node-%d", id)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d:%s", id, m.DirectoryID))
	}
	if keys, err := voterKeys(controllers[2]); err != nil || !slices.Equal(keys, want) {
		t.Fatalf("voters %v (%v), want %v\nstderr:\n%s", keys, err, want, p.err.String())
	}
	createTopicRF(t, bootstrap, "on-a-dynamic-quorum", 1)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("kraftd dev after SIGINT: %v", err)
	}
}
