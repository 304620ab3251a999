package replica

import (
	"errors"
	"fmt"
	"math"

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
}

// FollowerRead is the leader's answer to a follower fetch.
type FollowerRead struct {
	Records        []byte
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// Diverging is set when the follower's log diverges from the leader's at
	// its last fetched epoch (KIP-595's DivergingEpoch, Fetch v12+): it must
	// truncate, and no records come with it.
	Diverging *EpochEndOffset
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
	data, err := p.log.Read(req.FetchOffset, max(req.MaxBytes, 0), math.MaxInt64)
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return res, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	case err != nil:
		return res, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	res.Records = data
	p.mu.Lock()
	var item *AlterPartitionItem
	moved := false
	if p.isLeader() && p.followers[req.ReplicaID] == f {
		prev := f.endOffset
		f.updateFetch(req.FetchOffset, req.LogStartOffset, res.LogEndOffset, nowMs, req.BrokerEpoch)
		item = p.maybeExpandISRLocked(req.ReplicaID, f)
		if prev != f.endOffset || item != nil {
			moved = p.maybeAdvanceHW(nowMs)
		}
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
	f := p.followers[req.ReplicaID]
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
// fetch), producer state updated from their headers, and the high watermark
// moved to min(leaderHW, log end). A fetch made before a truncation or role
// change is dropped (ErrNotLeader, or nil when only the offset moved).
func (p *Partition) AppendAsFollower(leaderEpoch int32, fetchOffset int64, records []byte, leaderHW int64) error {
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
// have: a log entirely below the leader's log start restarts there; a log
// past what the leader has is cut back to the leader's high watermark
// (everything below it is committed, so the leader has it).
func (p *Partition) HandleOutOfRange(leaderEpoch int32, leaderStart, leaderHW int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followingLocked(leaderEpoch); err != nil {
		return err
	}
	end := p.log.EndOffset()
	if end < leaderStart {
		p.hooks.log.Info("follower log below the leader's log start; starting over there",
			zap.Stringer("partition", p.tp), zap.Int64("logEndOffset", end), zap.Int64("leaderLogStart", leaderStart))
		if err := p.log.TruncateFullyAndStartAt(leaderStart); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
		}
		p.hw.Store(leaderStart)
		if err := p.loadProducersLocked(p.hooks.nowMs()); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
		}
		return nil
	}
	if leaderHW >= 0 && leaderHW < end {
		return p.truncateLocked(leaderHW)
	}
	return nil
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
