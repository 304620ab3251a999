package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// TxnOffsetCommit: v0-v3 (transaction.version 1), as Kafka's
// KafkaApis.handleTxnOffsetCommitRequest. The transaction coordinator (here
// or the one on another broker) must hold the group's __consumer_offsets
// partition in the producer's ongoing transaction (AddOffsetsToTxn added
// it); then the group coordinator checks the member and generation (v3+),
// writes the offsets as a transactional batch of the producer and keeps
// them pending until the transaction's marker commits or aborts them.
func (c *ClientAPI) handleTxnOffsetCommit(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.TxnOffsetCommitRequest)
	tid := body.TransactionalID
	verify := c.verifyTxn(&tid, replica.TopicPartition{Topic: group.Topic, Partition: c.groups.PartitionFor(body.Group)})
	resp := c.groups.TxnOffsetCommit(body, verify)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, nil
}
