package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// OffsetForLeaderEpoch: v0-v4, as Kafka 3.9 serves it (KIP-101, KIP-279,
// KIP-320). Consumers (librdkafka, franz-go and the Java client after a
// leader change, KIP-320) and followers of older brokers ask where a leader
// epoch ends in the leader's log, to detect truncation.
//
// Behaviour, as Kafka's ReplicaManager.lastOffsetForLeaderEpoch:
//   - Only the leader answers (fetchOnlyFromLeader, whatever ReplicaID says):
//     NOT_LEADER_OR_FOLLOWER for a partition the metadata places elsewhere,
//     UNKNOWN_TOPIC_OR_PARTITION for one it does not know.
//   - CurrentLeaderEpoch (v2+; -1 skips the check) fences with
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
//   - The answer is the largest epoch <= LeaderEpoch in the leader-epoch
//     cache and the start offset of the next epoch (the log end offset for
//     the leader's latest epoch); -1/-1 when the cache cannot say (the epoch
//     is newer than every cached one, or negative). LeaderEpoch in the
//     answer is v1+.
func (c *ClientAPI) handleOffsetForLeaderEpoch(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := body.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := c.cfg.Metadata.Image()
	for _, rt := range body.Topics {
		t, _ := img.TopicByName(rt.Topic)
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			current := int32(-1)
			if body.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			p, err := c.hostedPartition(img, t, rp.Partition)
			if err == nil {
				e, lerr := p.LastOffsetForLeaderEpoch(current, rp.LeaderEpoch)
				sp.LeaderEpoch, sp.EndOffset, err = e.Epoch, e.EndOffset, lerr
			}
			sp.ErrorCode = replicaErrorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
