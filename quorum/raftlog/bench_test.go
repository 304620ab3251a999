package raftlog

import (
	"os"
	"path/filepath"
	"testing"
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
