package raftlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeStateLog writes batches (epochs as given) and a quorum-state at stateEpoch,
// cleanly closed, in a fresh directory.
func writeStateLog(t *testing.T, opts FileOptions, batches []Batch, stateEpoch int32) string {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	appendTest(t, s, batches...)
	syncTest(t, s)
	if err := s.SaveQuorumState(QuorumState{LeaderID: 2, LeaderEpoch: stateEpoch, VotedID: 2}); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	return dir
}

// TestRecoverCutsDamageBehindMarker (issue 14): a flipped byte in the middle of a
// cleanly stopped segment stops the node; Recover writes the marker with E, the
// highest epoch the node may have voted in (here the quorum-state's, above the
// log's), cuts the log at the damaged batch and lowers the durable end, so the node
// opens again, with Loaded.Recovery set until ClearRecovery.
func TestRecoverCutsDamageBehindMarker(t *testing.T) {
	batches := mkLog(5) // epoch 1, offsets 0..9
	dir := writeStateLog(t, FileOptions{}, batches, 3)
	flipByte(t, dir, batches, 2)
	path := filepath.Join(dir, segmentName(0))
	openCorrupt(t, dir, FileOptions{}, path, 4)

	rep, err := Recover(dir, RecoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Marker == nil || *rep.Marker != (Recovery{Epoch: 3}) || rep.EndOffset != 4 {
		t.Fatalf("report %+v (marker %v), want marker epoch 3 and the log cut to 4", rep, rep.Marker)
	}
	if !strings.Contains(strings.Join(rep.Actions, "\n"), "cut "+path+" at offset 4") {
		t.Fatalf("actions %q do not name the cut", rep.Actions)
	}
	got, err := ReadRecovery(dir)
	if err != nil || got == nil || *got != (Recovery{Epoch: 3}) {
		t.Fatalf("marker on disk %v, %v", got, err)
	}
	s := openTest(t, dir, FileOptions{})
	l := load(t, s)
	sameBatches(t, l.Batches, batches[:2])
	if l.Recovery == nil || l.Recovery.Epoch != 3 || l.StateMissing || l.State.LeaderEpoch != 3 {
		t.Fatalf("loaded recovery %v, state %+v (missing %t)", l.Recovery, l.State, l.StateMissing)
	}
	if recordedEnd(t, dir) != 4 {
		t.Fatalf("durable end %d, want 4", recordedEnd(t, dir))
	}
	if err := s.ClearRecovery(); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	if _, err := os.Stat(filepath.Join(dir, RecoveryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker still there after ClearRecovery: %v", err)
	}
	s = openTest(t, dir, FileOptions{})
	if l := load(t, s); l.Recovery != nil {
		t.Fatalf("recovery %v after the marker was cleared", l.Recovery)
	}
}

// TestRecoverEarlierSegment: damage in an older segment drops that segment's tail
// and every later segment; E comes from the highest epoch any segment still shows,
// even one after the damage.
func TestRecoverEarlierSegment(t *testing.T) {
	var batches []Batch
	for i := range 9 {
		batches = append(batches, mkBatch(int64(2*i), int32(1+i/3), 2)) // epochs 1,1,1,2,2,2,3,3,3
	}
	opts := FileOptions{SegmentBytes: int64(3 * batches[0].Size())}
	dir := writeStateLog(t, opts, batches, 3)
	if err := os.Remove(filepath.Join(dir, QuorumStateFile)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segmentName(6))
	data, _ := os.ReadFile(path)
	data[17] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	openCorrupt(t, dir, opts, path, 6)
	rep, err := Recover(dir, RecoverOptions{File: opts})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Marker == nil || *rep.Marker != (Recovery{Epoch: 3, StateLost: true}) || rep.EndOffset != 6 {
		t.Fatalf("report %+v (marker %v), want epoch 3, state lost, end 6", rep, rep.Marker)
	}
	if n := len(segmentFiles(t, dir)); n != 2 {
		t.Fatalf("%d segments left, want 2 (the damaged one emptied, the next deleted)", n)
	}
	s := openTest(t, dir, opts)
	if l := load(t, s); !l.StateMissing || l.Recovery == nil || !l.Recovery.StateLost {
		t.Fatalf("loaded state missing %t, recovery %v", l.StateMissing, l.Recovery)
	}
}

// TestRecoverUnreadableState: an unreadable quorum-state is moved aside and the marker
// says the state was lost; --unsafe-accept-data-loss instead writes a state at E with
// no vote and no marker (and removes an existing one).
func TestRecoverUnreadableState(t *testing.T) {
	batches := []Batch{mkBatch(0, 4, 2)}
	for _, unsafe := range []bool{false, true} {
		dir := writeStateLog(t, FileOptions{}, batches, 4)
		if err := os.WriteFile(filepath.Join(dir, QuorumStateFile), []byte("{garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFileStorage(dir, FileOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open with a garbage quorum-state: %v", err)
		}
		if err := WriteRecovery(dir, Recovery{Epoch: 2}); err != nil {
			t.Fatal(err)
		}
		rep, err := Recover(dir, RecoverOptions{UnsafeAcceptDataLoss: unsafe})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, QuorumStateFile+corruptSuffix)); err != nil {
			t.Fatalf("unsafe=%t: the bad file was not kept aside: %v", unsafe, err)
		}
		s := openTest(t, dir, FileOptions{})
		l := load(t, s)
		if unsafe {
			if rep.Marker != nil || l.Recovery != nil || l.StateMissing || l.State.LeaderEpoch != 4 || l.State.VotedID != -1 {
				t.Fatalf("unsafe: marker %v, loaded recovery %v, state %+v", rep.Marker, l.Recovery, l.State)
			}
		} else if l.Recovery == nil || *l.Recovery != (Recovery{Epoch: 4, StateLost: true}) || !l.StateMissing {
			t.Fatalf("loaded recovery %v, state missing %t", l.Recovery, l.StateMissing)
		}
		closeTest(t, s)
	}
}

// TestRecoverDropsBadSnapshot: a snapshot CheckSnapshot refuses is moved aside and
// the log, which may start at it, is deleted (fetched again).
func TestRecoverDropsBadSnapshot(t *testing.T) {
	batches := mkLog(3)
	dir := writeStateLog(t, FileOptions{}, batches, 1)
	s := openTest(t, dir, FileOptions{})
	w, err := s.CreateSnapshot(SnapshotID{EndOffset: 4, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("not a snapshot")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	bad := errors.New("checksum mismatch")
	rep, err := Recover(dir, RecoverOptions{CheckSnapshot: func(string, SnapshotID) error { return bad }})
	if err != nil {
		t.Fatal(err)
	}
	name := SnapshotFileName(SnapshotID{EndOffset: 4, Epoch: 1})
	if _, err := os.Stat(filepath.Join(dir, name+corruptSuffix)); err != nil || rep.EndOffset != 0 {
		t.Fatalf("snapshot not moved aside (%v) or log not emptied (end %d); actions %q", err, rep.EndOffset, rep.Actions)
	}
	s = openTest(t, dir, FileOptions{})
	if l := load(t, s); l.Snapshot != nil || len(l.Batches) != 0 || l.Recovery == nil {
		t.Fatalf("loaded snapshot %v, %d batches, recovery %v", l.Snapshot, len(l.Batches), l.Recovery)
	}
}

// TestBadRecoveryFileRefused: a marker that cannot be read stops the open (without
// E the node cannot tell which epochs it may vote in).
func TestBadRecoveryFileRefused(t *testing.T) {
	dir := writeStateLog(t, FileOptions{}, mkLog(1), 1)
	if err := os.WriteFile(filepath.Join(dir, RecoveryFile), []byte(`{"version":1,"epoch":-3,"state_lost":false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStorage(dir, FileOptions{}); !errors.Is(err, ErrBadRecoveryFile) {
		t.Fatalf("open: %v, want ErrBadRecoveryFile", err)
	}
}

// TestRecoverCutsNothingWithoutMarker: the marker is made durable before anything is
// cut; when it cannot be written, Recover fails and the damaged log is left as it was
// (a node repaired without the marker would vote as if it had never held the records).
func TestRecoverCutsNothingWithoutMarker(t *testing.T) {
	batches := mkLog(5)
	dir := writeStateLog(t, FileOptions{}, batches, 1)
	flipByte(t, dir, batches, 2)
	path := filepath.Join(dir, segmentName(0))
	before, _ := os.ReadFile(path)
	// A directory where the marker's tmp file goes makes its write fail.
	if err := os.Mkdir(filepath.Join(dir, RecoveryFile+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Recover(dir, RecoverOptions{}); err == nil {
		t.Fatal("Recover succeeded without writing its marker")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("the log was cut although the marker was not written")
	}
	openCorrupt(t, dir, FileOptions{}, path, 4)
}
