package raftlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeSnapshot writes and commits a snapshot made of batches.
func writeSnapshot(t *testing.T, s *FileStorage, id SnapshotID, batches ...Batch) []byte {
	t.Helper()
	w, err := s.CreateSnapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, b := range batches {
		if err := w.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b.Raw...)
	}
	if w.Size() != int64(len(want)) {
		t.Fatalf("size %d want %d", w.Size(), len(want))
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return want
}

func snapshotBatches(epoch int32) []Batch {
	header := EncodeBatch(0, epoch, 1, true, []Record{{Key: ControlKey(ControlSnapshotHeader), Value: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}}})
	data := mkBatch(1, epoch, 3)
	footer := EncodeBatch(4, epoch, 1, true, []Record{{Key: ControlKey(ControlSnapshotFooter), Value: []byte{0, 0, 0}}})
	return []Batch{header, data, footer}
}

func TestSnapshotWriteCommitRead(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	id := SnapshotID{EndOffset: 12345, Epoch: 7}
	want := writeSnapshot(t, s, id, snapshotBatches(7)...)
	path := filepath.Join(dir, "00000000000000012345-0000000007.checkpoint")
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file: %v", err)
	}
	if parts, _ := filepath.Glob(filepath.Join(dir, "*.part")); len(parts) != 0 {
		t.Fatalf("part files left: %v", parts)
	}
	f, size, err := s.OpenSnapshot(id)
	if err != nil || size != int64(len(want)) {
		t.Fatalf("open: %v size %d", err, size)
	}
	// Read from a FetchSnapshot-style position.
	chunk := make([]byte, 10)
	if _, err := f.ReadAt(chunk, 5); err != nil || !bytes.Equal(chunk, want[5:15]) {
		t.Fatalf("ReadAt: %v", err)
	}
	all, err := io.ReadAll(io.NewSectionReader(f, 0, size))
	if err != nil || !bytes.Equal(all, want) {
		t.Fatalf("ReadAll: %v", err)
	}
	_ = f.Close()
	if _, err := s.CreateSnapshot(id); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, _, err := s.OpenSnapshot(SnapshotID{EndOffset: 1, Epoch: 1}); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestSnapshotAbortAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkLog(4)...)
	syncTest(t, s)
	w, err := s.CreateSnapshot(SnapshotID{EndOffset: 4, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial chunk")); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); !errors.Is(err, ErrSnapshotWriterDone) {
		t.Fatalf("commit after abort: %v", err)
	}
	if len(s.Snapshots()) != 0 {
		t.Fatalf("aborted snapshot listed: %v", s.Snapshots())
	}
	// A crash mid-write leaves a .part file; a crash mid-delete a .deleted one.
	w, err = s.CreateSnapshot(SnapshotID{EndOffset: 6, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	deleted := filepath.Join(dir, "00000000000000000002-0000000001.checkpoint.deleted")
	if err := os.WriteFile(deleted, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	s = openTest(t, dir, FileOptions{})
	if l := load(t, s); l.Snapshot != nil || len(l.Batches) != 4 {
		t.Fatalf("loaded snapshot %v, %d batches", l.Snapshot, len(l.Batches))
	}
	for _, pattern := range []string{"*.part", "*.deleted"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) != 0 {
			t.Fatalf("leftovers %v", m)
		}
	}
	_ = w.Abort() // its file is already gone; must not fail the test
}

func TestSnapshotLogStartAndDeletion(t *testing.T) {
	dir := t.TempDir()
	batches := mkLog(10) // offsets 0..19
	opts := FileOptions{SegmentBytes: int64(2 * batches[0].Size())}
	s := openTest(t, dir, opts)
	appendTest(t, s, batches...)
	syncTest(t, s)
	if err := s.SetLogStart(4); !errors.Is(err, ErrLogStartBeyondSnapshot) {
		t.Fatalf("log start without snapshot: %v", err)
	}
	writeSnapshot(t, s, SnapshotID{EndOffset: 6, Epoch: 1}, snapshotBatches(1)...)
	writeSnapshot(t, s, SnapshotID{EndOffset: 10, Epoch: 1}, snapshotBatches(1)...)
	if err := s.SetLogStart(12); !errors.Is(err, ErrLogStartBeyondSnapshot) {
		t.Fatalf("log start past snapshot: %v", err)
	}
	// Segments are 0-3, 4-7, 8-11, ...: moving the start to 10 deletes the first two.
	if err := s.SetLogStart(10); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); got[0] != segmentName(8) || len(got) != 3 {
		t.Fatalf("segments %v", got)
	}
	if s.StartOffset() != 10 || !slices.Equal(s.EpochEntries(), []EpochEntry{{Epoch: 1, StartOffset: 10}}) {
		t.Fatalf("start %d epochs %v", s.StartOffset(), s.EpochEntries())
	}
	l := load(t, s)
	if l.StartOffset != 10 || l.Batches[0].BaseOffset != 10 || *l.Snapshot != (SnapshotID{EndOffset: 10, Epoch: 1}) {
		t.Fatalf("loaded start %d first %d snap %v", l.StartOffset, l.Batches[0].BaseOffset, l.Snapshot)
	}
	if err := s.TruncateTo(9); !errors.Is(err, ErrBelowLogStart) {
		t.Fatalf("truncate below start: %v", err)
	}
	if err := s.DeleteSnapshotsBefore(10); err != nil {
		t.Fatal(err)
	}
	if got := s.Snapshots(); !slices.Equal(got, []SnapshotID{{EndOffset: 10, Epoch: 1}}) {
		t.Fatalf("snapshots %v", got)
	}
	// The latest snapshot is never deleted.
	if err := s.DeleteSnapshotsBefore(1000); err != nil || len(s.Snapshots()) != 1 {
		t.Fatalf("deleted the latest: %v %v", err, s.Snapshots())
	}
	syncTest(t, s)
	closeTest(t, s)
	// After a restart the start is back on the snapshot, although the segment
	// holding it (from 8) was kept whole.
	s = openTest(t, dir, opts)
	if l := load(t, s); l.StartOffset != 10 || len(l.Batches) != 5 || l.Snapshot.EndOffset != 10 {
		t.Fatalf("reopened start %d, %d batches, snap %v", l.StartOffset, len(l.Batches), l.Snapshot)
	}
}

func TestResetLogToSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkLog(3)...)
	syncTest(t, s)
	id := SnapshotID{EndOffset: 100, Epoch: 4}
	writeSnapshot(t, s, id, snapshotBatches(4)...)
	if err := s.ResetLog(id.EndOffset); err != nil {
		t.Fatal(err)
	}
	if s.StartOffset() != 100 || s.EndOffset() != 100 || len(s.EpochEntries()) != 0 {
		t.Fatalf("start %d end %d epochs %v", s.StartOffset(), s.EndOffset(), s.EpochEntries())
	}
	appendTest(t, s, mkBatch(100, 5, 2))
	syncTest(t, s)
	closeTest(t, s)
	if got := segmentFiles(t, dir); !slices.Equal(got, []string{segmentName(100)}) {
		t.Fatalf("segments %v", got)
	}
	s = openTest(t, dir, FileOptions{})
	l := load(t, s)
	if l.StartOffset != 100 || len(l.Batches) != 1 || l.Batches[0].Epoch != 5 {
		t.Fatalf("reopened %+v", l)
	}
}

// A follower that committed a downloaded snapshot but crashed before resetting
// its log comes back with the log restarted at the snapshot (Kafka's
// truncateToLatestSnapshot).
func TestOpenTruncatesToNewerSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkLog(3)...) // epoch 1, end 6
	syncTest(t, s)
	writeSnapshot(t, s, SnapshotID{EndOffset: 50, Epoch: 3}, snapshotBatches(3)...)
	closeTest(t, s)
	s = openTest(t, dir, FileOptions{})
	l := load(t, s)
	if l.StartOffset != 50 || len(l.Batches) != 0 || s.EndOffset() != 50 || l.Snapshot.EndOffset != 50 {
		t.Fatalf("start %d end %d batches %d", l.StartOffset, s.EndOffset(), len(l.Batches))
	}
	// An older snapshot leaves the log alone.
	dir2 := t.TempDir()
	s2 := openTest(t, dir2, FileOptions{})
	appendTest(t, s2, mkLog(3)...)
	syncTest(t, s2)
	writeSnapshot(t, s2, SnapshotID{EndOffset: 4, Epoch: 1}, snapshotBatches(1)...)
	closeTest(t, s2)
	s2 = openTest(t, dir2, FileOptions{})
	if l := load(t, s2); l.StartOffset != 0 || len(l.Batches) != 3 {
		t.Fatalf("older snapshot changed the log: %+v", l)
	}
}

func TestParseSnapshotName(t *testing.T) {
	id, ok := parseSnapshotName("00000000000000012345-0000000007.checkpoint")
	if !ok || id != (SnapshotID{EndOffset: 12345, Epoch: 7}) {
		t.Fatalf("%v %v", id, ok)
	}
	if SnapshotFileName(SnapshotID{}) != "00000000000000000000-0000000000.checkpoint" {
		t.Fatal(SnapshotFileName(SnapshotID{}))
	}
	for _, bad := range []string{
		"00000000000000012345-0000000007.checkpoint.part",
		"0000000000000012345-0000000007.checkpoint",
		"00000000000000012345_0000000007.checkpoint",
		"0000000000000001234x-0000000007.checkpoint",
	} {
		if _, ok := parseSnapshotName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestOpenRestartsLogNotContinuingSnapshot: a log whose last epoch is newer than the
// latest snapshot's, but which does not hold the snapshot's last batch, holds another
// leader's uncommitted entries below the snapshot's end (a follower committed a
// downloaded snapshot and crashed before resetting its log). Kafka's rule keeps such a
// log; it is restarted at the snapshot. Both cases kept the log before.
func TestOpenRestartsLogNotContinuingSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  []Batch
		snap SnapshotID
	}{
		{"log ends below the snapshot in a newer epoch",
			[]Batch{mkBatch(0, 1, 2), mkBatch(2, 3, 2)}, SnapshotID{EndOffset: 6, Epoch: 1}},
		{"log passes the snapshot with another epoch at its end",
			[]Batch{mkBatch(0, 1, 2), mkBatch(2, 3, 2), mkBatch(4, 3, 2)}, SnapshotID{EndOffset: 4, Epoch: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, FileOptions{})
			appendTest(t, s, tc.log...)
			syncTest(t, s)
			writeSnapshot(t, s, tc.snap, snapshotBatches(tc.snap.Epoch)...)
			closeTest(t, s)
			s = openTest(t, dir, FileOptions{})
			l := load(t, s)
			if l.StartOffset != tc.snap.EndOffset || len(l.Batches) != 0 || s.EndOffset() != tc.snap.EndOffset {
				t.Fatalf("start %d end %d, %d batches; want an empty log at %d", l.StartOffset, s.EndOffset(), len(l.Batches), tc.snap.EndOffset)
			}
			if !l.LogContinuesSnapshot() {
				t.Fatal("loaded log does not continue the snapshot")
			}
		})
	}
	// A log holding the snapshot's last batch in its epoch is kept, retained part included.
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkBatch(0, 1, 2), mkBatch(2, 1, 2), mkBatch(4, 3, 2))
	syncTest(t, s)
	writeSnapshot(t, s, SnapshotID{EndOffset: 4, Epoch: 1}, snapshotBatches(1)...)
	closeTest(t, s)
	s = openTest(t, dir, FileOptions{})
	if l := load(t, s); l.StartOffset != 0 || len(l.Batches) != 3 {
		t.Fatalf("continuing log changed: start %d, %d batches", l.StartOffset, len(l.Batches))
	}
}
