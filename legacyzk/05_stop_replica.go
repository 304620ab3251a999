package legacyzk

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// handleStopReplica is ReplicaManager.stopReplicas: the same epoch fences
// as LeaderAndIsr; then each partition stops if the request's leader epoch
// is -2 (deletion), -1 (none) or newer than ours, else FENCED_LEADER_EPOCH,
// for an equal epoch too, as Kafka 3.3 answers (its controller sends the
// current epoch to a follower it takes offline, so that broker keeps the
// replica until LeaderAndIsr or its own shutdown). A stopped replica's log
// is deleted with the request's delete flag, else closed and kept; a
// replica this broker does not host stops with NONE (deleting what a
// delete finds on disk).
func (b *Broker) handleStopReplica(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.StopReplicaRequest)
	resp := r.ResponseKind().(*kmsg.StopReplicaResponse)
	code, err := b.verifyPush(ctx, r.BrokerEpoch, r.ControllerEpoch)
	if err != nil {
		return nil, err
	}
	if err := b.waitDataPlane(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if code == 0 {
		code = b.pushFenced(r.BrokerEpoch, r.ControllerEpoch)
	}
	if code == 0 {
		b.controllerEpoch = r.ControllerEpoch
	}
	resp.ErrorCode = code
	for _, t := range r.Topics {
		for _, p := range t.PartitionStates {
			pc := code
			if pc == 0 {
				pc = b.stopOne(TopicPartition{t.Topic, p.Partition}, p.LeaderEpoch, p.Delete)
			}
			resp.Partitions = append(resp.Partitions, kmsg.StopReplicaResponsePartition{Topic: t.Topic, Partition: p.Partition, ErrorCode: pc})
		}
	}
	return resp, nil
}

// stopOne stops one replica; caller holds mu.
func (b *Broker) stopOne(tp TopicPartition, leaderEpoch int32, del bool) int16 {
	cur, ok := b.replicas[tp]
	if ok && leaderEpoch >= 0 && leaderEpoch <= cur.LeaderEpoch {
		return kerr.FencedLeaderEpoch.Code
	}
	if code := b.stopReplica(tp, del); code != 0 {
		return code
	}
	delete(b.replicas, tp)
	return 0
}
