package storage

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// A Region names the bytes Read copies, for every offset and byte limit.
func TestReadRegionMatchesRead(t *testing.T) {
	l := openLogTest(t, t.TempDir(), LogConfig{SegmentBytes: 4 * int64(logBatch(0, 0, 3, 0).Size())})
	appendN(t, l, 1, 10)
	for off := int64(0); off <= l.EndOffset(); off++ {
		for _, maxBytes := range []int{1, 500, 1 << 20} {
			want, err := l.Read(off, maxBytes, 27)
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.ReadRegion(off, maxBytes, 27)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Bytes()
			r.Release()
			if err != nil || !bytes.Equal(got, want) || r.Len != int64(len(want)) {
				t.Fatalf("offset %d max %d: region %d bytes (%v), read %d", off, maxBytes, len(got), err, len(want))
			}
		}
	}
	if _, err := l.ReadRegion(31, 100, 40); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the end: %v", err)
	}
}

// A Region keeps its segment's bytes while the log lets go of the file:
// retention deletes the segment, then the log is closed; the file closes
// with the Region's release.
func TestRegionOutlivesRetentionAndClose(t *testing.T) {
	l, _ := retentionLog(t, t.TempDir())
	want, err := l.Read(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.ReadRegion(0, 1<<20, 12)
	if err != nil || r.Len != int64(len(want)) {
		t.Fatalf("region %+v, %v", r, err)
	}
	if n, err := l.DeleteOldSegments(5000, 3, Retention{Ms: 10, Bytes: -1}); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if _, err := os.Stat(r.File().Name()); !os.IsNotExist(err) {
		t.Fatalf("segment file still there: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := r.Bytes()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after deletion and close: %d bytes, %v", len(got), err)
	}
	f := r.File()
	if n := l.HeldRegions(); n != 1 {
		t.Fatalf("%d regions held, want 1", n)
	}
	r.Release()
	if n := l.HeldRegions(); n != 0 {
		t.Fatalf("%d regions held after the release", n)
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("file still open after the last release: %v", err)
	}
}

// A Region of a topic's log survives the log's deletion (rename, then
// removal of the directory).
func TestRegionOutlivesLogDeletion(t *testing.T) {
	dir := t.TempDir() + "/demo-0"
	l, err := OpenLog(dir, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 3)
	want, _ := l.Read(0, 1<<20, 9)
	r, err := l.ReadRegion(0, 1<<20, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := l.Delete("x"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after deletion: %d bytes, %v", len(got), err)
	}
}

// Truncating into a Region (a follower's divergent suffix) makes it fail
// Check, also when appends fill the file back past the Region's end: its
// bytes are then other batches.
func TestRegionTruncated(t *testing.T) {
	l := openLogTest(t, t.TempDir(), LogConfig{})
	appendN(t, l, 1, 4)
	r, err := l.ReadRegion(3, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, 4) // the file is longer than before again
	if err := r.Check(); !errors.Is(err, ErrRegionChanged) {
		t.Fatalf("check after truncation: %v", err)
	}
	if _, err := r.Bytes(); !errors.Is(err, ErrRegionChanged) {
		t.Fatalf("bytes after truncation: %v", err)
	}
}
