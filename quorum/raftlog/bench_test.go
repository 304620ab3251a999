package raftlog

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAppendSync measures what a voter pays per acknowledged batch: one small
// batch appended and fsynced. Compare with BenchmarkFsyncFloor for the overhead.
func BenchmarkAppendSync(b *testing.B) {
	s, err := OpenFileStorage(b.TempDir(), FileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := mkBatch(0, 1, 1)
	b.SetBytes(int64(batch.Size()))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.Append([]Batch{batch.WithBaseOffset(int64(i))}); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncFloor is the same work with no storage layer: write the same bytes
// at the end of a file and fsync it.
func BenchmarkFsyncFloor(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	raw := mkBatch(0, 1, 1).Raw
	b.SetBytes(int64(len(raw)))
	var off int64
	for b.Loop() {
		if _, err := f.WriteAt(raw, off); err != nil {
			b.Fatal(err)
		}
		off += int64(len(raw))
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// timedFS is the operating system's FS with every file's Sync and Datasync timed,
// apart for SyncedEndFile and for the rest; skipRecord makes SyncedEndFile's
// Datasync a no-op (the record is still written, to the page cache only), which is
// what a Sync without the second flush costs.
type timedFS struct {
	FS
	skipRecord     bool
	record, others time.Duration
}

func (t *timedFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &timedFile{File: f, fs: t, record: filepath.Base(name) == SyncedEndFile}, nil
}

type timedFile struct {
	File
	fs     *timedFS
	record bool
}

func (f *timedFile) timed(sync func() error) error {
	if f.record && f.fs.skipRecord {
		return nil
	}
	start := time.Now()
	err := sync()
	if f.record {
		f.fs.record += time.Since(start)
	} else {
		f.fs.others += time.Since(start)
	}
	return err
}

func (f *timedFile) Sync() error     { return f.timed(f.File.Sync) }
func (f *timedFile) Datasync() error { return f.timed(f.File.Datasync) }

// BenchmarkAppendSyncRecordShare measures, side by side in one run, what the
// durable-end record (SyncedEndFile's write + fdatasync) adds to an acknowledged
// batch: iterations alternate between a FileStorage as it is ("with") and one whose
// record fdatasync is skipped ("without"), each appending one small batch and
// syncing it, which is the acknowledgement; then, as a driver does after its ack,
// the record write (PrepareRecord's work) runs on a goroutine of its own while the
// other variant's iteration goes on, and the next iteration of its own variant
// waits for it (timed: what it still costs the acknowledgement path). Reported: each
// variant's ns per acknowledged Append+Sync, the record's fdatasync time per sync
// (most of it now off that path), the data fsync's, and the record's fdatasync as a
// share of the "with" time.
func BenchmarkAppendSyncRecordShare(b *testing.B) {
	open := func(skip bool) (*FileStorage, *timedFS) {
		tfs := &timedFS{FS: OSFS(), skipRecord: skip}
		s, err := OpenFileStorage(filepath.Join(b.TempDir(), "__cluster_metadata-0"), FileOptions{FS: tfs})
		if err != nil {
			b.Fatal(err)
		}
		tfs.record, tfs.others = 0, 0
		return s, tfs
	}
	with, withFS := open(false)
	defer with.Close()
	without, _ := open(true)
	defer without.Close()
	batch := mkBatch(0, 1, 1)
	var took [2]time.Duration
	var n [2]int
	var pending [2]chan func() error // the record write in flight: its finish, once done
	join := func(v int) {
		if pending[v] != nil {
			if err := (<-pending[v])(); err != nil {
				b.Fatal(err)
			}
			pending[v] = nil
		}
	}
	defer join(0)
	defer join(1)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v := i % 2
		s := []*FileStorage{with, without}[v]
		start := time.Now()
		join(v)
		if err := s.Append([]Batch{batch.WithBaseOffset(s.EndOffset())}); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
		took[v] += time.Since(start)
		n[v]++
		if work, finish := s.PrepareRecord(); work != nil {
			done := make(chan func() error, 1)
			pending[v] = done
			go func() { _ = work(); done <- finish }()
		}
	}
	join(0)
	join(1)
	if n[0] == 0 || n[1] == 0 {
		return
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(n[0]), "with-ns/sync")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(n[1]), "without-ns/sync")
	b.ReportMetric(float64(withFS.record.Nanoseconds())/float64(n[0]), "record-fdatasync-ns/sync")
	b.ReportMetric(float64(withFS.others.Nanoseconds())/float64(n[0]), "data-fsync-ns/sync")
	b.ReportMetric(100*float64(withFS.record)/float64(took[0]), "record-%-of-with")
}
