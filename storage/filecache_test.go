package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fdsUnder counts this process's descriptors open on files under dir
// (/proc/self/fd), the figure a broker's RLIMIT_NOFILE bounds.
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// Many partitions, few descriptors: 40 logs created, written past an
// index entry, read and reopened hold at most the cache's bound open
// (a Kafka broker, and kraftd before the cache, held one .log per replica
// plus its index files: 120 here), and every log still reads back what
// was appended, through descriptors the cache closed and reopened.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(8)
	cfg := LogConfig{Files: files, IndexIntervalBytes: 100}
	const n = 40
	logs := make([]*Log, n)
	appended := make([][]Batch, n)
	for i := range logs {
		logs[i] = openLogTest(t, filepath.Join(dir, fmt.Sprintf("t-%d", i)), cfg)
		appended[i] = appendN(t, logs[i], 1, 3)
	}
	if got := fdsUnder(t, dir); got > files.Max() {
		t.Fatalf("%d descriptors open under the log directory after appends, bound %d", got, files.Max())
	}
	for i, l := range logs {
		checkBatches(t, readAll(t, l, 0, 1<<20, l.EndOffset()), appended[i])
	}
	if got := fdsUnder(t, dir); got > files.Max() || files.Open() > files.Max() {
		t.Fatalf("%d descriptors (cache: %d) open after reads, bound %d", got, files.Open(), files.Max())
	}
	if files.Evictions() == 0 {
		t.Fatal("no file was closed by the cache")
	}
	for i, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logs[i] = openLogTest(t, l.Dir(), LogConfig{Files: files, CleanShutdown: true})
	}
	if got := fdsUnder(t, dir); got > files.Max() {
		t.Fatalf("%d descriptors open after a clean reopen of %d logs, bound %d", got, n, files.Max())
	}
	for i, l := range logs {
		checkBatches(t, readAll(t, l, 0, 1<<20, l.EndOffset()), appended[i])
		appended[i] = append(appended[i], appendN(t, l, 2, 1)...)
	}
	for i, l := range logs {
		checkBatches(t, readAll(t, l, 0, 1<<20, l.EndOffset()), appended[i])
	}
	if got := fdsUnder(t, dir); got > files.Max() {
		t.Fatalf("%d descriptors open after reopen, reads and appends, bound %d", got, files.Max())
	}
}

// A never-written partition holds no descriptor, neither once created (a
// large create: every replica a new directory) nor after a clean reopen
// (the broker restart of a cluster with many idle partitions), and a fetch
// of it (nothing to read) opens none.
func TestFileCacheIdleLogsHoldNothing(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(0) // no bound: what is open is what the logs keep
	var logs []*Log
	for i := range 50 {
		l, err := OpenLog(filepath.Join(dir, fmt.Sprintf("idle-%d", i)), LogConfig{Files: files})
		if err != nil {
			t.Fatal(err)
		}
		if !l.Created() {
			t.Fatalf("%s: not created", l.Dir())
		}
		if got := fdsUnder(t, dir); got != 0 || files.Open() != 0 {
			t.Fatalf("%d descriptors (cache: %d) open for a new log, want 0", got, files.Open())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, openLogTest(t, l.Dir(), LogConfig{Files: files, CleanShutdown: true}))
	}
	for _, l := range logs {
		if data, err := l.Read(0, 1<<20, 1); err != nil || len(data) != 0 {
			t.Fatalf("read of an empty log: %d bytes, %v", len(data), err)
		}
		if r, err := l.ReadRegion(0, 1<<20, 1); err != nil || r.Len != 0 {
			t.Fatalf("region of an empty log: %+v, %v", r, err)
		}
	}
	if got := fdsUnder(t, dir); got != 0 || files.Open() != 0 {
		t.Fatalf("%d descriptors (cache: %d) open for 50 idle logs, want 0", got, files.Open())
	}
}

func checkBatches(t *testing.T, got, want []Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d batches, appended %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Raw, want[i].Raw) {
			t.Fatalf("batch %d at offset %d differs from the one appended", i, want[i].BaseOffset)
		}
	}
}

// A Region pins its descriptor: other logs' reads that push its file out
// of a full cache do not close it, the bytes it sends are those read, and
// the file closes with its release once the log has let go of it; a file
// the cache did close is reopened for the next read and serves the same
// bytes.
func TestFileCacheRegionPinsDescriptor(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(2)
	a := openLogTest(t, filepath.Join(dir, "a-0"), LogConfig{Files: files})
	appendN(t, a, 1, 4)
	want, err := a.Read(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.ReadRegion(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	f := r.File()
	for i := range 8 { // every one more than the bound
		l := openLogTest(t, filepath.Join(dir, fmt.Sprintf("b-%d", i)), LogConfig{Files: files})
		appendN(t, l, 1, 1)
	}
	if _, err := f.Stat(); err != nil {
		t.Fatalf("pinned descriptor closed by the cache: %v", err)
	}
	if got, err := r.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pinned region: %d bytes, %v", len(got), err)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	r.Release()
	for i := range 8 {
		l := openLogTest(t, filepath.Join(dir, fmt.Sprintf("c-%d", i)), LogConfig{Files: files})
		appendN(t, l, 1, 1)
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("unpinned descriptor of a full cache still open: %v", err)
	}
	r2, err := a.ReadRegion(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Release()
	if got, err := r2.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("reopened file: %d bytes, %v", len(got), err)
	}
	if files.Open() > files.Max()+1 { // r2's pin may hold one past the bound
		t.Fatalf("%d open, bound %d", files.Open(), files.Max())
	}
}

// Eviction racing reads, Regions, appends, truncation, retention and
// deletion of the same logs (run with -race): with a cache of 3 files for
// 6 logs of several segments each, every read returns whole batches that
// are the ones appended at their offsets, or ErrRegionChanged /
// ErrLogClosed where a truncation or deletion came between; no descriptor
// is closed under a reader (that would be a read error, "file already
// closed"), and no descriptor is left open at the end.
func TestFileCacheEvictionRaces(t *testing.T) {
	dir := t.TempDir()
	files := NewFileCache(3)
	one := int64(logBatch(0, 0, 3, 0).Size())
	const nLogs = 6
	logs := make([]*Log, nLogs)
	for i := range logs {
		var err error
		logs[i], err = OpenLog(filepath.Join(dir, fmt.Sprintf("r-%d", i)), LogConfig{Files: files, SegmentBytes: 3 * one, IndexIntervalBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
	}
	// batchAt is what offset b of any log holds: batches are built from
	// their base offset and epoch alone, so a reader can check any batch.
	batchAt := func(base int64, epoch int32) Batch { return logBatch(base, epoch, 3, 1000+base) }
	check := func(data []byte) error {
		bs, n, err := SplitBatches(data)
		if err != nil || n != len(data) {
			return fmt.Errorf("torn read: %d of %d bytes, %v", n, len(data), err)
		}
		for _, b := range bs {
			if want := batchAt(b.BaseOffset, b.Epoch); !bytes.Equal(b.Raw, want.Raw) {
				return fmt.Errorf("batch at %d epoch %d is not the one appended", b.BaseOffset, b.Epoch)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for i, l := range logs {
		wg.Add(2)
		go func() { // writer: appends, truncates, deletes old segments
			defer wg.Done()
			epoch := int32(1)
			for step := range 60 {
				end := l.EndOffset()
				if err := l.Append([]Batch{batchAt(end, epoch)}); err != nil {
					report(fmt.Errorf("log %d append: %w", i, err))
					return
				}
				switch step % 10 {
				case 4:
					if _, err := l.TruncateTo(max(end-3, l.StartOffset())); err != nil {
						report(fmt.Errorf("log %d truncate: %w", i, err))
						return
					}
					epoch++
				case 9:
					if _, err := l.DeleteOldSegments(1<<40, l.EndOffset(), Retention{Ms: -1, Bytes: 4 * one}); err != nil {
						report(fmt.Errorf("log %d retention: %w", i, err))
						return
					}
				}
			}
			if i%2 == 0 { // half the logs go away under their readers
				if err := l.Delete("x"); err != nil {
					report(fmt.Errorf("log %d delete: %w", i, err))
				}
			}
		}()
		go func() { // reader: copies and Regions of every log, pushing files out of the cache
			defer wg.Done()
			for step := range 120 {
				o := logs[(i+step)%nLogs]
				from := o.StartOffset()
				data, err := o.Read(from, 1<<20, o.EndOffset())
				if err != nil && !errors.Is(err, ErrLogClosed) && !errors.Is(err, ErrOffsetOutOfRange) {
					report(fmt.Errorf("read: %w", err))
					return
				}
				if err == nil {
					if err := check(data); err != nil {
						// a truncation between the locate and the copy is impossible
						// (both under the log's lock); a torn read is a bug
						report(err)
						return
					}
				}
				r, err := o.ReadRegion(from, 1<<20, o.EndOffset())
				if err != nil {
					continue
				}
				data, err = r.Bytes()
				r.Release()
				if errors.Is(err, ErrRegionChanged) {
					continue
				}
				if err != nil {
					report(fmt.Errorf("region: %w", err))
					return
				}
				if err := check(data); err != nil {
					report(fmt.Errorf("region: %w", err))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, l := range logs {
		_ = l.Close()
	}
	if got := fdsUnder(t, dir); got != 0 || files.Open() != 0 {
		t.Fatalf("%d descriptors (cache: %d) open after every log closed", got, files.Open())
	}
}
