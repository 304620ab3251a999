package quorum

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Snapshots in the core (KIP-630). The core never touches snapshot files: it reads
// chunks through Config.Snapshots to serve FetchSnapshot, and hands downloaded chunks
// to the driver in Ready.SnapshotChunks. What it owns is the bookkeeping that must
// stay consistent with the log: which snapshot is the latest, where the log starts,
// and a follower's download position.

// SnapshotSource is the core's read-only view of the local snapshot files, used by a
// leader to serve FetchSnapshot. raftlog.FileStorage satisfies it through the driver.
type SnapshotSource interface {
	// ReadSnapshot returns up to maxBytes of snapshot id starting at position, and the
	// snapshot's total size. A missing snapshot is raftlog.ErrSnapshotNotFound; a
	// position at or past the end returns no bytes and the size.
	ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) (chunk []byte, size int64, err error)
}

// bootstrapSnapshot is the id kafka-storage writes for dynamic quorums; it is never
// served over FetchSnapshot.
var bootstrapSnapshot = raftlog.SnapshotID{}

// Errors about snapshots.
var (
	// ErrInvalidSnapshotID: a snapshot id that is not committed, not batch aligned or
	// whose epoch does not match the log (Kafka's createSnapshot checks).
	ErrInvalidSnapshotID = errors.New("quorum: invalid snapshot id")
)

// SnapshotChunk is a piece of a snapshot a follower downloaded. The driver appends
// Data to the partial file of ID; Position 0 starts a new file (aborting any other).
type SnapshotChunk struct {
	ID       raftlog.SnapshotID
	Position int64
	Size     int64
	Data     []byte
}

// snapshotFetch is a follower's download in progress. It lives in followerState, so a
// new leader or epoch restarts the download: another node's file for the same id may
// differ byte for byte, and resuming mid-file from it would splice two files.
type snapshotFetch struct {
	id       raftlog.SnapshotID
	size     int64
	position int64
	// done: every byte arrived; the driver is validating the file (no Fetch until
	// finishSnapshotLoad).
	done bool
}

// LatestSnapshot is the newest complete local snapshot the core knows of.
func (r *Raft) LatestSnapshot() (raftlog.SnapshotID, bool) {
	if r.snapshot == nil {
		return raftlog.SnapshotID{}, false
	}
	return *r.snapshot, true
}

// ValidateSnapshotID checks that a snapshot with this id may be written now: it must
// end on a batch boundary at or below the offset delivered to listeners (so at or
// below the high watermark), and Epoch must be the epoch of its last record.
func (r *Raft) ValidateSnapshotID(id raftlog.SnapshotID) error {
	switch {
	case id.EndOffset <= 0 || id.EndOffset > r.applied:
		return fmt.Errorf("%w: end offset %d, applied %d", ErrInvalidSnapshotID, id.EndOffset, r.applied)
	case id.Epoch > r.epoch:
		return fmt.Errorf("%w: epoch %d after current epoch %d", ErrInvalidSnapshotID, id.Epoch, r.epoch)
	case id.EndOffset == r.log.startOffset:
		if id.Epoch != r.log.startEpoch {
			return fmt.Errorf("%w: epoch %d at log start, want %d", ErrInvalidSnapshotID, id.Epoch, r.log.startEpoch)
		}
		return nil
	}
	i := r.log.batchIndex(id.EndOffset - 1)
	if i < 0 || id.EndOffset < r.log.startOffset {
		return fmt.Errorf("%w: end offset %d outside the log [%d, %d)", ErrInvalidSnapshotID, id.EndOffset, r.log.startOffset, r.log.endOffset())
	}
	b := r.log.batches[i]
	if b.NextOffset() != id.EndOffset || b.Epoch != id.Epoch {
		return fmt.Errorf("%w: (%d,%d) does not end batch [%d,%d] of epoch %d",
			ErrInvalidSnapshotID, id.EndOffset, id.Epoch, b.BaseOffset, b.LastOffset, b.Epoch)
	}
	return nil
}

// SnapshotCreated records a snapshot the driver wrote and committed. Call it only
// for ids ValidateSnapshotID accepted (or downloaded ones).
func (r *Raft) SnapshotCreated(id raftlog.SnapshotID) {
	if r.snapshot == nil || id.EndOffset > r.snapshot.EndOffset {
		r.snapshot = &id
	}
}

// CompactLog moves the log start to the latest snapshot's end and drops the batches
// below it from memory. The driver deletes the segments (raftlog SetLogStart); the
// log start never passes the latest snapshot, so every offset stays recoverable.
func (r *Raft) CompactLog() (int64, bool) {
	s := r.snapshot
	if s == nil || s.EndOffset <= r.log.startOffset || s.EndOffset > r.applied {
		return r.log.startOffset, false
	}
	r.log.compactTo(*s)
	return s.EndOffset, true
}

// compactTo drops batches below the snapshot's end. The snapshot ends on a batch
// boundary (ValidateSnapshotID), so the log still begins exactly at startOffset.
func (l *raftLog) compactTo(id raftlog.SnapshotID) {
	i := l.batchIndex(id.EndOffset)
	if i < 0 {
		i = len(l.batches)
	}
	assertf(i == len(l.batches) || l.batches[i].BaseOffset == id.EndOffset,
		"compaction on a batch boundary: %d inside batch at %d", id.EndOffset, l.batches[min(i, len(l.batches)-1)].BaseOffset)
	l.batches = append([]raftlog.Batch(nil), l.batches[i:]...)
	var epochs []epochStart
	for _, e := range l.epochs {
		if e.startOffset < id.EndOffset {
			continue
		}
		epochs = append(epochs, e)
	}
	if len(l.batches) > 0 && (len(epochs) == 0 || epochs[0].startOffset > id.EndOffset) {
		epochs = append([]epochStart{{epoch: l.batches[0].Epoch, startOffset: id.EndOffset}}, epochs...)
	}
	l.epochs = epochs
	l.startOffset, l.startEpoch = id.EndOffset, id.Epoch
}

// resetTo empties the log and restarts it at the snapshot's end, as Kafka's
// truncateFullyAndStartAt after a snapshot download.
func (l *raftLog) resetTo(id raftlog.SnapshotID, k SnapshotKRaft) {
	l.batches, l.epochs = nil, nil
	l.kraft.reset(id, k)
	l.kraftFloor = id.EndOffset
	l.startOffset, l.startEpoch = id.EndOffset, id.Epoch
	l.flushedEnd, l.unstableFrom = id.EndOffset, id.EndOffset
	l.pendingTruncate = -1
}

// snapshotForFetch is the snapshot a fetcher must download instead of reading the
// log (spec section 2.7 rules 2 and 4), or nil.
func (r *Raft) snapshotForFetch(req *FetchRequest) *raftlog.SnapshotID {
	s := r.snapshot
	if s == nil || *s == bootstrapSnapshot {
		return nil
	}
	start := r.log.startOffset
	switch {
	case req.FetchOffset == 0 && s.EndOffset > 0,
		start > 0 && req.FetchOffset < start,
		start > 0 && req.FetchOffset == start && req.LastFetchedEpoch != r.log.startEpoch,
		start > 0 && req.LastFetchedEpoch < r.log.startEpoch:
		id := *s
		return &id
	}
	return nil
}

// handleFetchSnapshot serves one chunk of a snapshot (leader only).
func (r *Raft) handleFetchSnapshot(nowMs int64, m Message) error {
	req := m.FetchSnapshot
	resp := &FetchSnapshotResponse{SnapshotID: req.SnapshotID, Position: req.Position}
	if code := r.validateLeaderRequest(req.CurrentLeaderEpoch); code != 0 {
		resp.ErrorCode = code
		r.replyFetchSnapshot(m, resp)
		return nil
	}
	if rs := r.lead.replicas[req.ReplicaID]; rs != nil && req.ReplicaID >= 0 {
		rs.lastFetchMs = nowMs // a download keeps the voter counted for check-quorum
	}
	// Any snapshot still on disk is served, not only the latest: a download of a large
	// snapshot must not restart each time a newer one is written meanwhile.
	if req.SnapshotID == bootstrapSnapshot {
		resp.ErrorCode = kerr.SnapshotNotFound.Code
		r.replyFetchSnapshot(m, resp)
		return nil
	}
	if req.Position < 0 {
		resp.ErrorCode = kerr.PositionOutOfRange.Code
		r.replyFetchSnapshot(m, resp)
		return nil
	}
	maxBytes := int(min(req.MaxBytes, r.cfg.FetchMaxBytes))
	chunk, size, err := r.readSnapshot(req.SnapshotID, req.Position, max(maxBytes, 1))
	switch {
	case errors.Is(err, raftlog.ErrSnapshotNotFound):
		resp.ErrorCode = kerr.SnapshotNotFound.Code
	case err != nil:
		return err
	case req.Position >= size:
		resp.ErrorCode = kerr.PositionOutOfRange.Code
	default:
		resp.Size, resp.Bytes = size, chunk
	}
	r.replyFetchSnapshot(m, resp)
	return nil
}

func (r *Raft) readSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error) {
	if r.cfg.Snapshots == nil {
		return nil, 0, raftlog.ErrSnapshotNotFound
	}
	return r.cfg.Snapshots.ReadSnapshot(id, position, maxBytes)
}

func (r *Raft) replyFetchSnapshot(m Message, resp *FetchSnapshotResponse) {
	resp.LeaderID, resp.LeaderEpoch = r.leaderID, r.epoch
	if r.role == Resigned || r.role == Leader {
		resp.LeaderID = r.cfg.NodeID
	}
	r.send(Message{To: m.From, RequestID: m.RequestID, FetchSnapshotResp: resp})
}

// startSnapshotFetch switches a follower from Fetch to downloading id.
func (r *Raft) startSnapshotFetch(id raftlog.SnapshotID) {
	f := r.follow
	if f.snap != nil && f.snap.id == id {
		return // already downloading it
	}
	r.logf("%d fetching snapshot (%d,%d) from %d", r.cfg.NodeID, id.EndOffset, id.Epoch, r.leaderID)
	f.snap = &snapshotFetch{id: id}
}

func (r *Raft) sendFetchSnapshot(to int32, s *snapshotFetch) uint64 {
	id := r.newRequestID()
	r.send(Message{To: to, RequestID: id, FetchSnapshot: &FetchSnapshotRequest{
		ClusterID:          r.cfg.ClusterID,
		ReplicaID:          r.cfg.NodeID,
		ReplicaDirectoryID: r.ownDirectoryID(),
		MaxBytes:           r.cfg.FetchMaxBytes,
		CurrentLeaderEpoch: r.epoch,
		SnapshotID:         s.id,
		Position:           s.position,
	}})
	return id
}

// handleFetchSnapshotResponse appends a chunk to the download and, when it is
// complete, asks the driver to validate and load it (finishSnapshotLoad resets the
// log at Advance). A download is at most Config.MaxSnapshotBytes
// (DefaultMaxSnapshotBytes, 1 GiB) in all: the announced size is fixed by the first
// chunk, every chunk must continue the download within it, and a size above the cap
// is refused (ERROR, Counters.RefusedResponse) and the download abandoned, so the
// driver never holds more than the cap for one.
func (r *Raft) handleFetchSnapshotResponse(nowMs int64, m Message) {
	f := r.follow
	if f == nil || f.inflight != m.RequestID {
		return
	}
	f.inflight = 0
	resp := m.FetchSnapshotResp
	if m.Err != nil || resp.ErrorCode == kerr.BrokerNotAvailable.Code {
		// Not a success: the fetch timer keeps running and the download is kept.
		r.fetchFailed(nowMs, f, m.From)
		return
	}
	if r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch) {
		if r.follow == f {
			f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
		}
		return
	}
	if r.role != Follower || m.From != r.leaderID || f.snap == nil {
		f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
		return
	}
	s := f.snap
	if resp.ErrorCode == 0 && resp.Size > r.cfg.MaxSnapshotBytes {
		// The driver holds the download in memory as it arrives: a snapshot past the
		// cap is abandoned at its first chunk, before any byte is kept. Fetch names the
		// snapshot again after the backoff, and its first chunk is refused again.
		r.refuseResponse(m.From, "snapshot larger than the download cap",
			zap.Int64("snapshot_end_offset", s.id.EndOffset), zap.Int32("snapshot_epoch", s.id.Epoch),
			zap.Int64("size", resp.Size), zap.Int64("max_snapshot_bytes", r.cfg.MaxSnapshotBytes))
		f.snap = nil
		r.fetchFailed(nowMs, f, m.From)
		return
	}
	if resp.ErrorCode == 0 && (resp.SnapshotID != s.id || resp.Position != s.position ||
		(s.size != 0 && resp.Size != s.size) || resp.Size <= 0 || int64(len(resp.Bytes)) > resp.Size-resp.Position ||
		len(resp.Bytes) == 0 && resp.Position < resp.Size) {
		// A chunk that does not continue the download, or makes no progress: not a
		// success, so the fetch timer keeps running and a leader that never sends a
		// usable chunk is replaced. Fetch names the snapshot again after the backoff.
		r.refuseResponse(m.From, "snapshot chunk does not continue the download",
			zap.Int64("snapshot_end_offset", s.id.EndOffset), zap.Int32("snapshot_epoch", s.id.Epoch),
			zap.Int64("position", s.position), zap.Int64("size", s.size), zap.Stringer("response", resp))
		f.snap = nil
		r.fetchFailed(nowMs, f, m.From)
		return
	}
	f.fetchedOK = true
	f.fetchDeadlineMs = nowMs + r.cfg.FetchTimeoutMs
	f.nextFetchMs = nowMs
	if resp.ErrorCode != 0 {
		// SNAPSHOT_NOT_FOUND (cleaned meanwhile), POSITION_OUT_OF_RANGE, ...: back to
		// Fetch, which names the snapshot to download now.
		r.logf("%d drops snapshot download (%d,%d) at %d: %s", r.cfg.NodeID, s.id.EndOffset, s.id.Epoch, s.position, resp)
		f.snap = nil
		r.maybeSendFetch(nowMs)
		return
	}
	s.size = resp.Size
	r.snapChunks = append(r.snapChunks, SnapshotChunk{ID: s.id, Position: s.position, Size: s.size, Data: resp.Bytes})
	s.position += int64(len(resp.Bytes))
	if s.position == s.size {
		if s.id.EndOffset < r.hw {
			// The high watermark passed it during the download (an observer's
			// rediscovery Fetch may have reached the leader): loading it would move
			// the state machine backwards.
			r.logf("%d drops downloaded snapshot (%d,%d): high watermark %d is past it", r.cfg.NodeID, s.id.EndOffset, s.id.Epoch, r.hw)
			f.snap = nil
			r.maybeSendFetch(nowMs)
			return
		}
		// Complete: the driver validates the file (Ready.LoadSnapshot) and the core
		// installs it, or drops it, at Advance. No Fetch meanwhile, so the high
		// watermark stays at or below its end.
		s.done = true
		r.loadSnapshot = &s.id
		return
	}
	r.maybeSendFetch(nowMs)
}

// finishSnapshotLoad runs at Advance of the Ready that carried LoadSnapshot: the
// driver has validated and committed the downloaded file, or found it invalid
// (rejected). A valid one is installed; an invalid one (its bytes come from the
// leader) is refused like any unusable answer and the follower fetches again after
// the retry backoff, instead of stopping.
func (r *Raft) finishSnapshotLoad(id raftlog.SnapshotID, rejected bool, kraft SnapshotKRaft) {
	f := r.follow
	if f == nil || f.snap == nil || !f.snap.done || f.snap.id != id {
		return
	}
	f.snap = nil
	if rejected {
		r.refuseResponse(r.leaderID, "downloaded snapshot is not a valid snapshot file",
			zap.Int64("snapshot_end_offset", id.EndOffset), zap.Int32("snapshot_epoch", id.Epoch))
		f.nextFetchMs = r.nowMs + r.cfg.RetryBackoffMs
	} else {
		r.installSnapshot(id, kraft)
	}
	r.maybeSendFetch(r.nowMs)
}

// unusableSnapshot says why a leader's snapshot id cannot be what this follower needs
// ("" when it can): it must end at or above the high watermark (the follower's
// committed records are in the leader's log, so its snapshot cannot end below them;
// loading it would move the state machine backwards) and lie in an epoch no later
// than the leader's.
func (r *Raft) unusableSnapshot(id raftlog.SnapshotID) string {
	switch {
	case id == bootstrapSnapshot || id.EndOffset <= 0 || id.Epoch < 0:
		return "snapshot id is not one a leader serves"
	case id.EndOffset < r.hw:
		return "snapshot ends below the high watermark"
	case id.Epoch > r.epoch:
		return "snapshot epoch is after the leader's epoch"
	}
	return ""
}

// installSnapshot makes a downloaded, validated snapshot the node's state: the log
// restarts at its end (the driver reset its storage already) and the listeners have
// reloaded from it. A leader never gets here (only a Follower downloads), and the
// high watermark was at or below the snapshot's end when the download completed and
// has not moved since (no Fetch is sent until here).
func (r *Raft) installSnapshot(id raftlog.SnapshotID, kraft SnapshotKRaft) {
	assertf(r.role == Follower, "only a follower loads a snapshot (role %s)", r.role)
	assertf(id.EndOffset >= r.hw, "snapshot (%d,%d) below high watermark %d", id.EndOffset, id.Epoch, r.hw)
	r.logf("%d loaded snapshot (%d,%d), log restarts at %d", r.cfg.NodeID, id.EndOffset, id.Epoch, id.EndOffset)
	r.log.resetTo(id, kraft)
	r.snapshot = &id
	r.hw = id.EndOffset
	r.applied = id.EndOffset
	r.refreshVoter(r.nowMs)
}

// RetainedBelowSnapshot is the size and the oldest batch time of the log kept below
// the latest snapshot: what cleaning (CompactLog) would free. Zero bytes when nothing.
func (r *Raft) RetainedBelowSnapshot() (bytes int64, oldestMs int64) {
	if r.snapshot == nil {
		return 0, 0
	}
	oldestMs = noDeadline
	for _, b := range r.log.batches {
		if b.NextOffset() > r.snapshot.EndOffset {
			break
		}
		bytes += int64(b.Size())
		oldestMs = min(oldestMs, b.MaxTimestampMs)
	}
	return bytes, oldestMs
}
