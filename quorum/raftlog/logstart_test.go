package raftlog

import "testing"

// TestLogStartRestoredToSnapshot: the log start moved to a snapshot inside a
// segment comes back on that snapshot after a restart, not on the segment's base,
// and Load returns the log from there.
func TestLogStartRestoredToSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{SegmentBytes: 400})
	if err := s.Append(mkLog(20)); err != nil { // offsets 0..39, several segments
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(s.segments) < 3 {
		t.Fatalf("want several segments, got %d", len(s.segments))
	}
	// A snapshot ending inside the second segment.
	mid := s.segments[1].base + 2
	id := SnapshotID{EndOffset: mid, Epoch: 1}
	writeSnapshot(t, s, id, snapshotBatches(1)...)
	if err := s.SetLogStart(mid); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	base := s.segments[0].base
	if base == mid {
		t.Fatal("test needs the snapshot inside a segment")
	}
	closeTest(t, s)

	s2 := openTest(t, dir, FileOptions{SegmentBytes: 400})
	l, err := s2.Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.StartOffset != mid || len(l.Batches) == 0 || l.Batches[0].BaseOffset != mid {
		t.Fatalf("after restart: start %d, first batch %v; want both at the snapshot end %d (segment base %d)",
			l.StartOffset, l.Batches[0].BaseOffset, mid, base)
	}
	if l.Snapshot == nil || *l.Snapshot != id || l.StartSnapshot == nil || *l.StartSnapshot != id {
		t.Fatalf("latest snapshot %v, snapshot at the start %v", l.Snapshot, l.StartSnapshot)
	}
}

// TestLogFromZeroKeepsItsStart: a log that was never cleaned keeps starting at 0
// even with snapshots above it.
func TestLogFromZeroKeepsItsStart(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	if err := s.Append(mkLog(5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, s, SnapshotID{EndOffset: 6, Epoch: 1}, snapshotBatches(1)...)
	closeTest(t, s)
	l, err := openTest(t, dir, FileOptions{}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.StartOffset != 0 || len(l.Batches) != 5 {
		t.Fatalf("start %d with %d batches, want 0 and 5", l.StartOffset, len(l.Batches))
	}
}
