package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// EndTxn: v0-v3 (transaction.version 1).
//
// Behaviour, as Kafka's TransactionCoordinator.handleEndTransaction: the
// transaction's PrepareCommit or PrepareAbort is written to
// __transaction_state and the producer answered; the COMMIT or ABORT
// markers then go to the partitions' leaders (WriteTxnMarkers) and the
// Complete state is written. A retry of a completed EndTxn with the same
// outcome succeeds; the opposite outcome is INVALID_TXN_STATE; while the
// markers are being written, CONCURRENT_TRANSACTIONS.
func (c *ClientAPI) handleEndTxn(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.EndTxnRequest)
	resp := body.ResponseKind().(*kmsg.EndTxnResponse)
	if err := c.txns.EndTxn(ctx, body.TransactionalID, body.ProducerID, body.ProducerEpoch, body.Commit); err != nil {
		resp.ErrorCode = txnErrorCode(err, body.Version)
	}
	return resp, nil
}
