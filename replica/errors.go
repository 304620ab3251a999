package replica

import (
	"errors"
	"fmt"
)

// Errors of the replica manager. The broker's handlers map them to Kafka error
// codes (the kerr names are in brackets); only the handlers know the wire.
var (
	// ErrUnknownPartition: this broker hosts no replica of the partition
	// [UNKNOWN_TOPIC_OR_PARTITION].
	ErrUnknownPartition = errors.New("replica: unknown topic or partition")
	// ErrNotLeader: the partition is hosted here but led elsewhere (or has no
	// leader) [NOT_LEADER_OR_FOLLOWER].
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrFencedLeaderEpoch: the request's current leader epoch is older than
	// ours [FENCED_LEADER_EPOCH].
	ErrFencedLeaderEpoch = errors.New("replica: fenced leader epoch")
	// ErrUnknownLeaderEpoch: the request's current leader epoch is newer than
	// ours [UNKNOWN_LEADER_EPOCH].
	ErrUnknownLeaderEpoch = errors.New("replica: unknown leader epoch")
	// ErrCorruptRecords: the records do not parse as RecordBatch v2 with valid
	// CRCs [CORRUPT_MESSAGE].
	ErrCorruptRecords = errors.New("replica: corrupt records")
	// ErrInvalidRecord: a batch parses but breaks a rule (one batch per
	// partition, record count, offset deltas, control batch from a client)
	// [INVALID_RECORD].
	ErrInvalidRecord = errors.New("replica: invalid record")
	// ErrMessageTooLarge: a batch is larger than max.message.bytes
	// [MESSAGE_TOO_LARGE].
	ErrMessageTooLarge = errors.New("replica: batch larger than max.message.bytes")
	// ErrRecordListTooLarge: the records exceed a segment [RECORD_LIST_TOO_LARGE].
	ErrRecordListTooLarge = errors.New("replica: records larger than a segment")
	// ErrNotEnoughReplicas: acks=-1 with fewer in-sync replicas than
	// min.insync.replicas [NOT_ENOUGH_REPLICAS].
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: an acks=-1 batch committed, but the
	// ISR shrank below min.insync.replicas while it waited
	// [NOT_ENOUGH_REPLICAS_AFTER_APPEND].
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after the append")
	// ErrOutOfOrderSequence: an idempotent batch does not continue its
	// producer's sequence [OUT_OF_ORDER_SEQUENCE_NUMBER].
	ErrOutOfOrderSequence = errors.New("replica: out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent batch carries an epoch older than
	// its producer's latest [INVALID_PRODUCER_EPOCH].
	ErrInvalidProducerEpoch = errors.New("replica: invalid producer epoch")
	// ErrTransactionsUnsupported: a transactional batch no transaction
	// coordinator vouched for (AppendOptions.VerifyTxn nil or refusing; Kafka's
	// verification answer) [INVALID_TXN_STATE].
	ErrTransactionsUnsupported = errors.New("replica: transactional batch without a transaction")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is open on the partition [INVALID_TXN_STATE].
	ErrInvalidTxnState = errors.New("replica: invalid transaction state")
	// ErrCoordinatorFenced: a transaction marker from a coordinator epoch
	// older than the last marker's [TRANSACTION_COORDINATOR_FENCED].
	ErrCoordinatorFenced = errors.New("replica: transaction coordinator fenced")
	// ErrOffsetOutOfRange: a fetch offset outside the log [OFFSET_OUT_OF_RANGE].
	ErrOffsetOutOfRange = errors.New("replica: offset out of range")
	// ErrPolicyViolation: DeleteRecords on a topic whose cleanup.policy
	// has no delete [POLICY_VIOLATION].
	ErrPolicyViolation = errors.New("replica: not allowed by the topic's cleanup.policy")
	// ErrOffsetNotAvailable: a new leader's high watermark has not reached
	// its leader epoch's start offset yet, so "latest" (and a timestamp
	// lookup at or above it) could go backwards (KIP-207)
	// [OFFSET_NOT_AVAILABLE].
	ErrOffsetNotAvailable = errors.New("replica: offset not available")
	// ErrStorage: the log failed [KAFKA_STORAGE_ERROR].
	ErrStorage = errors.New("replica: storage error")
	// ErrClosed: the manager is closed.
	ErrClosed = errors.New("replica: manager closed")
)

// RecordError is INVALID_RECORD caused by one record of a batch: Produce v8+
// answers it as a per-record error (Kafka's RecordError, KIP-467).
type RecordError struct {
	Index   int // the record's position in its batch
	Message string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%v: record %d: %s", ErrInvalidRecord, e.Index, e.Message)
}

// Unwrap makes errors.Is(err, ErrInvalidRecord) true.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }
