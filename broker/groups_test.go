package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/replica"
)

// A client Produce to __consumer_offsets is refused: the group coordinator
// loads that partition's records as group state (members, assignments,
// offsets), so anyone able to append there could forge it.
func TestProduceToInternalTopicRefused(t *testing.T) {
	d := newDataHarness(t, 0)
	d.commit(topicRecord(group.Topic, uuid(9)), partitionRecord(uuid(9), 0, 1, []int32{1}, []int32{1}))
	sp := d.produce(11, -1, group.Topic, 0, recordBatch(1))
	if sp.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", group.Topic, kerr.ErrorForCode(sp.ErrorCode))
	}
	if p, ok := d.replicas.Partition(replica.TopicPartition{Topic: group.Topic, Partition: 0}); !ok || p.Log().EndOffset() != 0 {
		t.Fatalf("the refused batch reached the log (hosted %v)", ok)
	}
}

// The first FindCoordinator of a cluster without __consumer_offsets asks
// the controller for it (50 partitions, offsets.topic.replication.factor,
// compacted) and answers COORDINATOR_NOT_AVAILABLE for every key; once the
// topic is there each group's coordinator is the leader of its partition
// (v0: one key, top-level fields; v4: batched).
func TestFindCoordinatorCreatesOffsetsTopic(t *testing.T) {
	active := newFakeController(t, true, nil)
	created := make(chan *kmsg.CreateTopicsRequest, 4)
	active.onCreate = func(r *kmsg.CreateTopicsRequest) { created <- r }
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3001: active.addr}
		c.Replicas = newTestReplicas(t)
		c.Groups.OffsetsTopicNumPartitions = 2
	})
	h.runPublisher()
	h.commit(mvRecord(14), brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 19001)), brokerRecord(2, 11, false, nil, ep("PLAINTEXT", 19002)))
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorKeys = []string{"a", "b"} // "a" hashes to 97: partition 1 of 2; "b" to 98: 0
	resp := h.request(req).(*kmsg.FindCoordinatorResponse)
	for _, co := range resp.Coordinators {
		if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || co.NodeID != -1 {
			t.Fatalf("before the topic: %+v", co)
		}
	}
	var cr *kmsg.CreateTopicsRequest
	select {
	case cr = <-created:
	case <-time.After(5 * time.Second):
		t.Fatal("no CreateTopics for __consumer_offsets")
	}
	rt := cr.Topics[0]
	compact := false
	for _, c := range rt.Configs {
		compact = compact || c.Name == "cleanup.policy" && c.Value != nil && *c.Value == "compact"
	}
	if rt.Topic != group.Topic || rt.NumPartitions != 2 || rt.ReplicationFactor != 3 || !compact {
		t.Fatalf("CreateTopics %+v", rt)
	}

	// The fake controller created the topic (every partition led by 1);
	// partition 1 moves to broker 2, so the two keys land on different
	// coordinators.
	var topicID [16]byte
	waitCond(t, "__consumer_offsets in the image", func() bool {
		tt, ok := h.b.Image().TopicByName(group.Topic)
		if ok {
			topicID = tt.ID()
		}
		return ok
	})
	move := &records.PartitionChangeRecord{}
	move.Default()
	move.TopicID, move.PartitionID, move.Leader, move.Replicas, move.ISR = topicID, 1, 2, []int32{2}, []int32{2}
	active.mu.Lock()
	active.commitLocked(move)
	active.mu.Unlock()
	waitCond(t, "partition 1 led by 2", func() bool {
		tt, _ := h.b.Image().TopicByName(group.Topic)
		p, ok := tt.Partition(1)
		return ok && p.Leader == 2
	})
	resp = h.request(req).(*kmsg.FindCoordinatorResponse)
	if a, b := resp.Coordinators[0], resp.Coordinators[1]; a.Key != "a" || a.ErrorCode != 0 || a.NodeID != 2 || a.Port != 19002 ||
		b.Key != "b" || b.ErrorCode != 0 || b.NodeID != 1 || b.Port != 19001 {
		t.Fatalf("coordinators %+v", resp.Coordinators)
	}
	v0 := kmsg.NewPtrFindCoordinatorRequest()
	v0.SetVersion(0)
	v0.CoordinatorKey = "a"
	if r := h.request(v0).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != 2 || r.Port != 19002 || len(r.Coordinators) != 0 {
		t.Fatalf("v0: %+v", r)
	}
}

// waitCond polls cond every 5 ms for up to 5 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func newTestReplicas(t *testing.T) *replica.Manager {
	t.Helper()
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// A Metadata request auto-creating __consumer_offsets creates it as the
// group coordinator needs it (Kafka's AutoTopicCreationManager): 50
// partitions at offsets.topic.replication.factor, compacted, not
// num.partitions and default.replication.factor, which would leave groups
// without a coordinator partition.
func TestMetadataAutoCreatesOffsetsTopicForGroups(t *testing.T) {
	active := newFakeController(t, true, nil)
	created := make(chan *kmsg.CreateTopicsRequest, 4)
	active.onCreate = func(r *kmsg.CreateTopicsRequest) { created <- r }
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3001: active.addr}
		c.Replicas = newTestReplicas(t)
		c.AutoCreateTopicsEnable = true
	})
	h.runPublisher()
	h.commit(mvRecord(14), brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 19001)))
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})

	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(group.Topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	h.request(req)
	select {
	case cr := <-created:
		if t0 := cr.Topics[0]; len(cr.Topics) != 1 || t0.Topic != group.Topic || t0.NumPartitions != 50 || t0.ReplicationFactor != 3 || len(t0.Configs) == 0 {
			t.Fatalf("CreateTopics %+v", cr.Topics)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no CreateTopics for __consumer_offsets")
	}
}
