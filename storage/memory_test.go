package storage

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"go.uber.org/zap"
)

// TestNewLogHeap pins the live heap a new, never-written partition log
// costs: a broker hosts one per replica (a million at the bench's largest
// size), so each of its bytes is a megabyte there. The directory strings
// are made before the count (the caller holds them anyway) and the cache
// keeps few descriptors open, so what is counted is the Log, its segment
// and its segment file. It was 780 bytes (a path string per segment and
// per cached file, index files holding their segment's path and suffix,
// the open's listing inline); 588, then 523 with the Log and its segment
// packed into the 208-byte size class (TestLogStructSizes).
func TestNewLogHeap(t *testing.T) {
	const n = 2000
	root := t.TempDir()
	files, logger := NewFileCache(16), zap.NewNop()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(root, fmt.Sprintf("topic-%d", i))
	}
	logs := make([]*Log, n)
	before := liveHeap()
	for i, dir := range dirs {
		l, err := OpenLog(dir, LogConfig{Files: files, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	perLog := float64(liveHeap()-before) / n
	runtime.KeepAlive(logs)
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%.0f heap bytes per new log", perLog)
	if perLog > 600 {
		t.Errorf("a new log costs %.0f heap bytes, want at most 600", perLog)
	}
}

// TestLogStructSizes pins a partition log's two structs in the 208-byte
// size class: a broker keeps one of each per hosted replica, a million on
// each broker of issue 17's largest cluster. The Log was 248 bytes and its
// segment 216 (both in 256 and 224): the Log kept all of its LogConfig and
// padded its flags, the segment its log's directory string and cache.
func TestLogStructSizes(t *testing.T) {
	if size := unsafe.Sizeof(Log{}); size > 208 {
		t.Errorf("Log is %d bytes, want at most 208 (its size class)", size)
	}
	if size := unsafe.Sizeof(logSegment{}); size > 208 {
		t.Errorf("logSegment is %d bytes, want at most 208 (its size class)", size)
	}
}

// liveHeap is the heap in use after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
