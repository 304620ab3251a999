package storage

import (
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
