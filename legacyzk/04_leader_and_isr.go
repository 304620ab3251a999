package legacyzk

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
)

// handleLeaderAndIsr is ReplicaManager.becomeLeaderOrFollower: a stale
// broker epoch (a request meant for an earlier incarnation, KIP-380)
// rejects the request with STALE_BROKER_EPOCH; an older controller epoch
// than the highest seen rejects it whole with STALE_CONTROLLER_EPOCH;
// otherwise the epoch is adopted and each partition applies only if its
// leader epoch is strictly greater than the one this broker holds.
func (b *Broker) handleLeaderAndIsr(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.LeaderAndISRRequest)
	b.mu.Lock()
	defer b.mu.Unlock()
	if code := b.pushFenced(r.BrokerEpoch, r.ControllerEpoch); code != 0 {
		return leaderAndIsrError(r, code), nil
	}
	b.controllerEpoch = r.ControllerEpoch
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	for _, ts := range r.TopicStates {
		rt := kmsg.LeaderAndISRResponseTopic{TopicID: ts.TopicID}
		for _, p := range ts.PartitionStates {
			code := b.applyLeaderAndIsr(ts.Topic, records.UUID(ts.TopicID), p)
			rt.Partitions = append(rt.Partitions, kmsg.LeaderAndISRResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// pushFenced is the broker-epoch then controller-epoch check every push
// goes through; 0 means accepted. Caller holds mu.
func (b *Broker) pushFenced(brokerEpoch int64, controllerEpoch int32) int16 {
	if brokerEpoch != -1 && brokerEpoch < b.brokerEpoch.Load() {
		return kerr.StaleBrokerEpoch.Code
	}
	if controllerEpoch < b.controllerEpoch {
		b.log.Info("rejected push from an older controller", zap.Int32("pushEpoch", controllerEpoch), zap.Int32("seenEpoch", b.controllerEpoch))
		return kerr.StaleControllerEpoch.Code
	}
	return 0
}

// applyLeaderAndIsr applies one partition state; caller holds mu.
func (b *Broker) applyLeaderAndIsr(topic string, id records.UUID, p kmsg.LeaderAndISRRequestTopicPartition) int16 {
	tp := TopicPartition{topic, p.Partition}
	cur, known := b.replicas[tp]
	switch {
	case known && cur.TopicID != id && !cur.TopicID.IsZero():
		return kerr.InconsistentTopicID.Code
	case known && p.LeaderEpoch <= cur.LeaderEpoch:
		return kerr.StaleControllerEpoch.Code // Kafka reports stale leader epochs this way
	case !slices.Contains(p.Replicas, b.cfg.NodeID):
		return kerr.UnknownTopicOrPartition.Code
	}
	b.replicas[tp] = ReplicaState{TopicID: id, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		ISR: slices.Clone(p.ISR), Replicas: slices.Clone(p.Replicas), PartitionEpoch: p.ZKVersion,
		ControllerEpoch: p.ControllerEpoch}
	return 0
}

// leaderAndIsrError is LeaderAndIsrRequest.getErrorResponse: the top-level
// code and the same code for every partition.
func leaderAndIsrError(r *kmsg.LeaderAndISRRequest, code int16) *kmsg.LeaderAndISRResponse {
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	resp.ErrorCode = code
	for _, ts := range r.TopicStates {
		rt := kmsg.LeaderAndISRResponseTopic{TopicID: ts.TopicID}
		for _, p := range ts.PartitionStates {
			rt.Partitions = append(rt.Partitions, kmsg.LeaderAndISRResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
