package legacyzk

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// capCluster is one in-memory broker (so also the controller) whose admin
// requests are capped at maxRecords records.
func capCluster(t *testing.T, maxRecords int, ids ...int32) *cluster {
	t.Helper()
	srv := NewMemServer()
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	for _, id := range ids {
		b, err := NewBroker(context.Background(), Config{NodeID: id, Dial: c.dial, Logger: testLogger(t),
			RetryBackoffMs: 20, MaxRecordsPerUserOp: maxRecords})
		if err != nil {
			t.Fatal(err)
		}
		c.brokers[id] = b
		t.Cleanup(func() { b.Close() })
	}
	return c
}

func createReq(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly, req.Topics = 7, 5000, validateOnly, topics
	return req
}

func newTopic(name string, partitions int32, rf int16) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	return rt
}

func isExcessivelyLarge(code int16, msg *string) bool {
	return code == kerr.PolicyViolation.Code && msg != nil && *msg == excessivelyLargeMessage
}

// Issue 12, zk-legacy: a CreateTopics for 2147483647 partitions used to
// make the receiving broker allocate a 2^31-entry assignment map (about
// 51 GB: "out of memory" under the race detector) before writing
// ZooKeeper. Counts are now checked against Config.MaxRecordsPerUserOp
// first, as the KRaft controller does: POLICY_VIOLATION for every topic,
// validate-only too, and nothing is written.
func TestCreateTopicsOverRecordCap(t *testing.T) {
	c := capCluster(t, 10, 1)
	ctx := context.Background()
	b := c.brokers[1]
	c.controller()
	for _, validateOnly := range []bool{true, false} {
		for _, req := range []*kmsg.CreateTopicsRequest{
			createReq(validateOnly, newTopic("huge", math.MaxInt32, 1)),
			createReq(validateOnly, newTopic("huge", 10, 1)), // 11 records: the topic and 10 partitions
			createReq(validateOnly, newTopic("a", 4, 1), newTopic("huge", 5, 1), newTopic("bad/name", math.MaxInt32, 1)),
		} {
			resp, err := b.CreateTopics(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != len(req.Topics) {
				t.Fatalf("%d answers to %d topics", len(resp.Topics), len(req.Topics))
			}
			for _, rt := range resp.Topics {
				if !isExcessivelyLarge(rt.ErrorCode, rt.ErrorMessage) || rt.NumPartitions != -1 {
					t.Errorf("validateOnly %v, %s: error %d %v, partitions %d; want POLICY_VIOLATION", validateOnly,
						rt.Topic, rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions)
				}
			}
		}
	}
	if kids, _ := c.admin.Children(ctx, BrokerTopicsPath, false); len(kids) != 0 {
		t.Fatalf("topics written past the cap: %v", kids)
	}
	// At the cap (a topic, a config and 8 partitions), and a failing topic
	// does not count (Kafka counts the records of the topics that pass).
	ok := newTopic("ok", 8, 1)
	ok.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}
	resp, err := b.CreateTopics(ctx, createReq(false, ok, newTopic("bad/name", 9, 1), newTopic("norf", 9, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if rt := resp.Topics; rt[0].ErrorCode != 0 || rt[0].NumPartitions != 8 ||
		rt[1].ErrorCode != kerr.InvalidTopicException.Code || rt[2].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("at the cap: %+v", rt)
	}
}

// CreatePartitions to 2147483647 used to allocate the same way; now it is
// POLICY_VIOLATION before anything is placed, validate-only too.
func TestCreatePartitionsOverRecordCap(t *testing.T) {
	c := capCluster(t, 10, 1)
	ctx := context.Background()
	b := c.brokers[1]
	c.controller()
	c.createTopic(b, "t", 2, 1)
	other := newTopic("u", 1, 1)
	if resp, _ := b.CreateTopics(ctx, createReq(false, other)); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create u: %d", resp.Topics[0].ErrorCode)
	}
	for _, validateOnly := range []bool{true, false} {
		for _, topics := range [][]kmsg.CreatePartitionsRequestTopic{
			{{Topic: "t", Count: math.MaxInt32}},
			{{Topic: "t", Count: 13}}, // 11 new partitions
			{{Topic: "t", Count: 7}, {Topic: "u", Count: 7}},
		} {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.TimeoutMillis, req.ValidateOnly, req.Topics = 5000, validateOnly, topics
			resp, err := b.CreatePartitions(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != len(topics) {
				t.Fatalf("%d answers to %d topics", len(resp.Topics), len(topics))
			}
			for _, rt := range resp.Topics {
				if !isExcessivelyLarge(rt.ErrorCode, rt.ErrorMessage) {
					t.Errorf("validateOnly %v, %s: error %d %v; want POLICY_VIOLATION", validateOnly, rt.Topic, rt.ErrorCode, rt.ErrorMessage)
				}
			}
		}
	}
	data, _, err := c.admin.Get(ctx, TopicPath("t"), false)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := DecodeTopic("t", data); len(a.Partitions) != 2 {
		t.Fatalf("t has %d partitions in ZooKeeper after refused requests", len(a.Partitions))
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis, req.Topics = 5000, []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 12}}
	if resp, _ := b.CreatePartitions(ctx, req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("10 new partitions (the cap): %d %v", resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	}
}

// DeleteTopics naming more topics than the cap is POLICY_VIOLATION (no
// message, as Kafka's DeleteTopics error response) and marks nothing.
func TestDeleteTopicsOverRecordCap(t *testing.T) {
	c := capCluster(t, 2, 1)
	ctx := context.Background()
	b := c.brokers[1]
	c.controller()
	c.createTopic(b, "t", 1, 1)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis, req.TopicNames = 5, 5000, []string{"t", "x", "y"}
	resp, err := b.DeleteTopics(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 3 {
		t.Fatalf("answers %+v", resp.Topics)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != kerr.PolicyViolation.Code {
			t.Errorf("%v: error %d, want POLICY_VIOLATION", rt.Topic, rt.ErrorCode)
		}
	}
	if kids, _ := c.admin.Children(ctx, DeleteTopicsPath, false); len(kids) != 0 {
		t.Fatalf("marked for deletion past the cap: %v", kids)
	}
}

// Manual assignments are checked entry by entry before anything is copied:
// a lone partition 2147483647, a replica list naming unknown or repeated
// brokers, or lists of different lengths are INVALID_REPLICA_ASSIGNMENT
// (Kafka's AdminZkClient rules; unknown brokers are refused as in Kafka's
// CreatePartitions), and a topic written with a hole at partition 0 cannot
// break CreatePartitions.
func TestManualAssignmentsChecked(t *testing.T) {
	c := capCluster(t, 1000, 1, 2)
	ctx := context.Background()
	b := c.brokers[1]
	c.controller()
	waitFor(t, 5*time.Second, "two live brokers", func() (bool, string) {
		ids, err := liveBrokerIDs(ctx, b.Store())
		return err == nil && len(ids) == 2, "not yet"
	})
	manual := func(parts map[int32][]int32) kmsg.CreateTopicsRequestTopic {
		rt := newTopic("m", -1, -1)
		for _, p := range sortedPartitions(parts) {
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: parts[p]})
		}
		return rt
	}
	long := make([]int32, 1<<16)
	for i := range long {
		long[i] = int32(i % 2)
	}
	for name, parts := range map[string]map[int32][]int32{
		"lone 2147483647": {math.MaxInt32: {1}},
		"hole":            {0: {1}, 2: {1}},
		"negative":        {-1: {1}, 0: {1}},
		"unknown broker":  {0: {1, 7}},
		"repeated":        {0: {1, 1}},
		"long list":       {0: long},
		"empty":           {0: {}},
		"uneven":          {0: {1, 2}, 1: {2}},
	} {
		for _, validateOnly := range []bool{true, false} {
			resp, err := b.CreateTopics(ctx, createReq(validateOnly, manual(parts)))
			if err != nil {
				t.Fatal(err)
			}
			if rt := resp.Topics[0]; rt.ErrorCode != kerr.InvalidReplicaAssignment.Code {
				t.Errorf("%s (validateOnly %v): error %d %v, want INVALID_REPLICA_ASSIGNMENT", name, validateOnly, rt.ErrorCode, rt.ErrorMessage)
			}
		}
	}
	if resp, _ := b.CreateTopics(ctx, createReq(false, manual(map[int32][]int32{0: {2, 1}, 1: {1, 2}}))); resp.Topics[0].ErrorCode != 0 ||
		resp.Topics[0].NumPartitions != 2 || resp.Topics[0].ReplicationFactor != 2 {
		t.Fatalf("valid manual assignment: %+v", resp.Topics[0])
	}
	for name, as := range map[string][][]int32{
		"unknown broker": {{1, 9}},
		"repeated":       {{2, 2}},
		"uneven":         {{1}},
		"too many":       {{1, 2}, {2, 1}},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "m", 3
		for _, r := range as {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
		}
		req.TimeoutMillis, req.Topics = 5000, []kmsg.CreatePartitionsRequestTopic{rt}
		resp, err := b.CreatePartitions(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0]; got.ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Errorf("CreatePartitions %s: error %d %v, want INVALID_REPLICA_ASSIGNMENT", name, got.ErrorCode, got.ErrorMessage)
		}
	}
	// A topic znode without partition 0 (another tool wrote it): refused,
	// not a panic.
	if _, err := c.admin.Create(ctx, TopicPath("holey"), EncodeTopic(TopicAssignment{Partitions: map[int32][]int32{1: {1}}}), Persistent); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "holey", Count: 3}}
	resp, err := b.CreatePartitions(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.UnknownServerError.Code {
		t.Errorf("CreatePartitions of a topic without partition 0: error %d %v", got.ErrorCode, got.ErrorMessage)
	}
}
