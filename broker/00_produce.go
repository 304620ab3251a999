package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// Produce: v3-v11 (v3 is the first to carry RecordBatch v2 only; v12 would
// announce transaction.version 2, v13 addresses topics by id).
//
// Behaviour, as Kafka's KafkaApis.handleProduceRequest / ReplicaManager:
//   - Acks other than 0, 1, -1: INVALID_REQUIRED_ACKS on every partition.
//   - Each partition's records go to its leader replica (replica.Partition.
//     AppendAsLeader): one RecordBatch v2, valid CRC, idempotent sequence
//     checks; errors per partition (CORRUPT_MESSAGE, INVALID_RECORD - as
//     CORRUPT_MESSAGE before v8, which lacks it -, MESSAGE_TOO_LARGE,
//     RECORD_LIST_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
//     INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS for acks=-1 below
//     min.insync.replicas). A topic the image does not know is
//     UNKNOWN_TOPIC_OR_PARTITION; a partition hosted elsewhere
//     NOT_LEADER_OR_FOLLOWER, with the leader and its endpoint on this
//     listener from v10 on (KIP-951).
//   - acks=-1 answers once the high watermark passes every appended batch
//     (every ISR member has it), or REQUEST_TIMED_OUT for the partitions still
//     waiting at TimeoutMillis; a duplicate waits for its original batch. A
//     batch that committed after the ISR shrank below min.insync.replicas is
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND; min.insync.replicas never counts more
//     than the partition's replicas (Kafka's effectiveMinIsr).
//   - acks=0 gets no response; if any partition failed, the connection is
//     closed instead, so the producer learns something went wrong.
//   - message.timestamp.type=LogAppendTime (topic, or the cluster's
//     log.message.timestamp.type): the batch is stamped with the broker's
//     time (max timestamp and attribute, CRC recomputed), returned in
//     LogAppendTime; CreateTime answers -1.
//   - The topic's configs apply (replica.TopicConfig): max.message.bytes,
//     segment.bytes (RECORD_LIST_TOO_LARGE), compression.type (a batch of
//     another codec is recompressed, unless "producer"), cleanup.policy
//     compact (a record without a key is INVALID_RECORD with a per-record
//     error from v8, KIP-467).
//   - Internal topics (__consumer_offsets, __transaction_state, ...):
//     INVALID_TOPIC_EXCEPTION; only their coordinators write them.
//   - Transactional batches (v3+ carries the transactional id): the first of
//     a transaction on a partition is admitted once the id's coordinator
//     (here, or on another broker through AddPartitionsToTxn v4 VerifyOnly,
//     KIP-890) confirms the partition is in the producer's ongoing
//     transaction; INVALID_TXN_STATE otherwise (not added, no transactional
//     id, or no transaction coordinator).
func (c *ClientAPI) handleProduce(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.ProduceRequest)
	resp := body.ResponseKind().(*kmsg.ProduceResponse)
	img := c.cfg.Metadata.Image()
	var waits []producedWait
	var hints []leaderHint
	failed := false
	for ti, rt := range body.Topics {
		t, _ := img.TopicByName(rt.Topic)
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			res, p, minISR, err := c.produceOne(img, t, rt.Topic, rp, body.Acks, body.TransactionID)
			if err != nil {
				failed = true
				c.setProduceError(body.Version, &sp, err)
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && body.Version >= 10 {
					if h := partitionLeaderHint(t, rp.Partition); h.ok {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = h.leaderID, h.leaderEpoch
						hints = append(hints, h)
					}
				}
			} else {
				sp.BaseOffset, sp.LogStartOffset, sp.LogAppendTime = res.BaseOffset, res.LogStartOffset, res.LogAppendTimeMs
				if body.Acks == -1 {
					waits = append(waits, producedWait{topic: ti, partition: pi, p: p, lastOffset: res.LastOffset, minISR: minISR})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if body.Acks == 0 {
		if failed {
			return nil, errors.New("broker: produce with acks=0 failed; closing the connection")
		}
		return nil, nil
	}
	moved, err := c.waitProduced(ctx, body, resp, waits)
	if err != nil {
		return nil, err
	}
	if len(moved) > 0 {
		// The leaders named after the wait: the image of now, which
		// names them before the replica manager applies the move.
		img = c.cfg.Metadata.Image()
		hints = append(hints, moved...)
	}
	resp.Brokers = produceLeaderEndpoints(img, req.Listener, hints)
	return resp, nil
}

// produceOne appends one partition's records; minISR is the topic's
// min.insync.replicas it was checked against.
func (c *ClientAPI) produceOne(img *image.Image, t *image.Topic, topic string,
	rp kmsg.ProduceRequestTopicPartition, acks int16, transactionalID *string) (replica.AppendResult, *replica.Partition, int, error) {
	if acks != 0 && acks != 1 && acks != -1 {
		return replica.AppendResult{}, nil, 0, errInvalidRequiredAcks
	}
	if IsInternalTopic(topic) {
		return replica.AppendResult{}, nil, 0, errInternalTopic
	}
	p, err := c.hostedPartition(img, t, rp.Partition)
	if err != nil {
		return replica.AppendResult{}, nil, 0, err
	}
	opts := c.appendOptions(img, topic, acks, time.Now().UnixMilli())
	if c.txns != nil {
		opts.VerifyTxn = c.verifyTxn(transactionalID, replica.TopicPartition{Topic: topic, Partition: rp.Partition})
	}
	res, err := p.AppendAsLeader(rp.Records, opts)
	return res, p, opts.MinInsyncReplicas, err
}

var errInvalidRequiredAcks = errors.New("broker: acks must be -1, 0 or 1")

// errInternalTopic: clients may not append to __consumer_offsets (or the
// other internal topics), whose records the coordinators load as state.
// Kafka's ReplicaManager refuses them too ("Cannot append to internal
// topic"), answering INVALID_TOPIC_EXCEPTION.
var errInternalTopic = errors.New("broker: cannot append to an internal topic")

func (c *ClientAPI) setProduceError(version int16, sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.BaseOffset = -1
	switch {
	case errors.Is(err, errInvalidRequiredAcks):
		sp.ErrorCode = kerr.InvalidRequiredAcks.Code
	case errors.Is(err, errInternalTopic):
		sp.ErrorCode = kerr.InvalidTopicException.Code
	default:
		sp.ErrorCode = replicaErrorCode(err)
	}
	if version < 8 && sp.ErrorCode == kerr.InvalidRecord.Code {
		sp.ErrorCode = kerr.CorruptMessage.Code
	}
	if version >= 8 {
		msg := err.Error()
		sp.ErrorMessage = &msg
		var re *replica.RecordError
		if errors.As(err, &re) {
			er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			er.RelativeOffset, er.ErrorMessage = int32(re.Index), &re.Message
			sp.ErrorRecords = append(sp.ErrorRecords, er)
		}
	}
	if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
		c.log.Warn("produce failed", zap.Error(err))
	}
}

// producedWait is an acks=-1 append waiting for the high watermark.
type producedWait struct {
	topic, partition int
	p                *replica.Partition
	lastOffset       int64
	minISR           int
}

// waitProduced waits for acks=-1 appends to commit, within the request's
// timeout; a partition still waiting then says REQUEST_TIMED_OUT. A
// partition whose leadership moved meanwhile is answered at once with
// NOT_LEADER_OR_FOLLOWER and, from v10, its new leader (KIP-951, as
// Kafka's KafkaApis fills CurrentLeader from the partition's state when a
// delayed produce completes), so the producer retries there without a
// metadata refresh; moved lists those leaders. It returns an error only
// when the client's connection is gone.
func (c *ClientAPI) waitProduced(ctx context.Context, body *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, waits []producedWait) (moved []leaderHint, err error) {
	if len(waits) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(max(body.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, w := range waits {
		err := w.p.WaitCommitted(wctx, w.lastOffset)
		if err == nil {
			err = w.p.CheckReplicasAfterCommit(w.minISR)
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		sp := &resp.Topics[w.topic].Partitions[w.partition]
		c.setProduceError(body.Version, sp, fmt.Errorf("waiting for offset %d to be replicated: %w", w.lastOffset, err))
		if sp.ErrorCode == kerr.NotLeaderForPartition.Code && body.Version >= 10 {
			if st := w.p.State(); st.Leader >= 0 && st.Leader != c.cfg.NodeID {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = st.Leader, st.LeaderEpoch
				moved = append(moved, leaderHint{leaderID: st.Leader, leaderEpoch: st.LeaderEpoch, ok: true})
			}
		}
	}
	return moved, nil
}

// produceLeaderEndpoints lists the endpoints of the leaders named in KIP-951
// hints, on the request's listener.
func produceLeaderEndpoints(img *image.Image, listener string, hints []leaderHint) []kmsg.ProduceResponseBroker {
	var out []kmsg.ProduceResponseBroker
	seen := map[int32]bool{}
	for _, h := range hints {
		if seen[h.leaderID] {
			continue
		}
		seen[h.leaderID] = true
		br, ok := img.Broker(h.leaderID)
		if !ok {
			continue
		}
		ep, ok := br.Listener(listener)
		if !ok {
			continue
		}
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = br.ID, ep.Host, int32(ep.Port), br.Rack
		out = append(out, b)
	}
	return out
}
