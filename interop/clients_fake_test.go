package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The scenario's self-test: an in-memory "client" that answers like a
// correct cluster passes every step, and each way of answering wrongly
// fails exactly the step that should catch it. Without this, "pass" in
// the table could mean a step that checks nothing.

// fakeAdmin models a 3-broker cluster's admin answers; flaw picks one way
// to answer wrongly.
type fakeAdmin struct {
	mu     sync.Mutex
	topics map[string]int32 // name -> partitions
	flaw   string
}

func (f *fakeAdmin) brokers(context.Context) ([]int32, int32, error) {
	switch f.flaw {
	case "missing broker":
		return []int32{4, 5}, 4, nil
	case "controller is a controller node":
		return []int32{4, 5, 6}, 1, nil
	}
	return []int32{4, 5, 6}, 5, nil
}

func (f *fakeAdmin) createTopic(_ context.Context, topic string, partitions int32, rf int16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.flaw == "wrong error code" && rf > 3:
		return kafkaError(kerr.InvalidRequest.Code, fmt.Errorf("fake"))
	case rf > 3:
		return kafkaError(kerr.InvalidReplicationFactor.Code, fmt.Errorf("fake"))
	case f.topics[topic] > 0 && f.flaw != "duplicate accepted":
		return kafkaError(kerr.TopicAlreadyExists.Code, fmt.Errorf("fake"))
	}
	f.topics[topic] = partitions
	return nil
}

func (f *fakeAdmin) leaders(_ context.Context, topic string) (map[int32]int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.topics[topic]
	if !ok {
		return nil, errTopicAbsent
	}
	out := map[int32]int32{}
	for p := range n {
		out[p] = 4 + p%3
		if f.flaw == "one leader" {
			out[p] = 4
		}
	}
	return out, nil
}

func (f *fakeAdmin) describeCluster(ctx context.Context) (clusterView, error) {
	ids, ctrl, _ := f.brokers(ctx)
	id := "fake-cluster"
	if f.flaw == "wrong cluster id" {
		id = "other"
	}
	return clusterView{clusterID: id, brokers: ids, controllerID: ctrl}, nil
}

func (f *fakeAdmin) createPartitions(_ context.Context, topic string, total int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flaw != "partitions not grown" {
		f.topics[topic] = total
	}
	return nil
}

func (f *fakeAdmin) deleteTopic(_ context.Context, topic string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[topic]; !ok {
		if f.flaw == "unknown delete accepted" {
			return nil
		}
		return kafkaError(kerr.UnknownTopicOrPartition.Code, fmt.Errorf("fake"))
	}
	if f.flaw != "delete ignored" {
		delete(f.topics, topic)
	}
	return nil
}

// recorder is a reporter that keeps the failures.
type recorder struct {
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestScenarioCatchesWrongAnswers(t *testing.T) {
	cases := []struct {
		flaw string
		fail []step // the steps that must fail; every other step passes
	}{
		{"", nil},
		{"missing broker", []step{stepListBrokers, stepDescribeCluster}},
		{"controller is a controller node", []step{stepController, stepDescribeCluster}},
		{"one leader", []step{stepLeadersSpread}},
		{"wrong cluster id", []step{stepDescribeCluster}},
		{"partitions not grown", []step{stepCreatePartitions}},
		{"duplicate accepted", []step{stepErrTopicExists}},
		{"wrong error code", []step{stepErrReplication}},
		{"unknown delete accepted", []step{stepErrUnknownTopic}},
		{"delete ignored", []step{stepDeleteTopic}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.flaw, " ", "-"), func(t *testing.T) {
			helper := &fakeAdmin{topics: map[string]int32{}}
			env := scenarioEnv{clusterID: "fake-cluster", brokerIDs: []int32{4, 5, 6}, helper: helper,
				timeout: 200 * time.Millisecond}
			var rec recorder
			out := runScenario(&rec, env, "fake", &fakeAdmin{topics: map[string]int32{}, flaw: tc.flaw})
			for _, s := range scenarioSteps {
				want := outcomePass
				if slices.Contains(tc.fail, s) {
					want = outcomeFail
				}
				if out[s] != want {
					t.Errorf("step %q: %s, want %s (reported: %q)", s, out[s], want, rec.errors)
				}
			}
		})
	}
}
