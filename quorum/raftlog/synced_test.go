package raftlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordedEnd reads the durable end SyncedEndFile holds in dir.
func recordedEnd(t *testing.T, dir string) int64 {
	t.Helper()
	f, ok, err := openSyncedEnd(osFS{}, dir)
	if err != nil || !ok {
		t.Fatalf("reading %s: present %t, %v", SyncedEndFile, ok, err)
	}
	defer f.close()
	return f.last.End
}

// flipByte flips one byte inside the records of batch i of segment 0 (mkLog batches).
func flipByte(t *testing.T, dir string, batches []Batch, i int) {
	t.Helper()
	path := filepath.Join(dir, segmentName(0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[i*batches[0].Size()+BatchHeaderSize+3] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordNow runs the durable-end record write PrepareRecord hands out, as a driver
// does after it acknowledged what the last Sync covered.
func recordNow(t *testing.T, s *FileStorage) {
	t.Helper()
	work, finish := s.PrepareRecord()
	if work == nil {
		return
	}
	if err := work(); err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
}

// TestDurableEndTrailsOneSync: a Sync (or a PrepareSync) makes its batches durable
// without writing the durable-end record; the record of that end is written after
// the acknowledgement (PrepareRecord's work), and the next Sync writes it first if
// nobody did, so the record trails the acknowledged end by one Sync at most. Once
// it is written, damage to the last synced batch stops the node (the batch may be
// counted toward the high watermark on other voters); before, that batch lies in the
// window recovery cannot tell from a torn tail, and is cut (the accepted cost).
// Damage to a batch written after the last sync (never acknowledged) is always a
// torn tail. Close records the last durable end.
func TestDurableEndTrailsOneSync(t *testing.T) {
	batches := mkLog(5)
	for _, tc := range []struct {
		name string
		sync func(*testing.T, *FileStorage)
	}{
		{"Sync", func(t *testing.T, s *FileStorage) { syncTest(t, s) }},
		{"PrepareSync", func(t *testing.T, s *FileStorage) {
			work, finish := s.PrepareSync()
			if err := finish(work()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		name, sync := tc.name, tc.sync
		// write: batches 0-1 synced (end 4), batches 2-3 synced (end 8), batch 4 not;
		// the record of end 8 written (record) or not.
		write := func(t *testing.T, record, crash bool) string {
			dir := t.TempDir()
			s := openTest(t, dir, FileOptions{})
			appendTest(t, s, batches[:2]...)
			sync(t, s)
			if got := recordedEnd(t, dir); got != 0 {
				t.Fatalf("the record is at %d after the first sync, want 0: it is written after the acknowledgement", got)
			}
			appendTest(t, s, batches[2:4]...)
			sync(t, s) // records end 4 first: nobody ran PrepareRecord's work
			if got := recordedEnd(t, dir); got != 4 {
				t.Fatalf("the record is at %d after the second sync, want 4 (it trails one sync at most)", got)
			}
			if record {
				recordNow(t, s)
			}
			appendTest(t, s, batches[4])
			if crash {
				if err := s.closeFiles(); err != nil {
					t.Fatal(err)
				}
			} else {
				closeTest(t, s)
			}
			return dir
		}
		for _, c := range []struct{ record, crash bool }{{true, true}, {false, true}, {false, false}} {
			t.Run(fmt.Sprintf("%s/record=%t/crash=%t", name, c.record, c.crash), func(t *testing.T) {
				dir := write(t, c.record, c.crash)
				want := int64(8)
				if !c.record && c.crash {
					want = 4
				}
				if got := recordedEnd(t, dir); got != want {
					t.Fatalf("the record is at %d, want %d", got, want)
				}
				flipByte(t, dir, batches, 3) // the last batch of the last, acknowledged sync
				if want == 8 {
					openCorrupt(t, dir, FileOptions{}, filepath.Join(dir, segmentName(0)), 6)
				} else {
					s := openTest(t, dir, FileOptions{}) // in the unrecorded window: cut as a torn tail
					sameBatches(t, load(t, s).Batches, batches[:3])
					closeTest(t, s)
				}

				dir = write(t, c.record, c.crash)
				flipByte(t, dir, batches, 4) // never synced: a torn tail
				s := openTest(t, dir, FileOptions{})
				sameBatches(t, load(t, s).Batches, batches[:4])
				if got := recordedEnd(t, dir); got != 8 {
					t.Fatalf("after recovery the record is at %d, want the recovered end 8", got)
				}
			})
		}
	}
}

// TestFailedDurableEndWriteIsSticky: a failed write of the durable-end record is
// an I/O failure like any other: the record write (PrepareRecord's), or the next
// Sync or PrepareSync that writes it because nobody did, fails, and so does every
// later write.
func TestFailedDurableEndWriteIsSticky(t *testing.T) {
	for _, how := range []string{"Sync", "PrepareSync", "PrepareRecord"} {
		s := openTest(t, t.TempDir(), FileOptions{})
		appendTest(t, s, mkBatch(0, 1, 2))
		syncTest(t, s)         // end 2 durable, not yet recorded
		_ = s.synced.f.Close() // every later write of the record fails
		appendTest(t, s, mkBatch(2, 1, 2))
		var err error
		switch how {
		case "PrepareSync":
			work, finish := s.PrepareSync()
			err = finish(work())
		case "PrepareRecord":
			work, finish := s.PrepareRecord()
			if werr := work(); !errors.Is(werr, os.ErrClosed) {
				t.Fatalf("the record write: %v, want the write's error", werr)
			}
			err = finish()
		default:
			err = s.Sync() // records end 2 first
		}
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("%s whose record write failed: %v, want the write's error", how, err)
		}
		if err := s.Append([]Batch{mkBatch(4, 1, 1)}); !errors.Is(err, ErrStorageFailed) {
			t.Fatalf("append after a failed record write (%s): %v, want the sticky failure", how, err)
		}
		if err := s.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Fatalf("close: %v", err)
		}
	}
}

// TestDecodeSyncedEnd: the exported reader (the simulation's, on CrashFS file
// content) returns the end the last Sync recorded, and nothing for a damaged file.
// CrashFS.ClearFailSync disarms an armed fsync failure.
func TestDecodeSyncedEnd(t *testing.T) {
	c := NewCrashFS(1)
	const dir = "/d/__cluster_metadata-0"
	s, err := OpenFileStorage(dir, FileOptions{FS: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batches := mkLog(4)
	appendTest(t, s, batches[:2]...)
	syncTest(t, s)
	recordNow(t, s)
	appendTest(t, s, batches[2:]...) // not synced: not recorded
	data, ok := c.ReadFile(dir + "/" + SyncedEndFile)
	if !ok {
		t.Fatal("no " + SyncedEndFile)
	}
	if end, ok := DecodeSyncedEnd(data); !ok || end != batches[1].NextOffset() {
		t.Fatalf("DecodeSyncedEnd = %d, %t; want %d", end, ok, batches[1].NextOffset())
	}
	if _, ok := DecodeSyncedEnd(make([]byte, len(data))); ok {
		t.Fatal("DecodeSyncedEnd accepted a zeroed file")
	}
	c.FailNextSync()
	c.ClearFailSync()
	syncTest(t, s) // fails if the fsync failure is still armed
	recordNow(t, s)
	data, _ = c.ReadFile(dir + "/" + SyncedEndFile)
	if end, ok := DecodeSyncedEnd(data); !ok || end != batches[3].NextOffset() {
		t.Fatalf("after the second Sync DecodeSyncedEnd = %d, %t; want %d", end, ok, batches[3].NextOffset())
	}
}

// TestCutWaitsForRecordWrite: TruncateTo and ResetLog wait for the record write in
// flight (run by another goroutine, or by nobody yet: they do it themselves) and
// then lower the record below the cut, so that no record, written or in flight, ends
// up above the log; the write's finish afterwards changes nothing, and nothing
// PrepareRecord hands out later is above the log either. Checked on the file after
// each step, and after a reopen (a record above the log would stop the open).
func TestCutWaitsForRecordWrite(t *testing.T) {
	batches := mkLog(4) // ends 2, 4, 6, 8
	for _, cut := range []string{"TruncateTo", "ResetLog"} {
		for _, started := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/started=%t", cut, started), func(t *testing.T) {
				dir := t.TempDir()
				s := openTest(t, dir, FileOptions{})
				appendTest(t, s, batches...)
				syncTest(t, s)
				work, finish := s.PrepareRecord() // the record of end 8, in flight
				if work == nil {
					t.Fatal("no record write for the durable end 8")
				}
				if w2, _ := s.PrepareRecord(); w2 != nil {
					t.Fatal("a second record write while one is in flight")
				}
				done := make(chan error, 1)
				if started {
					go func() { done <- work() }()
				}
				var err error
				want := int64(4)
				if cut == "TruncateTo" {
					err = s.TruncateTo(4)
				} else {
					// A restart below the durable end (to test the lowering; a
					// download's ends above the log), at a committed snapshot.
					want = 2
					sw, serr := s.CreateSnapshot(SnapshotID{EndOffset: 2, Epoch: batches[0].Epoch})
					if serr != nil {
						t.Fatal(serr)
					}
					if _, serr = sw.Write([]byte("snapshot")); serr == nil {
						if serr = sw.Sync(); serr == nil {
							serr = sw.Commit()
						}
					}
					if serr != nil {
						t.Fatal(serr)
					}
					err = s.ResetLog(2)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := recordedEnd(t, dir); got != want {
					t.Fatalf("after %s the record is at %d, want %d", cut, got, want)
				}
				if started {
					if err := <-done; err != nil {
						t.Fatal(err)
					}
				} else if err := work(); err != nil {
					t.Fatal(err)
				}
				if err := finish(); err != nil {
					t.Fatal(err)
				}
				if got := recordedEnd(t, dir); got != want {
					t.Fatalf("after the write's finish the record is at %d, want %d", got, want)
				}
				recordNow(t, s)
				if got := recordedEnd(t, dir); got > s.EndOffset() {
					t.Fatalf("a later record write put the record at %d, above the log end %d", got, s.EndOffset())
				}
				if err := s.closeFiles(); err != nil {
					t.Fatal(err)
				}
				s = openTest(t, dir, FileOptions{})
				if end := s.EndOffset(); end < want {
					t.Fatalf("reopened log ends at %d, want at least %d", end, want)
				}
				closeTest(t, s)
			})
		}
	}
}

// gatedFS is the operating system's FS whose SyncedEndFile Datasync waits until
// release is closed, and which closes dataSynced at the first Sync of a segment
// (a data fsync) after armed is set.
type gatedFS struct {
	FS
	release    chan struct{}
	dataSynced chan struct{}
	armed      atomic.Bool
	once       sync.Once
}

func (g *gatedFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, fs: g, record: filepath.Base(name) == SyncedEndFile}, nil
}

type gatedFile struct {
	File
	fs     *gatedFS
	record bool
}

func (f *gatedFile) Sync() error {
	if !f.record && f.fs.armed.Load() {
		f.fs.once.Do(func() { close(f.fs.dataSynced) })
	}
	return f.File.Sync()
}

func (f *gatedFile) Datasync() error {
	if f.record && f.fs.armed.Load() {
		<-f.fs.release
	}
	return f.File.Datasync()
}

// TestSyncOverlapsRecordWrite: a follower's Sync does not wait for the record write
// in flight (started after its previous acknowledgement) before its own data fsync;
// the two flushes run at once, and the Sync returns only once the record covers the
// end of the Sync before (it trails by one Sync at most, as before). Before, a batch
// fetched right after another waited for the record's fdatasync and then for its own
// fsync: two flushes of the disk in sequence on the acknowledgement path.
func TestSyncOverlapsRecordWrite(t *testing.T) {
	gfs := &gatedFS{FS: OSFS(), release: make(chan struct{}), dataSynced: make(chan struct{})}
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{FS: gfs})
	batches := mkLog(2) // ends 2, 4
	appendTest(t, s, batches[0])
	syncTest(t, s)
	gfs.armed.Store(true)
	work, finish := s.PrepareRecord() // the record of end 2, as the driver starts it after the ack
	if work == nil {
		t.Fatal("no record write for the durable end 2")
	}
	recorded := make(chan error, 1)
	go func() { recorded <- work() }()
	appendTest(t, s, batches[1])
	synced := make(chan error, 1)
	go func() { synced <- s.Sync() }()
	select {
	case <-gfs.dataSynced:
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while the record write it must wait for was held", err)
	case <-time.After(time.Minute): // a deadlock detector, not a timing bound
		close(gfs.release)
		t.Fatal("the Sync's data fsync did not start while the record write was in flight: it waited for the record first")
	}
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) before the record write it must wait for finished", err)
	default:
	}
	close(gfs.release)
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if got := recordedEnd(t, dir); got != 2 {
		t.Fatalf("after the second Sync the record is at %d, want 2 (the end of the Sync before)", got)
	}
	recordNow(t, s)
	if got := recordedEnd(t, dir); got != 4 {
		t.Fatalf("after the record write of the second Sync's end the record is at %d, want 4", got)
	}
}
