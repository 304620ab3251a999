package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// FollowerFetch is one partition of a Fetch from a follower replica, as the
// leader reads it.
type FollowerFetch struct {
	ReplicaID int32
	// BrokerEpoch is the follower broker's epoch (ReplicaState.ReplicaEpoch,
	// Fetch v15+), -1 when the request carries none.
	BrokerEpoch        int64
	FetchOffset        int64
	LogStartOffset     int64
	CurrentLeaderEpoch int32
	// LastFetchedEpoch is -1 when absent (Fetch < v12, or an empty log).
	LastFetchedEpoch int32
	MaxBytes         int
	// Region asks for the records as FollowerRead.Region (no copy; the
	// caller releases it) instead of Records.
	Region bool
	// SessionFetchMs, when the read comes from a follower's incremental
	// fetch session (KIP-227), holds the time in ms of that session's
	// latest fetch; the session stores it at each of its fetches, read or
	// not. The leader keeps it: a session fetch that does not read this
	// partition still names it in Kafka, whose leader then counts a
	// follower at the log end as caught up at that fetch
	// (followersCaughtUpLocked). nil outside a session.
	SessionFetchMs *atomic.Int64
}

// FollowerRead is the leader's answer to a follower fetch.
type FollowerRead struct {
	Records []byte
	// Region is the records when FollowerFetch.Region asked for them so.
	Region         storage.Region
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// Diverging is set when the follower's log diverges from the leader's at
	// its last fetched epoch (KIP-595's DivergingEpoch, Fetch v12+): it must
	// truncate, and no records come with it.
	Diverging *EpochEndOffset
	// OutOfISR is set when, after this fetch, the follower is not in the
	// partition's committed ISR or an ISR change is in flight (which may
	// take it out), or the partition changed role or follower state under
	// the read: the leader owes the follower a state update that its later
	// fetches must drive even when they ask nothing new, such as adding it
	// to the ISR once its broker may join or once a refused AlterPartition
	// is out of the way (Kafka's leader updates every session partition's
	// follower state on each fetch). A fetch session reads such a
	// partition on every fetch (broker/fetch_sessions.go).
	OutOfISR bool
}

// ReadForFollower serves a follower's fetch, as Kafka's Partition.fetchRecords
// for a follower: the leader epoch is checked, a replica outside the
// assignment or with a stale broker epoch gets ErrNotLeader, a divergent log
// is answered with DivergingEpoch, and records are read up to the log end
// (not the high watermark). Unless it diverged, the fetch offset becomes the
// follower's log end offset: it may advance the high watermark or bring the
// follower back into the ISR (an AlterPartition is then submitted).
func (p *Partition) ReadForFollower(req FollowerFetch) (FollowerRead, error) {
	nowMs := p.hooks.nowMs()
	p.mu.Lock()
	f, res, err := p.checkFollowerFetchLocked(req)
	p.mu.Unlock()
	if err != nil || res.Diverging != nil {
		return res, err
	}
	if req.Region {
		res.Region, err = p.log.ReadRegion(req.FetchOffset, max(req.MaxBytes, 0), math.MaxInt64)
	} else {
		res.Records, err = p.log.Read(req.FetchOffset, max(req.MaxBytes, 0), math.MaxInt64)
	}
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return res, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	case err != nil:
		return res, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	p.mu.Lock()
	var item *AlterPartitionItem
	moved := false
	res.OutOfISR = true
	if p.isLeader() && p.followers.get(req.ReplicaID) == f {
		prev, prevStart := f.endOffset, f.startOffset
		f.updateFetch(req.FetchOffset, req.LogStartOffset, res.LogEndOffset, nowMs, req.BrokerEpoch)
		f.session = req.SessionFetchMs
		item = p.maybeExpandISRLocked(req.ReplicaID, f)
		if prev != f.endOffset || item != nil {
			moved = p.maybeAdvanceHW(nowMs)
		}
		// A new follower log start may complete a DeleteRecords waiting
		// for LowWatermark.
		moved = moved || prevStart != f.startOffset
		res.OutOfISR = p.pending != nil || !slices.Contains(p.state.ISR, req.ReplicaID)
	}
	p.mu.Unlock()
	if moved {
		p.notify()
	}
	if item != nil {
		p.hooks.log.Info("expanding ISR", zap.Stringer("partition", p.tp), zap.Stringer("alter", item))
		p.hooks.submit(p, item)
	}
	return res, nil
}

// checkFollowerFetchLocked validates a follower fetch and answers
// DivergingEpoch when its last fetched epoch does not end where it fetches;
// mu held.
func (p *Partition) checkFollowerFetchLocked(req FollowerFetch) (*followerState, FollowerRead, error) {
	var res FollowerRead
	if err := p.checkLeaderEpoch(req.CurrentLeaderEpoch); err != nil {
		return nil, res, err
	}
	if !p.isLeader() {
		return nil, res, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	f := p.followers.get(req.ReplicaID)
	if f == nil {
		return nil, res, fmt.Errorf("%w: fetch from %d, not a replica of %s", ErrNotLeader, req.ReplicaID, p.tp)
	}
	if view := p.hooks.brokers(); view != nil && req.BrokerEpoch != -1 {
		if epoch, _, registered := view.ISRBroker(req.ReplicaID); registered && epoch > req.BrokerEpoch {
			return nil, res, fmt.Errorf("%w: fetch from %d at broker epoch %d, registered %d", ErrNotLeader, req.ReplicaID, req.BrokerEpoch, epoch)
		}
	}
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = p.hw.Load(), p.log.StartOffset(), p.log.EndOffset()
	if req.LastFetchedEpoch < 0 {
		return f, res, nil
	}
	epoch, end, ok := p.log.EndOffsetForEpoch(req.LastFetchedEpoch)
	switch {
	case !ok:
		return nil, res, fmt.Errorf("%w: no end offset for last fetched epoch %d", ErrOffsetOutOfRange, req.LastFetchedEpoch)
	case req.FetchOffset < res.LogStartOffset:
		return nil, res, fmt.Errorf("%w: fetch offset %d below log start %d", ErrOffsetOutOfRange, req.FetchOffset, res.LogStartOffset)
	case epoch < req.LastFetchedEpoch || end < req.FetchOffset:
		res.Diverging = &EpochEndOffset{Epoch: epoch, EndOffset: end}
	}
	return f, res, nil
}

// LastOffsetForLeaderEpoch answers OffsetForLeaderEpoch (key 23) on the
// leader, as Kafka's Partition.lastOffsetForLeaderEpoch: the largest epoch
// <= leaderEpoch in the epoch cache and where it ends (the log end for the
// latest epoch); (-1, -1) when the cache cannot say.
func (p *Partition) LastOffsetForLeaderEpoch(currentLeaderEpoch, leaderEpoch int32) (EpochEndOffset, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderEpoch(currentLeaderEpoch); err != nil {
		return EpochEndOffset{Epoch: -1, EndOffset: -1}, err
	}
	if !p.isLeader() {
		return EpochEndOffset{Epoch: -1, EndOffset: -1}, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	epoch, end, ok := p.log.EndOffsetForEpoch(leaderEpoch)
	if !ok {
		return EpochEndOffset{Epoch: -1, EndOffset: -1}, nil
	}
	return EpochEndOffset{Epoch: epoch, EndOffset: end}, nil
}

// followingLocked checks that this broker still follows at leaderEpoch (a
// fetch answer for an older role is dropped); mu held.
func (p *Partition) followingLocked(leaderEpoch int32) error {
	if p.stopped || p.isLeader() || p.state.Leader < 0 || p.state.LeaderEpoch != leaderEpoch {
		return fmt.Errorf("%w: %s no longer follows at leader epoch %d", ErrNotLeader, p.tp, leaderEpoch)
	}
	return nil
}

// AppendAsFollower appends what the leader returned for a fetch at
// fetchOffset in leaderEpoch: whole batches, offsets and epochs as the
// leader assigned them (a trailing partial batch is left for the next
// fetch), producer state updated from their headers, the high watermark
// moved to min(leaderHW, log end), and the log start offset raised to the
// leader's (Kafka's maybeIncrementLogStartOffset after a follower append:
// records below it are gone for consumers at once, and the segments wholly
// below it are deleted at the next retention pass) when it is not past the
// high watermark. A fetch made before a truncation or role change is
// dropped (ErrNotLeader, or nil when only the offset moved).
func (p *Partition) AppendAsFollower(leaderEpoch int32, fetchOffset int64, records []byte, leaderHW, leaderStart int64) error {
	batches, _, err := storage.SplitBatches(records)
	if err != nil && len(batches) == 0 {
		return fmt.Errorf("%w: %w", ErrCorruptRecords, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followingLocked(leaderEpoch); err != nil {
		return err
	}
	if p.log.EndOffset() != fetchOffset {
		return nil
	}
	for _, b := range batches {
		if err := p.appendBatchLocked(b); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
		}
	}
	if hw := min(leaderHW, p.log.EndOffset()); hw > p.hw.Load() {
		p.hw.Store(hw)
	}
	if leaderStart > p.log.StartOffset() && leaderStart <= p.hw.Load() {
		p.log.SetStartOffset(leaderStart)
	}
	return nil
}

// TruncateOnDivergence cuts the follower's log where it diverges from the
// leader's, given the leader's DivergingEpoch answer, as Kafka's
// AbstractFetcherThread.getOffsetTruncationState: to the end of that epoch
// in both logs when the follower has it; to the end of its own largest
// epoch below it otherwise (the next fetch narrows further); to the
// leader's offset when the follower's cache cannot say.
func (p *Partition) TruncateOnDivergence(leaderEpoch int32, div EpochEndOffset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followingLocked(leaderEpoch); err != nil {
		return err
	}
	end := p.log.EndOffset()
	target := min(div.EndOffset, end)
	if epoch, off, ok := p.log.EndOffsetForEpoch(div.Epoch); ok {
		target = min(off, end)
		if epoch == div.Epoch {
			target = min(target, div.EndOffset)
		}
	}
	return p.truncateLocked(target)
}

// HandleOutOfRange repairs a follower whose fetch offset the leader does not
// have, given the leader's log end offset (ListOffsets latest from a
// replica) and, when the follower is not past it, the leader's log start
// offset (earliest; -1 when not asked), as Kafka's
// AbstractFetcherThread.fetchOffsetAndTruncate: a log past the leader's
// end (an unclean election) is cut back to it, starting over there when
// the cut falls below its first segment; a log entirely below the leader's
// log start (it deleted what the follower lacks) starts over at the
// leader's log start; otherwise the log is kept and the fetch retried.
func (p *Partition) HandleOutOfRange(leaderEpoch int32, leaderEnd, leaderStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followingLocked(leaderEpoch); err != nil {
		return err
	}
	end := p.log.EndOffset()
	switch {
	case leaderEnd >= 0 && leaderEnd < end && leaderEnd >= p.log.FirstSegmentBase():
		p.hooks.log.Warn("follower log past the leader's log end; truncating to it", zap.Stringer("partition", p.tp),
			zap.Int64("logEndOffset", end), zap.Int64("leaderLogEndOffset", leaderEnd))
		return p.truncateLocked(leaderEnd)
	case leaderEnd >= 0 && leaderEnd < end:
		return p.startOverLocked(leaderEnd, "follower log past the leader's log end, below its first segment; starting over there")
	case leaderStart > end:
		return p.startOverLocked(leaderStart, "follower log below the leader's log start; starting over there")
	}
	return nil
}

// startOverLocked empties the log and starts it at offset, durably; mu held.
func (p *Partition) startOverLocked(offset int64, why string) error {
	p.hooks.log.Warn(why, zap.Stringer("partition", p.tp), zap.Int64("logEndOffset", p.log.EndOffset()),
		zap.Int64("offset", offset))
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	if err := p.syncTruncation(); err != nil {
		return err
	}
	p.hw.Store(offset)
	// An empty log has no producers, open transactions or aborts; this also
	// drops producer snapshots past the new start.
	if err := p.loadProducersLocked(p.hooks.nowMs()); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	return nil
}

// OffsetForReplica answers ListOffsets from a replica (Kafka's
// fetchOffsetForTimestamp without an isolation level): latest is the
// leader's log end offset (not the high watermark, and never
// OFFSET_NOT_AVAILABLE), earliest its log start offset. Only the leader
// answers. Followers ask it when their fetch is out of range.
func (p *Partition) OffsetForReplica(tsMs int64, currentLeaderEpoch int32) (offset int64, leaderEpoch int32, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	if !p.isLeader() {
		return -1, -1, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	switch tsMs {
	case LatestTimestamp:
		return p.log.EndOffset(), p.state.LeaderEpoch, nil
	case EarliestTimestamp, EarliestLocalTimestamp:
		return p.log.StartOffset(), p.state.LeaderEpoch, nil
	}
	return -1, -1, fmt.Errorf("replica: a replica's ListOffsets asks latest or earliest, not %d", tsMs)
}

// truncateLocked cuts the log at offset, lowers the high watermark with it
// and rebuilds producer state; mu held.
func (p *Partition) truncateLocked(offset int64) error {
	before := p.log.EndOffset()
	end, err := p.log.TruncateTo(offset)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	if end == before {
		return nil
	}
	if err := p.syncTruncation(); err != nil {
		return err
	}
	p.hooks.log.Info("truncated follower log", zap.Stringer("partition", p.tp),
		zap.Int64("from", before), zap.Int64("to", end), zap.Int32("leaderEpoch", p.state.LeaderEpoch))
	if p.hw.Load() > end {
		p.hw.Store(end)
	}
	if err := p.loadProducersLocked(p.hooks.nowMs()); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	return nil
}

// syncTruncation makes a truncation durable before the follower fetches on:
// its next fetch offset (the new log end) tells the leader what it holds,
// and the leader counts it towards the high watermark; a crash must not
// bring back the cut records under offsets it then fetches anew. The
// segment files are fsynced (the cut one and any appended since the last
// flush; the recovery point becomes the log end) and the directory, whose
// entries a truncation removes or creates.
func (p *Partition) syncTruncation() error {
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	if err := storage.SyncDir(p.log.Dir()); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	return nil
}
