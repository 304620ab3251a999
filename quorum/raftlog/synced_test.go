package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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

// TestDurableEndIsExact: a Sync (or a PrepareSync's work) records the end it made
// durable before it returns, so before anything it covered is acknowledged. After a
// crash right after an acknowledged sync, damage to its last batch stops the node
// (the batch may be counted toward the high watermark on other voters; cutting it as
// a torn tail would let this voter forget it); damage to a batch written after the
// last sync (never acknowledged) is still a torn tail. The same holds after Close.
// With the record lagging one sync (the mutant_syncedlag build) the last synced
// batch is cut silently.
func TestDurableEndIsExact(t *testing.T) {
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
		// write: batches 0-1 synced (end 4), batches 2-3 synced (end 8), batch 4 not.
		write := func(t *testing.T, crash bool) string {
			dir := t.TempDir()
			s := openTest(t, dir, FileOptions{})
			appendTest(t, s, batches[:2]...)
			sync(t, s)
			appendTest(t, s, batches[2:4]...)
			sync(t, s)
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
		for _, crash := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/crash=%t", name, crash), func(t *testing.T) {
				dir := write(t, crash)
				if got := recordedEnd(t, dir); got != 8 {
					t.Fatalf("the record is at %d, want 8 (the end of the last sync)", got)
				}
				flipByte(t, dir, batches, 3) // the last batch of the last, acknowledged sync
				openCorrupt(t, dir, FileOptions{}, filepath.Join(dir, segmentName(0)), 6)

				dir = write(t, crash)
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
// an I/O failure like any other: the Sync fails and so does every later write.
func TestFailedDurableEndWriteIsSticky(t *testing.T) {
	for _, prepare := range []bool{false, true} {
		s := openTest(t, t.TempDir(), FileOptions{})
		appendTest(t, s, mkBatch(0, 1, 2))
		syncTest(t, s)
		_ = s.synced.f.Close() // every later write of the record fails
		appendTest(t, s, mkBatch(2, 1, 2))
		var err error
		if prepare {
			work, finish := s.PrepareSync()
			err = finish(work())
		} else {
			err = s.Sync() // records end 2
		}
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("sync (PrepareSync %t) whose record write failed: %v, want the write's error", prepare, err)
		}
		if err := s.Append([]Batch{mkBatch(4, 1, 1)}); !errors.Is(err, ErrStorageFailed) {
			t.Fatalf("append after a failed record write: %v, want the sticky failure", err)
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
	data, _ = c.ReadFile(dir + "/" + SyncedEndFile)
	if end, ok := DecodeSyncedEnd(data); !ok || end != batches[3].NextOffset() {
		t.Fatalf("after the second Sync DecodeSyncedEnd = %d, %t; want %d", end, ok, batches[3].NextOffset())
	}
}
