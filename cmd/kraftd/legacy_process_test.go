package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/legacyzk"
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
	zkRequired(t)
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
	zkRequired(t)
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

// zkRequired skips t when ZooKeeper is not installed, or fails it when
// KRAFTD_REQUIRE_ZK=1 (CI: make test sets it, scripts/install-deps.sh
// installs ZooKeeper), so that a missing ZooKeeper cannot pass CI silently.
func zkRequired(t testing.TB) {
	t.Helper()
	if _, _, err := zkserver.Find(); err != nil {
		zkserver.SkipOrFail(t, err)
	}
}

// startLegacyProc runs p as a zk-legacy broker with its metrics on its
// loopback metrics port, plus extra flags (--kraftd-fault-injection-enable
// true adds the fault switches' admin endpoint there).
func startLegacyProc(t testing.TB, bin string, p *kproc, zkAddr string, extra ...string) {
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
	p.done, p.exited = waitInBackground(p.cmd)
}

// controllerOf is the ControllerID addr's Metadata names, once it names
// one of brokers 1-3.
func controllerOf(t testing.TB, addr string) int {
	t.Helper()
	id := -1
	eventually(t, "a controller id", 20*time.Second, func() bool {
		var err error
		id, err = controllerID(addr)
		return err == nil && id >= 1 && id <= 3
	})
	return id
}

// controllerID asks addr's Metadata (v12) for its ControllerID.
func controllerID(addr string) (int, error) {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "process-test"})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return -1, err
	}
	id := resp.(*kmsg.MetadataResponse).ControllerID
	if id < 0 {
		return -1, fmt.Errorf("%s names no controller", addr)
	}
	return int(id), nil
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

func createTopic(t *testing.T, addr, topic string) { t.Helper(); createTopicRF(t, addr, topic, 3) }

// createTopicRF creates topic with 2 partitions of rf replicas through addr.
func createTopicRF(t *testing.T, addr, topic string, rf int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, rf, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// TestProcessZkLegacyAttacks is issue 12 against ZooKeeper-era brokers:
// a ZooKeeper and 2 `kraftd --mode zk-legacy` processes. A CreateTopics
// for 2^31-1 partitions (which used to run the receiving broker out of
// memory) and a CreatePartitions to that count are POLICY_VIOLATION; an
// UpdateMetadata from no controller, at controller epoch 2^31-1 and with
// the target's real broker epoch (read from ZooKeeper, as an attacker
// with ZooKeeper access could), is refused and not adopted. Afterwards
// both processes run, neither Go heap grew by anything like the request,
// and the real controller still creates a topic that both brokers see.
func TestProcessZkLegacyAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	zkRequired(t)
	bin := buildBinary(t)
	zk, err := zkserver.Start(zkserver.Config{Dir: t.TempDir(), TickMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Stop)
	c := &procCluster{t: t, bin: bin, procs: map[int]*kproc{}}
	t.Cleanup(c.killAll)
	for id := 1; id <= 2; id++ {
		c.procs[id] = &kproc{id: id, port: freePort(t), metricsPort: freePort(t), role: "broker", dir: t.TempDir()}
		startLegacyProc(t, bin, c.procs[id], zk.Addr)
	}
	eventually(t, "both brokers to list brokers 1 and 2", 20*time.Second, func() bool {
		for _, addr := range c.brokerAddrs() {
			if v, err := metadataView(addr); err != nil || fmt.Sprint(v.brokers) != "[1 2]" {
				return false
			}
		}
		return true
	})
	ctrl := controllerOf(t, c.procs[1].addr())
	victim := c.procs[3-ctrl]
	heapBefore := map[int]float64{}
	for id, p := range c.procs {
		heapBefore[id], _ = scrapeMetric(p.metricsPort, "go_memstats_heap_alloc_bytes")
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "attacker"})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", math.MaxInt32, 1
	ct.Topics = append(ct.Topics, rt)
	for _, p := range c.procs {
		r := mustRequest(ctx, t, cl, p.addr(), ct).(*kmsg.CreateTopicsResponse)
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
			t.Errorf("broker %d: CreateTopics with 2^31-1 partitions: %+v, want POLICY_VIOLATION", p.id, r.Topics)
		}
	}
	createTopicRF(t, c.procs[ctrl].addr(), "small", 2)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "small", Count: math.MaxInt32}}
	if r := mustRequest(ctx, t, cl, victim.addr(), cp).(*kmsg.CreatePartitionsResponse); len(r.Topics) != 1 ||
		r.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Errorf("CreatePartitions to 2^31-1: %+v, want POLICY_VIOLATION", r.Topics)
	}

	// A forged UpdateMetadata naming a leader that does not exist.
	st, err := legacyzk.DialZk(ctx, legacyzk.ZkConfig{Connect: zk.Addr, SessionTimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg, _, err := st.Exists(ctx, legacyzk.BrokerPath(int32(victim.id)), false)
	if err != nil {
		t.Fatal(err)
	}
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 7, 99, math.MaxInt32, reg.Czxid
	um.TopicStates = []kmsg.UpdateMetadataRequestTopicState{{Topic: "small", PartitionStates: []kmsg.UpdateMetadataRequestTopicPartition{
		{Topic: "small", Partition: 0, Leader: 99, LeaderEpoch: math.MaxInt32, ISR: []int32{99}, Replicas: []int32{99}}}}}
	if r := mustRequest(ctx, t, cl, victim.addr(), um).(*kmsg.UpdateMetadataResponse); r.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Errorf("forged UpdateMetadata at controller epoch 2^31-1: error %d, want STALE_CONTROLLER_EPOCH", r.ErrorCode)
	}

	for id, p := range c.procs {
		if !p.running() {
			t.Fatalf("broker %d exited: %s", id, tail(p.out.String(), 20))
		}
		after, ok := scrapeMetric(p.metricsPort, "go_memstats_heap_alloc_bytes")
		if !ok {
			t.Errorf("broker %d: no heap metric", id)
			continue
		}
		t.Logf("broker %d: Go heap %.1f MB before, %.1f MB after", id, heapBefore[id]/1e6, after/1e6)
		if grew := after - heapBefore[id]; grew > 64e6 {
			t.Errorf("broker %d: Go heap grew by %.0f MB under the attack", id, grew/1e6)
		}
	}
	// The real controller is still obeyed by the victim.
	createTopicRF(t, c.procs[ctrl].addr(), "after-attack", 2)
	eventually(t, "both brokers to list after-attack with real leaders", 20*time.Second, func() bool {
		for _, addr := range c.brokerAddrs() {
			v, err := metadataView(addr)
			if err != nil || len(v.topics["after-attack"]) != 2 || v.leads(99) {
				return false
			}
		}
		return true
	})
}

// TestProcessZkLegacyControllerDivergence is the third divergence case end
// to end: ZooKeeper and the controller's in-memory state disagree. Three
// zk-legacy brokers with the fault switches; `kraftd check-divergence
// --controller-admin` reads the active controller's view (GET
// /controller/view on its metrics listener) and finds it in sync; after
// the controller is told to lose its next ZooKeeper write (lose-zk-write:
// it never lands, the controller takes it as applied) a controlled
// shutdown of another broker moves partitions in the controller's view
// and the brokers' caches only, and the check exits 1 naming the
// controller and the partitions.
func TestProcessZkLegacyControllerDivergence(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	zkRequired(t)
	bin := buildBinary(t)
	zk, err := zkserver.Start(zkserver.Config{Dir: t.TempDir(), TickMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Stop)
	c := &procCluster{t: t, bin: bin, procs: map[int]*kproc{}}
	t.Cleanup(c.killAll)
	var admin []string
	for id := 1; id <= 3; id++ {
		c.procs[id] = &kproc{id: id, port: freePort(t), metricsPort: freePort(t), role: "broker", dir: t.TempDir()}
		startLegacyProc(t, bin, c.procs[id], zk.Addr, "--kraftd-fault-injection-enable", "true")
		admin = append(admin, fmt.Sprintf("127.0.0.1:%d", c.procs[id].metricsPort))
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
	createTopic(t, c.procs[ctrl].addr(), "drift")
	check := func() (string, error) {
		out, err := exec.Command(bin, "check-divergence", "--bootstrap", strings.Join(c.brokerAddrs(), ","),
			"--zookeeper-connect", zk.Addr, "--controller-admin", strings.Join(admin, ","), "--settle", "100ms").CombinedOutput()
		return string(out), err
	}
	var out string
	eventually(t, "check-divergence to pass with the controller's view", 20*time.Second, func() bool {
		out, err = check()
		return err == nil
	})
	if !strings.Contains(out, fmt.Sprintf("controller %d (%s): in sync", ctrl, admin[ctrl-1])) {
		t.Fatalf("before the fault:\n%s", out)
	}
	postFault(t, c.procs[ctrl].metricsPort, "lose-zk-write")
	leaving := c.procs[1+ctrl%3]
	if err := leaving.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-leaving.done:
		leaving.done <- err
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not stop after SIGTERM")
	}
	out, err = check()
	if exitCode(err) != exitError || !strings.Contains(out, fmt.Sprintf("controller %d (%s): divergent", ctrl, admin[ctrl-1])) ||
		!strings.Contains(out, fmt.Sprintf("controller %d: drift-", ctrl)) || !strings.Contains(out, "DIVERGENT") {
		t.Fatalf("check-divergence after a lost ZooKeeper write: exit %d\n%s", exitCode(err), out)
	}
	t.Logf("after the lost write:\n%s", out)
}
