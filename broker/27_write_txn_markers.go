package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// WriteTxnMarkers: v0-1, sent by a transaction coordinator to partition
// leaders to end a transaction (transaction.version 1: no v2 field).
//
// Behaviour, as Kafka's KafkaApis.handleWriteTxnMarkersRequest:
//   - Each marker's partitions get a COMMIT or ABORT control batch appended
//     by their leader (replica.Partition.AppendTxnMarker) and are answered
//     once the high watermark passes it (acks=-1), or REQUEST_TIMED_OUT after
//     writeTxnMarkersTimeout.
//   - A partition not led here is NOT_LEADER_OR_FOLLOWER, an unknown one
//     UNKNOWN_TOPIC_OR_PARTITION; a producer epoch older than the
//     partition's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than
//     the one of the producer's last marker TRANSACTION_COORDINATOR_FENCED
//     (a zombie coordinator), a negative producer id or epoch
//     INVALID_RECORD.
//   - A marker on a __consumer_offsets partition, once committed, settles
//     the producer's TxnOffsetCommit offsets in the group coordinator
//     (group.Coordinator.CompleteTxn), as Kafka's onTransactionCompleted.
//   - Kafka checks CLUSTER_ACTION;
//     kraftd has no authorizer (PLAINTEXT only), so any client may send it.
func (c *ClientAPI) handleWriteTxnMarkers(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := body.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	img := c.cfg.Metadata.Image()
	type pending struct {
		p      *replica.Partition
		offset int64
		code   *int16
		pid    int64
		commit bool
	}
	var waits []pending
	for _, m := range body.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			t, _ := img.TopicByName(mt.Topic)
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			for i, partition := range mt.Partitions {
				rp := &rt.Partitions[i]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = partition
				p, err := c.hostedPartition(img, t, partition)
				var offset int64
				if err == nil {
					offset, err = p.AppendTxnMarker(replica.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
						CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed})
				}
				rp.ErrorCode = replicaErrorCode(err)
				if err == nil {
					// rp points into rt.Partitions' array, which the
					// response shares once rt is appended.
					waits = append(waits, pending{p: p, offset: offset, code: &rp.ErrorCode, pid: m.ProducerID, commit: m.Committed})
				}
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	wctx, cancel := context.WithTimeout(ctx, writeTxnMarkersTimeout)
	defer cancel()
	for _, w := range waits {
		if err := w.p.WaitCommitted(wctx, w.offset); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			*w.code = replicaErrorCode(err)
			continue
		}
		c.markerCommitted(w.p.TopicPartition(), w.pid, w.commit, w.offset)
	}
	return resp, nil
}

// writeTxnMarkersTimeout bounds the wait for markers to commit: Kafka's
// request.timeout.ms default, which its coordinator's marker channel uses.
const writeTxnMarkersTimeout = 30 * time.Second

// markerCommitted tells the group coordinator that producer pid's marker
// at offset of tp committed, when tp is a __consumer_offsets partition: its pending
// TxnOffsetCommit offsets commit or are dropped.
func (c *ClientAPI) markerCommitted(tp replica.TopicPartition, pid int64, commit bool, offset int64) {
	if c.groups != nil && tp.Topic == group.Topic {
		c.groups.CompleteTxn(tp.Partition, pid, commit, offset)
	}
}
