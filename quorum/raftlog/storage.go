package raftlog

import (
	"cmp"
	"errors"
	"slices"
)

// QuorumState is the content of the quorum-state file (Kafka's QuorumStateData): the
// durable election state a voter must persist before it answers a vote or moves to a
// new epoch.
//
// -1 means "none" for LeaderID, LeaderEpoch and VotedID, as in Kafka.
type QuorumState struct {
	LeaderID         int32
	LeaderEpoch      int32
	VotedID          int32
	VotedDirectoryID [16]byte
	// CurrentVoters is written by data_version 0 files (static quorums); nil otherwise.
	CurrentVoters []int32
	// DataVersion is the quorum-state file's data_version: 0 for static quorums
	// (kraft.version 0: clusterId, appliedOffset and currentVoters are written,
	// VotedDirectoryID is not), 1 for dynamic quorums (KIP-853: votedDirectoryId is
	// written, the voters live in the log). The zero value suits a static quorum.
	DataVersion int16
}

// EmptyQuorumState is the state of a freshly formatted node.
func EmptyQuorumState() QuorumState {
	return QuorumState{LeaderID: -1, LeaderEpoch: 0, VotedID: -1}
}

// SnapshotID names a snapshot: it holds state for offsets < EndOffset (exclusive), and
// Epoch is the epoch of the last contained record.
type SnapshotID struct {
	EndOffset int64
	Epoch     int32
}

// Loaded is what a Storage holds at start-up, after any torn tail was truncated.
type Loaded struct {
	State QuorumState
	// Batches are the log's batches in offset order, from StartOffset.
	Batches []Batch
	// StartOffset is the log start offset (the end offset of the snapshot it starts at, or 0).
	StartOffset int64
	// Snapshot is the latest complete snapshot, if any.
	Snapshot *SnapshotID
	// StartSnapshot is the snapshot ending exactly at StartOffset, if any: its epoch
	// is the epoch of the record before the log start.
	StartSnapshot *SnapshotID
	// StateCorrupt reports that the quorum-state file existed but could not be read
	// or parsed; State is then EmptyQuorumState(). As Kafka does
	// (QuorumState.initialize), the caller should start Unattached at the epoch of
	// the log's last batch with no leader and no vote.
	StateCorrupt bool
	// StateMissing reports that there was no quorum-state file (a fresh node, or
	// one whose file was deleted). The core refuses to start a voter whose log shows
	// it took part in the quorum without one, unless Recovery is set.
	StateMissing bool
	// RanBefore reports that a node started on this storage before (FileStorage:
	// kraftd-synced-end existed; it is created right after the first quorum-state
	// is written). With StateMissing it means the quorum-state was lost.
	RanBefore bool
	// Recovery is the marker `kraftd storage recover` left (RecoveryFile), nil when
	// there is none: the node must not vote or campaign until it has caught up.
	Recovery *Recovery
}

// LogContinuesSnapshot reports whether a log whose first offset is start continues
// snapshot snap: the log starts at or after the snapshot's end, or batchEndingAt
// finds a batch of the snapshot's epoch ending exactly at the snapshot's end (the
// snapshot's last record; by log matching everything below it is then the committed
// log). A log that does not continue its latest snapshot (a follower committed a
// downloaded snapshot and crashed before restarting its log there; its log may end
// below the snapshot, or hold another leader's uncommitted entries there) holds
// nothing committed the snapshot does not hold: it must restart at the snapshot's
// end (Kafka's truncateToLatestSnapshot, for every such log, not only a shorter or
// older one). batchEndingAt returns the epoch of the batch whose next offset is end.
func LogContinuesSnapshot(snap SnapshotID, start int64, batchEndingAt func(end int64) (int32, bool)) bool {
	if start >= snap.EndOffset {
		return true
	}
	epoch, ok := batchEndingAt(snap.EndOffset)
	return ok && epoch == snap.Epoch
}

// LogContinuesSnapshot applies the package function to a loaded log and its latest
// snapshot (true when there is none). Load returns only logs that do.
func (l Loaded) LogContinuesSnapshot() bool {
	if l.Snapshot == nil {
		return true
	}
	return LogContinuesSnapshot(*l.Snapshot, l.StartOffset, func(end int64) (int32, bool) {
		i, found := slices.BinarySearchFunc(l.Batches, end, func(b Batch, end int64) int {
			return cmp.Compare(b.NextOffset(), end)
		})
		if !found {
			return 0, false
		}
		return l.Batches[i].Epoch, true
	})
}

// ErrStorageFailed wraps any I/O failure. The caller must stop the node: after a failed
// fsync the page cache and the disk may disagree, and limping on can lose committed data.
var ErrStorageFailed = errors.New("raftlog: storage failed")

// Storage persists the metadata log and the quorum state. Calls are made by one
// goroutine (the quorum driver). Any error is fatal to the node.
// AsyncSyncer is a Storage that can fsync on another goroutine while its owner keeps
// appending (FileStorage): a leader then serves its followers during its own fsync.
type AsyncSyncer interface {
	PrepareSync() (work func() error, finish func(error) error)
}

// EndRecorder is a Storage that keeps a record of its durable end (FileStorage's
// SyncedEndFile) and writes it off the acknowledgement path: a Sync makes the log
// durable, and the record of that end is written later, by work from PrepareRecord,
// after the caller has acknowledged what the Sync covered.
//
// PrepareRecord returns the write of the record for the end the last completed Sync
// made durable, or nil work when the record already says so or a write is in flight
// (one at a time). work touches only the record file, so it may run on another
// goroutine while the owner goes on (even Sync, which waits for it first); finish,
// on the owner's goroutine, applies its outcome: an error fails the storage as a
// failed Sync does. If the owner already waited for the write (a Sync, TruncateTo,
// ResetLog or Close does), finish only returns. A caller that never runs work loses
// nothing but the window: the storage runs it itself when it next waits for it.
type EndRecorder interface {
	PrepareRecord() (work func() error, finish func() error)
}

type Storage interface {
	// Load reads everything back at start-up.
	Load() (Loaded, error)
	// Append writes batches after the current end. They are durable only after Sync.
	Append(batches []Batch) error
	// TruncateTo removes every batch at or above offset (a batch boundary).
	TruncateTo(offset int64) error
	// Sync makes every Append and TruncateTo so far durable (fsync).
	Sync() error
	// SaveQuorumState atomically replaces the quorum-state file and syncs it.
	SaveQuorumState(QuorumState) error
	// Close releases files. It does not sync.
	Close() error
}
