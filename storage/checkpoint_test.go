package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The checkpoint file is Kafka's OffsetCheckpointFile byte for byte and
// reads back; malformed files are refused.
func TestOffsetCheckpointFormat(t *testing.T) {
	entries := []PartitionOffset{{"b", 0, 7}, {"a", 10, 0}, {"a", 2, 1 << 40}}
	got := string(EncodeOffsetCheckpoint(entries))
	const want = "0\n3\na 2 1099511627776\na 10 0\nb 0 7\n"
	if got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	dir := t.TempDir()
	if err := WriteOffsetCheckpoint(dir, ReplicationOffsetCheckpointFile, entries); err != nil {
		t.Fatal(err)
	}
	back, err := ReadOffsetCheckpoint(dir, ReplicationOffsetCheckpointFile)
	if err != nil || len(back) != 3 || back[0] != (PartitionOffset{"a", 2, 1 << 40}) {
		t.Fatalf("read back %v, %v", back, err)
	}
	// The streamed file is the encoded one byte for byte; a count other
	// than announced replaces nothing.
	if raw, err := os.ReadFile(filepath.Join(dir, ReplicationOffsetCheckpointFile)); err != nil || string(raw) != want {
		t.Fatalf("written %q (%v), want %q", raw, err, want)
	}
	if err := WriteOffsetCheckpointSeq(dir, ReplicationOffsetCheckpointFile, 4, slices.Values(entries)); err == nil {
		t.Fatal("3 entries written as 4")
	}
	if raw, err := os.ReadFile(filepath.Join(dir, ReplicationOffsetCheckpointFile)); err != nil || string(raw) != want {
		t.Fatalf("after a failed write %q (%v), want %q", raw, err, want)
	}
	if none, err := ReadOffsetCheckpoint(dir, "missing"); err != nil || none != nil {
		t.Fatalf("missing file: %v %v", none, err)
	}
	if empty := string(EncodeOffsetCheckpoint(nil)); empty != "0\n0\n" {
		t.Fatalf("empty checkpoint %q", empty)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\n1\na 0 -1\n", "0\n1\na 0 1\nb 0 1\n", "0\n-1\n"} {
		if _, err := DecodeOffsetCheckpoint([]byte(bad)); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// corruptPayload flips a byte inside the records of the batch at offset
// (its header stays readable, its CRC fails).
func corruptPayload(t *testing.T, dir string, base int64, pos int64) {
	t.Helper()
	path := filepath.Join(dir, SegmentFileName(base, LogSuffix))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos+BatchHeaderSize+5); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, pos+BatchHeaderSize+5); err != nil {
		t.Fatal(err)
	}
}

// Recovery scans only the segments that end after the recovery point: a
// corrupt batch in a segment below it is not looked at (its indexes are
// trusted), one above it cuts the log there; with no recovery point every
// segment is scanned.
func TestRecoveryStartsAtTheRecoveryPoint(t *testing.T) {
	for _, tc := range []struct {
		name          string
		recoveryPoint int64
		wantEnd       int64
	}{{"recovery point 6", 6, 12}, {"no recovery point", 0, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, one := retentionLog(t, dir) // segments 0, 3, 6, 9 (active)
			if rp := l.RecoveryPoint(); rp != 9 {
				t.Fatalf("recovery point %d after three rolls, want 9", rp)
			}
			l.closeFiles() // a crash: nothing flushed or closed cleanly
			corruptPayload(t, dir, 3, 0)
			l2 := openLogTest(t, dir, LogConfig{SegmentBytes: one, RecoveryPoint: tc.recoveryPoint})
			if l2.EndOffset() != tc.wantEnd {
				t.Fatalf("end %d after recovery from %d, want %d", l2.EndOffset(), tc.recoveryPoint, tc.wantEnd)
			}
			if l2.RecoveryPoint() != min(tc.recoveryPoint, tc.wantEnd) {
				t.Fatalf("recovery point %d after open", l2.RecoveryPoint())
			}
		})
	}
}

// After a clean shutdown nothing is scanned (a corrupt batch in the active
// segment stays unnoticed), and what a scan would have learnt comes from the
// indexes and headers: log end, max timestamp, segment.ms base. Without
// the marker the same corruption is cut.
func TestCleanShutdownSkipsTheScan(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		l := openLogTest(t, dir, LogConfig{SegmentMs: 100})
		for i := range 3 {
			if err := l.Append([]Batch{logBatch(int64(3*i), 1, 3, 1000+int64(i))}); err != nil {
				t.Fatal(err)
			}
		}
		ts, off, _ := l.MaxTimestamp()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		corruptPayload(t, dir, 0, int64(logBatch(0, 1, 3, 0).Size()))
		l2 := openLogTest(t, dir, LogConfig{SegmentMs: 100, CleanShutdown: clean, RecoveryPoint: 9})
		if !clean {
			if l2.EndOffset() != 3 {
				t.Fatalf("unclean: end %d, want the corrupt batch at 3 cut", l2.EndOffset())
			}
			continue
		}
		ts2, off2, _ := l2.MaxTimestamp()
		if l2.EndOffset() != 9 || l2.RecoveryPoint() != 9 || ts2 != ts || off2 != off {
			t.Fatalf("clean: end %d recovery point %d max ts %d@%d, want 9 9 %d@%d", l2.EndOffset(), l2.RecoveryPoint(), ts2, off2, ts, off)
		}
		// segment.ms counts from the first batch (1002): 1102 is not due, 1103 is.
		if err := l2.Append([]Batch{logBatch(9, 1, 1, 1102-0)}); err != nil || l2.ActiveSegmentBase() != 0 {
			t.Fatalf("rolled early: active %d (%v)", l2.ActiveSegmentBase(), err)
		}
		if err := l2.Append([]Batch{logBatch(10, 1, 1, 1103)}); err != nil || l2.ActiveSegmentBase() != 10 {
			t.Fatalf("segment.ms roll: active %d (%v)", l2.ActiveSegmentBase(), err)
		}
	}
}

// SetStartOffset raises the log start (never lowers it, never past the
// end); reads below it are out of range and the next retention pass deletes
// the segments wholly below it.
func TestSetStartOffset(t *testing.T) {
	l, _ := retentionLog(t, t.TempDir())
	l.SetStartOffset(4)
	l.SetStartOffset(1)
	if l.StartOffset() != 4 {
		t.Fatalf("start %d", l.StartOffset())
	}
	if _, err := l.Read(3, 100, 12); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v", err)
	}
	if n, err := l.DeleteOldSegments(0, 12, Retention{Ms: -1, Bytes: -1}); err != nil || n != 1 || l.NumSegments() != 3 {
		t.Fatalf("deleted %d (%v), %d segments left", n, err, l.NumSegments())
	}
	l.SetStartOffset(100)
	if l.StartOffset() != 12 {
		t.Fatalf("start %d past the end", l.StartOffset())
	}
}
