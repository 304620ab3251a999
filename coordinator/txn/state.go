package txn

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state (Kafka's TransactionState; the byte in
// TransactionLogValue).
type State int8

// The states and their ids on disk.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	case PrepareEpochFence:
		return "PrepareEpochFence"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// TopicPartition names a partition in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// DefaultMaxTimeoutMs is transaction.max.timeout.ms' default (15 minutes):
// a producer asking for a longer transaction timeout is refused.
const DefaultMaxTimeoutMs = 900000

// Metadata is one transactional id's state (Kafka's TransactionMetadata):
// what the coordinator writes to __transaction_state at every transition
// and rebuilds from it.
//
// INVARIANTS: Partitions is empty in Empty and Complete*; StartMs is -1
// in Empty; ProducerEpoch >= 0 once initialized.
type Metadata struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
	State           State
	Partitions      map[TopicPartition]struct{}
	LastUpdateMs    int64
	StartMs         int64
}

// Clone is a deep copy: a transition is computed on a copy and applied
// only once its record is committed.
func (m *Metadata) Clone() *Metadata {
	c := *m
	c.Partitions = make(map[TopicPartition]struct{}, len(m.Partitions))
	for tp := range m.Partitions {
		c.Partitions[tp] = struct{}{}
	}
	return &c
}

// pending reports a state whose markers or fencing are still being
// written: requests meanwhile are CONCURRENT_TRANSACTIONS (retriable).
func (m *Metadata) pending() bool {
	return m.State == PrepareCommit || m.State == PrepareAbort || m.State == PrepareEpochFence
}

// InitRequest is InitProducerId with a transactional id.
type InitRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID and ProducerEpoch (v3+, KIP-360) are the producer's current
	// ones, -1 when it has none.
	ProducerID    int64
	ProducerEpoch int16
}

// Transition is what a request does to a transactional id: the metadata to
// write (nil: nothing) and, when it ends a transaction, the markers to send
// once that record is committed.
type Transition struct {
	Next *Metadata
	// Markers are set when Next is PrepareCommit or PrepareAbort: write
	// COMMIT/ABORT markers (Commit) to these partitions for (ProducerID,
	// ProducerEpoch), then CompleteMarkers.
	Markers bool
}

// Init is InitProducerId for a transactional id at nowMs, as Kafka's
// TransactionCoordinator.handleInitProducerId with transaction.version 1:
// a new id gets a fresh producer id at epoch 0; a known one in Empty or
// Complete* gets its epoch bumped (a new producer id when the epoch is
// exhausted), fencing the previous producer; one with a transaction in
// flight (Ongoing) is fenced first: its epoch is bumped and the transaction
// aborted, and the caller answers CONCURRENT_TRANSACTIONS so the producer
// retries once the abort completed. newProducerID allocates an id.
func Init(cur *Metadata, req InitRequest, maxTimeoutMs int32, nowMs int64, newProducerID func() (int64, error)) (Transition, *kerr.Error) {
	if req.TimeoutMs <= 0 || req.TimeoutMs > maxTimeoutMs {
		return Transition{}, kerr.InvalidTransactionTimeout
	}
	if cur == nil {
		pid, err := newProducerID()
		if err != nil {
			return Transition{}, kerr.CoordinatorLoadInProgress
		}
		return Transition{Next: &Metadata{TransactionalID: req.TransactionalID, ProducerID: pid, TimeoutMs: req.TimeoutMs,
			State: Empty, Partitions: map[TopicPartition]struct{}{}, LastUpdateMs: nowMs, StartMs: -1}}, nil
	}
	if req.ProducerID >= 0 && (req.ProducerID != cur.ProducerID || req.ProducerEpoch != cur.ProducerEpoch) {
		// KIP-360: a producer that knows its id may only bump its own epoch.
		return Transition{}, kerr.ProducerFenced
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return Transition{}, kerr.ConcurrentTransactions
	case Ongoing:
		next := cur.Clone()
		next.ProducerEpoch++ // fences the current producer's batches and EndTxn
		next.State, next.LastUpdateMs = PrepareAbort, nowMs
		return Transition{Next: next, Markers: true}, kerr.ConcurrentTransactions
	}
	next := cur.Clone()
	next.TimeoutMs, next.LastUpdateMs, next.State, next.StartMs = req.TimeoutMs, nowMs, Empty, -1
	next.Partitions = map[TopicPartition]struct{}{}
	if cur.ProducerEpoch >= math.MaxInt16-1 {
		pid, err := newProducerID()
		if err != nil {
			return Transition{}, kerr.CoordinatorLoadInProgress
		}
		next.ProducerID, next.ProducerEpoch = pid, 0
		return Transition{Next: next}, nil
	}
	next.ProducerEpoch++
	return Transition{Next: next}, nil
}

// checkProducer applies the producer id and epoch of a request.
func checkProducer(cur *Metadata, producerID int64, producerEpoch int16) *kerr.Error {
	switch {
	case cur == nil || cur.ProducerID != producerID:
		return kerr.InvalidProducerIDMapping
	case producerEpoch != cur.ProducerEpoch:
		return kerr.ProducerFenced
	}
	return nil
}

// AddPartitions is AddPartitionsToTxn (and AddOffsetsToTxn's
// __consumer_offsets partition): the transaction becomes (or stays)
// Ongoing with parts added. Partitions already in it change nothing (no
// write).
func AddPartitions(cur *Metadata, producerID int64, producerEpoch int16, parts []TopicPartition, nowMs int64) (Transition, *kerr.Error) {
	if err := checkProducer(cur, producerID, producerEpoch); err != nil {
		return Transition{}, err
	}
	if cur.pending() {
		return Transition{}, kerr.ConcurrentTransactions
	}
	if cur.State == Ongoing {
		missing := false
		for _, tp := range parts {
			if _, ok := cur.Partitions[tp]; !ok {
				missing = true
			}
		}
		if !missing {
			return Transition{}, nil
		}
	}
	next := cur.Clone()
	if next.State != Ongoing {
		next.Partitions, next.StartMs = map[TopicPartition]struct{}{}, nowMs
	}
	for _, tp := range parts {
		next.Partitions[tp] = struct{}{}
	}
	next.State, next.LastUpdateMs = Ongoing, nowMs
	return Transition{Next: next}, nil
}

// End is EndTxn: an Ongoing transaction goes to PrepareCommit or
// PrepareAbort and its markers are to be written; a retry of an EndTxn that
// already completed the same way succeeds with no write; the opposite
// outcome, or ending a transaction that never started, is INVALID_TXN_STATE.
func End(cur *Metadata, producerID int64, producerEpoch int16, commit bool, nowMs int64) (Transition, *kerr.Error) {
	if err := checkProducer(cur, producerID, producerEpoch); err != nil {
		return Transition{}, err
	}
	switch {
	case cur.State == Ongoing:
		next := cur.Clone()
		next.State, next.LastUpdateMs = PrepareAbort, nowMs
		if commit {
			next.State = PrepareCommit
		}
		return Transition{Next: next, Markers: true}, nil
	case cur.State == CompleteCommit && commit, cur.State == CompleteAbort && !commit:
		return Transition{}, nil
	case cur.State == PrepareCommit && commit, cur.State == PrepareAbort && !commit:
		return Transition{}, kerr.ConcurrentTransactions
	case cur.State == PrepareEpochFence:
		return Transition{}, kerr.ConcurrentTransactions
	}
	return Transition{}, kerr.InvalidTxnState
}

// CompleteMarkers is the write that follows a PrepareCommit/PrepareAbort
// once every partition has its marker: CompleteCommit/CompleteAbort, no
// partitions.
func CompleteMarkers(cur *Metadata, nowMs int64) (*Metadata, error) {
	next := cur.Clone()
	switch cur.State {
	case PrepareCommit:
		next.State = CompleteCommit
	case PrepareAbort:
		next.State = CompleteAbort
	default:
		return nil, fmt.Errorf("txn: %s: markers completed in state %s", cur.TransactionalID, cur.State)
	}
	next.Partitions, next.LastUpdateMs = map[TopicPartition]struct{}{}, nowMs
	return next, nil
}

// Expire aborts a transaction Ongoing for longer than its timeout at nowMs
// (Kafka's abortTimedOutTransactions): the epoch is bumped so the producer
// is fenced, and the abort's markers are to be written. Other states give
// nothing.
func Expire(cur *Metadata, nowMs int64) Transition {
	if cur.State != Ongoing || nowMs-cur.StartMs <= int64(cur.TimeoutMs) {
		return Transition{}
	}
	next := cur.Clone()
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.State, next.LastUpdateMs = PrepareAbort, nowMs
	return Transition{Next: next, Markers: true}
}
