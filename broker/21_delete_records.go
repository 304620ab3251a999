package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// DeleteRecords: v0-v2 (v2 flexible, KIP-482), as Kafka's
// ReplicaManager.deleteRecords with DelayedDeleteRecords.
//
// Per partition: the leader raises its log start offset to Offset (-1: its
// high watermark); the records below stop being readable at once and their
// whole segments go at the next retention pass. Errors:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (not hosted here, or
// a follower), POLICY_VIOLATION (cleanup.policy without delete),
// OFFSET_OUT_OF_RANGE (above the high watermark, or negative other than
// -1); each with LowWatermark -1.
//
// The answer waits, up to TimeoutMillis, until every accepted partition's
// low watermark (the smallest log start of the leader and its live
// followers, which report theirs in their fetches) reaches the offset;
// then LowWatermark is that low watermark. A partition that does not get
// there in time answers REQUEST_TIMED_OUT, one whose leadership moved
// meanwhile NOT_LEADER_OR_FOLLOWER.
func (c *ClientAPI) handleDeleteRecords(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := body.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img := c.cfg.Metadata.Image()
	type pending struct {
		sp     *kmsg.DeleteRecordsResponseTopicPartition
		p      *replica.Partition
		offset int64
	}
	var waits []pending
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(body.Topics))
	for i, rt := range body.Topics {
		t, _ := img.TopicByName(rt.Topic)
		st := &resp.Topics[i]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			p, err := c.hostedPartition(img, t, rp.Partition)
			var offset int64
			if err == nil {
				offset, err = p.DeleteRecords(rp.Offset)
			}
			if err != nil {
				sp.ErrorCode = deleteRecordsErrorCode(err)
				continue
			}
			waits = append(waits, pending{sp, p, offset})
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(max(body.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, w := range waits {
		low, err := waitLowWatermark(wctx, w.p, w.offset)
		switch {
		case err == nil:
			w.sp.LowWatermark = low
		case ctx.Err() != nil:
			return nil, ctx.Err() // the client is gone
		case errors.Is(err, context.DeadlineExceeded):
			w.sp.ErrorCode = kerr.RequestTimedOut.Code
		default:
			w.sp.ErrorCode = deleteRecordsErrorCode(err)
		}
	}
	return resp, nil
}

// waitLowWatermark returns p's low watermark once it is at least offset.
func waitLowWatermark(ctx context.Context, p *replica.Partition, offset int64) (int64, error) {
	for {
		changed := p.Changed() // before the check: a move in between wakes us
		low, err := p.LowWatermark()
		if err != nil || low >= offset {
			return low, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
}

func deleteRecordsErrorCode(err error) int16 {
	if errors.Is(err, replica.ErrPolicyViolation) {
		return kerr.PolicyViolation.Code
	}
	return replicaErrorCode(err)
}
