package interop

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/storage"
)

// Sweepers of the data-plane APIs. Produce writes one batch per version to
// partition 0 of the sweep topic (v3 first), so ListOffsets and Fetch, swept
// after it, know what the partition holds.

func sweepInitProducerID(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := request[*kmsg.InitProducerIDResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("InitProducerId"))
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		return fmt.Errorf("producer id %d epoch %d", resp.ProducerID, resp.ProducerEpoch)
	}
	return nil
}

func sweepProduce(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = storage.EncodeBatch(0, -1, 1700000000000+int64(v), false,
		[]storage.Record{{Value: []byte(fmt.Sprintf("produce-v%d", v))}}).Raw
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp, err := request[*kmsg.ProduceResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("answer %+v", resp.Topics)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return kafkaError(sp.ErrorCode, fmt.Errorf("Produce"))
	}
	if want := int64(v - 3); sp.BaseOffset != want {
		return fmt.Errorf("base offset %d, want %d", sp.BaseOffset, want)
	}
	e.produced++
	return nil
}

func sweepListOffsets(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = e.topic
	for _, ts := range []int64{-2, -1, 1700000000005} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp, err := request[*kmsg.ListOffsetsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		return fmt.Errorf("answer %+v", resp.Topics)
	}
	for i, want := range []int64{0, e.produced, 2} { // the v5 batch is offset 2
		sp := resp.Topics[0].Partitions[i]
		if sp.ErrorCode != 0 {
			return kafkaError(sp.ErrorCode, fmt.Errorf("ListOffsets timestamp %d", rt.Partitions[i].Timestamp))
		}
		if sp.Offset != want {
			return fmt.Errorf("timestamp %d: offset %d, want %d", rt.Partitions[i].Timestamp, sp.Offset, want)
		}
	}
	return nil
}

// sweepOffsetForLeaderEpoch asks where leader epoch 0 (the sweep topic's
// only epoch, every produced batch's) ends: at the log end; epoch 99 is
// newer than any: -1/-1.
func sweepOffsetForLeaderEpoch(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = e.topic
	for _, epoch := range []int32{0, 99} {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, epoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt}
	resp, err := request[*kmsg.OffsetForLeaderEpochResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		return fmt.Errorf("answer %+v", resp.Topics)
	}
	for i, want := range []struct {
		epoch int32
		end   int64
	}{{0, e.produced}, {-1, -1}} {
		sp := resp.Topics[0].Partitions[i]
		if sp.ErrorCode != 0 {
			return kafkaError(sp.ErrorCode, fmt.Errorf("OffsetForLeaderEpoch %d", rt.Partitions[i].LeaderEpoch))
		}
		if sp.EndOffset != want.end || v >= 1 && sp.LeaderEpoch != want.epoch {
			return fmt.Errorf("epoch %d: ends at %d in epoch %d, want %d in %d", rt.Partitions[i].LeaderEpoch,
				sp.EndOffset, sp.LeaderEpoch, want.end, want.epoch)
		}
	}
	return nil
}

func sweepFetch(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 500, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = e.topic
	if v >= 13 {
		id, err := topicID(ctx, e)
		if err != nil {
			return err
		}
		rt.TopicID = id
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp, err := request[*kmsg.FetchResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("Fetch"))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("answer %+v", resp.Topics)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return kafkaError(sp.ErrorCode, fmt.Errorf("Fetch"))
	}
	batches, _, err := storage.SplitBatches(sp.RecordBatches)
	if err != nil || int64(len(batches)) != e.produced || sp.HighWatermark != e.produced ||
		sp.LastStableOffset != e.produced {
		return fmt.Errorf("%d batches (%v), high watermark %d, last stable offset %d",
			len(batches), err, sp.HighWatermark, sp.LastStableOffset)
	}
	return nil
}

// topicID asks Metadata v10+ for the sweep topic's id.
func topicID(ctx context.Context, e *sweepEnv) ([16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := request[*kmsg.MetadataResponse](ctx, e, req, 12)
	if err != nil {
		return [16]byte{}, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return [16]byte{}, fmt.Errorf("metadata for %s: %+v", e.topic, resp.Topics)
	}
	return resp.Topics[0].TopicID, nil
}
