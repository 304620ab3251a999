package legacyzk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

// bareBroker is a Broker with only the push-handling state, for calling
// handlers directly. Its ZooKeeper session (for verifyPush) is on an
// in-memory server whose /controller_epoch is bareControllerEpoch.
func bareBroker(t testing.TB, id int32, brokerEpoch int64) *Broker {
	srv := NewMemServer()
	st := srv.Connect()
	t.Cleanup(func() { st.Close() })
	if _, err := st.Create(context.Background(), ControllerEpochPath, EncodeControllerEpoch(bareControllerEpoch), Persistent); err != nil {
		t.Fatal(err)
	}
	b := &Broker{cfg: Config{NodeID: id}, log: testLoggerNop(), replicas: map[TopicPartition]ReplicaState{},
		ctrl: &controller{store: st}}
	b.started.Store(b.ctrl)
	b.cache.Store(image.Empty())
	b.brokerEpoch.Store(brokerEpoch)
	return b
}

// bareControllerEpoch is the controller epoch bareBroker's ZooKeeper holds.
const bareControllerEpoch = 50

func pushOne(t *testing.T, b *Broker, req kmsg.Request) kmsg.Response {
	t.Helper()
	var h protocol.Handler
	switch req.Key() {
	case 4:
		h = b.handleLeaderAndIsr
	case 5:
		h = b.handleStopReplica
	case 6:
		h = b.handleUpdateMetadata
	}
	resp, err := h(context.Background(), &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func viewPushes(t *testing.T, controllerEpoch int32, mutate func(v *ClusterView)) (lai *kmsg.LeaderAndISRRequest, um *kmsg.UpdateMetadataRequest) {
	t.Helper()
	v := testView()
	if mutate != nil {
		mutate(v)
	}
	b := NewBatch()
	for _, tp := range sortedTPs(v.States) {
		b.AddLeaderAndIsr(v, v.Topics[tp.Topic].Partitions[tp.Partition], tp, false)
	}
	for _, p := range Translate(v, b, 1, controllerEpoch) {
		if p.Broker != 2 {
			continue
		}
		switch r := p.Req.(type) {
		case *kmsg.LeaderAndISRRequest:
			lai = r
		case *kmsg.UpdateMetadataRequest:
			um = r
		}
	}
	return lai, um
}

func TestPushFencing(t *testing.T) {
	b := bareBroker(t, 2, 102)
	lai, um := viewPushes(t, 5, nil)
	if r := pushOne(t, b, lai).(*kmsg.LeaderAndISRResponse); r.ErrorCode != 0 {
		t.Fatalf("first LeaderAndIsr: %d", r.ErrorCode)
	}
	if r := pushOne(t, b, um).(*kmsg.UpdateMetadataResponse); r.ErrorCode != 0 {
		t.Fatalf("first UpdateMetadata: %d", r.ErrorCode)
	}
	if b.SeenControllerEpoch() != 5 || b.Image().NumPartitions() != 3 {
		t.Fatalf("epoch %d, %d partitions cached", b.SeenControllerEpoch(), b.Image().NumPartitions())
	}
	// The same states again: equal leader epochs are not applied.
	r := pushOne(t, b, lai).(*kmsg.LeaderAndISRResponse)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("replayed LeaderAndIsr: %+v", r)
	}
	// A zombie (older controller epoch) is rejected whole, and its
	// UpdateMetadata does not touch the cache.
	oldLai, oldUm := viewPushes(t, 4, func(v *ClusterView) {
		s := v.States[TopicPartition{"a", 1}]
		s.Leader, s.LeaderEpoch = 3, 9
		v.States[TopicPartition{"a", 1}] = s
	})
	if r := pushOne(t, b, oldLai).(*kmsg.LeaderAndISRResponse); r.ErrorCode != kerr.StaleControllerEpoch.Code ||
		r.Topics[0].Partitions[0].ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("zombie LeaderAndIsr: %+v", r)
	}
	if r := pushOne(t, b, oldUm).(*kmsg.UpdateMetadataResponse); r.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("zombie UpdateMetadata: %d", r.ErrorCode)
	}
	if rs, _ := b.Replica("a", 1); rs.Leader != 2 {
		t.Fatalf("zombie changed the replica: %+v", rs)
	}
	// A request for an earlier incarnation of this broker.
	lai.BrokerEpoch = 101
	if r := pushOne(t, b, lai).(*kmsg.LeaderAndISRResponse); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: %d", r.ErrorCode)
	}
}

func TestLeaderAndIsrAppliesOnlyNewerLeaderEpochs(t *testing.T) {
	b := bareBroker(t, 2, 102)
	lai, _ := viewPushes(t, 5, nil)
	pushOne(t, b, lai)
	next, _ := viewPushes(t, 5, func(v *ClusterView) {
		s := v.States[TopicPartition{"a", 0}]
		s.Leader, s.LeaderEpoch, s.ZkVersion = 2, 5, 8
		v.States[TopicPartition{"a", 0}] = s
	})
	r := pushOne(t, b, next).(*kmsg.LeaderAndISRResponse)
	if r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[1].ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("%+v", r.Topics)
	}
	if rs, _ := b.Replica("a", 0); rs.Leader != 2 || rs.LeaderEpoch != 5 || rs.PartitionEpoch != 8 {
		t.Fatalf("%+v", rs)
	}
}

func TestUpdateMetadataLastWriterWinsAndDeletes(t *testing.T) {
	b := bareBroker(t, 2, 102)
	_, um := viewPushes(t, 5, nil)
	pushOne(t, b, um)
	// Same controller epoch, an OLDER partition state: ZkMetadataCache has
	// no per-partition comparison, the cache takes it.
	_, older := viewPushes(t, 5, func(v *ClusterView) {
		s := v.States[TopicPartition{"a", 0}]
		s.Leader, s.LeaderEpoch = 2, 1
		v.States[TopicPartition{"a", 0}] = s
		delete(v.Live, 3)
	})
	pushOne(t, b, older)
	a, _ := b.Image().TopicByName("a")
	p, _ := a.Partition(0)
	if p.Leader != 2 || p.LeaderEpoch != 1 {
		t.Fatalf("a-0 = leader %d epoch %d", p.Leader, p.LeaderEpoch)
	}
	if _, ok := b.Image().Broker(3); ok {
		t.Fatal("broker 3 left the live list but is still cached")
	}
	// Deletion: leader -2 for every partition removes the topic.
	v := testView()
	v.Deleting["b"] = true
	batch := NewBatch()
	batch.AddUpdateMetadata(v, []int32{2}, TopicPartition{"b", 0})
	pushOne(t, b, Translate(v, batch, 1, 5)[0].Req)
	if _, ok := b.Image().TopicByName("b"); ok {
		t.Fatal("deleted topic still cached")
	}
}

func TestZnodeJSONShapes(t *testing.T) {
	st := EncodeState(LeaderIsr{Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 2}, ControllerEpoch: 3})
	if string(st) != `{"version":1,"leader":1,"leader_epoch":2,"isr":[1,2],"controller_epoch":3}` {
		t.Fatalf("state %s", st)
	}
	rec := EncodeState(LeaderIsr{Leader: -1, ISR: []int32{}, RecoveryState: 1})
	var m map[string]any
	json.Unmarshal(rec, &m)
	if m["leader_recovery_state"] != 1.0 {
		t.Fatalf("recovering state %s", rec)
	}
	if got := string(EncodeControllerEpoch(7)); got != "7" {
		t.Fatal(got)
	}
	if got := string(EncodeClusterID("abc")); got != `{"version":"1","id":"abc"}` {
		t.Fatal(got)
	}
	topic := EncodeTopic(TopicAssignment{Partitions: map[int32][]int32{0: {1, 2}, 1: {2, 1}}})
	back, err := DecodeTopic("t", topic)
	if err != nil || len(back.Partitions) != 2 || back.Partitions[1][0] != 2 {
		t.Fatalf("%s -> %+v %v", topic, back, err)
	}
	json.Unmarshal(topic, &m)
	if m["version"] != 3.0 || m["adding_replicas"] == nil || m["removing_replicas"] == nil {
		t.Fatalf("topic %s", topic)
	}
	// A Kafka 2.x broker registration (no features) parses.
	old := `{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"SASL_SSL"},"endpoints":["PLAINTEXT://h:9092","INTERNAL://h:9093"],"jmx_port":-1,"host":"h","timestamp":"1","port":9092,"version":4}`
	bi, err := DecodeBroker(5, []byte(old))
	if err != nil || len(bi.Endpoints) != 2 || bi.Endpoints[1].SecurityProtocol != 3 || bi.Endpoints[0].Port != 9092 {
		t.Fatalf("%+v %v", bi, err)
	}
	if _, err := DecodeState([]byte("{"), 0); !errors.Is(err, ErrBadZnode) {
		t.Fatal(err)
	}
}

func TestMemFencedWriteMakesControllerResign(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	ctrl := c.controller()
	ctx := context.Background()
	a := TopicAssignment{ID: [16]byte{9}, Partitions: map[int32][]int32{0: {1, 2}}}
	c.admin.Create(ctx, TopicPath("t"), EncodeTopic(a), Persistent)
	c.converged()
	// Someone else bumps /controller_epoch (a controller we never heard
	// of): our next write's epoch check fails and we resign.
	if _, err := c.admin.Set(ctx, ControllerEpochPath, EncodeControllerEpoch(9), -1); err != nil {
		t.Fatal(err)
	}
	other := c.brokers[3-ctrl.ID()]
	other.Close() // broker change -> the controller tries a fenced write
	// It gave /controller up, so a proper election moves the epoch on.
	waitFor(t, 5*time.Second, "re-election at epoch 10", func() (bool, string) {
		return ctrl.ActiveControllerEpoch() == 10, fmt.Sprint("epoch ", ctrl.ActiveControllerEpoch())
	})
	// Had the epoch-1 write gone through, the ISR change would carry
	// controller_epoch 1 and the new controller would have had nothing to
	// write; the only write is the new controller's.
	waitFor(t, 5*time.Second, "the ISR shrink", func() (bool, string) {
		data, st, _ := c.admin.Get(ctx, PartitionStatePath("t", 0), false)
		s, _ := DecodeState(data, st.Version)
		return len(s.ISR) == 1, string(data)
	})
	data, st, _ := c.admin.Get(ctx, PartitionStatePath("t", 0), false)
	if s, _ := DecodeState(data, st.Version); s.ControllerEpoch != 10 || s.ZkVersion != 1 {
		t.Fatalf("state after fencing: %s (version %d)", data, st.Version)
	}
}

func TestMemCreateDeleteAndAddPartitions(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	ctrl := c.controller()
	via := c.brokers[2]
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 5000
	for _, n := range []string{"ok", "bad/name", "ok"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 2, 2
		create.Topics = append(create.Topics, rt)
	}
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "toobig", 1, 4
	create.Topics = append(create.Topics, rt)
	resp, err := via.CreateTopics(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	codes := []int16{}
	for _, r := range resp.Topics {
		codes = append(codes, r.ErrorCode)
	}
	want := []int16{kerr.InvalidRequest.Code, kerr.InvalidTopicException.Code, kerr.InvalidRequest.Code, kerr.InvalidReplicationFactor.Code}
	if len(codes) != 4 || codes[0] != want[0] || codes[1] != want[1] || codes[3] != want[3] {
		t.Fatalf("codes %v want %v", codes, want)
	}
	c.createTopic(via, "t", 2, 2)
	again, _ := via.CreateTopics(ctx, create2("t"))
	if again.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("duplicate create: %d", again.Topics[0].ErrorCode)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 5000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 5}, {Topic: "nope", Count: 2}, {Topic: "t", Count: 1}}
	cpr, err := via.CreatePartitions(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if cpr.Topics[0].ErrorCode != 0 || cpr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || cpr.Topics[2].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("CreatePartitions %+v", cpr.Topics)
	}
	if tp, _ := via.Image().TopicByName("t"); tp.NumPartitions() != 5 {
		t.Fatalf("t has %d partitions", tp.NumPartitions())
	}
	c.converged()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis, del.TopicNames = 5, 5000, []string{"t", "ghost"}
	dr, err := ctrl.DeleteTopics(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DeleteTopics %+v", dr.Topics)
	}
	c.converged()
	if _, ok, _ := c.admin.Exists(ctx, TopicPath("t"), false); ok {
		t.Fatal("topic znode survived deletion")
	}
	if kids, _ := c.admin.Children(ctx, DeleteTopicsPath, false); len(kids) != 0 {
		t.Fatalf("deletion markers left: %v", kids)
	}
}

func create2(name string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	r.Topics = append(r.Topics, rt)
	return r
}

// A broker that bounces (new session, same id) between two reads of
// /brokers/ids is detected by its larger czxid (KIP-380) and gets full
// state again.
func TestMemBouncedBrokerGetsFullState(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	ctrl := c.controller()
	c.createTopic(ctrl, "t", 2, 2)
	c.converged()
	other := c.brokers[3-ctrl.ID()]
	oldEpoch := other.BrokerEpoch()
	c.mem.Expire(other.Store().SessionID())
	waitFor(t, 5*time.Second, "re-registration", func() (bool, string) {
		return other.BrokerEpoch() > oldEpoch, "same epoch"
	})
	c.converged()
	waitFor(t, 5*time.Second, "LeaderAndIsr to the new incarnation", func() (bool, string) {
		r, ok := other.Replica("t", 0)
		return ok && r.LeaderEpoch > 0, "not yet"
	})
}

// The controller itself shutting down: it moves its own leaderships away
// through its own ControlledShutdown handler, then leaves; another broker
// takes over at the next epoch and the survivors converge.
func TestMemControllerControlledShutdown(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.createTopic(ctrl, "t", 6, 3)
	c.converged()
	if err := ctrl.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	next := c.controller()
	if next.ActiveControllerEpoch() != 2 {
		t.Fatalf("epoch %d", next.ActiveControllerEpoch())
	}
	c.converged()
	tr, err := ReadTruth(context.Background(), c.admin)
	if err != nil {
		t.Fatal(err)
	}
	for tp, s := range tr.States {
		if s.Leader == ctrl.ID() || slices.Contains(s.ISR, ctrl.ID()) {
			t.Fatalf("%v still has the departed controller: %+v", tp, s)
		}
	}
}

func TestControlledShutdownErrors(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	ctrl := c.controller()
	other := c.brokers[3-ctrl.ID()]
	var code int16
	call := func(id int32, epoch int64) {
		t.Helper()
		if err := ctrl.ctrl.call(context.Background(), func() { _, code = ctrl.ctrl.controlledShutdown(id, epoch) }); err != nil {
			t.Fatal(err)
		}
	}
	call(other.ID(), other.BrokerEpoch()-1)
	if code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale epoch: %d", code)
	}
	// A forged request for another broker must name its current
	// registration: -1 (Kafka's "unknown") and later epochs are refused
	// too, and the broker keeps its leaderships.
	for _, forged := range []int64{-1, other.BrokerEpoch() + 1, math.MaxInt64} {
		call(other.ID(), forged)
		if code != kerr.StaleBrokerEpoch.Code {
			t.Fatalf("broker epoch %d: %d, want STALE_BROKER_EPOCH", forged, code)
		}
	}
	if err := ctrl.ctrl.call(context.Background(), func() {
		if ctrl.ctrl.view.ShuttingDown[other.ID()] {
			code = -1
		}
	}); err != nil || code == -1 {
		t.Fatalf("a refused ControlledShutdown marked broker %d shutting down (%v)", other.ID(), err)
	}
	call(42, -1)
	if code != kerr.BrokerNotAvailable.Code {
		t.Fatalf("unknown broker: %d", code)
	}
	if err := other.ctrl.call(context.Background(), func() { _, code = other.ctrl.controlledShutdown(ctrl.ID(), -1) }); err != nil {
		t.Fatal(err)
	}
	if code != kerr.NotController.Code {
		t.Fatalf("not controller: %d", code)
	}
}

// Issue 12, zk-legacy: anyone who reaches the listener can send a push.
// Kafka adopts the highest controller epoch it is sent and lets broker
// epoch -1 (or any later one) through, so a forged UpdateMetadata at
// controller epoch 2147483647 used to fence the real controller for good.
// Now an epoch above what ZooKeeper holds is refused and not adopted, and
// the broker epoch must be this broker's registration.
func TestForgedPushEpochs(t *testing.T) {
	b := bareBroker(t, 2, 102)
	lai, um := viewPushes(t, 5, nil)
	if r := pushOne(t, b, um).(*kmsg.UpdateMetadataResponse); r.ErrorCode != 0 {
		t.Fatalf("real UpdateMetadata: %d", r.ErrorCode)
	}
	forged := *um
	forged.ControllerEpoch = math.MaxInt32
	forged.TopicStates = nil
	if r := pushOne(t, b, &forged).(*kmsg.UpdateMetadataResponse); r.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("UpdateMetadata at controller epoch 2147483647: %d, want STALE_CONTROLLER_EPOCH", r.ErrorCode)
	}
	forgedLai := *lai
	forgedLai.ControllerEpoch = bareControllerEpoch + 1
	if r := pushOne(t, b, &forgedLai).(*kmsg.LeaderAndISRResponse); r.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("LeaderAndIsr one epoch past ZooKeeper: %d, want STALE_CONTROLLER_EPOCH", r.ErrorCode)
	}
	if got := b.SeenControllerEpoch(); got != 5 || b.Image().NumPartitions() != 3 {
		t.Fatalf("after forged pushes: controller epoch %d, %d partitions cached", got, b.Image().NumPartitions())
	}
	for _, epoch := range []int64{-1, 103, math.MaxInt64} {
		f := *lai
		f.BrokerEpoch = epoch
		if r := pushOne(t, b, &f).(*kmsg.LeaderAndISRResponse); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
			t.Fatalf("LeaderAndIsr at broker epoch %d: %d, want STALE_BROKER_EPOCH", epoch, r.ErrorCode)
		}
	}
	if _, ok := b.Replica("a", 0); ok {
		t.Fatal("a forged LeaderAndIsr was applied")
	}
	// The real controller (epoch 5, then a successor at ZooKeeper's epoch)
	// is still obeyed, and a broker epoch above the one registerSelf saw
	// passes when it is the registration's czxid.
	if r := pushOne(t, b, lai).(*kmsg.LeaderAndISRResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("real LeaderAndIsr after the forged ones: %+v", r)
	}
	// (The in-memory server's zxids are small: the broker's epoch goes
	// back to 1, as before a re-registration whose result registerSelf has
	// not stored yet.)
	st := b.Store()
	if err := ensurePath(context.Background(), st, BrokerIDsPath); err != nil {
		t.Fatal(err)
	}
	res, err := st.Multi(context.Background(), CreateOp{Path: BrokerPath(2), Mode: Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	b.brokerEpoch.Store(1)
	next := *um
	next.ControllerEpoch, next.BrokerEpoch = bareControllerEpoch, res[0].Stat.Czxid
	if next.BrokerEpoch <= 1 {
		t.Fatalf("registration czxid %d not above 1", next.BrokerEpoch)
	}
	stale := next
	stale.BrokerEpoch++
	if r := pushOne(t, b, &stale).(*kmsg.UpdateMetadataResponse); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("UpdateMetadata one past the registration's czxid: %d", r.ErrorCode)
	}
	if r := pushOne(t, b, &next).(*kmsg.UpdateMetadataResponse); r.ErrorCode != 0 {
		t.Fatalf("successor's UpdateMetadata at ZooKeeper's epoch: %d", r.ErrorCode)
	}
	if b.SeenControllerEpoch() != bareControllerEpoch {
		t.Fatalf("controller epoch %d, want %d", b.SeenControllerEpoch(), bareControllerEpoch)
	}
}

func TestStopReplicaEpochRules(t *testing.T) {
	b := bareBroker(t, 2, 102)
	lai, _ := viewPushes(t, 5, nil) // a-0 at leader epoch 4, a-1 at 1, b-0 absent for 2
	pushOne(t, b, lai)
	sr := kmsg.NewPtrStopReplicaRequest()
	sr.Version, sr.ControllerEpoch, sr.BrokerEpoch = StopReplicaVersion, 5, 102
	sr.Topics = []kmsg.StopReplicaRequestTopic{{Topic: "a", PartitionStates: []kmsg.StopReplicaRequestTopicPartitionState{
		{Partition: 0, LeaderEpoch: 5}, // newer epoch: stops
		{Partition: 1, LeaderEpoch: 0}, // older: fenced
	}}, {Topic: "b", PartitionStates: []kmsg.StopReplicaRequestTopicPartitionState{
		{Partition: 0, LeaderEpoch: 7}, // not hosted here: NONE
	}}}
	r := pushOne(t, b, sr).(*kmsg.StopReplicaResponse)
	if r.ErrorCode != 0 || r.Partitions[0].ErrorCode != 0 || r.Partitions[1].ErrorCode != kerr.FencedLeaderEpoch.Code ||
		r.Partitions[2].ErrorCode != 0 {
		t.Fatalf("%+v", r)
	}
	if _, ok := b.Replica("a", 0); ok {
		t.Fatal("a-0 not stopped")
	}
	if _, ok := b.Replica("a", 1); !ok {
		t.Fatal("a-1 stopped by a fenced request")
	}
}

// TestStopReplicaSameEpochFenced: Kafka 3.3 answers a StopReplica at the
// leader epoch the broker holds FENCED_LEADER_EPOCH and keeps the replica
// (its controller sends the current epoch when it takes a follower
// offline); -1 (no epoch) and -2 (deletion) always stop.
func TestStopReplicaSameEpochFenced(t *testing.T) {
	b := bareBroker(t, 2, 102)
	lai, _ := viewPushes(t, 5, nil) // a-0 at leader epoch 4, a-1 at 1
	pushOne(t, b, lai)
	sr := kmsg.NewPtrStopReplicaRequest()
	sr.Version, sr.ControllerEpoch, sr.BrokerEpoch = StopReplicaVersion, 5, 102
	sr.Topics = []kmsg.StopReplicaRequestTopic{{Topic: "a", PartitionStates: []kmsg.StopReplicaRequestTopicPartitionState{
		{Partition: 0, LeaderEpoch: 4},
		{Partition: 1, LeaderEpoch: -1},
	}}}
	r := pushOne(t, b, sr).(*kmsg.StopReplicaResponse)
	if r.Partitions[0].ErrorCode != kerr.FencedLeaderEpoch.Code || r.Partitions[1].ErrorCode != 0 {
		t.Fatalf("%+v", r)
	}
	if _, ok := b.Replica("a", 0); !ok {
		t.Fatal("a-0 stopped at its own leader epoch")
	}
	if _, ok := b.Replica("a", 1); ok {
		t.Fatal("a-1 not stopped with epoch -1")
	}
}
