// Package storage is the on-disk and on-wire form of Kafka logs, shared by the
// KRaft metadata log (quorum/raftlog) and the partition logs of the data plane
// (package replica): the RecordBatch v2 codec with its CRC-32C, the leader epoch
// cache and its leader-epoch-checkpoint file, segment file names and the recovery
// scan, and Log, one partition replica's directory.
//
// # Files (Log)
//
//	<log.dirs>/<topic>-<partition>/
//	    00000000000000000000.log        RecordBatch v2 batches back to back, as sent
//	    00000000000000000000.index      sparse: (int32 relative offset, int32 position)
//	    00000000000000000000.timeindex  sparse: (int64 timestamp, int32 relative offset)
//	    leader-epoch-checkpoint         "0\n<count>\n<epoch> <startOffset>\n..."
//	    partition.metadata              "version: 0\ntopic_id: <base64 uuid>"
//
// Every file is byte-compatible with Apache Kafka's. As Kafka's LazyIndex,
// a segment's index files are created at their first entry (and at the
// segment's roll or close once it has batches), so a partition never written
// to holds its .log and partition.metadata only; a missing index file reads
// as one without entries.
//
// # Durability and recovery
//
// As Kafka by default: no fsync on the append path (replication makes data
// durable), fsync when a segment rolls and on Flush and Close, each raising the
// log's recovery point. At open the segments ending after the recovery point
// (recovery-point-offset-checkpoint; all of them without one, none after a clean
// shutdown) are scanned batch by batch (CRC, offsets, epochs) and cut at the
// first invalid byte; the others keep their indexes unless those fail a sanity
// check, in which case they are rebuilt by a scan. leader-epoch-checkpoint
// covers at least what is below the recovery point: a leader's epoch start is
// written at the next flush or roll (with the batches after it; one no batch
// follows is left out, as an open drops it anyway), epochs of the scanned
// segments come back from their batches. A new log writes nothing durably at
// creation: SetTopicID only records the topic id, and partition.metadata is
// written (file, then directory fsync, which covers the new segment too) by
// FlushTopicID, which the replica manager runs in the background as Kafka
// schedules it, or before the first batch is written, so a directory a crash
// leaves without it holds no batch. Retention (DeleteOldSegments)
// deletes whole segments below the high watermark and moves the log start
// offset. The broker-level offset checkpoint files' codec lives here too
// (checkpoint.go).
//
// # Zero-copy reads
//
// ReadRegion names the batches Read would copy as a Region of the segment
// file, for the Fetch path to send with sendfile. Segment files are
// reference-counted: a Region keeps its bytes through retention, compaction,
// Close and deletion of the log; a truncation since the read fails its Check
// (region.go).
//
// # Goroutines
//
// None. A Log is safe for concurrent use (appends serialized, reads beside them).
// The package imports nothing from the project.
package storage
