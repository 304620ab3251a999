package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/legacyzk/zkserver"
	"github.com/kraftd/kraftd/protocol"
)

// TestProcessZkLegacyDivergence is issue 7's divergence case end to end
// with real processes: a ZooKeeper and 3 `kraftd --mode zk-legacy`
// brokers; the controller is told over its admin endpoint (POST /faults on
// metrics.listener) to drop UpdateMetadata to one broker; after a
// CreateTopics `kraftd check-divergence` exits 1 naming that broker; a
// SIGTERM of the controller (controlled shutdown, then failover: the next
// controller pushes everything) heals it and the check exits 0.
func TestProcessZkLegacyDivergence(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	if _, _, err := zkserver.Find(); errors.Is(err, zkserver.ErrNotInstalled) {
		t.Skip(err)
	}
	bin := buildBinary(t)
	zk, err := zkserver.Start(zkserver.Config{Dir: t.TempDir(), TickMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Stop)
	c := &procCluster{t: t, bin: bin, procs: map[int]*kproc{}}
	t.Cleanup(c.killAll) // before zk.Stop: cleanups run last first
	for id := 1; id <= 3; id++ {
		c.procs[id] = &kproc{id: id, port: freePort(t), metricsPort: freePort(t), role: "broker", dir: t.TempDir()}
		startLegacyProc(t, bin, c.procs[id], zk.Addr, "--kraftd-fault-injection-enable", "true")
	}
	eventually(t, "every broker to list brokers 1, 2 and 3", 20*time.Second, func() bool {
		for _, addr := range c.brokerAddrs() {
			if v, err := metadataView(addr); err != nil || fmt.Sprint(v.brokers) != "[1 2 3]" {
				return false
			}
		}
		return true
	})
	ctrl := controllerOf(t, c.procs[1].addr())
	deaf := 1 + ctrl%3 // another broker
	postFault(t, c.procs[ctrl].metricsPort, fmt.Sprintf("drop-update-metadata-to=%d", deaf))
	createTopic(t, c.procs[ctrl].addr(), "drift")

	check := func() (string, error) {
		out, err := exec.Command(bin, "check-divergence", "--bootstrap", strings.Join(c.brokerAddrs(), ","),
			"--zookeeper-connect", zk.Addr, "--settle", "100ms").CombinedOutput()
		return string(out), err
	}
	out, err := check()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError ||
		!strings.Contains(out, fmt.Sprintf("broker %d (%s): divergent", deaf, c.procs[deaf].addr())) ||
		!strings.Contains(out, "drift") || strings.Count(out, ": in sync\n") != 2 {
		t.Fatalf("check-divergence with a deaf broker: %v\n%s", err, out)
	}

	p := c.procs[ctrl]
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("controller exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the controller did not stop after SIGTERM")
	}
	eventually(t, "check-divergence to pass after the failover", 20*time.Second, func() bool {
		out, err = check()
		return err == nil
	})
	if strings.Count(out, ": in sync\n") != 2 || !strings.Contains(out, "no divergence") {
		t.Fatalf("after failover:\n%s", out)
	}
}

// TestProcessZkLegacyFaultsOff: a zk-legacy broker started without
// --kraftd-fault-injection-enable serves its metrics but no POST /faults;
// with it, a metrics listener on all interfaces stops the start naming the
// setting.
func TestProcessZkLegacyFaultsOff(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "--mode", "zk-legacy", "--node-id", "1", "--zookeeper-connect", "127.0.0.1:1",
		"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--metrics-listener", "0.0.0.0:0", "--kraftd-fault-injection-enable", "true").CombinedOutput()
	if exitCode(err) != exitError || !strings.Contains(string(out), "kraftd.fault.injection.enable") ||
		!strings.Contains(string(out), "loopback") {
		t.Fatalf("fault switches on 0.0.0.0: exit %d\n%s", exitCode(err), out)
	}
	if _, _, err := zkserver.Find(); errors.Is(err, zkserver.ErrNotInstalled) {
		t.Skip(err)
	}
	zk, err := zkserver.Start(zkserver.Config{Dir: t.TempDir(), TickMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Stop)
	c := &procCluster{t: t, bin: bin, procs: map[int]*kproc{}}
	t.Cleanup(c.killAll)
	p := &kproc{id: 1, port: freePort(t), metricsPort: freePort(t), role: "broker", dir: t.TempDir()}
	c.procs[1] = p
	startLegacyProc(t, bin, p, zk.Addr)
	base := fmt.Sprintf("http://127.0.0.1:%d", p.metricsPort)
	eventually(t, "the metrics endpoint", 20*time.Second, func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := http.Post(base+"/faults", "text/plain", strings.NewReader("pause-before-push"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /faults without --kraftd-fault-injection-enable: %s", resp.Status)
	}
}

// startLegacyProc runs p as a zk-legacy broker with its metrics on its
// loopback metrics port, plus extra flags (--kraftd-fault-injection-enable
// true adds the fault switches' admin endpoint there).
func startLegacyProc(t *testing.T, bin string, p *kproc, zkAddr string, extra ...string) {
	t.Helper()
	p.out = &syncBuffer{}
	args := []string{"--mode", "zk-legacy", "--node-id", strconv.Itoa(p.id),
		"--listeners", "PLAINTEXT://" + p.addr(), "--log-dirs", p.dir, "--zookeeper-connect", zkAddr,
		"--metrics-listener", fmt.Sprintf("127.0.0.1:%d", p.metricsPort),
		"--override", "zookeeper.session.timeout.ms=4000",
		"--override", "controlled.shutdown.retry.backoff.ms=200", "--log-format", "json"}
	p.cmd = exec.Command(bin, append(args, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan error, 1)
	cmd := p.cmd
	go func() { p.done <- cmd.Wait() }()
}

// controllerOf is the ControllerID addr's Metadata names.
func controllerOf(t *testing.T, addr string) int {
	t.Helper()
	var id int32 = -1
	eventually(t, "a controller id", 20*time.Second, func() bool {
		cl := protocol.NewClient(protocol.ClientConfig{ClientID: "process-test"})
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		resp, err := cl.Request(ctx, addr, req)
		if err == nil {
			id = resp.(*kmsg.MetadataResponse).ControllerID
		}
		return id >= 1 && id <= 3
	})
	return int(id)
}

func postFault(t *testing.T, metricsPort int, fault string) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/faults", metricsPort), "text/plain", strings.NewReader(fault))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /faults %q: %s", fault, resp.Status)
	}
}

func createTopic(t *testing.T, addr, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
}
