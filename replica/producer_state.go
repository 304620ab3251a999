package replica

import (
	"errors"
	"maps"
	"os"
	"slices"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// Producer state across restarts and leader changes, as Kafka's
// ProducerStateManager keeps it:
//
//   - every replica, leader or follower, updates it from each batch it
//     appends (trackBatchLocked), so a new leader answers a producer's
//     retries as duplicates;
//   - a snapshot of it (storage's <offset>.snapshot, Kafka's format) is
//     written when a segment rolls, at the new segment's base offset, and
//     when the partition closes, at the log end;
//   - a log that opens loads the latest snapshot at or below its end and
//     rebuilds the rest from the batches after it (the whole log when there
//     is none); a truncation does the same at its new end;
//   - producers idle for producer.id.expiration.ms (from their last batch's
//     timestamp) with no ongoing transaction are forgotten
//     (removeExpiredProducers, and when a snapshot is loaded).

// setProducerLocked records pid's state; the map is made with the
// partition's first producer (most partitions have none); mu held.
func (p *Partition) setProducerLocked(pid int64, st *producerState) {
	if p.producers == nil {
		p.producers = make(map[int64]*producerState)
	}
	p.producers[pid] = st
}

// trackBatchLocked updates producer state from a batch now in the log (a
// leader's or follower's append, or the walk at load); mu held. A batch of
// an older epoch than the producer's (possible only in a replicated log the
// leader validated) changes nothing.
func (p *Partition) trackBatchLocked(h storage.BatchInfo) {
	pid := h.ProducerID
	if pid < 0 {
		return
	}
	st := p.producers[pid]
	if st == nil {
		st = newProducerState(h.ProducerEpoch)
		p.setProducerLocked(pid, st)
	}
	if h.ProducerEpoch < st.epoch {
		return
	}
	st.lastTimestampMs = h.MaxTimestampMs
	if h.IsControl() {
		st.setEpoch(h.ProducerEpoch)
		if h.ControlType == storage.ControlCommit || h.ControlType == storage.ControlAbort {
			p.completeTxnLocked(pid, st, h)
		}
		return
	}
	if h.BaseSequence < 0 {
		// A coordinator's write (sequence -1): no sequences to keep, but a
		// transactional one opens the producer's transaction like any other.
		st.setEpoch(h.ProducerEpoch)
	} else {
		st.update(h.ProducerEpoch, producerBatch{firstSeq: h.BaseSequence,
			lastSeq: lastSeqOf(h.BaseSequence, h.LastOffset-h.BaseOffset), firstOffset: h.BaseOffset, lastOffset: h.LastOffset})
	}
	if h.Transactional() && st.txnFirstOffset < 0 {
		st.txnFirstOffset = h.BaseOffset
		p.txns.begin(pid, h.BaseOffset)
	}
}

// appendLocked appends one batch to the log and tracks it; when the append
// rolled the log, producer state up to the new segment (without b) is
// snapshotted first, as Kafka snapshots at every roll; mu held.
func (p *Partition) appendBatchLocked(b storage.Batch) error {
	before := p.log.ActiveSegmentBase()
	if err := p.log.Append([]storage.Batch{b}); err != nil {
		return err
	}
	if base := p.log.ActiveSegmentBase(); base != before && base == b.BaseOffset {
		p.snapshotProducersLocked(base)
	}
	p.trackBatchLocked(b.Info())
	return nil
}

// snapshotEntriesLocked renders producer state as snapshot entries, by
// producer id; mu held.
func (p *Partition) snapshotEntriesLocked() []storage.ProducerSnapshotEntry {
	out := make([]storage.ProducerSnapshotEntry, 0, len(p.producers))
	for _, pid := range slices.Sorted(maps.Keys(p.producers)) {
		st := p.producers[pid]
		e := storage.ProducerSnapshotEntry{ProducerID: pid, ProducerEpoch: st.epoch, LastSequence: -1, LastOffset: -1,
			TimestampMs: st.lastTimestampMs, CoordinatorEpoch: st.coordinatorEpoch, CurrentTxnFirstOffset: st.txnFirstOffset}
		if n := len(st.batches); n > 0 {
			last := st.batches[n-1]
			e.LastSequence, e.LastOffset, e.OffsetDelta = last.lastSeq, last.lastOffset, int32(last.lastOffset-last.firstOffset)
		}
		out = append(out, e)
	}
	return out
}

// snapshotProducersLocked writes the snapshot at offset (state built from
// every batch below it) unless one at or past it exists; mu held. A failed
// write is logged, not fatal: the log holds the truth, and the next load
// rebuilds from an older snapshot or the log.
func (p *Partition) snapshotProducersLocked(offset int64) {
	if offset <= p.snapEnd {
		return
	}
	if err := storage.WriteProducerSnapshot(p.log.Dir(), offset, p.snapshotEntriesLocked()); err != nil {
		p.hooks.log.Error("writing a producer snapshot failed", zap.Stringer("partition", p.tp),
			zap.Int64("offset", offset), zap.Error(err))
		return
	}
	p.snapEnd = offset
}

// expiredLocked reports whether st may be forgotten at nowMs: no ongoing
// transaction, and idle for producer.id.expiration.ms (Kafka's
// isProducerExpired).
func (p *Partition) expiredLocked(st *producerState, nowMs int64) bool {
	return st.txnFirstOffset < 0 && nowMs-st.lastTimestampMs >= p.hooks.producerExpiryMs
}

// removeExpiredProducers forgets the producers expired at nowMs and returns
// how many went.
func (p *Partition) removeExpiredProducers(nowMs int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for pid, st := range p.producers {
		if p.expiredLocked(st, nowMs) {
			delete(p.producers, pid)
			n++
		}
	}
	return n
}

// loadProducersLocked rebuilds producer state for the log as it is now (at
// open and after a truncation): from the latest readable snapshot at or
// below the log end, then the batches after it; snapshots past the log end
// or below its first segment are deleted, and so is an unreadable one (the
// next older is tried). mu held, or p not yet shared.
func (p *Partition) loadProducersLocked(nowMs int64) error {
	offsets, err := storage.ProducerSnapshotOffsets(p.log.Dir())
	if err != nil {
		return err
	}
	return p.loadProducersFromLocked(nowMs, offsets)
}

// loadProducersFromLocked is loadProducersLocked with the directory's
// snapshot offsets listed already (sorted).
func (p *Partition) loadProducersFromLocked(nowMs int64, offsets []int64) error {
	dir, end, base := p.log.Dir(), p.log.EndOffset(), p.log.FirstSegmentBase()
	p.producers, p.snapEnd = map[int64]*producerState{}, base
	p.txns.reset()
	from := base
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off <= end && off >= base {
			entries, err := storage.ReadProducerSnapshot(dir, off)
			if err == nil {
				p.loadSnapshotLocked(entries, nowMs)
				from, p.snapEnd = off, off
				break
			}
			p.hooks.log.Warn("unreadable producer snapshot; deleting it", zap.Stringer("partition", p.tp),
				zap.Int64("offset", off), zap.Error(err))
		}
		if _, err := storage.DeleteProducerSnapshots(dir, func(o int64) bool { return o == off }); err != nil {
			return err
		}
	}
	// The walk holds the log's read lock: aborted transactions found on the
	// way are indexed after it (an entry already there is skipped).
	var found []storage.AbortedTxn
	p.walkAborts = &found
	err := p.log.WalkBatches(from, func(h storage.BatchInfo) bool {
		p.trackBatchLocked(h)
		return true
	})
	p.walkAborts = nil
	if err != nil {
		return err
	}
	for _, e := range found {
		if err := p.log.AppendAbortedTxn(e); err != nil {
			return err
		}
	}
	return nil
}

// loadSnapshotLocked installs a snapshot's entries, leaving out the expired
// and the implausible (a corrupt file that passed its CRC cannot make a
// negative producer id, epoch or batch span); mu held.
func (p *Partition) loadSnapshotLocked(entries []storage.ProducerSnapshotEntry, nowMs int64) {
	for _, e := range entries {
		if e.ProducerID < 0 || e.ProducerEpoch < 0 || e.OffsetDelta < 0 || e.LastOffset >= 0 && e.LastOffset < int64(e.OffsetDelta) {
			continue
		}
		st := newProducerState(e.ProducerEpoch)
		st.lastTimestampMs, st.coordinatorEpoch, st.txnFirstOffset = e.TimestampMs, e.CoordinatorEpoch, max(e.CurrentTxnFirstOffset, -1)
		if p.expiredLocked(st, nowMs) {
			continue
		}
		if e.LastOffset >= 0 && e.LastSequence >= 0 {
			st.batches = append(st.batches, producerBatch{firstSeq: firstSeqOf(e.LastSequence, e.OffsetDelta), lastSeq: e.LastSequence,
				firstOffset: e.LastOffset - int64(e.OffsetDelta), lastOffset: e.LastOffset})
		}
		p.setProducerLocked(e.ProducerID, st)
		if st.txnFirstOffset >= 0 {
			p.txns.begin(e.ProducerID, st.txnFirstOffset)
		}
	}
}

// recordAbortLocked adds an aborted transaction to the log's index; mu held.
// A failure leaves the log failed (it refuses writes from then on).
func (p *Partition) recordAbortLocked(e storage.AbortedTxn) {
	if p.walkAborts != nil {
		*p.walkAborts = append(*p.walkAborts, e)
		return
	}
	if err := p.log.AppendAbortedTxn(e); err != nil {
		p.hooks.log.Error("recording an aborted transaction failed", zap.Stringer("partition", p.tp), zap.Error(err))
	}
}

// deleteProducerSnapshotsBelow removes the snapshots below the log's first
// segment (after retention deleted segments).
func (p *Partition) deleteProducerSnapshotsBelow(base int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := storage.DeleteProducerSnapshots(p.log.Dir(), func(o int64) bool { return o < base }); err != nil &&
		!errors.Is(err, os.ErrNotExist) {
		p.hooks.log.Warn("deleting old producer snapshots failed", zap.Stringer("partition", p.tp), zap.Error(err))
	}
}

// close snapshots producer state at the log end and closes the log (the
// partition is stopped).
func (p *Partition) close() error {
	p.mu.Lock()
	p.snapshotProducersLocked(p.log.EndOffset())
	p.mu.Unlock()
	return p.log.Close()
}
