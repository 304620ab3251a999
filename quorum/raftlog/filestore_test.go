package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// mkBatch builds a data batch of n records at base in epoch, stamped with a
// timestamp derived from base so that batches differ.
func mkBatch(base int64, epoch int32, n int) Batch {
	return mkBatchTs(base, epoch, n, 1_700_000_000_000+base)
}

func mkBatchTs(base int64, epoch int32, n int, tsMs int64) Batch {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Value: fmt.Appendf(nil, "record-%08d-%04d", base+int64(i), epoch)}
	}
	return EncodeBatch(base, epoch, tsMs, false, recs)
}

// mkLog builds count batches of 2 records each, epoch 1, from offset 0.
func mkLog(count int) []Batch {
	out := make([]Batch, count)
	for i := range out {
		out[i] = mkBatch(int64(2*i), 1, 2)
	}
	return out
}

func openTest(t *testing.T, dir string, opts FileOptions) *FileStorage {
	t.Helper()
	s, err := OpenFileStorage(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func closeTest(t *testing.T, s *FileStorage) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func load(t *testing.T, s Storage) Loaded {
	t.Helper()
	l, err := s.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return l
}

func appendTest(t *testing.T, s Storage, batches ...Batch) {
	t.Helper()
	if err := s.Append(batches); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func syncTest(t *testing.T, s Storage) {
	t.Helper()
	if err := s.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// sameBatches compares logs by offsets, epochs and bytes.
func sameBatches(t *testing.T, got, want []Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].BaseOffset != want[i].BaseOffset || got[i].LastOffset != want[i].LastOffset ||
			got[i].Epoch != want[i].Epoch || !bytes.Equal(got[i].Raw, want[i].Raw) {
			t.Fatalf("batch %d: got [%d,%d]@%d want [%d,%d]@%d", i,
				got[i].BaseOffset, got[i].LastOffset, got[i].Epoch, want[i].BaseOffset, want[i].LastOffset, want[i].Epoch)
		}
	}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range matches {
		matches[i] = filepath.Base(matches[i])
	}
	return matches
}

func TestRoundTripThroughReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	s := openTest(t, dir, FileOptions{})
	if l := load(t, s); len(l.Batches) != 0 || l.StartOffset != 0 || l.Snapshot != nil || l.StateCorrupt ||
		l.State.LeaderEpoch != 0 || l.State.VotedID != -1 {
		t.Fatalf("fresh: %+v", l)
	}
	batches := []Batch{mkBatch(0, 1, 3), mkBatch(3, 1, 1), mkBatch(4, 2, 5)}
	appendTest(t, s, batches...)
	ctl := EncodeBatch(9, 3, 1_700_000_001_000, true, []Record{{Key: ControlKey(ControlLeaderChange), Value: []byte{0, 0}}})
	appendTest(t, s, ctl)
	syncTest(t, s)
	st := QuorumState{LeaderID: 1, LeaderEpoch: 3, VotedID: 1, CurrentVoters: []int32{1}}
	if err := s.SaveQuorumState(st); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	if got := segmentFiles(t, dir); !slices.Equal(got, []string{"00000000000000000000.log"}) {
		t.Fatalf("files %v", got)
	}

	s = openTest(t, dir, FileOptions{})
	l := load(t, s)
	sameBatches(t, l.Batches, append(batches, ctl))
	if !l.Batches[3].Control || l.State.LeaderEpoch != 3 || s.EndOffset() != 10 {
		t.Fatalf("reloaded %+v end %d", l.State, s.EndOffset())
	}
	if want := []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 4}, {Epoch: 3, StartOffset: 9}}; !slices.Equal(s.EpochEntries(), want) {
		t.Fatalf("epochs %v", s.EpochEntries())
	}
	// The log keeps going after a reopen.
	appendTest(t, s, mkBatch(10, 3, 1))
	if s.EndOffset() != 11 {
		t.Fatalf("end %d", s.EndOffset())
	}
}

func TestSegmentRollOnSize(t *testing.T) {
	dir := t.TempDir()
	batches := mkLog(20)
	size := int64(batches[0].Size())
	s := openTest(t, dir, FileOptions{SegmentBytes: 3*size + 1})
	for _, b := range batches {
		appendTest(t, s, b) // one at a time, as a leader appends
	}
	syncTest(t, s)
	files := segmentFiles(t, dir)
	want := []string{}
	for base := 0; base < 40; base += 6 {
		want = append(want, fmt.Sprintf("%020d.log", base))
	}
	if !slices.Equal(files, want) {
		t.Fatalf("segments %v, want %v", files, want)
	}
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() > 3*size+1 {
			t.Fatalf("%s: %v size %d", f, err, st.Size())
		}
	}
	closeTest(t, s)
	s = openTest(t, dir, FileOptions{SegmentBytes: 3*size + 1})
	sameBatches(t, load(t, s).Batches, batches)
}

func TestSegmentRollOnTime(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{SegmentMs: 1000})
	appendTest(t, s,
		mkBatchTs(0, 1, 1, 10_000),
		mkBatchTs(1, 1, 1, 10_500),
		mkBatchTs(2, 1, 1, 11_000), // exactly SegmentMs later: no roll yet
		mkBatchTs(3, 1, 1, 11_001), // past it: roll
		mkBatchTs(4, 1, 1, 11_500))
	if got := segmentFiles(t, dir); !slices.Equal(got, []string{"00000000000000000000.log", "00000000000000000003.log"}) {
		t.Fatalf("segments %v", got)
	}
}

func TestTruncateAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	batches := mkLog(10) // offsets 0..19, two per batch
	opts := FileOptions{SegmentBytes: int64(2*batches[0].Size()) + 1}
	s := openTest(t, dir, opts)
	appendTest(t, s, batches...)
	syncTest(t, s)
	if n := len(segmentFiles(t, dir)); n != 5 {
		t.Fatalf("%d segments", n)
	}
	// Offset 9 is the second record of the batch at 8 in segment 8: that whole
	// batch goes, segment 8 keeps nothing, later segments go.
	if err := s.TruncateTo(9); err != nil {
		t.Fatal(err)
	}
	if s.EndOffset() != 8 {
		t.Fatalf("end %d", s.EndOffset())
	}
	if got := segmentFiles(t, dir); !slices.Equal(got, []string{"00000000000000000000.log", "00000000000000000004.log", "00000000000000000008.log"}) {
		t.Fatalf("segments %v", got)
	}
	// Truncating at or past the end is a no-op.
	if err := s.TruncateTo(100); err != nil || s.EndOffset() != 8 {
		t.Fatalf("no-op truncate: %v end %d", err, s.EndOffset())
	}
	// The log continues in a new epoch.
	next := []Batch{mkBatch(8, 2, 3), mkBatch(11, 2, 1)}
	appendTest(t, s, next...)
	syncTest(t, s)
	closeTest(t, s)

	s = openTest(t, dir, opts)
	want := append(slices.Clone(batches[:4]), next...)
	sameBatches(t, load(t, s).Batches, want)
	if e := s.EpochEntries(); !slices.Equal(e, []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 8}}) {
		t.Fatalf("epochs %v", e)
	}
	if err := s.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if s.EndOffset() != 2 || len(segmentFiles(t, dir)) != 1 {
		t.Fatalf("end %d files %v", s.EndOffset(), segmentFiles(t, dir))
	}
}

func TestAppendValidation(t *testing.T) {
	s := openTest(t, t.TempDir(), FileOptions{})
	appendTest(t, s, mkBatch(0, 2, 2))
	if err := s.Append([]Batch{mkBatch(5, 2, 1)}); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("gap: %v", err)
	}
	if err := s.Append([]Batch{mkBatch(2, 1, 1)}); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("old epoch: %v", err)
	}
	bad := mkBatch(2, 2, 1)
	bad.BaseOffset = 3 // header says 2
	if err := s.Append([]Batch{bad}); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("mismatched header: %v", err)
	}
	if err := s.TruncateTo(-1); !errors.Is(err, ErrBelowLogStart) {
		t.Fatalf("truncate below start: %v", err)
	}
	// Contract errors are not I/O failures and are not sticky.
	appendTest(t, s, mkBatch(2, 2, 1))
	syncTest(t, s)
}

// writeLogAndClose writes batches through a FileStorage and returns the dir.
func writeLogAndClose(t *testing.T, opts FileOptions, batches []Batch) string {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	appendTest(t, s, batches...)
	syncTest(t, s)
	closeTest(t, s)
	return dir
}

func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	return zap.New(core), logs
}

// writeLogUnsyncedTail writes synced batches, then unsynced ones (what a crash may
// tear: Close does not sync), and closes.
func writeLogUnsyncedTail(t *testing.T, opts FileOptions, synced, unsynced []Batch) string {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, opts)
	appendTest(t, s, synced...)
	syncTest(t, s)
	appendTest(t, s, unsynced...)
	closeTest(t, s)
	return dir
}

// TestTornTailRepaired: a crash tore the last batch, written after the last Sync:
// it is cut silently (a WARN), as before the durable end was recorded.
func TestTornTailRepaired(t *testing.T) {
	batches := mkLog(5)
	dir := writeLogUnsyncedTail(t, FileOptions{}, batches[:4], batches[4:])
	path := filepath.Join(dir, segmentName(0))
	st, _ := os.Stat(path)
	cut := st.Size() - int64(batches[4].Size()) + 20 // mid-way into the last batch
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	logger, logs := observedLogger()
	s := openTest(t, dir, FileOptions{Logger: logger})
	sameBatches(t, load(t, s).Batches, batches[:4])
	if st, _ := os.Stat(path); st.Size() != cut-20 {
		t.Fatalf("file not cut to the valid prefix: %d", st.Size())
	}
	entries := logs.FilterMessage("truncating invalid log tail").All()
	if len(entries) != 1 || entries[0].ContextMap()["dropped_bytes"] != int64(20) ||
		entries[0].ContextMap()["offset"] != int64(8) {
		t.Fatalf("warning: %+v", entries)
	}
	appendTest(t, s, mkBatch(8, 1, 2))
}

// TestCorruptUnsyncedTailRepaired: garbage in batches written after the last Sync
// (a crash can leave any prefix of unsynced pages, in any order) is a torn tail.
func TestCorruptUnsyncedTailRepaired(t *testing.T) {
	batches := mkLog(5)
	dir := writeLogUnsyncedTail(t, FileOptions{}, batches[:2], batches[2:])
	path := filepath.Join(dir, segmentName(0))
	data, _ := os.ReadFile(path)
	pos := 2*batches[0].Size() + BatchHeaderSize + 3 // inside batch 2's records
	data[pos] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, FileOptions{})
	sameBatches(t, load(t, s).Batches, batches[:2])
	if s.EndOffset() != 4 {
		t.Fatalf("end %d", s.EndOffset())
	}
}

// openCorrupt opens dir expecting ErrCorrupt naming path and offset.
func openCorrupt(t *testing.T, dir string, opts FileOptions, path string, offset int64) {
	t.Helper()
	s, err := OpenFileStorage(dir, opts)
	if err == nil {
		l, _ := s.Load()
		_ = s.Close()
		t.Fatalf("opened a log damaged below its durable end: start %d, %d batches", l.StartOffset, len(l.Batches))
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), fmt.Sprintf("at offset %d ", offset)) || !strings.Contains(err.Error(), "Ways out") {
		t.Fatalf("open: %v; want ErrCorrupt naming %s at offset %d and the ways out", err, path, offset)
	}
}

// TestCorruptSyncedBatchRefused (issue 14): one flipped byte in the middle of a
// cleanly stopped segment was treated as a torn tail: the log was cut there with a
// WARN (committed metadata silently dropped). Any damage below the durable end now
// stops the node at open, naming the file and offset; the files are left untouched.
func TestCorruptSyncedBatchRefused(t *testing.T) {
	batches := mkLog(5)
	for _, tc := range []struct {
		name   string
		batch  int
		offset int64
	}{{"middle batch", 2, 4}, {"first batch", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeLogAndClose(t, FileOptions{}, batches)
			path := filepath.Join(dir, segmentName(0))
			data, _ := os.ReadFile(path)
			data[tc.batch*batches[0].Size()+BatchHeaderSize+3] ^= 0xff
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			openCorrupt(t, dir, FileOptions{}, path, tc.offset)
			if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
				t.Fatal("the damaged segment was changed")
			}
		})
	}
}

// TestCorruptionInEarlierSegmentRefused: a bad CRC in an older segment (the log
// continued in the next one) is damage to durable data, not a tail.
func TestCorruptionInEarlierSegmentRefused(t *testing.T) {
	batches := mkLog(9)
	opts := FileOptions{SegmentBytes: int64(3 * batches[0].Size())}
	dir := writeLogAndClose(t, opts, batches)
	if n := len(segmentFiles(t, dir)); n != 3 {
		t.Fatalf("%d segments", n)
	}
	// A bad CRC in the first batch of the middle segment (offsets 6..11).
	path := filepath.Join(dir, segmentName(6))
	data, _ := os.ReadFile(path)
	data[17] ^= 1 // a CRC byte (RecordBatch v2 offset 17)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	openCorrupt(t, dir, opts, path, 6)
	if n := len(segmentFiles(t, dir)); n != 3 {
		t.Fatalf("%d segments left", n)
	}
}

// TestMissingMiddleSegmentRefused: a durable segment that disappeared is a lost
// part of the log, not a tail.
func TestMissingMiddleSegmentRefused(t *testing.T) {
	batches := mkLog(9)
	opts := FileOptions{SegmentBytes: int64(3 * batches[0].Size())}
	dir := writeLogAndClose(t, opts, batches)
	if err := os.Remove(filepath.Join(dir, segmentName(6))); err != nil {
		t.Fatal(err)
	}
	openCorrupt(t, dir, opts, filepath.Join(dir, segmentName(12)), 6)
	// The last segment too: the log ends early.
	if err := os.Remove(filepath.Join(dir, segmentName(12))); err != nil {
		t.Fatal(err)
	}
	openCorrupt(t, dir, opts, filepath.Join(dir, segmentName(12)), 6)
}

// TestMissingFirstSegmentRefused (issue 14): a lost first segment used to go
// unnoticed: the log started at the next segment's base with no snapshot below it,
// and the node served it as if the offsets before had never existed. The log start
// only moves to a committed snapshot's end, so a first segment above every snapshot
// is damage: the open refuses, naming the missing offsets and the segment the log
// now starts at. A snapshot that reaches the next segment makes the loss harmless
// (the log was cleanable there). Recover deletes the log, which is fetched again.
func TestMissingFirstSegmentRefused(t *testing.T) {
	batches := mkLog(9) // offsets 0..17, 6 a segment: 0, 6, 12
	opts := FileOptions{SegmentBytes: int64(3 * batches[0].Size())}
	for _, tc := range []struct {
		name    string
		snapEnd int64 // -1: no snapshot
		missing string
	}{{"no snapshot", -1, "offsets 0 to 5"}, {"snapshot below the next segment", 4, "offsets 4 to 5"},
		{"snapshot reaching the next segment", 6, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, opts)
			appendTest(t, s, batches...)
			syncTest(t, s)
			if tc.snapEnd >= 0 {
				writeSnapshot(t, s, SnapshotID{EndOffset: tc.snapEnd, Epoch: 1}, snapshotBatches(1)...)
			}
			closeTest(t, s)
			if n := len(segmentFiles(t, dir)); n != 3 {
				t.Fatalf("%d segments", n)
			}
			if err := os.Remove(filepath.Join(dir, segmentName(0))); err != nil {
				t.Fatal(err)
			}
			s, err := OpenFileStorage(dir, opts)
			if tc.missing == "" {
				if err != nil {
					t.Fatalf("open with the lost segment below the snapshot: %v", err)
				}
				if l := load(t, s); l.StartOffset != 6 || len(l.Batches) != 6 || l.StartSnapshot == nil {
					t.Fatalf("start %d, %d batches, snapshot at the start %v; want 6, 6, the snapshot", l.StartOffset, len(l.Batches), l.StartSnapshot)
				}
				closeTest(t, s)
				return
			}
			if err == nil {
				l, _ := s.Load()
				_ = s.Close()
				t.Fatalf("opened a log whose first segment is gone: start %d, %d batches", l.StartOffset, len(l.Batches))
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, segmentName(6))) ||
				!strings.Contains(err.Error(), tc.missing) || !strings.Contains(err.Error(), "Ways out") {
				t.Fatalf("open: %v; want ErrCorrupt naming %s, %s and the ways out", err, segmentName(6), tc.missing)
			}
			rep, err := Recover(dir, RecoverOptions{File: opts})
			if err != nil {
				t.Fatal(err)
			}
			want := max(tc.snapEnd, 0)
			if rep.Marker == nil || rep.EndOffset != want {
				t.Fatalf("recover: %+v; want a marker and the log restarted at %d", rep, want)
			}
			l := load(t, openTest(t, dir, opts))
			if l.StartOffset != want || len(l.Batches) != 0 || l.Recovery == nil {
				t.Fatalf("after recover: start %d, %d batches, marker %v", l.StartOffset, len(l.Batches), l.Recovery)
			}
		})
	}
}

// TestDurableEndAfterTruncation: a truncation lowers the durable end before it cuts
// the log, so batches written again at the cut offsets and torn by a crash are a torn
// tail, not damage below the old durable end.
func TestDurableEndAfterTruncation(t *testing.T) {
	batches := mkLog(5)
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, batches...)
	syncTest(t, s)
	if err := s.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	// New batches at the truncated offsets, never synced, then torn by a crash.
	appendTest(t, s, mkBatch(4, 2, 2), mkBatch(6, 2, 2))
	closeTest(t, s)
	path := filepath.Join(dir, segmentName(0))
	data, _ := os.ReadFile(path)
	data[len(data)-5] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, FileOptions{})
	sameBatches(t, load(t, s).Batches, append(slices.Clone(batches[:2]), mkBatch(4, 2, 2)))
}

// TestTornDurableEndRecord: a crash that tears the durable-end write of a Sync (the
// Sync never returned, nothing it covered was acknowledged) leaves the previous slot:
// damage past that end is a torn tail.
func TestTornDurableEndRecord(t *testing.T) {
	batches := mkLog(5)
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, batches[:2]...)
	syncTest(t, s)
	appendTest(t, s, batches[2:]...)
	syncTest(t, s)
	closeTest(t, s)
	m, ok, err := openSyncedEnd(osFS{}, dir)
	if err != nil || !ok || m.last.End != 10 {
		t.Fatalf("durable end %+v %v %v", m.last, ok, err)
	}
	_ = m.close()
	f, err := os.OpenFile(filepath.Join(dir, SyncedEndFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff}, int64(m.last.Seq%2)*syncedSlotSize+14); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	path := filepath.Join(dir, segmentName(0))
	data, _ := os.ReadFile(path)
	data[3*batches[0].Size()+BatchHeaderSize+3] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, FileOptions{})
	sameBatches(t, load(t, s).Batches, batches[:3])
}

func TestStickyFailureAfterFailedFsync(t *testing.T) {
	s := openTest(t, t.TempDir(), FileOptions{})
	appendTest(t, s, mkBatch(0, 1, 1))
	// Pull the file out from under the storage: the next fsync fails, as a disk
	// error would make it.
	if err := s.active().f.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Sync()
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("sync: %v", err)
	}
	for name, op := range map[string]func() error{
		"append":   func() error { return s.Append([]Batch{mkBatch(1, 1, 1)}) },
		"sync":     s.Sync,
		"truncate": func() error { return s.TruncateTo(0) },
		"state":    func() error { return s.SaveQuorumState(EmptyQuorumState()) },
		"snapshot": func() error { _, err := s.CreateSnapshot(SnapshotID{EndOffset: 1, Epoch: 1}); return err },
	} {
		if err := op(); !errors.Is(err, ErrStorageFailed) {
			t.Errorf("%s after failure: %v", name, err)
		}
	}
}

func TestStickyFailureAfterFailedWrite(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	// The directory disappears (a yanked disk): quorum-state cannot be written.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err := s.SaveQuorumState(QuorumState{LeaderID: -1, LeaderEpoch: 1, VotedID: 2})
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("save: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Even with the directory back, the storage stays failed.
	if err := s.SaveQuorumState(EmptyQuorumState()); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("second save: %v", err)
	}
}

func TestClosedStorageRefusesWork(t *testing.T) {
	s := openTest(t, t.TempDir(), FileOptions{})
	closeTest(t, s)
	if err := s.Append([]Batch{mkBatch(0, 1, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append: %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, ErrClosed) {
		t.Fatalf("load: %v", err)
	}
}

func TestKafkaIndexFilesRemovedAtOpen(t *testing.T) {
	dir := writeLogAndClose(t, FileOptions{}, mkLog(2))
	for _, name := range []string{"00000000000000000000.index", "00000000000000000000.timeindex"} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 8), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openTest(t, dir, FileOptions{})
	for _, name := range []string{"00000000000000000000.index", "00000000000000000000.timeindex"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s kept: %v", name, err)
		}
	}
}

// FuzzSegmentLoad feeds arbitrary bytes as the only segment: opening must not
// panic, must keep a valid contiguous prefix, and reopening must find exactly
// that prefix.
func FuzzSegmentLoad(f *testing.F) {
	var seed []byte
	for _, b := range mkLog(3) {
		seed = append(seed, b.Raw...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-7])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 80))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(0)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFileStorage(dir, FileOptions{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		l := load(t, s)
		var next int64
		var valid int
		for _, b := range l.Batches {
			if b.BaseOffset != next {
				t.Fatalf("batch at %d, expected %d", b.BaseOffset, next)
			}
			if !bytes.Equal(b.Raw, data[valid:valid+b.Size()]) {
				t.Fatal("batch bytes are not the file's prefix")
			}
			next, valid = b.NextOffset(), valid+b.Size()
		}
		if s.EndOffset() != next {
			t.Fatalf("end %d, batches end at %d", s.EndOffset(), next)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := OpenFileStorage(dir, FileOptions{})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.Close()
		sameBatches(t, load(t, s2).Batches, l.Batches)
	})
}

// A segment must be readable by a parser that knows only Kafka's format, the way
// kafka-dump-log.sh reads it: batches back to back, nothing else in the file.
func TestSegmentReadableByKafkaParser(t *testing.T) {
	batches := mkLog(4)
	dir := writeLogAndClose(t, FileOptions{}, batches)
	data, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	for len(data) > 0 {
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(data); err != nil {
			t.Fatalf("kmsg at offset %d: %v", next, err)
		}
		if kb.FirstOffset != next || kb.Magic != 2 || kb.PartitionLeaderEpoch != 1 {
			t.Fatalf("batch %+v", kb)
		}
		next += int64(kb.LastOffsetDelta) + 1
		data = data[12+int(kb.Length):]
	}
	if next != 8 {
		t.Fatalf("read %d offsets", next)
	}
}

// After an unsynced truncation and re-append, a crash can leave the new batches
// followed by stale bytes of the old suffix. If the stale batch happens to line up
// (valid CRC, contiguous offsets) its older epoch still gives it away.
func TestRecoveryStopsAtEpochRegression(t *testing.T) {
	old := mkLog(4) // epoch 1, offsets 0..7
	replacement := mkBatch(4, 2, 2)
	dir := t.TempDir()
	var data []byte
	for _, b := range []Batch{old[0], old[1], replacement, old[3]} {
		data = append(data, b.Raw...)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(0)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, FileOptions{})
	sameBatches(t, load(t, s).Batches, []Batch{old[0], old[1], replacement})
	if want := []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 4}}; !slices.Equal(s.EpochEntries(), want) {
		t.Fatalf("epochs %v", s.EpochEntries())
	}
}
