package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
)

// dynProc is one kraftd process of a dynamic quorum, run from its own properties
// file as Kafka's quickstart runs kafka-server-start.sh.
type dynProc struct {
	kproc
	file string
}

func newDynProc(t *testing.T, id, port int, role string, bootstrap []string) *dynProc {
	p := &dynProc{kproc: kproc{id: id, port: port, role: role, dir: t.TempDir()}}
	listener := "PLAINTEXT"
	if role == "controller" {
		listener = "CONTROLLER"
	}
	props := fmt.Sprintf("process.roles=%s\nnode.id=%d\nlisteners=%s://%s\ncontroller.listener.names=CONTROLLER\n"+
		"controller.quorum.bootstrap.servers=%s\nlog.dirs=%s\n"+
		"controller.quorum.election.timeout.ms=300\ncontroller.quorum.fetch.timeout.ms=1000\n"+
		"broker.heartbeat.interval.ms=%d\nbroker.session.timeout.ms=%d\n",
		role, id, listener, p.addr(), strings.Join(bootstrap, ","), filepath.Join(p.dir, "data"), procHeartbeatMs, procSessionMs)
	p.file = filepath.Join(p.dir, "server.properties")
	if err := os.WriteFile(p.file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *dynProc) format(t *testing.T, bin string, mode string) {
	t.Helper()
	args := []string{"storage", "format", "--config", p.file, "-t", testClusterID}
	if mode != "" {
		args = append(args, mode)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("node %d: storage format %s: %v\n%s", p.id, mode, err, out)
	}
}

func (p *dynProc) start(t *testing.T, bin string) {
	t.Helper()
	p.out = &syncBuffer{}
	p.cmd = exec.Command(bin, "--config", p.file, "--log-format", "json")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done, p.exited = waitInBackground(p.cmd)
}

func (p *dynProc) kill() {
	if p.running() {
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *dynProc) directoryID(t *testing.T) string {
	t.Helper()
	m, err := app.ReadMetaProperties(filepath.Join(p.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	return m.DirectoryID
}

func (p *dynProc) quorum(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"quorum"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kraftd quorum %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// voterKeys asks addr's quorum leader for the voters as id:directory id.
func voterKeys(addr string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "dyn-test"})
	defer cl.Close()
	q, err := describeQuorum(ctx, cl, addr)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, v := range q.part.CurrentVoters {
		keys = append(keys, fmt.Sprintf("%d:%s", v.ReplicaID, uuidString(v.ReplicaDirectoryID)))
	}
	return keys, nil
}

// TestProcessDynamicQuorum is issue 18's first "done when" with real processes:
// controller 1 formatted --standalone, started with a broker; controllers 2 and 3
// formatted --no-initial-controllers and added with `kraftd quorum
// add-controller`; DescribeQuorum lists three voters with their directory ids;
// after kill -9 of controller 1 another is elected and CreateTopics still works;
// `remove-controller` takes the dead one out; its directory wiped and formatted
// again (a new directory id), it is added back. About 10 s.
func TestProcessDynamicQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	ports := []int{freePort(t), freePort(t), freePort(t), freePort(t)}
	var controllers []string
	for _, port := range ports[:3] {
		controllers = append(controllers, fmt.Sprintf("127.0.0.1:%d", port))
	}
	c1 := newDynProc(t, 1, ports[0], "controller", controllers)
	c2 := newDynProc(t, 2, ports[1], "controller", controllers)
	c3 := newDynProc(t, 3, ports[2], "controller", controllers)
	b4 := newDynProc(t, 4, ports[3], "broker", controllers)
	all := []*dynProc{c1, c2, c3, b4}
	t.Cleanup(func() {
		for _, p := range all {
			p.kill()
			if t.Failed() {
				t.Logf("node %d (%s) output (tail):\n%s", p.id, p.role, tail(p.out.String(), 30))
			}
		}
	})
	c1.format(t, bin, "--standalone")
	c2.format(t, bin, "--no-initial-controllers")
	c3.format(t, bin, "--no-initial-controllers")
	b4.format(t, bin, "")
	for _, p := range all {
		p.start(t, bin)
	}
	eventually(t, "controller 1 leads alone", 20*time.Second, func() bool {
		keys, err := voterKeys(c1.addr())
		return err == nil && slices.Equal(keys, []string{"1:" + c1.directoryID(t)})
	})
	for _, p := range []*dynProc{c2, c3} {
		p.quorum(t, bin, "add-controller", "--bootstrap-controller", c1.addr(), "--command-config", p.file)
	}
	want := []string{"1:" + c1.directoryID(t), "2:" + c2.directoryID(t), "3:" + c3.directoryID(t)}
	if keys, err := voterKeys(c1.addr()); err != nil || !slices.Equal(keys, want) {
		t.Fatalf("voters %v (%v), want %v", keys, err, want)
	}
	var status bytes.Buffer
	if code := runQuorum([]string{"describe", "--status", "--bootstrap-controller", c1.addr()}, &status, os.Stderr); code != exitOK {
		t.Fatalf("quorum describe: %d", code)
	}
	t.Logf("quorum describe --status:\n%s", status.String())

	c1.kill()
	eventually(t, "a new leader among 2 and 3", 20*time.Second, func() bool {
		keys, err := voterKeys(c2.addr())
		return err == nil && slices.Equal(keys, want)
	})
	createTopicRF(t, b4.addr(), "after-failover", 1)

	c2.quorum(t, bin, "remove-controller", "--bootstrap-controller", c2.addr(), "--controller-id", "1",
		"--controller-directory-id", c1.directoryID(t))
	if keys, err := voterKeys(c2.addr()); err != nil || !slices.Equal(keys, want[1:]) {
		t.Fatalf("voters after remove-controller %v (%v), want %v", keys, err, want[1:])
	}
	old := c1.directoryID(t)
	if err := os.RemoveAll(filepath.Join(c1.dir, "data")); err != nil {
		t.Fatal(err)
	}
	c1.format(t, bin, "--no-initial-controllers")
	if c1.directoryID(t) == old {
		t.Fatal("the wiped controller kept its directory id")
	}
	c1.start(t, bin)
	c1.quorum(t, bin, "add-controller", "--bootstrap-controller", c2.addr(), "--command-config", c1.file)
	want[0] = "1:" + c1.directoryID(t)
	slices.Sort(want)
	eventually(t, "the replaced controller is a voter again", 10*time.Second, func() bool {
		keys, err := voterKeys(c2.addr())
		return err == nil && slices.Equal(keys, want)
	})
	// The active controller still works after the voter changes: the quorum's
	// VotersRecords landed between its own batches (it renounced here, with
	// controller.ErrOffsetMismatch, before it took the offsets the quorum returns).
	createTopicRF(t, b4.addr(), "after-voter-changes", 1)
}
