package legacyzk

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wire versions of the controller-to-broker requests, as Kafka 3.3 with
// inter.broker.protocol.version 3.3 sends them (ControllerChannelManager):
// LeaderAndIsr v6 (v5 brought topic ids in 2.8, v6 the leader recovery
// state of KIP-704 in 3.2), UpdateMetadata v7 (topic ids; v8 only marks a
// KRaft controller during migration, 3.4+), StopReplica v3 (per-partition
// leader epoch and delete flag, KIP-570; v4 is again migration-only) and
// ControlledShutdown v3.
const (
	LeaderAndIsrVersion       int16 = 6
	UpdateMetadataVersion     int16 = 7
	StopReplicaVersion        int16 = 3
	ControlledShutdownVersion int16 = 3
)

// Special leader values on the wire.
const (
	// NoLeader is leader -1 in a state znode and on the wire.
	NoLeader int32 = -1
	// LeaderDuringDelete (-2) in UpdateMetadata tells brokers to drop the
	// partition from their cache (topic deletion).
	LeaderDuringDelete int32 = -2
	// EpochDuringDelete (-2) is StopReplica's leader epoch for deletions.
	EpochDuringDelete int32 = -2
)

// ClusterView is the controller context a translation reads: what the
// controller believes about brokers, topics and partition states. The
// translator never writes it.
type ClusterView struct {
	Live         map[int32]BrokerInfo
	ShuttingDown map[int32]bool
	Topics       map[string]TopicAssignment
	States       map[TopicPartition]LeaderIsr
	Deleting     map[string]bool // topics queued for deletion
	// Listener is the inter-broker listener name whose endpoints go into
	// LiveLeaders (and which the senders dial).
	Listener string
}

// Batch is what one state-machine operation decided to tell brokers, Kafka's
// AbstractControllerBrokerRequestBatch between newBatch() and
// sendRequestsToBrokers(): per target broker the partitions whose
// LeaderAndIsr it must get, the UpdateMetadata recipients and partitions
// (one partition set for every recipient), and per broker the replicas to
// stop.
//
// INVARIANTS: every partition in LeaderAndIsr or UpdateMetadata has a
// state in the view it is translated with.
type Batch struct {
	LeaderAndIsr map[int32]map[TopicPartition]bool // broker -> partition -> isNew
	UMBrokers    map[int32]bool
	UMPartitions map[TopicPartition]bool
	StopReplica  map[int32]map[TopicPartition]bool // broker -> partition -> deletePartition
}

// NewBatch returns an empty batch.
func NewBatch() *Batch {
	return &Batch{LeaderAndIsr: map[int32]map[TopicPartition]bool{}, UMBrokers: map[int32]bool{},
		UMPartitions: map[TopicPartition]bool{}, StopReplica: map[int32]map[TopicPartition]bool{}}
}

// Empty reports whether the batch would send nothing.
func (b *Batch) Empty() bool {
	return len(b.LeaderAndIsr) == 0 && len(b.UMBrokers) == 0 && len(b.StopReplica) == 0
}

// AddLeaderAndIsr queues tp's state for brokers, and (as Kafka's
// addLeaderAndIsrRequestForBrokers does) adds tp to the UpdateMetadata for
// every live broker.
func (b *Batch) AddLeaderAndIsr(v *ClusterView, brokers []int32, tp TopicPartition, isNew bool) {
	for _, id := range brokers {
		if _, live := v.Live[id]; !live {
			continue
		}
		m := b.LeaderAndIsr[id]
		if m == nil {
			m = map[TopicPartition]bool{}
			b.LeaderAndIsr[id] = m
		}
		m[tp] = m[tp] || isNew
	}
	b.AddUpdateMetadata(v, slices.Collect(maps.Keys(v.Live)), tp)
}

// AddUpdateMetadata sends UpdateMetadata to brokers, carrying the given
// partitions (none: a broker-list-only update).
func (b *Batch) AddUpdateMetadata(v *ClusterView, brokers []int32, tps ...TopicPartition) {
	for _, id := range brokers {
		if _, live := v.Live[id]; live {
			b.UMBrokers[id] = true
		}
	}
	for _, tp := range tps {
		b.UMPartitions[tp] = true
	}
}

// AddStopReplica stops tp on broker, deleting its log if del.
func (b *Batch) AddStopReplica(v *ClusterView, broker int32, tp TopicPartition, del bool) {
	if _, live := v.Live[broker]; !live {
		return
	}
	m := b.StopReplica[broker]
	if m == nil {
		m = map[TopicPartition]bool{}
		b.StopReplica[broker] = m
	}
	m[tp] = m[tp] || del
}

// Push is one request for one broker.
type Push struct {
	Broker int32
	Req    kmsg.Request
}

// Translate is the pure translator (STYLE rule 9): (batch, view, controller
// id, controller epoch) -> requests, in Kafka's flush order: every
// LeaderAndIsr, then every UpdateMetadata, then every StopReplica, each
// group by broker id. Each request carries the target's broker epoch.
func Translate(v *ClusterView, b *Batch, controllerID, controllerEpoch int32) []Push {
	var out []Push
	for _, id := range sortedKeys(b.LeaderAndIsr) {
		out = append(out, Push{Broker: id, Req: leaderAndIsrRequest(v, id, b.LeaderAndIsr[id], controllerID, controllerEpoch)})
	}
	if len(b.UMBrokers) > 0 {
		parts := sortedTPs(b.UMPartitions)
		for _, id := range sortedKeys(b.UMBrokers) {
			out = append(out, Push{Broker: id, Req: updateMetadataRequest(v, id, parts, controllerID, controllerEpoch)})
		}
	}
	for _, id := range sortedKeys(b.StopReplica) {
		out = append(out, Push{Broker: id, Req: stopReplicaRequest(v, id, b.StopReplica[id], controllerID, controllerEpoch)})
	}
	return out
}

func leaderAndIsrRequest(v *ClusterView, target int32, parts map[TopicPartition]bool, controllerID, controllerEpoch int32) *kmsg.LeaderAndISRRequest {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.Version = LeaderAndIsrVersion
	req.ControllerID, req.ControllerEpoch = controllerID, controllerEpoch
	req.BrokerEpoch = v.Live[target].Epoch
	leaders := map[int32]bool{}
	var topic *kmsg.LeaderAndISRRequestTopicState
	for _, tp := range sortedTPs(parts) {
		st, a := v.States[tp], v.Topics[tp.Topic]
		if topic == nil || topic.Topic != tp.Topic {
			req.TopicStates = append(req.TopicStates, kmsg.LeaderAndISRRequestTopicState{Topic: tp.Topic, TopicID: a.ID})
			topic = &req.TopicStates[len(req.TopicStates)-1]
		}
		p := kmsg.NewLeaderAndISRRequestTopicPartition()
		p.Partition, p.ControllerEpoch = tp.Partition, st.ControllerEpoch
		p.Leader, p.LeaderEpoch, p.ISR, p.ZKVersion = st.Leader, st.LeaderEpoch, slices.Clone(st.ISR), st.ZkVersion
		p.Replicas, p.IsNew, p.LeaderRecoveryState = slices.Clone(a.Partitions[tp.Partition]), parts[tp], st.RecoveryState
		p.AddingReplicas, p.RemovingReplicas = []int32{}, []int32{}
		topic.PartitionStates = append(topic.PartitionStates, p)
		if st.Leader >= 0 {
			leaders[st.Leader] = true
		}
	}
	for _, id := range sortedKeys(leaders) {
		if e, ok := v.Live[id].Endpoint(v.Listener); ok {
			req.LiveLeaders = append(req.LiveLeaders, kmsg.LeaderAndISRRequestLiveLeader{BrokerID: id, Host: e.Host, Port: int32(e.Port)})
		}
	}
	return req
}

func updateMetadataRequest(v *ClusterView, target int32, parts []TopicPartition, controllerID, controllerEpoch int32) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = UpdateMetadataVersion
	req.ControllerID, req.ControllerEpoch = controllerID, controllerEpoch
	req.BrokerEpoch = v.Live[target].Epoch
	var topic *kmsg.UpdateMetadataRequestTopicState
	for _, tp := range parts {
		st, a := v.States[tp], v.Topics[tp.Topic]
		if topic == nil || topic.Topic != tp.Topic {
			req.TopicStates = append(req.TopicStates, kmsg.UpdateMetadataRequestTopicState{Topic: tp.Topic, TopicID: a.ID})
			topic = &req.TopicStates[len(req.TopicStates)-1]
		}
		p := kmsg.NewUpdateMetadataRequestTopicPartition()
		replicas := a.Partitions[tp.Partition]
		p.Partition, p.ControllerEpoch = tp.Partition, st.ControllerEpoch
		p.Leader, p.LeaderEpoch, p.ISR, p.ZKVersion = st.Leader, st.LeaderEpoch, slices.Clone(st.ISR), st.ZkVersion
		p.Replicas = slices.Clone(replicas)
		p.OfflineReplicas = filter(replicas, func(b int32) bool { _, ok := v.Live[b]; return !ok })
		if v.Deleting[tp.Topic] {
			p.Leader = LeaderDuringDelete
		}
		topic.PartitionStates = append(topic.PartitionStates, p)
	}
	for _, id := range sortedKeys(v.Live) {
		req.LiveBrokers = append(req.LiveBrokers, liveBroker(v.Live[id]))
	}
	return req
}

func liveBroker(b BrokerInfo) kmsg.UpdateMetadataRequestLiveBroker {
	lb := kmsg.NewUpdateMetadataRequestLiveBroker()
	lb.ID, lb.Rack = b.ID, b.Rack
	for _, e := range b.Endpoints {
		lb.Endpoints = append(lb.Endpoints, kmsg.UpdateMetadataRequestLiveBrokerEndpoint{
			Port: int32(e.Port), Host: e.Host, ListenerName: e.Name, SecurityProtocol: e.SecurityProtocol})
	}
	return lb
}

func stopReplicaRequest(v *ClusterView, target int32, parts map[TopicPartition]bool, controllerID, controllerEpoch int32) *kmsg.StopReplicaRequest {
	req := kmsg.NewPtrStopReplicaRequest()
	req.Version = StopReplicaVersion
	req.ControllerID, req.ControllerEpoch = controllerID, controllerEpoch
	req.BrokerEpoch = v.Live[target].Epoch
	var topic *kmsg.StopReplicaRequestTopic
	for _, tp := range sortedTPs(parts) {
		if topic == nil || topic.Topic != tp.Topic {
			req.Topics = append(req.Topics, kmsg.StopReplicaRequestTopic{Topic: tp.Topic})
			topic = &req.Topics[len(req.Topics)-1]
		}
		epoch := v.States[tp].LeaderEpoch
		if parts[tp] && v.Deleting[tp.Topic] {
			epoch = EpochDuringDelete
		}
		topic.PartitionStates = append(topic.PartitionStates, kmsg.StopReplicaRequestTopicPartitionState{
			Partition: tp.Partition, LeaderEpoch: epoch, Delete: parts[tp]})
	}
	return req
}

func sortedKeys[V any](m map[int32]V) []int32 {
	return slices.Sorted(maps.Keys(m))
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func sortedTPs[V any](m map[TopicPartition]V) []TopicPartition {
	return slices.SortedFunc(maps.Keys(m), compareTP)
}
