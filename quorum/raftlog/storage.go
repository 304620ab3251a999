package raftlog

import "errors"

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
