package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DescribeTransactions: v0 (KIP-664), for operators: each transactional
// id's state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), timeout,
// start time (-1 when none), producer id and epoch and partitions, from its
// coordinator; NOT_COORDINATOR elsewhere, TRANSACTIONAL_ID_NOT_FOUND for an
// unknown id.
func (c *ClientAPI) handleDescribeTransactions(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range body.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = id, -1, -1, -1
		m, err := c.txns.Describe(id)
		if err != nil {
			ts.ErrorCode = err.Code
			resp.TransactionStates = append(resp.TransactionStates, ts)
			continue
		}
		ts.State, ts.TimeoutMillis, ts.StartTimestamp = m.State.String(), m.TimeoutMs, m.StartMs
		ts.ProducerID, ts.ProducerEpoch = m.ProducerID, m.ProducerEpoch
		by := map[string][]int32{}
		var order []string
		for tp := range m.Partitions {
			if _, ok := by[tp.Topic]; !ok {
				order = append(order, tp.Topic)
			}
			by[tp.Topic] = append(by[tp.Topic], tp.Partition)
		}
		for _, topic := range sortedStrings(order) {
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic, tt.Partitions = topic, sortedInt32s(by[topic])
			ts.Topics = append(ts.Topics, tt)
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
