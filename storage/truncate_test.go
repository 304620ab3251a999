package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLogTruncateTo cuts a log of several segments in the middle of a batch:
// the log ends at that batch's base, later segments and epochs go, indexes
// match a recovery scan, appends continue there, and a reopen sees the same.
func TestLogTruncateTo(t *testing.T) {
	dir := t.TempDir()
	cfg := LogConfig{SegmentBytes: 1500, IndexIntervalBytes: 300}
	l := openLogTest(t, dir, cfg)
	appendN(t, l, 1, 6) // offsets 0-17
	appendN(t, l, 3, 6) // 18-35
	appendN(t, l, 5, 4) // 36-47
	if len(l.segments) < 3 {
		t.Fatalf("want several segments, got %d", len(l.segments))
	}
	end, err := l.TruncateTo(20) // inside the batch 18-20
	if err != nil || end != 18 {
		t.Fatalf("TruncateTo(20) = %d, %v; want 18", end, err)
	}
	if got := l.EpochEntries(); len(got) != 1 || got[0] != (EpochEntry{1, 0}) {
		t.Fatalf("epochs after truncation: %v", got)
	}
	if ts, off, _ := l.MaxTimestamp(); off != 17 || ts != 1000+15+2 {
		t.Fatalf("max timestamp %d at %d after truncation", ts, off)
	}
	for _, sg := range l.segments {
		checkIndexFiles(t, sg)
	}
	if got := readAll(t, l, 0, 1<<20, 1<<40); got[len(got)-1].LastOffset != 17 {
		t.Fatalf("last batch read ends at %d", got[len(got)-1].LastOffset)
	}
	appendN(t, l, 7, 2) // 18-23 at a newer epoch
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLogTest(t, dir, cfg)
	if l2.EndOffset() != 24 {
		t.Fatalf("reopened end %d, want 24", l2.EndOffset())
	}
	if got := l2.EpochEntries(); len(got) != 2 || got[1] != (EpochEntry{7, 18}) {
		t.Fatalf("reopened epochs: %v", got)
	}
}

// TestLogEpochStartWithoutBatches: a leader's epoch start is cached before
// any batch; truncating to the log end drops it so a follower can append the
// new leader's older-epoch batches.
func TestLogEpochStartWithoutBatches(t *testing.T) {
	l := openLogTest(t, t.TempDir(), LogConfig{})
	appendN(t, l, 2, 2) // 0-5
	if err := l.AssignEpochStartOffset(4, 5); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("epoch start below the log end: %v", err)
	}
	if err := l.AssignEpochStartOffset(4, 6); err != nil {
		t.Fatal(err)
	}
	if e, off, ok := l.EndOffsetForEpoch(2); !ok || e != 2 || off != 6 {
		t.Fatalf("EndOffsetForEpoch(2) = %d %d %v", e, off, ok)
	}
	if e, off, ok := l.EndOffsetForEpoch(3); !ok || e != 2 || off != 6 {
		t.Fatalf("EndOffsetForEpoch(3) = %d %d %v", e, off, ok)
	}
	if _, _, ok := l.EndOffsetForEpoch(9); ok {
		t.Fatal("EndOffsetForEpoch(9) found an epoch newer than the cache")
	}
	if err := l.Append([]Batch{logBatch(6, 3, 1, 0)}); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("append of epoch 3 after cached epoch 4: %v", err)
	}
	if end, err := l.TruncateTo(6); err != nil || end != 6 {
		t.Fatalf("TruncateTo(end) = %d %v", end, err)
	}
	if l.LatestEpoch() != 2 {
		t.Fatalf("latest epoch %d after dropping the empty epoch", l.LatestEpoch())
	}
	if err := l.Append([]Batch{logBatch(6, 3, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(l.Dir(), LeaderEpochCheckpointFile))
	if err != nil || string(data) != "0\n2\n2 0\n3 6\n" {
		t.Fatalf("leader-epoch-checkpoint %q %v", data, err)
	}
}

// TestLogTruncateFullyAndStartAt empties the log at a new start offset.
func TestLogTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := openLogTest(t, dir, LogConfig{SegmentBytes: 1500})
	appendN(t, l, 1, 8)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.EndOffset() != 100 || l.LatestEpoch() != -1 {
		t.Fatalf("start %d end %d epoch %d", l.StartOffset(), l.EndOffset(), l.LatestEpoch())
	}
	if err := l.Append([]Batch{logBatch(100, 2, 2, 0)}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	logs := 0
	for _, e := range entries {
		if filepath.Ext(e.Name()) == LogSuffix {
			logs++
		}
	}
	if logs != 1 {
		t.Fatalf("%d segment files left", logs)
	}
}

// TestLogTruncateKeepsRecoveryPointAndStart: a follower's truncation keeps
// the log's offsets within its new end (the merge of log management and
// replication): the recovery point (recovery-point-offset-checkpoint) and
// the log start offset (log-start-offset-checkpoint) never exceed the end,
// and a full truncation starts both at the new start.
func TestLogTruncateKeepsRecoveryPointAndStart(t *testing.T) {
	dir := t.TempDir()
	cfg := LogConfig{SegmentBytes: 1500}
	l := openLogTest(t, dir, cfg)
	appendN(t, l, 1, 12) // 0-35
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != 36 {
		t.Fatalf("recovery point %d after flush, want 36", l.RecoveryPoint())
	}
	l.SetStartOffset(30)
	end, err := l.TruncateTo(21)
	if err != nil || end != 21 {
		t.Fatalf("TruncateTo(21) = %d, %v", end, err)
	}
	if rp := l.RecoveryPoint(); rp > end {
		t.Fatalf("recovery point %d past the truncated end %d", rp, end)
	}
	if so := l.StartOffset(); so > end {
		t.Fatalf("log start offset %d past the truncated end %d", so, end)
	}
	if _, err := l.Read(end, 1<<20, 1<<40); err != nil {
		t.Fatalf("read at the new end: %v", err)
	}
	appendN(t, l, 2, 2) // 21-26
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.RecoveryPoint() != 100 {
		t.Fatalf("after TruncateFullyAndStartAt(100): start %d, recovery point %d", l.StartOffset(), l.RecoveryPoint())
	}
	appendN(t, l, 3, 2) // 100-105
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A reopen from a checkpointed recovery point at the end (no scan of
	// the flushed part) sees every batch.
	l2 := openLogTest(t, dir, LogConfig{SegmentBytes: 1500, RecoveryPoint: 106})
	if l2.StartOffset() != 100 || l2.EndOffset() != 106 {
		t.Fatalf("reopened [%d, %d), want [100, 106)", l2.StartOffset(), l2.EndOffset())
	}
}
