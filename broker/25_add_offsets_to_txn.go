package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
)

// AddOffsetsToTxn: v0-v3 (transaction.version 1).
//
// Behaviour, as Kafka's KafkaApis.handleAddOffsetsToTxnRequest: the
// __consumer_offsets partition of the group (the group coordinator's
// partition, where TxnOffsetCommit writes its pending offsets) joins the
// producer's transaction, so that the markers of EndTxn commit or abort the
// offsets with the records; the errors are AddPartitionsToTxn's
// (PRODUCER_FENCED reads INVALID_PRODUCER_EPOCH before v2).
func (c *ClientAPI) handleAddOffsetsToTxn(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := body.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := txn.TopicPartition{Topic: group.Topic, Partition: c.offsetsPartitionFor(body.Group)}
	if err := c.txns.AddPartitions(ctx, body.TransactionalID, body.ProducerID, body.ProducerEpoch, []txn.TopicPartition{tp}); err != nil {
		resp.ErrorCode = txnErrorCode(err, body.Version)
	}
	return resp, nil
}

// offsetsPartitionFor is the __consumer_offsets partition of a group: the
// group coordinator's, or with no group coordinator here
// offsets.topic.num.partitions' default.
func (c *ClientAPI) offsetsPartitionFor(groupID string) int32 {
	if c.groups != nil {
		return c.groups.PartitionFor(groupID)
	}
	return group.PartitionFor(groupID, group.DefaultNumPartitions)
}
