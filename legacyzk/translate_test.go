package legacyzk

import (
	"slices"
	"testing"
	"testing/quick"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

func testView() *ClusterView {
	ep := func(id int32) BrokerInfo {
		return BrokerInfo{ID: id, Epoch: int64(100 + id), Endpoints: []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9000 + id)}}}
	}
	return &ClusterView{
		Live:         map[int32]BrokerInfo{1: ep(1), 2: ep(2), 3: ep(3)},
		ShuttingDown: map[int32]bool{},
		Topics: map[string]TopicAssignment{
			"a": {ID: records.UUID{1}, Partitions: map[int32][]int32{0: {1, 2, 4}, 1: {2, 3, 1}}},
			"b": {ID: records.UUID{2}, Partitions: map[int32][]int32{0: {3, 1}}},
		},
		States: map[TopicPartition]LeaderIsr{
			{"a", 0}: {Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}, ControllerEpoch: 3, ZkVersion: 7},
			{"a", 1}: {Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3, 1}, ControllerEpoch: 3, ZkVersion: 1},
			{"b", 0}: {Leader: 3, LeaderEpoch: 0, ISR: []int32{3, 1}, ControllerEpoch: 2, ZkVersion: 0},
		},
		Deleting: map[string]bool{},
		Listener: "PLAINTEXT",
	}
}

func TestTranslateOrderAndContents(t *testing.T) {
	v := testView()
	b := NewBatch()
	for _, tp := range []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}} {
		b.AddLeaderAndIsr(v, v.Topics[tp.Topic].Partitions[tp.Partition], tp, tp.Topic == "b")
	}
	b.AddStopReplica(v, 2, TopicPartition{"a", 0}, false)
	pushes := Translate(v, b, 1, 5)
	var keys []int16
	var targets []int32
	for _, p := range pushes {
		keys = append(keys, p.Req.Key())
		targets = append(targets, p.Broker)
	}
	// Every LeaderAndIsr, then every UpdateMetadata, then StopReplica;
	// broker 4 is not live and gets nothing.
	if !slices.Equal(keys, []int16{4, 4, 4, 6, 6, 6, 5}) || !slices.Equal(targets, []int32{1, 2, 3, 1, 2, 3, 2}) {
		t.Fatalf("keys %v targets %v", keys, targets)
	}
	lai := pushes[2].Req.(*kmsg.LeaderAndISRRequest) // broker 3: a-1 and b-0
	if lai.Version != LeaderAndIsrVersion || lai.ControllerID != 1 || lai.ControllerEpoch != 5 || lai.BrokerEpoch != 103 {
		t.Fatalf("LeaderAndIsr header %+v", lai)
	}
	if len(lai.TopicStates) != 2 || lai.TopicStates[0].Topic != "a" || lai.TopicStates[1].TopicID != [16]byte{2} {
		t.Fatalf("topics %+v", lai.TopicStates)
	}
	p := lai.TopicStates[0].PartitionStates[0]
	if p.Partition != 1 || p.Leader != 2 || p.ZKVersion != 1 || p.ControllerEpoch != 3 || p.IsNew {
		t.Fatalf("a-1 %+v", p)
	}
	if !lai.TopicStates[1].PartitionStates[0].IsNew {
		t.Fatal("b-0 should be new")
	}
	if len(lai.LiveLeaders) != 2 || lai.LiveLeaders[0].BrokerID != 2 || lai.LiveLeaders[1].Port != 9003 {
		t.Fatalf("live leaders %+v", lai.LiveLeaders)
	}
	um := pushes[3].Req.(*kmsg.UpdateMetadataRequest)
	if um.Version != UpdateMetadataVersion || um.BrokerEpoch != 101 || len(um.LiveBrokers) != 3 || len(um.TopicStates) != 2 {
		t.Fatalf("UpdateMetadata %+v", um)
	}
	if off := um.TopicStates[0].PartitionStates[0].OfflineReplicas; !slices.Equal(off, []int32{4}) {
		t.Fatalf("offline replicas of a-0 = %v, want [4]", off)
	}
	sr := pushes[6].Req.(*kmsg.StopReplicaRequest)
	if sr.Version != StopReplicaVersion || sr.Topics[0].PartitionStates[0].LeaderEpoch != 4 || sr.Topics[0].PartitionStates[0].Delete {
		t.Fatalf("StopReplica %+v", sr)
	}
}

func TestTranslateDeletionMarksLeaderMinusTwo(t *testing.T) {
	v := testView()
	v.Deleting["b"] = true
	b := NewBatch()
	b.AddUpdateMetadata(v, []int32{1}, TopicPartition{"b", 0})
	b.AddStopReplica(v, 3, TopicPartition{"b", 0}, true)
	pushes := Translate(v, b, 1, 5)
	um := pushes[0].Req.(*kmsg.UpdateMetadataRequest)
	if um.TopicStates[0].PartitionStates[0].Leader != LeaderDuringDelete {
		t.Fatalf("leader %d", um.TopicStates[0].PartitionStates[0].Leader)
	}
	sr := pushes[1].Req.(*kmsg.StopReplicaRequest)
	if ps := sr.Topics[0].PartitionStates[0]; ps.LeaderEpoch != EpochDuringDelete || !ps.Delete {
		t.Fatalf("stop %+v", ps)
	}
}

func TestTranslateBrokerListOnly(t *testing.T) {
	v := testView()
	b := NewBatch()
	b.AddUpdateMetadata(v, []int32{1, 2, 3, 9})
	pushes := Translate(v, b, 2, 1)
	if len(pushes) != 3 {
		t.Fatalf("%d pushes", len(pushes))
	}
	for _, p := range pushes {
		um := p.Req.(*kmsg.UpdateMetadataRequest)
		if len(um.TopicStates) != 0 || len(um.LiveBrokers) != 3 {
			t.Fatalf("%+v", um)
		}
	}
}

// Elections against a naive restatement of Kafka's rules.
func TestElectOfflineMatchesNaive(t *testing.T) {
	f := func(replicas, isr []uint8, aliveMask uint8, epoch uint8) bool {
		rs := small(replicas)
		cur := LeaderIsr{Leader: -1, LeaderEpoch: int32(epoch), ISR: small(isr)}
		alive := func(b int32) bool { return aliveMask&(1<<uint(b)) != 0 }
		got := electOffline(rs, cur, alive, 9)
		want := int32(-1)
		for _, r := range rs {
			if alive(r) && slices.Contains(cur.ISR, r) {
				want = r
				break
			}
		}
		if got.state.Leader != want || got.ok != (want >= 0) || got.state.LeaderEpoch != cur.LeaderEpoch+1 || got.state.ControllerEpoch != 9 {
			return false
		}
		if want < 0 {
			return slices.Equal(got.state.ISR, cur.ISR) // KAFKA-5083
		}
		for _, b := range got.state.ISR {
			if !alive(b) || !slices.Contains(cur.ISR, b) {
				return false
			}
		}
		return slices.Contains(got.state.ISR, want)
	}
	if err := quick.Check(f, nil); err != nil {
		t.Fatal(err)
	}
}

func small(in []uint8) []int32 {
	var out []int32
	for _, v := range in {
		b := int32(v % 6)
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

func TestElectControlledShutdownSkipsShuttingDown(t *testing.T) {
	cur := LeaderIsr{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2, 3}}
	alive := func(int32) bool { return true }
	shutting := func(b int32) bool { return b == 1 || b == 2 }
	r := electControlledShutdown([]int32{1, 2, 3}, cur, alive, shutting, 4)
	if !r.ok || r.state.Leader != 3 || !slices.Equal(r.state.ISR, []int32{3}) || r.state.LeaderEpoch != 4 {
		t.Fatalf("%+v", r)
	}
	r = electControlledShutdown([]int32{1, 2}, LeaderIsr{Leader: 1, ISR: []int32{1, 2}}, alive, shutting, 4)
	if r.ok {
		t.Fatalf("no eligible replica, got %+v", r)
	}
}

func TestRemoveFromIsrKeepsLastMember(t *testing.T) {
	s := removeFromIsr(LeaderIsr{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}, 2, 3)
	if s.Leader != -1 || !slices.Equal(s.ISR, []int32{2}) || s.LeaderEpoch != 2 {
		t.Fatalf("%+v", s)
	}
	s = removeFromIsr(LeaderIsr{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}}, 3, 3)
	if s.Leader != 2 || !slices.Equal(s.ISR, []int32{2}) {
		t.Fatalf("%+v", s)
	}
}

func TestAssignReplicasSpreadsLeadersAndReplicas(t *testing.T) {
	brokers := []int32{1, 2, 3}
	a := assignReplicas(brokers, 6, 3, 0, 0, 0)
	leaders := map[int32]int{}
	for p := int32(0); p < 6; p++ {
		r := a[p]
		if len(r) != 3 || len(small8(r)) != 3 {
			t.Fatalf("partition %d replicas %v", p, r)
		}
		leaders[r[0]]++
	}
	for _, b := range brokers {
		if leaders[b] != 2 {
			t.Fatalf("leaders %v", leaders)
		}
	}
	// Partitions added later continue the round-robin from their ids.
	more := assignReplicas(brokers, 2, 2, 6, 0, 0)
	if _, ok := more[6]; !ok || len(more[7]) != 2 {
		t.Fatalf("%v", more)
	}
}

func small8(r []int32) map[int32]bool {
	m := map[int32]bool{}
	for _, v := range r {
		m[v] = true
	}
	return m
}

// The placement example in the doc comment of Kafka's
// AdminUtils.assignReplicasToBrokers: 5 brokers, 10 partitions, RF 3,
// start index 0, shift 0.
func TestAssignReplicasMatchesKafkaExample(t *testing.T) {
	a := assignReplicas([]int32{0, 1, 2, 3, 4}, 10, 3, 0, 0, 0)
	want := map[int32][]int32{0: {0, 1, 2}, 4: {4, 0, 1}, 5: {0, 2, 3}, 9: {4, 1, 2}}
	for p, r := range want {
		if !slices.Equal(a[p], r) {
			t.Errorf("p%d = %v, want %v", p, a[p], r)
		}
	}
}
