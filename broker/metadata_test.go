package broker

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/metadata/records"
)

var (
	fooID = uuid(1)
	barID = uuid(2)
)

// seedCluster commits the image most handler tests read:
//
//	broker 1: this broker, unfenced, rack r1
//	broker 2: unfenced
//	broker 3: fenced
//	broker 4: unfenced, but only on listener OTHER
//	foo p0 leader 1 [1 2]   p1 leader 2 [2 3] isr [2]   p2 leader 3 (fenced)
//	    p3 leader 4 (no PLAINTEXT)   p4 no leader, replica 5 unregistered
//	bar p0 leader 1 [1]
func seedCluster(h *harness) {
	port := h.b.cfg.Listeners[0].Port
	rack := "r1"
	h.commit(mvRecord(14))
	h.commit(
		brokerRecord(1, 1, false, &rack, ep("PLAINTEXT", port)),
		brokerRecord(2, 2, false, nil, ep("PLAINTEXT", 9002), ep("OTHER", 19002)),
		brokerRecord(3, 3, true, nil, ep("PLAINTEXT", 9003)),
		brokerRecord(4, 4, false, nil, ep("OTHER", 19004)),
	)
	h.commit(
		topicRecord("foo", fooID),
		partitionRecord(fooID, 0, 1, []int32{1, 2}, []int32{1, 2}),
		partitionRecord(fooID, 1, 2, []int32{2, 3}, []int32{2}),
		partitionRecord(fooID, 2, 3, []int32{3, 1}, []int32{3}),
		partitionRecord(fooID, 3, 4, []int32{4, 1}, []int32{4, 1}),
		partitionRecord(fooID, 4, -1, []int32{5}, []int32{}),
		topicRecord("bar", barID),
		partitionRecord(barID, 0, 1, []int32{1}, []int32{1}),
	)
}

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	if topics == nil && version > 0 {
		return req // null = all topics
	}
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func findTopic(t *testing.T, resp *kmsg.MetadataResponse, name string) kmsg.MetadataResponseTopic {
	t.Helper()
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == name {
			return mt
		}
	}
	t.Fatalf("topic %q not in response %v", name, resp.Topics)
	return kmsg.MetadataResponseTopic{}
}

func brokerIDs(resp *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// TestMetadataVersions checks every version's shape against one image:
// hidden fenced brokers, leader errors, offline replicas, v0 filtering.
func TestMetadataVersions(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	for _, v := range []int16{0, 1, 4, 5, 6, 7, 9, 10, 12, 13} {
		resp := h.request(metadataRequest(v)).(*kmsg.MetadataResponse)
		if got := brokerIDs(resp); !slices.Equal(got, []int32{1, 2}) {
			t.Errorf("v%d brokers = %v, want [1 2] (3 fenced, 4 lacks PLAINTEXT)", v, got)
		}
		if v >= 1 && resp.ControllerID != 1 && resp.ControllerID != 2 {
			t.Errorf("v%d controller id %d, want a live broker", v, resp.ControllerID)
		}
		if v >= 1 && (resp.Brokers[0].Rack == nil || *resp.Brokers[0].Rack != "r1") {
			t.Errorf("v%d broker 1 rack %v", v, resp.Brokers[0].Rack)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != testCluster) {
			t.Errorf("v%d cluster id %v", v, resp.ClusterID)
		}
		if len(resp.Topics) != 2 {
			t.Fatalf("v%d: %d topics, want 2", v, len(resp.Topics))
		}
		checkFoo(t, v, findTopic(t, resp, "foo"))
	}
}

func checkFoo(t *testing.T, v int16, foo kmsg.MetadataResponseTopic) {
	t.Helper()
	if (foo.TopicID == fooID) != (v >= 10) {
		t.Errorf("v%d topic id %x", v, foo.TopicID)
	}
	listenerErr := kerr.LeaderNotAvailable.Code
	if v >= 6 {
		listenerErr = kerr.ListenerNotFound.Code
	}
	p1Err, p1Replicas := int16(0), []int32{2, 3}
	if v == 0 {
		p1Err, p1Replicas = kerr.ReplicaNotAvailable.Code, []int32{2}
	}
	want := []struct {
		code    int16
		leader  int32
		replica []int32
		offline []int32
	}{
		{0, 1, []int32{1, 2}, []int32{}},
		{p1Err, 2, p1Replicas, []int32{3}},
		{kerr.LeaderNotAvailable.Code, -1, nil, []int32{3}},
		{listenerErr, -1, nil, []int32{4}},
		{kerr.LeaderNotAvailable.Code, -1, nil, []int32{5}},
	}
	if len(foo.Partitions) != len(want) {
		t.Fatalf("v%d foo has %d partitions", v, len(foo.Partitions))
	}
	for i, w := range want {
		p := foo.Partitions[i]
		if p.Partition != int32(i) || p.ErrorCode != w.code || p.Leader != w.leader {
			t.Errorf("v%d foo-%d: partition %d error %d leader %d, want error %d leader %d",
				v, i, p.Partition, p.ErrorCode, p.Leader, w.code, w.leader)
		}
		if w.replica != nil && !slices.Equal(p.Replicas, w.replica) {
			t.Errorf("v%d foo-%d replicas %v, want %v", v, i, p.Replicas, w.replica)
		}
		if v >= 5 && !slices.Equal(p.OfflineReplicas, w.offline) && len(p.OfflineReplicas)+len(w.offline) > 0 {
			t.Errorf("v%d foo-%d offline %v, want %v", v, i, p.OfflineReplicas, w.offline)
		}
		if v >= 7 && p.LeaderEpoch != 0 {
			t.Errorf("v%d foo-%d leader epoch %d", v, i, p.LeaderEpoch)
		}
	}
}

func TestMetadataRequestedTopics(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)

	resp := h.request(metadataRequest(9, "bar", "nope")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || *resp.Topics[1].Topic != "nope" ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("bar+nope: %+v", resp.Topics)
	}
	empty := h.request(metadataRequest(9, []string{}...)).(*kmsg.MetadataResponse)
	if len(empty.Topics) != 0 || len(empty.Brokers) != 2 {
		t.Errorf("empty topic list v9: %d topics %d brokers, want 0 and 2", len(empty.Topics), len(empty.Brokers))
	}

	// v12+: look up by id (null name).
	byID := metadataRequest(12)
	for _, id := range [][16]byte{fooID, uuid(9)} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		byID.Topics = append(byID.Topics, rt)
	}
	r12 := h.request(byID).(*kmsg.MetadataResponse)
	if len(r12.Topics) != 2 || r12.Topics[0].Topic == nil || *r12.Topics[0].Topic != "foo" || r12.Topics[0].TopicID != fooID {
		t.Fatalf("by id: %+v", r12.Topics)
	}
	if r12.Topics[1].ErrorCode != kerr.UnknownTopicID.Code || r12.Topics[1].Topic != nil {
		t.Errorf("unknown id: error %d name %v", r12.Topics[1].ErrorCode, r12.Topics[1].Topic)
	}
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	req := metadataRequest(10, "bar")
	plain := h.request(req).(*kmsg.MetadataResponse)
	if plain.AuthorizedOperations != math.MinInt32 || plain.Topics[0].AuthorizedOperations != math.MinInt32 {
		t.Errorf("not requested: cluster %d topic %d, want MinInt32", plain.AuthorizedOperations, plain.Topics[0].AuthorizedOperations)
	}
	req = metadataRequest(10, "bar")
	req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
	asked := h.request(req).(*kmsg.MetadataResponse)
	if asked.AuthorizedOperations != 8096 || asked.Topics[0].AuthorizedOperations != 3576 {
		t.Errorf("requested: cluster %d topic %d, want 8096 and 3576", asked.AuthorizedOperations, asked.Topics[0].AuthorizedOperations)
	}
}

// TestMetadataFollowsFencing: a broker fenced by a later record leaves the
// broker list and the partitions it leads become LEADER_NOT_AVAILABLE.
func TestMetadataFollowsFencing(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	h.commit(&records.BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 2, Fenced: records.FenceChangeFence})
	resp := h.request(metadataRequest(12, "foo")).(*kmsg.MetadataResponse)
	if got := brokerIDs(resp); !slices.Equal(got, []int32{1}) {
		t.Errorf("brokers %v, want [1]", got)
	}
	if resp.ControllerID != 1 {
		t.Errorf("controller id %d, want the only live broker 1", resp.ControllerID)
	}
	p1 := resp.Topics[0].Partitions[1]
	if p1.ErrorCode != kerr.LeaderNotAvailable.Code || p1.Leader != -1 || !slices.Equal(p1.OfflineReplicas, []int32{2, 3}) {
		t.Errorf("foo-1 after fencing 2: %+v", p1)
	}
}

// TestMetadataWithFranzGo reads the image through kadm exactly as users do.
func TestMetadataWithFranzGo(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"bar", "foo"}) {
		t.Errorf("topics %v", names)
	}
	if foo := topics["foo"]; foo.ID != kadm.TopicID(fooID) || len(foo.Partitions) != 5 || foo.Partitions[0].Leader != 1 {
		t.Errorf("foo via kadm: %+v", foo)
	}
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Cluster != testCluster || len(m.Brokers) != 2 || m.Brokers[0].NodeID != 1 || m.Brokers[0].Port != int32(h.b.cfg.Listeners[0].Port) {
		t.Errorf("kadm metadata: %+v", m)
	}
}

func TestDescribeCluster(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	ids := func(r *kmsg.DescribeClusterResponse) []int32 {
		var out []int32
		for _, b := range r.Brokers {
			out = append(out, b.NodeID)
		}
		return out
	}
	for _, v := range []int16{0, 1, 2} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(v)
		req.EndpointType = 1
		resp := h.request(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != testCluster || !slices.Equal(ids(resp), []int32{1, 2}) {
			t.Errorf("v%d: error %d cluster %q brokers %v", v, resp.ErrorCode, resp.ClusterID, ids(resp))
		}
		if resp.ControllerID != 1 && resp.ControllerID != 2 {
			t.Errorf("v%d controller %d", v, resp.ControllerID)
		}
		if resp.ClusterAuthorizedOperations != math.MinInt32 {
			t.Errorf("v%d authorized ops %d not requested", v, resp.ClusterAuthorizedOperations)
		}
	}
	// Kafka's AuthHelper.computeDescribeClusterResponse: CONTROLLER at a
	// broker is MISMATCHED_ENDPOINT_TYPE, an unknown type
	// UNSUPPORTED_ENDPOINT_TYPE; the answer's EndpointType stays BROKER.
	for _, tc := range []struct {
		version int16
		typ     int8
		want    *kerr.Error
	}{
		{1, 2, kerr.MismatchedEndpointType}, {2, 2, kerr.MismatchedEndpointType},
		{1, 3, kerr.UnsupportedEndpointType}, {2, 0, kerr.UnsupportedEndpointType}, {1, -1, kerr.UnsupportedEndpointType},
	} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(tc.version)
		req.EndpointType = tc.typ
		resp := h.request(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != tc.want.Code || resp.ErrorMessage == nil || resp.EndpointType != 1 || len(resp.Brokers) != 0 {
			t.Errorf("v%d endpoint type %d at a broker: error %d type %d, want %s", tc.version, tc.typ,
				resp.ErrorCode, resp.EndpointType, tc.want.Message)
		}
	}
	// v0 has no EndpointType on the wire (it is BROKER); a mismatch there,
	// which only an in-process caller can produce, is INVALID_REQUEST.
	for _, typ := range []int8{2, 3} {
		if e, _ := describeClusterEndpointError(&kmsg.DescribeClusterRequest{Version: 0, EndpointType: typ}); e != kerr.InvalidRequest {
			t.Errorf("v0 endpoint type %d: %v, want INVALID_REQUEST", typ, e)
		}
	}
	fenced := kmsg.NewPtrDescribeClusterRequest()
	fenced.SetVersion(2)
	fenced.EndpointType, fenced.IncludeFencedBrokers = 1, true
	resp := h.request(fenced).(*kmsg.DescribeClusterResponse)
	if !slices.Equal(ids(resp), []int32{1, 2, 3}) || !resp.Brokers[2].IsFenced || resp.Brokers[0].IsFenced {
		t.Errorf("IncludeFencedBrokers: %+v", resp.Brokers)
	}
}

// TestDeadCoordinatorNeverNamed: a broker that Metadata does not list (in
// ZooKeeper mode unregistered because the last UpdateMetadata's live
// brokers left it out while the partition states still name it as leader;
// in KRaft fenced) is never named by Metadata as a partition leader nor by
// FindCoordinator as a group or transaction coordinator. franz-go fails a
// request to such an id with "unknown broker", which is fatal to a
// transactional producer's AddPartitionsToTxn. Kafka:
// ZkMetadataCache/KRaftMetadataCache.getPartitionMetadata answer
// LEADER_NOT_AVAILABLE with leader -1, and getCoordinator asks
// getAliveBrokerNode.
func TestDeadCoordinatorNeverNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill records.Message
	}{
		{"zk-unregistered", &records.UnregisterBrokerRecord{BrokerID: 2, BrokerEpoch: 2}},
		{"kraft-fenced", &records.BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 2, Fenced: records.FenceChangeFence}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Replicas = newTestReplicas(t)
				c.Groups.OffsetsTopicNumPartitions = 1
				c.Txns.NumPartitions = 1
			})
			h.runPublisher()
			port := h.b.cfg.Listeners[0].Port
			offsetsID, txnID := uuid(7), uuid(8)
			h.commit(mvRecord(14))
			h.commit(brokerRecord(1, 1, false, nil, ep("PLAINTEXT", port)), brokerRecord(2, 2, false, nil, ep("PLAINTEXT", 9002)))
			h.commit(
				topicRecord(group.Topic, offsetsID), partitionRecord(offsetsID, 0, 2, []int32{2, 1}, []int32{2, 1}),
				topicRecord(txn.Topic, txnID), partitionRecord(txnID, 0, 2, []int32{2, 1}, []int32{2, 1}),
				topicRecord("foo", fooID), partitionRecord(fooID, 0, 2, []int32{2, 1}, []int32{2, 1}),
			)
			coordinators := func() []kmsg.FindCoordinatorResponseCoordinator {
				var out []kmsg.FindCoordinatorResponseCoordinator
				for _, typ := range []int8{0, 1} {
					req := kmsg.NewPtrFindCoordinatorRequest()
					req.SetVersion(4)
					req.CoordinatorType, req.CoordinatorKeys = typ, []string{"eos"}
					out = append(out, h.request(req).(*kmsg.FindCoordinatorResponse).Coordinators...)
				}
				return out
			}
			for _, co := range coordinators() {
				if co.ErrorCode != 0 || co.NodeID != 2 || co.Port != 9002 {
					t.Fatalf("before the kill: %+v", co)
				}
			}

			h.commit(tc.kill)
			for _, v := range []int16{0, 1, 5, 12} {
				resp := h.request(metadataRequest(v, "foo", group.Topic, txn.Topic)).(*kmsg.MetadataResponse)
				if got := brokerIDs(resp); !slices.Equal(got, []int32{1}) {
					t.Fatalf("v%d brokers %v, want [1]", v, got)
				}
				for _, mt := range resp.Topics {
					p := mt.Partitions[0]
					if p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 {
						t.Errorf("v%d %s-0: error %d leader %d, want LEADER_NOT_AVAILABLE and -1", v, *mt.Topic, p.ErrorCode, p.Leader)
					}
					wantReplicas, wantOffline := []int32{2, 1}, []int32{2}
					if v == 0 { // errorUnavailableEndpoints: dead replicas filtered out
						wantReplicas = []int32{1}
					}
					if !slices.Equal(p.Replicas, wantReplicas) || !slices.Equal(p.ISR, wantReplicas) ||
						v >= 5 && !slices.Equal(p.OfflineReplicas, wantOffline) {
						t.Errorf("v%d %s-0: replicas %v isr %v offline %v", v, *mt.Topic, p.Replicas, p.ISR, p.OfflineReplicas)
					}
				}
			}
			for _, co := range coordinators() {
				if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || co.NodeID != -1 || co.Port != -1 {
					t.Errorf("coordinator after the kill: %+v, want COORDINATOR_NOT_AVAILABLE and node -1", co)
				}
			}
		})
	}
}
