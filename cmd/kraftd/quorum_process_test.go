package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a child's output; the test reads it while the child runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// controllerProc is one `kraftd --process-roles controller` process of a test quorum.
type controllerProc struct {
	id   int
	port int
	dir  string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
	// exited is set once the process has been waited for.
	exited *atomic.Bool
}

type processQuorum struct {
	t      *testing.T
	bin    string
	voters string
	procs  map[int]*controllerProc
}

func newProcessQuorum(t *testing.T, bin string, n int) *processQuorum {
	q := &processQuorum{t: t, bin: bin, procs: map[int]*controllerProc{}}
	var vs []string
	for id := 1; id <= n; id++ {
		p := &controllerProc{id: id, port: freePort(t), dir: t.TempDir()}
		q.procs[id] = p
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", id, p.port))
	}
	q.voters = strings.Join(vs, ",")
	for id := range q.procs {
		q.start(id)
	}
	t.Cleanup(func() {
		for _, p := range q.procs {
			if p.cmd != nil && !p.exited.Load() {
				p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	return q
}

func (q *processQuorum) start(id int) {
	p := q.procs[id]
	p.out = &syncBuffer{}
	p.cmd = exec.Command(q.bin,
		"--node-id", strconv.Itoa(id), "--process-roles", "controller",
		"--listeners", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p.port),
		"--controller-listener-names", "CONTROLLER",
		"--controller-quorum-voters", q.voters,
		"--log-dirs", p.dir, "--cluster-id", testClusterID,
		"--override", "controller.quorum.election.timeout.ms=300",
		"--override", "controller.quorum.fetch.timeout.ms=600",
		"--override", "controller.quorum.election.backoff.max.ms=200",
		"--log-format", "json")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		q.t.Fatal(err)
	}
	p.done, p.exited = waitInBackground(p.cmd)
}

// describe runs `kraftd quorum describe --status` against node id and parses it.
func (q *processQuorum) describe(id int) (map[string]string, error) {
	out, err := exec.Command(q.bin, "quorum", "describe", "--status", "--timeout", "2s",
		"--bootstrap-controller", fmt.Sprintf("127.0.0.1:%d", q.procs[id].port)).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields, nil
}

// waitLeader polls describe on the live nodes until one reports a leader with a high
// watermark that is not -1, and returns the status.
func (q *processQuorum) waitLeader(exclude int, minEpoch int) map[string]string {
	q.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for id, p := range q.procs {
			if id == exclude || p.exited.Load() {
				continue
			}
			st, err := q.describe(id)
			if err != nil {
				continue
			}
			epoch, _ := strconv.Atoi(st["LeaderEpoch"])
			hw, _ := strconv.Atoi(st["HighWatermark"])
			if epoch >= minEpoch && hw > 0 {
				return st
			}
		}
		waitABit()
	}
	for id, p := range q.procs {
		q.t.Logf("node %d output:\n%s", id, p.out.String())
	}
	q.t.Fatalf("no leader with epoch >= %d", minEpoch)
	return nil
}

// waitABit paces polling of other processes; it is not a readiness wait by itself.
func waitABit() { <-time.After(50 * time.Millisecond) }

func TestProcessQuorumFailoverAndTornTail(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	q := newProcessQuorum(t, bin, 3)
	st := q.waitLeader(0, 1)
	leader, _ := strconv.Atoi(st["LeaderId"])
	epoch, _ := strconv.Atoi(st["LeaderEpoch"])
	if !regexp.MustCompile(`^\[\{"id": 1, "directoryId": null, "endpoints": \["CONTROLLER://127\.0\.0\.1:\d+"\]\}, `).MatchString(st["CurrentVoters"]) {
		t.Fatalf("CurrentVoters line: %q", st["CurrentVoters"])
	}

	// kill -9 the leader: the other two elect a new leader in a higher epoch.
	lp := q.procs[leader]
	lp.cmd.Process.Signal(syscall.SIGKILL)
	<-lp.done
	st2 := q.waitLeader(leader, epoch+1)
	newLeader, _ := strconv.Atoi(st2["LeaderId"])
	if newLeader == leader {
		t.Fatalf("killed node %d still reported as leader", leader)
	}

	// Tear the tail of the killed node's active segment, as a crash mid-write would,
	// then restart it: it must repair the tail and catch up to the new leader.
	seg := filepath.Join(lp.dir, "__cluster_metadata-0", "00000000000000000000.log")
	info, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 200, 1, 2, 3}) // half a batch header
	f.Close()
	q.start(leader)
	hw2, _ := strconv.Atoi(st2["HighWatermark"])
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur := q.waitLeader(leader, epoch+1)
		if strings.Contains(cur["CurrentVoters"], fmt.Sprintf(`"id": %d`, leader)) {
			out, err := exec.Command(bin, "quorum", "describe", "--replication", "--bootstrap-controller",
				fmt.Sprintf("127.0.0.1:%d", q.procs[newLeader].port)).CombinedOutput()
			if err == nil && caughtUp(string(out), leader, hw2) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node %d did not catch up; its output:\n%s", leader, lp.out.String())
		}
		waitABit()
	}
	if !strings.Contains(lp.out.String(), "truncat") {
		t.Errorf("restarted node did not log the torn-tail repair; output:\n%s", lp.out.String())
	}
	if info.Size() == 0 {
		t.Fatal("segment was empty before the crash")
	}
}

// caughtUp reports whether the --replication table shows node id at or past offset.
func caughtUp(table string, id, offset int) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == strconv.Itoa(id) {
			leo, _ := strconv.Atoi(f[2])
			return leo >= offset
		}
	}
	return false
}
