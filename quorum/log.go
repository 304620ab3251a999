package quorum

import (
	"fmt"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// epochStart is one leader-epoch-checkpoint entry: the first offset written in epoch.
type epochStart struct {
	epoch       int32
	startOffset int64
}

// raftLog is the in-memory copy of the metadata log. Every standby already holds the
// log in memory (snapshots bound it), so the core reads it directly instead of
// asking storage.
//
// INVARIANTS:
//   - batches are contiguous: batches[i+1].BaseOffset == batches[i].NextOffset(), and
//     batches[0].BaseOffset == startOffset.
//   - epochs is the epoch cache of batches: strictly increasing in both fields.
//   - flushedEnd <= endOffset(); unstableFrom <= endOffset().
type raftLog struct {
	startOffset int64
	// startEpoch is the epoch of the record before startOffset (the snapshot's epoch).
	startEpoch int32
	batches    []raftlog.Batch
	epochs     []epochStart
	// flushedEnd: every offset below it is durable on this node's disk.
	flushedEnd int64
	// unstableFrom: batches at or above it are not yet handed to the driver in a Ready.
	unstableFrom int64
	// pendingTruncate is the lowest truncation not yet handed out; -1 if none.
	pendingTruncate int64
	// kraft is what the snapshot and the control records of batches at or above
	// kraftFloor (the snapshot's end) say of kraft.version and the voters.
	kraft      kraftHistory
	kraftFloor int64
}

// newRaftLog builds the log view of what storage loaded; snapKRaft is what the
// latest snapshot (loaded.Snapshot) says of the quorum.
func newRaftLog(l raftlog.Loaded, snapKRaft SnapshotKRaft) (*raftLog, error) {
	rl := &raftLog{startOffset: l.StartOffset, pendingTruncate: -1}
	// Only a snapshot ending exactly at the log start tells the epoch before it; a
	// log that starts below the latest snapshot (retention kept it) has its own.
	switch {
	case l.StartSnapshot != nil && l.StartSnapshot.EndOffset == l.StartOffset:
		rl.startEpoch = l.StartSnapshot.Epoch
	case l.Snapshot != nil && l.Snapshot.EndOffset == l.StartOffset:
		rl.startEpoch = l.Snapshot.Epoch
	}
	if s := l.Snapshot; s != nil {
		rl.kraft.reset(*s, snapKRaft)
		rl.kraftFloor = s.EndOffset
	}
	for _, b := range l.Batches {
		if b.BaseOffset != rl.endOffset() {
			return nil, fmt.Errorf("quorum: loaded log not contiguous at offset %d (batch at %d)", rl.endOffset(), b.BaseOffset)
		}
		if b.Epoch < rl.lastEpoch() {
			return nil, fmt.Errorf("quorum: loaded log epoch goes down at offset %d", b.BaseOffset)
		}
		recs, err := kraftRecordsOf(b)
		if err != nil {
			return nil, fmt.Errorf("quorum: loaded log: %w", err)
		}
		rl.push(b, recs)
	}
	rl.flushedEnd = rl.endOffset()
	rl.unstableFrom = rl.endOffset()
	return rl, nil
}

// endOffset is the log end offset (LEO): the offset the next record gets.
func (l *raftLog) endOffset() int64 {
	if n := len(l.batches); n > 0 {
		return l.batches[n-1].NextOffset()
	}
	return l.startOffset
}

// lastEpoch is the epoch of the last record (or of the snapshot, or 0 when empty).
func (l *raftLog) lastEpoch() int32 {
	if n := len(l.epochs); n > 0 {
		return l.epochs[n-1].epoch
	}
	return l.startEpoch
}

// push adds b, whose KRaftVersion and Voters records are recs (kraftRecordsOf).
func (l *raftLog) push(b raftlog.Batch, recs []kraftRecord) {
	if len(l.epochs) == 0 || l.epochs[len(l.epochs)-1].epoch != b.Epoch {
		l.epochs = append(l.epochs, epochStart{epoch: b.Epoch, startOffset: b.BaseOffset})
	}
	l.batches = append(l.batches, b)
	if len(recs) > 0 && b.BaseOffset >= l.kraftFloor {
		l.kraft.add(recs)
	}
}

// append adds batches at the log end. Their control records decode: the leader
// wrote them itself, and a follower checked fetched ones (fetchedBatchUsable).
func (l *raftLog) append(bs ...raftlog.Batch) {
	for _, b := range bs {
		assertf(b.BaseOffset == l.endOffset(), "log contiguity: batch at %d appended at end %d", b.BaseOffset, l.endOffset())
		assertf(b.Epoch >= l.lastEpoch(), "epoch cache monotone: batch epoch %d after %d", b.Epoch, l.lastEpoch())
		recs, err := kraftRecordsOf(b)
		assertf(err == nil, "appended control records decode: %v", err)
		l.push(b, recs)
	}
}

// truncateTo removes every batch at or above offset. An offset inside a batch removes
// that whole batch (batches are the unit of replication). It returns the new end.
func (l *raftLog) truncateTo(offset int64) int64 {
	i := l.batchIndex(offset)
	if i < 0 {
		return l.endOffset()
	}
	l.batches = l.batches[:i:i]
	end := l.endOffset()
	l.kraft.truncateFrom(end)
	for len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].startOffset >= end {
		l.epochs = l.epochs[:len(l.epochs)-1]
	}
	l.flushedEnd = min(l.flushedEnd, end)
	if end < l.unstableFrom {
		l.unstableFrom = end
		if l.pendingTruncate < 0 || end < l.pendingTruncate {
			l.pendingTruncate = end
		}
	}
	return end
}

// batchIndex is the index of the batch holding offset, or -1 if offset >= end.
func (l *raftLog) batchIndex(offset int64) int {
	if offset >= l.endOffset() {
		return -1
	}
	lo, hi := 0, len(l.batches)
	for lo < hi {
		mid := (lo + hi) / 2
		if l.batches[mid].LastOffset < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// read returns batches from offset on, at most maxBytes but always at least one batch
// when any exists (a fetcher must be able to make progress past a large batch).
func (l *raftLog) read(offset int64, maxBytes int) []raftlog.Batch {
	i := l.batchIndex(offset)
	if i < 0 {
		return nil
	}
	size := 0
	j := i
	for j < len(l.batches) && (j == i || size+l.batches[j].Size() <= maxBytes) {
		size += l.batches[j].Size()
		j++
	}
	return l.batches[i:j:j]
}

// from returns the batches at or above offset (a batch boundary), sharing memory.
func (l *raftLog) from(offset int64) []raftlog.Batch {
	i := l.batchIndex(offset)
	if i < 0 {
		return nil
	}
	return l.batches[i:len(l.batches):len(l.batches)]
}

// between returns the batches holding offsets in [lo, hi): whole batches that end
// below hi.
func (l *raftLog) committedBetween(lo, hi int64) []raftlog.Batch {
	var out []raftlog.Batch
	for i := l.batchIndex(lo); i >= 0 && i < len(l.batches) && l.batches[i].NextOffset() <= hi; i++ {
		out = append(out, l.batches[i])
	}
	return out
}

// endOffsetForEpoch answers "where does epoch end?" from the epoch cache, as Kafka's
// leader-epoch cache does: it returns the largest cached epoch <= epoch and the start
// offset of the following epoch (or the LEO if it is the last). For an epoch below
// everything cached it returns the log start (and the snapshot's epoch, or 0).
func (l *raftLog) endOffsetForEpoch(epoch int32) (int32, int64) {
	found := -1
	for i, e := range l.epochs {
		if e.epoch > epoch {
			break
		}
		found = i
	}
	if found < 0 {
		if epoch >= l.startEpoch {
			return l.startEpoch, l.startOffset
		}
		return 0, l.startOffset
	}
	if found+1 < len(l.epochs) {
		return l.epochs[found].epoch, l.epochs[found+1].startOffset
	}
	return l.epochs[found].epoch, l.endOffset()
}

// isUpToDate reports whether a log ending at (lastEpoch, endOffset) is at least as
// complete as this one (KIP-595 vote rule, lexicographic).
func (l *raftLog) isUpToDate(lastEpoch int32, endOffset int64) bool {
	if lastEpoch != l.lastEpoch() {
		return lastEpoch > l.lastEpoch()
	}
	return endOffset >= l.endOffset()
}

func assertf(ok bool, format string, args ...any) {
	if !ok {
		panic(fmt.Sprintf("quorum: invariant violated: "+format, args...))
	}
}
