package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pythonAdmin drives the scenario with kafka-python's KafkaAdminClient
// (Debian's python3-kafka) through testdata/kafka_python_admin.py: one
// long-lived Python process, so the client and its connections live across
// steps (and across a controller failover) as they would in a real program.
//
// Goroutines: one reader turns the script's stdout into lines; it ends
// when the process exits, and the test cleanup waits for it.
type pythonAdmin struct {
	mu     sync.Mutex // one command in flight
	stdin  io.WriteCloser
	lines  <-chan string
	broken error // set when an answer did not arrive in time: later answers would be off by one
}

// systemPython is the interpreter Debian's python3-kafka installs for; a
// python3 earlier on PATH (pyenv, venv) would not see the package.
const systemPython = "/usr/bin/python3"

// pythonUsable reports whether the system Python can import kafka-python.
func pythonUsable() bool {
	return exec.Command(systemPython, "-c", "import kafka").Run() == nil
}

func newPythonAdmin(t *testing.T, c *cluster) admin {
	if !pythonUsable() {
		t.Skipf("kafka-python not importable by %s (make deps installs python3-kafka)", systemPython)
	}
	cmd := exec.Command(systemPython, "-u", "testdata/kafka_python_admin.py", strings.Join(c.bootstrap(), ","))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	})
	p := &pythonAdmin{stdin: stdin, lines: lines}
	t.Cleanup(func() {
		stdin.Close() // the script's loop ends at EOF...
		// ...unless it is stuck in a call (kafka-python waits on some
		// futures without a deadline): then it is killed.
		grace := time.AfterFunc(5*time.Second, func() { cmd.Process.Kill() })
		for range lines {
		}
		wg.Wait()
		grace.Stop()
		if err := cmd.Wait(); err != nil {
			t.Logf("kafka-python process: %v; stderr:\n%s", err, stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ready struct{ Ready bool }
	if err := p.read(ctx, &ready); err != nil || !ready.Ready {
		cmd.Process.Kill()
		t.Fatalf("kafka-python admin did not start: %v; stderr:\n%s", err, stderr.String())
	}
	return p
}

// pyAnswer is the common part of every answer: a Kafka error code (>0), or
// -1 for a Python-side failure, with its text.
type pyAnswer struct {
	Errno int16  `json:"errno"`
	Error string `json:"error"`
}

func (a pyAnswer) err() error {
	switch {
	case a.Errno > 0:
		return kafkaError(a.Errno, errors.New(a.Error))
	case a.Errno < 0:
		return fmt.Errorf("kafka-python: %s", a.Error)
	}
	return nil
}

func (p *pythonAdmin) read(ctx context.Context, out any) error {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return errors.New("kafka-python process exited")
		}
		return json.Unmarshal([]byte(line), out)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call sends one command and decodes the answer into out (which should
// embed pyAnswer) and returns the answer's error.
func (p *pythonAdmin) call(ctx context.Context, cmd map[string]any, out any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return p.broken
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return err
	}
	err = p.read(ctx, out)
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		p.broken = fmt.Errorf("kafka-python: an earlier %v got no answer in time", cmd["op"])
	}
	return err
}

func (p *pythonAdmin) simple(ctx context.Context, cmd map[string]any) error {
	var a pyAnswer
	if err := p.call(ctx, cmd, &a); err != nil {
		return err
	}
	return a.err()
}

type pyCluster struct {
	pyAnswer
	Brokers      []int32 `json:"brokers"`
	ControllerID int32   `json:"controller_id"`
	ClusterID    string  `json:"cluster_id"`
}

func (p *pythonAdmin) cluster(ctx context.Context) (clusterView, error) {
	var a pyCluster
	if err := p.call(ctx, map[string]any{"op": "brokers"}, &a); err != nil {
		return clusterView{}, err
	}
	if err := a.err(); err != nil {
		return clusterView{}, err
	}
	return clusterView{clusterID: a.ClusterID, brokers: sortedIDs(a.Brokers), controllerID: a.ControllerID}, nil
}

func (p *pythonAdmin) brokers(ctx context.Context) ([]int32, int32, error) {
	v, err := p.cluster(ctx)
	return v.brokers, v.controllerID, err
}

// describeCluster is KafkaAdminClient.describe_cluster, which kafka-python
// 2.0.2 answers from a Metadata request.
func (p *pythonAdmin) describeCluster(ctx context.Context) (clusterView, error) {
	return p.cluster(ctx)
}

func (p *pythonAdmin) createTopic(ctx context.Context, topic string, partitions int32, rf int16) error {
	return p.simple(ctx, map[string]any{"op": "create_topic", "topic": topic,
		"partitions": partitions, "replication_factor": rf})
}

func (p *pythonAdmin) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	var a struct {
		pyAnswer
		Found   bool             `json:"found"`
		Leaders map[string]int32 `json:"leaders"`
	}
	if err := p.call(ctx, map[string]any{"op": "leaders", "topic": topic}, &a); err != nil {
		return nil, err
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	if !a.Found {
		return nil, errTopicAbsent
	}
	out := map[int32]int32{}
	for k, l := range a.Leaders {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, err
		}
		out[int32(p)] = l
	}
	return out, nil
}

func (p *pythonAdmin) createPartitions(ctx context.Context, topic string, total int32) error {
	return p.simple(ctx, map[string]any{"op": "create_partitions", "topic": topic, "total": total})
}

func (p *pythonAdmin) deleteTopic(ctx context.Context, topic string) error {
	return p.simple(ctx, map[string]any{"op": "delete_topic", "topic": topic})
}
