package storage

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkLogAppend appends 16-record batches of 1 KB records (no fsync on
// the append path) and reports MB/s:
//
//	go test ./storage -run '^$' -bench LogAppend -benchtime 20000x
func BenchmarkLogAppend(b *testing.B) {
	l, err := OpenLog(b.TempDir(), LogConfig{SegmentBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([]Record, 16)
	for i := range recs {
		recs[i] = Record{Value: make([]byte, 1024)}
	}
	batch := EncodeBatch(0, 1, 1700000000000, false, recs)
	b.SetBytes(int64(batch.Size()))
	b.ResetTimer()
	for range b.N {
		batch.SetBaseOffset(l.EndOffset())
		if err := l.Append([]Batch{batch}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLogRead reads 1 MB at a time from random offsets of a 64 MB log.
func BenchmarkLogRead(b *testing.B) {
	l, err := OpenLog(b.TempDir(), LogConfig{SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([]Record, 16)
	for i := range recs {
		recs[i] = Record{Value: make([]byte, 1024)}
	}
	batch := EncodeBatch(0, 1, 1700000000000, false, recs)
	for l.EndOffset() < 64<<10 {
		batch.SetBaseOffset(l.EndOffset())
		if err := l.Append([]Batch{batch}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := range b.N {
		off := int64(i*7919) % end
		if _, err := l.Read(off, 1<<20, end); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenNewLogs: creating partition logs (OpenLog of a new
// directory: mkdir and its segment's .log), one per op, by 1 or 16
// goroutines at once, as the replica manager's apply does (applyWorkers):
// what 100k or 1M new replicas cost a broker in file system work alone.
// The cache bound keeps the descriptors within the process's limit.
//
//	go test ./storage -run '^$' -bench OpenNewLogs -benchtime 20000x
func BenchmarkOpenNewLogs(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			dir := b.TempDir()
			cfg := LogConfig{Files: NewFileCache(1024)}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range workers {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						l, err := OpenLog(filepath.Join(dir, fmt.Sprintf("topic-%d", i)), cfg)
						if err != nil {
							b.Error(err)
							return
						}
						_ = l // left open, as a hosted replica's
					}
				})
			}
			wg.Wait()
		})
	}
}
