package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Truncation and leader-epoch bookkeeping for replication: a follower cuts
// the suffix its new leader does not have (KIP-101/KIP-279, through the epoch
// cache), and a new leader records where its epoch starts before any batch of
// that epoch exists, so followers with entries of later, abandoned epochs find
// their divergence point.

// AssignEpochStartOffset records that leader epoch epoch starts at
// startOffset (a new leader's log end offset), as Kafka's
// UnifiedLog.maybeAssignEpochStartOffset: the cache gets the entry before any
// batch of the epoch is appended. It is a no-op unless epoch is newer than
// every cached epoch.
//
// leader-epoch-checkpoint is not rewritten here but by the next flush (or
// roll, or any other rewrite of the file): the checkpoint only needs to
// cover what lies below the recovery point, since recovery rebuilds the
// epochs of the segments above it from their batches, and an entry without
// a batch after it is dropped at the next open anyway (the cache is
// truncated to the log end). Writing it here cost a file and a directory
// fsync per partition a broker starts leading, serially on the metadata
// publisher: most of a controlled shutdown's leader moves.
func (l *Log) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	if startOffset != l.endOffset() {
		return fmt.Errorf("%w: epoch %d starts at %d, log end offset %d", ErrNonContiguous, epoch, startOffset, l.endOffset())
	}
	if l.epochs.Assign(epoch, startOffset) {
		l.epochsUnsaved = true
	}
	return nil
}

// EndOffsetForEpoch answers "where does epoch end in this log?" as Kafka's
// UnifiedLog.endOffsetForEpoch: (foundEpoch, endOffset) from the epoch cache
// and the log end offset (see EpochCache.EndOffsetFor); ok is false when the
// cache cannot say (epoch < 0, empty cache, or newer than every entry).
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	foundEpoch, endOffset = l.epochs.EndOffsetFor(epoch, l.endOffset())
	return foundEpoch, endOffset, endOffset >= 0
}

// TruncateTo removes every batch at or after offset, so the log ends at
// offset (or at the start of the batch holding offset, when offset falls
// inside one: batches are never split). Later segments are deleted, the
// segment holding offset is cut with its indexes, and the epoch cache drops
// the epochs that start at or after the new end (also when offset is the log
// end: an epoch assigned there holds no batch). An offset past the log end
// changes nothing; one below the log start empties the log down to
// its first segment's base (use TruncateFullyAndStartAt to move the start).
// The recovery point and the log start offset are lowered to the new end
// when above it. It returns the new log end offset.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return 0, l.failed
	}
	if offset < l.endOffset() {
		offset = max(offset, l.segments[0].base)
		i := segmentFor(l.segments, offset)
		for len(l.segments) > i+1 {
			last := l.segments[len(l.segments)-1]
			if err := l.removeSegment(last); err != nil {
				return 0, l.fail(err)
			}
			l.segments = l.segments[:len(l.segments)-1]
		}
		if err := l.cutSegment(l.active(), offset); err != nil {
			return 0, l.fail(err)
		}
	}
	// The recovery point and the log start offset stay within the log (as
	// Kafka's UnifiedLog.truncateTo lowers the recovery point): a checkpoint
	// written now must not claim offsets the log no longer has.
	end := l.endOffset()
	l.recoveryPoint = min(l.recoveryPoint, end)
	l.startOffset = min(l.startOffset, end)
	// An epoch that starts at the new end has no batch left (a leader that
	// assigned its epoch start and appended nothing): it goes too, or the
	// follower could not append its new leader's older epochs after it.
	if l.epochs.TruncateFromEnd(end) {
		if err := l.writeEpochs(); err != nil {
			return 0, l.fail(err)
		}
	}
	return end, nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower whose log is entirely below its leader's log start), as
// Kafka's UnifiedLog.truncateFullyAndStartAt. The epoch cache is cleared;
// the log start offset and the recovery point are offset.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	if offset < 0 {
		return fmt.Errorf("%w: start offset %d", ErrOffsetOutOfRange, offset)
	}
	for _, sg := range l.segments {
		if err := l.removeSegment(sg); err != nil {
			return l.fail(err)
		}
	}
	l.segments = nil
	if err := l.addSegment(offset); err != nil {
		return l.fail(err)
	}
	l.startOffset, l.recoveryPoint = offset, offset
	l.epochs.Clear()
	if err := l.writeEpochs(); err != nil {
		return l.fail(err)
	}
	return nil
}

// removeSegment closes sg and deletes its files.
func (l *Log) removeSegment(sg *logSegment) error {
	_ = sg.close() // its files are going away
	for _, suffix := range segmentSuffixes {
		path := filepath.Join(l.dir, SegmentFileName(sg.base, suffix))
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return SyncDir(l.dir)
}

// cutSegment drops the batches of sg from the one holding offset on: the
// .log file is cut at that batch's position and the segment's indexes, end and
// timestamps are rebuilt from the batches that stay (headers only).
func (l *Log) cutSegment(sg *logSegment, offset int64) error {
	pos := int64(-1)
	for p := floorOffset(sg.idx, int32(max(offset-sg.base, 0))); p < sg.size; {
		h, err := sg.readHeader(p)
		if err != nil {
			return err
		}
		if h.LastOffset >= offset {
			pos = p
			break
		}
		p += h.Size
	}
	if pos < 0 {
		return nil
	}
	if err := sg.file.truncate(pos); err != nil {
		return err
	}
	if err := sg.cutTxnIndex(offset); err != nil {
		return err
	}
	size := pos
	sg.idx, sg.tidx, sg.size, sg.end, sg.sinceIndex, sg.dirty = nil, nil, 0, sg.base, 0, true
	sg.firstTsMs, sg.maxTsMs, sg.maxTsOffset = -1, -1, -1
	if err := sg.idxFile.reset(sg); err != nil {
		return err
	}
	if err := sg.tidxFile.reset(sg); err != nil {
		return err
	}
	for p := int64(0); p < size; {
		h, err := sg.readHeader(p)
		if err != nil {
			return err
		}
		if err := sg.indexBatch(h, int64(l.indexIntervalBytes)); err != nil {
			return err
		}
		p += h.Size
	}
	return nil
}
