package storage

import (
	"errors"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// Retention bounds a log by age and size (a topic's retention.ms and
// retention.bytes); a negative value is no bound.
type Retention struct {
	// Ms: a segment whose newest record timestamp (its file's modification
	// time when it holds no timestamp) is more than Ms before now is due.
	Ms int64
	// Bytes: the oldest segments are due while the log without them would
	// still hold at least Bytes.
	Bytes int64
}

// DeleteOldSegments deletes the segments retention r makes due at nowMs, as
// Kafka's UnifiedLog.deleteOldSegments: whole segments only, oldest first,
// stopping at the first one that is not due, and only segments wholly below
// highWatermark (a consumer may still need the rest). Time goes first, then
// size. The active segment is due too when it is not empty: the log rolls
// first, so an empty active segment always remains. The log start offset
// moves to the first remaining segment, and the leader epoch cache forgets
// what is below it. It returns how many segments went.
func (l *Log) DeleteOldSegments(nowMs, highWatermark int64, r Retention) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return 0, l.failed
	}
	// Segments wholly below a raised log start offset go first (Kafka's
	// deleteLogStartOffsetBreachedSegments).
	deleted, err := l.deleteWhile(highWatermark, func(sg *logSegment) bool { return sg.end <= l.startOffset })
	if err != nil {
		return deleted, err
	}
	if r.Ms >= 0 {
		n, err := l.deleteWhile(highWatermark, func(sg *logSegment) bool {
			return nowMs-sg.newestMs() > r.Ms
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	if r.Bytes >= 0 {
		excess := -r.Bytes
		for _, sg := range l.segments {
			excess += sg.size
		}
		n, err := l.deleteWhile(highWatermark, func(sg *logSegment) bool {
			if excess-sg.size < 0 {
				return false
			}
			excess -= sg.size
			return true
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// newestMs is the segment's largest record timestamp, else its file's
// modification time (Kafka's LogSegment.largestTimestamp).
func (sg *logSegment) newestMs() int64 {
	if sg.maxTsMs >= 0 {
		return sg.maxTsMs
	}
	if st, err := os.Stat(sg.path()); err == nil {
		return st.ModTime().UnixMilli()
	}
	return -1
}

// deleteWhile deletes the leading segments for which due holds (asked in
// order, stopping at the first false), that end at or below highWatermark
// and are not empty; l.mu held.
func (l *Log) deleteWhile(highWatermark int64, due func(*logSegment) bool) (int, error) {
	n := 0
	for n < len(l.segments) {
		sg := l.segments[n]
		if sg.size == 0 || sg.end > highWatermark || !due(sg) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segments) {
		if err := l.roll(l.endOffset()); err != nil {
			return 0, l.fail(err)
		}
	}
	doomed := l.segments[:n]
	l.segments = append([]*logSegment(nil), l.segments[n:]...)
	l.startOffset = max(l.startOffset, l.segments[0].base)
	if l.epochs.TruncateFromStart(l.startOffset) {
		if err := l.writeEpochs(); err != nil {
			return n, l.fail(err)
		}
	}
	var errs []error
	for _, sg := range doomed {
		errs = append(errs, sg.close())
		for _, suffix := range segmentSuffixes {
			err := os.Remove(filepath.Join(l.dir, SegmentFileName(sg.base, suffix)))
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		l.logger().Info("deleted log segment by retention", zap.Int64("base", sg.base),
			zap.Int64("end", sg.end), zap.Int64("bytes", sg.size), zap.Int64("newest_ms", sg.maxTsMs))
	}
	if err := errors.Join(errs...); err != nil {
		return n, l.fail(err)
	}
	return n, nil
}
