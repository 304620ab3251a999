package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var zeroUUIDText = uuidString([16]byte{})

// newStaticProc is a kraftd process of a static quorum (controller.quorum.voters),
// run from its own properties file.
func newStaticProc(t *testing.T, id, port int, role, voters string) *dynProc {
	p := &dynProc{kproc: kproc{id: id, port: port, role: role, dir: t.TempDir()}}
	listener := "PLAINTEXT"
	if role == "controller" {
		listener = "CONTROLLER"
	}
	props := fmt.Sprintf("process.roles=%s\nnode.id=%d\nlisteners=%s://%s\ncontroller.listener.names=CONTROLLER\n"+
		"controller.quorum.voters=%s\nlog.dirs=%s\n"+
		"controller.quorum.election.timeout.ms=300\ncontroller.quorum.fetch.timeout.ms=1000\n"+
		"broker.heartbeat.interval.ms=%d\nbroker.session.timeout.ms=%d\n",
		role, id, listener, p.addr(), voters, filepath.Join(p.dir, "data"), procHeartbeatMs, procSessionMs)
	p.file = filepath.Join(p.dir, "server.properties")
	if err := os.WriteFile(p.file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProcessStaticQuorumUpgrade is issue 18's second "done when" with real
// processes: three controllers of a static quorum (controller.quorum.voters) and a
// broker, with topics; `kraftd features upgrade --feature kraft.version=1` (after
// the voters reported their directory ids through UpdateRaftVoter; the dry run is
// sent to the broker, which forwards it) makes the voter set dynamic:
// DescribeQuorum then lists the voters with their directory ids, every topic is
// still there, and a fourth controller, formatted --no-initial-controllers, is
// added with `kraftd quorum add-controller --bootstrap-server` (the broker).
func TestProcessStaticQuorumUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	ports := []int{freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)}
	var voters, controllers []string
	for i, port := range ports[:3] {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, port))
		controllers = append(controllers, fmt.Sprintf("127.0.0.1:%d", port))
	}
	c1 := newStaticProc(t, 1, ports[0], "controller", strings.Join(voters, ","))
	c2 := newStaticProc(t, 2, ports[1], "controller", strings.Join(voters, ","))
	c3 := newStaticProc(t, 3, ports[2], "controller", strings.Join(voters, ","))
	b4 := newStaticProc(t, 4, ports[3], "broker", strings.Join(voters, ","))
	c5 := newDynProc(t, 5, ports[4], "controller", controllers)
	all := []*dynProc{c1, c2, c3, b4, c5}
	t.Cleanup(func() {
		for _, p := range all {
			p.kill()
			if t.Failed() {
				t.Logf("node %d (%s) output (tail):\n%s", p.id, p.role, tail(p.out.String(), 30))
			}
		}
	})
	for _, p := range all[:4] {
		p.format(t, bin, "")
		p.start(t, bin)
	}
	c5.format(t, bin, "--no-initial-controllers")
	eventually(t, "a static leader", 20*time.Second, func() bool {
		keys, err := voterKeys(c1.addr())
		return err == nil && len(keys) == 3
	})
	topics := []string{"before-upgrade-a", "before-upgrade-b"}
	for _, topic := range topics {
		createTopicRF(t, b4.addr(), topic, 1)
	}
	if keys, _ := voterKeys(c1.addr()); !slices.Equal(keys, []string{"1:" + zeroUUIDText, "2:" + zeroUUIDText, "3:" + zeroUUIDText}) {
		t.Fatalf("voters of the static quorum %v, want no directory ids", keys)
	}

	// The voters report to the leader in the background: until all did, the dry run
	// says which one has not. It goes through the broker, which forwards it.
	eventually(t, "a dry run of the upgrade passes", 10*time.Second, func() bool {
		out, err := exec.Command(bin, "features", "upgrade", "--bootstrap-server", b4.addr(),
			"--feature", "kraft.version=1", "--dry-run").CombinedOutput()
		return err == nil && strings.Contains(string(out), "kraft.version can be upgraded to 1")
	})
	out, err := exec.Command(bin, "features", "upgrade", "--bootstrap-controller", c1.addr(),
		"--feature", "kraft.version=1").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kraft.version was upgraded to 1.") {
		t.Fatalf("features upgrade: %v\n%s", err, out)
	}
	want := []string{"1:" + c1.directoryID(t), "2:" + c2.directoryID(t), "3:" + c3.directoryID(t)}
	eventually(t, "the voters with their directory ids", 10*time.Second, func() bool {
		keys, err := voterKeys(c2.addr())
		return err == nil && slices.Equal(keys, want)
	})
	out, err = exec.Command(bin, "features", "describe", "--bootstrap-controller", c3.addr()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1") {
		t.Fatalf("features describe: %v\n%s", err, out)
	}

	c5.start(t, bin)
	// Added through the broker, which forwards DescribeQuorum and AddRaftVoter.
	c5.quorum(t, bin, "add-controller", "--bootstrap-server", b4.addr(), "--command-config", c5.file)
	want = append(want, "5:"+c5.directoryID(t))
	eventually(t, "controller 5 is a voter", 10*time.Second, func() bool {
		keys, err := voterKeys(c3.addr())
		return err == nil && slices.Equal(keys, want)
	})
	createTopicRF(t, b4.addr(), "after-upgrade", 1)
	eventually(t, "every topic on the broker", 10*time.Second, func() bool {
		v, err := metadataView(b4.addr())
		if err != nil {
			return false
		}
		for _, topic := range append(topics, "after-upgrade") {
			if _, ok := v.topics[topic]; !ok {
				return false
			}
		}
		return true
	})
}
