package controller

// AlterPartition, API key 56, versions 0-3 (KIP-497, KIP-704, KIP-841,
// KIP-903), as Kafka 3.7+'s ReplicationControlManager.alterPartition. A
// partition leader asks to change its ISR (shrink a lagging follower out,
// bring a caught-up one back in).
//
//   - The requesting broker must be registered with BrokerEpoch, else the
//     whole answer is STALE_BROKER_EPOCH.
//   - Topics by name (v0-1) or id (v2+); unknown: UNKNOWN_TOPIC_OR_PARTITION
//     (v0-1) or UNKNOWN_TOPIC_ID (v2+) for each partition.
//   - Per partition, in Kafka's order: unknown partition
//     UNKNOWN_TOPIC_OR_PARTITION; a leader or partition epoch newer than
//     ours NOT_CONTROLLER (we are likely a stale controller); an older
//     leader epoch FENCED_LEADER_EPOCH; a requester that is not the leader
//     INVALID_REQUEST; an older partition epoch INVALID_UPDATE_VERSION; an
//     ISR that is not a set of assigned replicas or lacks the leader
//     INVALID_REQUEST; leader recovery RECOVERING with more than one replica,
//     or RECOVERED to RECOVERING, INVALID_REQUEST; an ISR member not
//     registered, fenced, in controlled shutdown, or (v3) whose broker epoch
//     is not -1 and not its registered one: INELIGIBLE_REPLICA (v2+) or
//     OPERATION_NOT_ATTEMPTED (v0-1).
//   - Otherwise a PartitionChangeRecord (when something changes, including
//     the leader recovery state: a leader elected uncleanly reports
//     RECOVERED, KIP-704) and the partition's new state: leader, leader
//     epoch, ISR, partition epoch, leader recovery state.
//     The leader never changes here (no reassignments yet, which is the only
//     way Kafka's answer can carry NEW_LEADER_ELECTED).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) alterPartition(req *kmsg.AlterPartitionRequest) Result {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	resp.SetVersion(req.Version)
	img := c.pending.img
	if b, ok := img.Broker(req.BrokerID); !ok || b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return Result{Response: resp}
	}
	mv := c.metadataVersion()
	var recs []records.Record
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID // kmsg spells it TopidID
		t := alterPartitionTopic(img, req.Version, rt)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case t == nil && req.Version >= 2:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case t == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if rec := c.alterOnePartition(img, req, t, rp, &sp, mv); rec != nil {
					recs = append(recs, records.Record{Version: partitionChangeVersion(mv), Message: rec})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return Result{Records: recs, Response: resp, nonAtomic: true} // Kafka: ControllerResult.of
}

func alterPartitionTopic(img *image.Image, version int16, rt kmsg.AlterPartitionRequestTopic) *image.Topic {
	var t *image.Topic
	if version >= 2 {
		t, _ = img.TopicByID(records.UUID(rt.TopicID))
	} else {
		t, _ = img.TopicByName(rt.Topic)
	}
	return t
}

// alterOnePartition validates one partition's change and fills sp; it
// returns the record to write, or nil.
func (c *core) alterOnePartition(img *image.Image, req *kmsg.AlterPartitionRequest, t *image.Topic,
	rp kmsg.AlterPartitionRequestTopicPartition, sp *kmsg.AlterPartitionResponseTopicPartition, mv int16) *records.PartitionChangeRecord {
	p, ok := t.Partition(rp.Partition)
	if !ok {
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return nil
	}
	isr := alterPartitionISR(req.Version, rp)
	if code := validateAlterPartition(img, req, p, rp, isr); code != 0 {
		sp.ErrorCode = code
		return nil
	}
	ids := make([]int32, len(isr))
	for i, m := range isr {
		ids[i] = m.BrokerID
	}
	rec := partitionChange(t.ID(), rp.Partition, p, ids, func(r int32) bool { return isActive(img, r) }, false, mv)
	recovery := p.LeaderRecoveryState
	if rp.LeaderRecoveryState != p.LeaderRecoveryState {
		// A leader elected uncleanly reports RECOVERED once it leads
		// (validateAlterPartition refuses the other direction), as
		// Kafka's setTargetLeaderRecoveryState.
		if rec == nil {
			rec = records.NewPartitionChangeRecord()
			rec.TopicID, rec.PartitionID = t.ID(), rp.Partition
		}
		rec.LeaderRecoveryState, recovery = rp.LeaderRecoveryState, rp.LeaderRecoveryState
	}
	leader, leaderEpoch, partitionEpoch, newISR := p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR()
	if rec != nil {
		partitionEpoch++
		if rec.Leader != records.NoLeaderChange {
			leader, leaderEpoch = rec.Leader, leaderEpoch+1
		}
		if rec.ISR != nil {
			newISR = rec.ISR
		}
	}
	sp.LeaderID, sp.LeaderEpoch, sp.PartitionEpoch = leader, leaderEpoch, partitionEpoch
	sp.ISR, sp.LeaderRecoveryState = slices.Clone(newISR), recovery
	return rec
}

// alterPartitionISR is the proposed ISR with broker epochs; before v3 the
// epochs are -1 (not checked).
func alterPartitionISR(version int16, rp kmsg.AlterPartitionRequestTopicPartition) []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR {
	if version >= 3 {
		return rp.NewEpochISR
	}
	out := make([]kmsg.AlterPartitionRequestTopicPartitionNewEpochISR, len(rp.NewISR))
	for i, id := range rp.NewISR {
		out[i] = kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: -1}
	}
	return out
}

// validateAlterPartition is Kafka's validateAlterPartitionData.
func validateAlterPartition(img *image.Image, req *kmsg.AlterPartitionRequest, p image.Partition,
	rp kmsg.AlterPartitionRequestTopicPartition, isr []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR) int16 {
	switch {
	case rp.LeaderEpoch > p.LeaderEpoch || rp.PartitionEpoch > p.PartitionEpoch:
		return kerr.NotController.Code
	case rp.LeaderEpoch < p.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case req.BrokerID != p.Leader:
		return kerr.InvalidRequest.Code
	case rp.PartitionEpoch < p.PartitionEpoch:
		return kerr.InvalidUpdateVersion.Code
	}
	ids := make([]int32, len(isr))
	for i, m := range isr {
		ids[i] = m.BrokerID
	}
	switch {
	case !validISR(p.Replicas(), ids), !slices.Contains(ids, p.Leader):
		return kerr.InvalidRequest.Code
	case rp.LeaderRecoveryState == image.LeaderRecovering && len(ids) > 1,
		p.LeaderRecoveryState == image.LeaderRecovered && rp.LeaderRecoveryState == image.LeaderRecovering:
		return kerr.InvalidRequest.Code
	}
	for _, m := range isr {
		b, ok := img.Broker(m.BrokerID)
		if !ok || b.InControlledShutdown || b.Fenced || m.BrokerEpoch != -1 && m.BrokerEpoch != b.Epoch {
			if req.Version > 1 {
				return kerr.IneligibleReplica.Code
			}
			return kerr.OperationNotAttempted.Code
		}
	}
	return 0
}

// validISR is Kafka's Replicas.validateIsr: distinct non-negative ids, all
// among the replicas (an empty ISR passes here; the leader check refuses it).
func validISR(replicas, isr []int32) bool {
	seen := make(map[int32]bool, len(isr))
	for _, id := range isr {
		if id < 0 || seen[id] || !slices.Contains(replicas, id) {
			return false
		}
		seen[id] = true
	}
	return true
}
