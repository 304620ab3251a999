package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// ListOffsets: v1-v8 (v0's OldStyleOffsets are not served).
//
// A follower's latest or earliest (ReplicaID >= 0) is answered from the
// leader's log: latest is its log end offset, earliest its log start (Kafka
// answers a replica without an isolation level); followers ask these when
// their fetch is out of range. Everything else is answered as for consumers
// (ReplicaID -1; -2, Kafka's debugging replica, is treated as a consumer,
// and a replica's timestamp lookup stops at the high watermark).
//
// Behaviour, as Kafka's ReplicaManager.fetchOffsetForTimestamp for consumers:
//   - Timestamp -2 (earliest) and -4 (earliest local, KIP-405: there is no
//     tiered storage, so the same): the log start offset; -1 (latest): the high
//     watermark, or the last stable offset for read_committed (IsolationLevel
//     1, v2+), which also bounds the lookups below for read_committed; -3
//     (max timestamp, v7+, KIP-734): the batch reaching the largest
//     timestamp; t >= 0: the first record whose timestamp is at or
//     after t. Nothing qualifying (or only at or above the high watermark):
//     offset -1, timestamp -1, no error.
//   - Right after an election (KIP-207), while the new leader's high
//     watermark is below its leader epoch's start offset: OFFSET_NOT_AVAILABLE
//     for latest, and for max-timestamp and timestamp lookups that find
//     nothing below the high watermark (Kafka's fetchOffsetForTimestamp);
//     earliest is answered.
//   - LeaderEpoch (v4+) is the epoch of the batch holding the offset (the
//     current leader epoch for earliest/latest); CurrentLeaderEpoch fences
//     (KIP-320). Errors per partition as Fetch: UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
//   - -3 before v7, -4 before v8, and any other negative timestamp (-5, latest
//     tiered, needs v9, which is not served): UNSUPPORTED_VERSION.
func (c *ClientAPI) handleListOffsets(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.ListOffsetsRequest)
	resp := body.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := c.cfg.Metadata.Image()
	for _, rt := range body.Topics {
		t, _ := img.TopicByName(rt.Topic)
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			partition := func() (*replica.Partition, error) { return c.hostedPartition(img, t, rp.Partition) }
			if body.ReplicaID >= 0 && (rp.Timestamp == replica.LatestTimestamp || rp.Timestamp == replica.EarliestTimestamp) {
				sp.ErrorCode = listOffsetForReplica(&sp, body.Version, rp, partition)
			} else {
				sp.ErrorCode = listOffset(c, &sp, body.Version, body.IsolationLevel == 1, rp, partition)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func listOffset(c *ClientAPI, sp *kmsg.ListOffsetsResponseTopicPartition, version int16, readCommitted bool,
	rp kmsg.ListOffsetsRequestTopicPartition, partition func() (*replica.Partition, error)) int16 {
	switch {
	case rp.Timestamp == replica.MaxTimestamp && version < 7,
		rp.Timestamp == replica.EarliestLocalTimestamp && version < 8,
		rp.Timestamp < replica.EarliestLocalTimestamp:
		return kerr.UnsupportedVersion.Code
	}
	p, err := partition()
	if err != nil {
		return replicaErrorCode(err)
	}
	epoch := int32(-1)
	if version >= 4 {
		epoch = rp.CurrentLeaderEpoch
	}
	offset, ts, leaderEpoch, found, err := p.OffsetForTimestampIsolated(rp.Timestamp, epoch, readCommitted)
	if err != nil {
		return replicaErrorCode(err)
	}
	if found {
		sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch
	}
	return 0
}

// listOffsetForReplica answers a follower (ReplicaID >= 0): latest is the
// leader's log end offset, earliest its log start offset
// (replica.Partition.OffsetForReplica).
func listOffsetForReplica(sp *kmsg.ListOffsetsResponseTopicPartition, version int16,
	rp kmsg.ListOffsetsRequestTopicPartition, partition func() (*replica.Partition, error)) int16 {
	p, err := partition()
	if err != nil {
		return replicaErrorCode(err)
	}
	epoch := int32(-1)
	if version >= 4 {
		epoch = rp.CurrentLeaderEpoch
	}
	offset, leaderEpoch, err := p.OffsetForReplica(rp.Timestamp, epoch)
	if err != nil {
		return replicaErrorCode(err)
	}
	sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, -1, leaderEpoch
	return 0
}
