// Package txn is the transaction coordinator (KIP-98, with
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
// Coordinator (coordinator.go) runs the state machine for the
// __transaction_state partitions this broker leads (partition
// abs(javaHashCode(id)) % 50, PartitionFor), like coordinator/group: Tick
// follows leadership and loads a newly led partition from its log (the last
// record of each id wins); every transition is appended through the replica
// manager as the partition's leader and applied once the high watermark
// passes it; a prepared transaction's markers go out through MarkerSender
// at the partition's leader epoch (the coordinator epoch), then the
// Complete state is written; a failed send is retried at the next Tick,
// also after a reload; Tick aborts transactions past their timeout with an
// epoch bump, fencing the silent producer, and deletes (a tombstone) ids
// idle for transactional.id.expiration.ms.
//
// The broker serves it (broker/txns.go and the handlers of keys 10, 22, 24,
// 25, 26, 65 and 66; TxnOffsetCommit, key 28, asks Verify before the group
// coordinator writes). Verify answers partition leaders
// checking a transaction's first batch (KIP-890, AddPartitionsToTxn v4
// VerifyOnly).
//
// The state machine has no goroutines and no clock; Coordinator owns one
// goroutine per marker send and background write, stopped by Close.
package txn
