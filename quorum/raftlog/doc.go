// Package raftlog holds the on-disk and on-wire representation of the
// __cluster_metadata log: RecordBatch v2 encoding with CRC-32C and control records,
// the Storage interface the quorum driver persists through, an in-memory Storage for
// tests and a file Storage laid out as Kafka lays out a partition directory
// (segments, leader-epoch-checkpoint, quorum-state, snapshots).
//
// # Files (FileStorage)
//
//	<metadata.log.dir>/.lock                 locked (fcntl) while a FileStorage is open
//	<metadata.log.dir>/__cluster_metadata-0/
//	    00000000000000000000.log        segment: RecordBatch v2 batches back to back
//	    leader-epoch-checkpoint         "0\n<count>\n<epoch> <startOffset>\n..."
//	    quorum-state                    QuorumStateData JSON + "data_version"
//	    %020d-%010d.checkpoint          snapshot (end offset, epoch)
//	    kraftd-synced-end               durable end of the log
//	    kraftd-recovering               marker left by `kraftd storage recover`
//
// Every file is byte-compatible with Apache Kafka; the two kraftd-* files are
// kraftd's own (Kafka ignores them). Segment .index/.timeindex files
// are not written (Kafka rebuilds missing ones); stale ones are deleted at open.
//
// # Durability and recovery
//
// Append and TruncateTo are durable after Sync; SaveQuorumState and snapshot Commit
// are durable when they return (tmp file, fsync, rename, directory fsync). At open,
// the first torn or corrupt batch ends the log: the rest of its segment and every
// later segment are removed, because nothing after it can be trusted, the leader
// will send those offsets again, and committed data lives on a majority. Any I/O
// error fails the storage for good (sticky): after a failed fsync the page cache and
// the disk may disagree, so the node must stop rather than limp on.
//
// Damage at or below the durable end (SyncedEndFile) is not a torn tail: open stops
// with ErrCorrupt naming the file and offset, and so does an unreadable quorum-state.
// The record of the durable end is written after the data it covers may be
// acknowledged (EndRecorder: a Sync's data fsync alone makes an append durable; the
// record follows, off the acknowledgement path), so it trails the durable end:
//
//	INVARIANT: record end <= durable end (never above: only ends a completed Sync made
//	durable are recorded, the open fsyncs the recovered log before recording its end,
//	and TruncateTo and ResetLog wait for a record write in flight and lower the record
//	before they cut).
//	INVARIANT: the acknowledged bytes above the record are those of one Sync at most
//	(each Sync, after its own data fsync, and each PrepareSync finish wait for, or do,
//	the record write of the Sync before it, which thus overlaps their flush; Close
//	records the last durable end).
//
// Recovery detects damage below the record; damage between the record and the
// durable end after a crash (the last Sync's batches, already acknowledged) is cut as
// a torn tail, indistinguishable from crash damage: that window is the price of one
// fdatasync per Sync instead of two on the acknowledgement path.
// Recover (`kraftd storage recover`) first makes a RecoveryFile durable holding E, the
// highest epoch the node may have voted in, then cuts the damage; while the marker
// exists the quorum core grants no vote and never campaigns (Loaded.Recovery), and the
// driver removes it (RecoveryClearer) once the core has caught up with a leader.
//
// FileStorage does all its I/O through FS (FileOptions.FS; the operating system's by
// default). CrashFS is a deterministic in-memory FS that crashes inside any call
// (keeping a seeded prefix of unsynced writes and only directory entries made
// durable by SyncDir) or fails an fsync: TestFileStorageCrashAnywhere runs the real
// FileStorage on it. MemStorage models the same contract in memory, with Crash
// dropping whatever was not synced, for the deterministic simulator.
//
// # Goroutines
//
// None. A Storage is used by one goroutine (the quorum driver), except for the work
// PrepareSync and PrepareRecord hand out, which the owner runs on goroutines of its
// own and which touch only the files they captured (PrepareRecord's work only the
// record file; the storage waits for it with a sync.Once before it touches that
// file itself); MemStorage is additionally safe to Crash from another, and CrashFS
// serializes its calls. The package imports nothing from the
// project.
package raftlog
