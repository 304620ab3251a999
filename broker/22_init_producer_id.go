package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
)

// InitProducerId: v0-v4, for idempotent and transactional producers.
//
// Behaviour:
//   - No TransactionalID: a fresh producer id with epoch 0, whatever
//     ProducerID/ProducerEpoch (v3+) say, as Kafka's TransactionCoordinator
//     answers a non-transactional producer; ids come from the block the broker
//     got from the active controller (AllocateProducerIds). When no block can
//     be had: COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka's
//     RPCProducerIdManager answers.
//   - A TransactionalID: the transaction coordinator's answer
//     (coordinator/txn): a new id gets a producer id at epoch 0, a known one
//     its epoch bumped (fencing the previous producer instance); an open
//     transaction is aborted first (CONCURRENT_TRANSACTIONS until then);
//     NOT_COORDINATOR when this broker does not lead the id's
//     __transaction_state partition, INVALID_TRANSACTION_TIMEOUT above
//     transaction.max.timeout.ms. ProducerID/ProducerEpoch (v3+, KIP-360)
//     must match the id's current ones.
func (c *ClientAPI) handleInitProducerID(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.InitProducerIDRequest)
	resp := body.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if body.TransactionalID != nil {
		if c.txns == nil {
			resp.ErrorCode = kerr.NotCoordinator.Code
			return resp, nil
		}
		ireq := txn.InitRequest{TransactionalID: *body.TransactionalID, TimeoutMs: body.TransactionTimeoutMillis,
			ProducerID: -1, ProducerEpoch: -1}
		if body.Version >= 3 {
			ireq.ProducerID, ireq.ProducerEpoch = body.ProducerID, body.ProducerEpoch
		}
		pid, epoch, err := c.txns.InitProducerID(ctx, ireq)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			code := err.Code
			if err == kerr.ProducerFenced && body.Version < 3 {
				code = kerr.InvalidProducerEpoch.Code
			}
			resp.ErrorCode = code
			return resp, nil
		}
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
		return resp, nil
	}
	id, err := c.cfg.ProducerIDs.NextProducerID(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log.Info("no producer id block available", zap.Error(err))
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// errNoProducerIDBlock: the controller would not give a block.
var errNoProducerIDBlock = errors.New("broker: no producer id block")

// producerIDBlocks hands out producer ids from blocks the active controller
// allocates (Kafka's RPCProducerIdManager, KIP-730). One block request is in
// flight at a time; callers wait for it.
//
// INVARIANTS: next <= end; ids in [next, end) were allocated to this broker and
// not handed out.
type producerIDBlocks struct {
	b         *Broker
	timeoutMs int32

	mu        sync.Mutex
	next, end int64
}

// NextProducerID implements ProducerIDSource.
func (s *producerIDBlocks) NextProducerID(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= s.end {
		if err := s.fetchBlock(ctx); err != nil {
			return -1, err
		}
	}
	id := s.next
	s.next++
	return id, nil
}

// fetchBlock asks the active controller for the next block; mu held.
func (s *producerIDBlocks) fetchBlock(ctx context.Context) error {
	epoch := s.b.BrokerEpoch()
	if epoch < 0 {
		return fmt.Errorf("%w: not registered yet", errNoProducerIDBlock)
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = s.b.cfg.NodeID, epoch
	resp, err := s.b.forward(ctx, req, s.timeoutMs, forwarded{
		notController: func(r kmsg.Response) bool {
			return isNotControllerCode(r.(*kmsg.AllocateProducerIDsResponse).ErrorCode)
		},
		failure: func(code int16, _ string) kmsg.Response {
			r := kmsg.NewPtrAllocateProducerIDsResponse()
			r.ErrorCode = code
			return r
		},
	})
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AllocateProducerIDsResponse)
	switch {
	case r.ErrorCode != 0:
		return fmt.Errorf("%w: %w", errNoProducerIDBlock, kerr.ErrorForCode(r.ErrorCode))
	case r.ProducerIDStart < 0 || r.ProducerIDLen <= 0 || r.ProducerIDStart < s.end:
		// A block must lie above every id handed out before: anything else
		// would give two producers one id.
		return fmt.Errorf("%w: controller answered block [%d, +%d) after %d", errNoProducerIDBlock,
			r.ProducerIDStart, r.ProducerIDLen, s.end)
	}
	s.next, s.end = r.ProducerIDStart, r.ProducerIDStart+int64(r.ProducerIDLen)
	return nil
}
