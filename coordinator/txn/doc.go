// Package txn is the core of the transaction coordinator (KIP-98, with
// transaction.version 1: no KIP-890 part 2): the per-transactional-id
// state machine (Kafka's TransactionMetadata transitions, as pure functions
// of the current state, the request and nowMs) and the records it writes to
// __transaction_state (Kafka's TransactionLogKey v0 / TransactionLogValue
// v0, byte for byte).
//
//	(new) --Init--> Empty --AddPartitions--> Ongoing --End--> PrepareCommit / PrepareAbort
//	PrepareCommit / PrepareAbort --markers written--> CompleteCommit / CompleteAbort
//	Complete*, Empty --Init--> Empty (epoch + 1: the previous producer is fenced)
//	Ongoing --Init, or timeout (Expire)--> PrepareAbort at epoch + 1
//
// Each function returns the next Metadata to write and whether COMMIT/ABORT
// markers must then be sent to the transaction's partitions (WriteTxnMarkers,
// served by their leaders: replica.Partition.AppendTxnMarker); the caller
// applies a transition only once its record is committed.
//
// Not here yet (issue 16): the coordinator around it, which would, like
// coordinator/group, lead the partition abs(javaHashCode(id)) % 50 of
// __transaction_state (group.PartitionFor's hash), load it on leadership,
// append records through the replica manager and answer after the high
// watermark, send WriteTxnMarkers to partition leaders with retries, run
// Expire on a timer, and serve InitProducerId with a transactional id,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
// ListTransactions behind a small interface the broker calls, plus the
// FindCoordinator key type 1 answer; and the Produce-side verification
// (replica.AppendOptions.VerifyTxn) that admits a transactional batch only
// for a partition in the producer's ongoing transaction.
//
// The package has no goroutines and no clock.
package txn
