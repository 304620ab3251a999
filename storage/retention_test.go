package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// retentionLog is a log of four one-batch segments (offsets 0-2, 3-5, 6-8 and
// the active 9-11), newest record timestamps 1002, 2002, 3002, 4002, at
// leader epochs 1, 1, 2, 2.
func retentionLog(t *testing.T, dir string) (*Log, int64) {
	t.Helper()
	one := int64(logBatch(0, 0, 3, 0).Size())
	l := openLogTest(t, dir, LogConfig{SegmentBytes: one})
	for i, epoch := range []int32{1, 1, 2, 2} {
		if err := l.Append([]Batch{logBatch(int64(3*i), epoch, 3, int64(1000*(i+1)))}); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("%d segments, want 4", n)
	}
	return l, one
}

// Retention deletes whole segments, oldest first, only below the high
// watermark; time first, then size; the log start offset follows, reads
// below it are out of range, and the epoch cache forgets what went.
func TestDeleteOldSegments(t *testing.T) {
	dir := t.TempDir()
	l, one := retentionLog(t, dir)
	// Everything is older than 10 ms, but only the first segment ends at or
	// below the high watermark 3.
	if n, err := l.DeleteOldSegments(5000, 3, Retention{Ms: 10, Bytes: -1}); err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want 1 below the high watermark", n, err)
	}
	if l.StartOffset() != 3 || l.NumSegments() != 3 {
		t.Fatalf("start %d, %d segments", l.StartOffset(), l.NumSegments())
	}
	if _, err := l.Read(2, 1<<20, 12); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	// retention.ms 2500 at 5000: the segment with newest 2002 is due, the
	// one with 3002 is not (it stops the pass even though the size pass
	// could go on).
	if n, err := l.DeleteOldSegments(5000, 12, Retention{Ms: 2500, Bytes: -1}); err != nil || n != 1 || l.StartOffset() != 6 {
		t.Fatalf("time: deleted %d (%v), start %d", n, err, l.StartOffset())
	}
	if got := l.EpochEntries(); len(got) != 1 || got[0] != (EpochEntry{Epoch: 2, StartOffset: 6}) {
		t.Fatalf("epoch cache %v after the epoch-1 segments went", got)
	}
	// retention.bytes of one segment: the older of the two remaining goes
	// (one byte more keeps both: whole segments only).
	if n, _ := l.DeleteOldSegments(5000, 12, Retention{Ms: -1, Bytes: one + 1}); n != 0 {
		t.Fatalf("size: deleted %d with one byte to spare", n)
	}
	if n, err := l.DeleteOldSegments(5000, 12, Retention{Ms: -1, Bytes: one}); err != nil || n != 1 || l.StartOffset() != 9 {
		t.Fatalf("size: deleted %d (%v), start %d", n, err, l.StartOffset())
	}
	if bs := readAll(t, l, 9, 1<<20, 12); len(bs) != 1 || bs[0].BaseOffset != 9 {
		t.Fatalf("the active segment's batch is gone: %v", bs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogTest(t, dir, LogConfig{SegmentBytes: one})
	if l.StartOffset() != 9 || l.EndOffset() != 12 {
		t.Fatalf("reopened: start %d, end %d", l.StartOffset(), l.EndOffset())
	}
}

// When every segment is due, the active one included, the log rolls first:
// an empty segment at the log end remains, appends continue there, and the
// log start offset is the log end offset.
func TestDeleteOldSegmentsRollsTheActiveOne(t *testing.T) {
	l, _ := retentionLog(t, t.TempDir())
	if n, err := l.DeleteOldSegments(1<<40, 12, Retention{Ms: 0, Bytes: -1}); err != nil || n != 4 {
		t.Fatalf("deleted %d (%v), want all 4", n, err)
	}
	if l.StartOffset() != 12 || l.EndOffset() != 12 || l.NumSegments() != 1 || l.ActiveSegmentBase() != 12 {
		t.Fatalf("start %d end %d segments %d active %d", l.StartOffset(), l.EndOffset(), l.NumSegments(), l.ActiveSegmentBase())
	}
	if n, err := l.DeleteOldSegments(1<<40, 12, Retention{Ms: 0, Bytes: 0}); err != nil || n != 0 {
		t.Fatalf("an empty active segment was deleted: %d %v", n, err)
	}
	if err := l.Append([]Batch{logBatch(12, 3, 1, 5000)}); err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, l, 12, 1<<20, 13); len(bs) != 1 {
		t.Fatalf("read after the roll: %v", bs)
	}
}

// MarkDeleted closes the log and renames its directory to
// "<dir>.<suffix>-delete"; the caller removes it.
func TestMarkDeleted(t *testing.T) {
	parent := t.TempDir()
	l := openLogTest(t, filepath.Join(parent, "demo-0"), LogConfig{})
	if err := l.Append([]Batch{logBatch(0, 1, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	doomed, err := l.MarkDeleted("0123abcd")
	if err != nil || doomed != filepath.Join(parent, "demo-0.0123abcd-delete") {
		t.Fatalf("renamed to %q (%v)", doomed, err)
	}
	if _, err := os.Stat(filepath.Join(doomed, SegmentFileName(0, LogSuffix))); err != nil {
		t.Fatalf("segment not under the renamed directory: %v", err)
	}
	if err := l.Append([]Batch{logBatch(1, 1, 1, 0)}); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("append after MarkDeleted: %v", err)
	}
}
