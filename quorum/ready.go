package quorum

import (
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// SoftState is the volatile part of the state; Ready carries it when it changed.
type SoftState struct {
	Role     Role
	Epoch    int32
	LeaderID int32
	// EpochStartOffset is set for a Leader: the state machine may write only once it has
	// applied every committed batch below it (KAFKA-15345); Committed delivers them in
	// order before the leader's own LeaderChange batch.
	EpochStartOffset int64
}

// Ready is the work the core hands to the driver. Handle it in this order:
//
//  1. Send Messages (they depend on nothing unsaved).
//  2. If QuorumState is set, replace the quorum-state file atomically (tmp, fsync, rename).
//  3. If TruncateTo >= 0, truncate the log there; then append Append; then fsync.
//  4. Send MessagesAfterPersist (vote grants, epoch acks, a follower's Fetch, which is
//     its durability ack, ...).
//  5. Apply Committed to the state machine, in order.
//  6. Call Advance(rd). Do not call Step, Tick or Propose between Ready and Advance,
//     with one exception: a Leader's Ready that only appends (no QuorumState,
//     TruncateTo, MessagesAfterPersist or snapshot work) may be Advanced after its
//     fsync completes, and the driver may go on stepping and handling later Readys
//     meanwhile, as long as Advance calls keep Ready order and any Ready that touches
//     storage first waits for them (Node.appendAsync). Only the leader's own flushed
//     offset, which counts toward the high watermark, waits for Advance.
type Ready struct {
	QuorumState *raftlog.QuorumState
	// TruncateTo is -1 when there is nothing to truncate.
	TruncateTo int64
	Append     []raftlog.Batch
	Messages   []Message
	// MessagesAfterPersist may only be sent once QuorumState and Append are durable.
	MessagesAfterPersist []Message
	// Committed are newly committed batches (control batches included), gap-free and in
	// offset order.
	Committed     []raftlog.Batch
	HighWatermark int64
	// KnownHighWatermark is the quorum's high watermark as this node knows it:
	// a leader's established one, or the largest a leader's Fetch answer
	// named (ahead of HighWatermark while the local log is behind it); -1
	// before either. A state machine catching up at start holds its output
	// until it applied everything below the first one (Kafka's
	// MetadataLoader, raftClient.highWatermark()).
	KnownHighWatermark int64
	SoftState          *SoftState

	// SnapshotChunks are downloaded snapshot bytes to append to the partial file
	// before step 2 (Position 0 starts a new file).
	SnapshotChunks []SnapshotChunk
	// LoadSnapshot, when set, completes the download: validate and commit the partial
	// file, reset the log to start at its end (instead of TruncateTo), make that
	// durable, and load it into the state machine before applying Committed. The core
	// moves its log to the snapshot at Advance. Node, the driver in this package,
	// marks a file that is not a valid snapshot (snapshotRejected) instead of
	// stopping: the core then drops the download at Advance and fetches again.
	LoadSnapshot *raftlog.SnapshotID
	// RecoveryDone: the node has caught up after a recovery (raftlog.Recovery).
	// Once Append (and everything before it) is durable, and before sending
	// MessagesAfterPersist, remove the recovery marker (raftlog.RecoveryClearer).
	RecoveryDone bool
	// snapshotRejected: the driver found the LoadSnapshot file invalid.
	snapshotRejected bool
	// snapshotKRaft is what a valid LoadSnapshot file says of the quorum.
	snapshotKRaft SnapshotKRaft

	flushEnd int64
}

// HasReady reports whether Ready would return any work.
func (r *Raft) HasReady() bool {
	return r.pendingState != nil || r.log.pendingTruncate >= 0 || r.log.unstableFrom < r.log.endOffset() ||
		len(r.msgs) > 0 || len(r.msgsAfter) > 0 || r.hasCommitted() || r.softState() != r.lastSoft ||
		len(r.snapChunks) > 0 || r.loadSnapshot != nil || r.recoveryDone || r.knownHighWatermark() != r.reportedHW
}

// knownHighWatermark is Ready.KnownHighWatermark.
func (r *Raft) knownHighWatermark() int64 {
	return max(r.knownHW, r.leaderHW())
}

func (r *Raft) hasCommitted() bool {
	i := r.log.batchIndex(r.applied)
	return i >= 0 && r.log.batches[i].NextOffset() <= r.hw
}

func (r *Raft) softState() SoftState {
	s := SoftState{Role: r.role, Epoch: r.epoch, LeaderID: r.leaderID}
	if r.lead != nil {
		s.EpochStartOffset = r.lead.epochStartOffset
	}
	return s
}

// Ready takes the pending work. The caller must handle it and call Advance.
func (r *Raft) Ready() Ready {
	rd := Ready{
		QuorumState:          r.pendingState,
		TruncateTo:           r.log.pendingTruncate,
		Append:               r.log.from(r.log.unstableFrom),
		Messages:             r.msgs,
		MessagesAfterPersist: r.msgsAfter,
		HighWatermark:        r.hw,
		KnownHighWatermark:   r.knownHighWatermark(),
		SnapshotChunks:       r.snapChunks,
		LoadSnapshot:         r.loadSnapshot,
		RecoveryDone:         r.recoveryDone,
		flushEnd:             r.log.endOffset(),
	}
	r.snapChunks, r.loadSnapshot, r.recoveryDone = nil, nil, false
	r.knownHW, r.reportedHW = rd.KnownHighWatermark, rd.KnownHighWatermark
	if rd.QuorumState != nil {
		r.stateInFlight = true
	}
	r.pendingState = nil
	r.log.pendingTruncate = -1
	r.log.unstableFrom = r.log.endOffset()
	r.msgs, r.msgsAfter = nil, nil
	if rd.LoadSnapshot == nil {
		// (A snapshot being loaded replaces everything below its end.)
		rd.Committed = r.log.committedBetween(r.applied, r.hw)
	}
	if n := len(rd.Committed); n > 0 {
		assertf(rd.Committed[0].BaseOffset == r.applied, "gap-free commit: next %d, batch at %d", r.applied, rd.Committed[0].BaseOffset)
		r.applied = rd.Committed[n-1].NextOffset()
	}
	if s := r.softState(); s != r.lastSoft {
		r.lastSoft = s
		rd.SoftState = &s
	}
	return rd
}

// statePersisted tells the core that the QuorumState of the Ready being handled is
// durable while its log append is not yet (Node.beginEpochAsync writes a new
// leader's state at once and fsyncs its LeaderChange batch on the flusher). Only the
// state held the leader's Fetch answers back (send), so they leave at once from
// here on, and an append that wakes parked Fetches can take the flusher too; Advance
// confirms the rest of the Ready.
func (r *Raft) statePersisted() { r.stateInFlight = false }

// Advance tells the core that everything in rd is durable. For a leader this can move
// the high watermark (its own flushed offset counts toward the majority), and once
// nothing appended is left unflushed it appends the proposals that accumulated while
// the fsync ran (see Propose), for the next Ready.
func (r *Raft) Advance(rd Ready) {
	if id := rd.LoadSnapshot; id != nil {
		r.finishSnapshotLoad(*id, rd.snapshotRejected, rd.snapshotKRaft)
	}
	if rd.QuorumState != nil {
		r.stateInFlight = false
	}
	r.log.flushedEnd = max(r.log.flushedEnd, min(rd.flushEnd, r.log.endOffset()))
	if r.lead != nil {
		r.maybeAdvanceHW()
		r.maybeResignAfterRemoval(r.nowMs)
	}
	// Proposals that waited for this fsync go out as the next batch (group commit);
	// the next Ready carries it.
	r.drainIfIdle()
}
