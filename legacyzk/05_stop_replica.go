package legacyzk

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// handleStopReplica is ReplicaManager.stopReplicas: the same epoch fences
// as LeaderAndIsr; then each partition stops if the request's leader epoch
// is -2 (deletion), -1 (none) or not older than ours (the controller
// sends the epoch the broker already holds), else FENCED_LEADER_EPOCH.
// There are no logs to delete: the replica is simply forgotten.
func (b *Broker) handleStopReplica(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.StopReplicaRequest)
	resp := r.ResponseKind().(*kmsg.StopReplicaResponse)
	code, err := b.verifyPush(ctx, r.BrokerEpoch, r.ControllerEpoch)
	if err != nil {
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
				pc = b.stopOne(TopicPartition{t.Topic, p.Partition}, p.LeaderEpoch)
			}
			resp.Partitions = append(resp.Partitions, kmsg.StopReplicaResponsePartition{Topic: t.Topic, Partition: p.Partition, ErrorCode: pc})
		}
	}
	return resp, nil
}

func (b *Broker) stopOne(tp TopicPartition, leaderEpoch int32) int16 {
	cur, ok := b.replicas[tp]
	if ok && leaderEpoch >= 0 && leaderEpoch < cur.LeaderEpoch {
		return kerr.FencedLeaderEpoch.Code
	}
	delete(b.replicas, tp)
	return 0
}
