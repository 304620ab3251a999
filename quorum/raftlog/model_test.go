package raftlog

import (
	"os"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// fileVsModel drives a FileStorage and a MemStorage (the model) with the same
// random operations and checks after each that both hold the same log.
type fileVsModel struct {
	dir   string
	opts  FileOptions
	file  *FileStorage
	model *MemStorage
	epoch int32
}

func (m *fileVsModel) end() int64 { return m.file.EndOffset() }

func (m *fileVsModel) appendBatch(t *rapid.T) {
	m.epoch += int32(rapid.IntRange(0, 1).Draw(t, "epochBump"))
	n := rapid.IntRange(1, 4).Draw(t, "records")
	b := mkBatchTs(m.end(), m.epoch, n, rapid.Int64Range(0, 5000).Draw(t, "ts"))
	if err := m.file.Append([]Batch{b}); err != nil {
		t.Fatalf("file append: %v", err)
	}
	if err := m.model.Append([]Batch{b}); err != nil {
		t.Fatalf("model append: %v", err)
	}
}

func (m *fileVsModel) truncate(t *rapid.T) {
	if m.end() == 0 {
		t.Skip("empty log")
	}
	offset := rapid.Int64Range(0, m.end()).Draw(t, "offset")
	if err := m.file.TruncateTo(offset); err != nil {
		t.Fatalf("file truncate: %v", err)
	}
	if err := m.model.TruncateTo(offset); err != nil {
		t.Fatalf("model truncate: %v", err)
	}
}

func (m *fileVsModel) sync(t *rapid.T) {
	if err := m.file.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// reopen is a clean restart: the page cache survives, so nothing is lost.
func (m *fileVsModel) reopen(t *rapid.T) {
	if err := m.file.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s, err := OpenFileStorage(m.dir, m.opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	m.file = s
}

func (m *fileVsModel) check(t *rapid.T) {
	got, err := m.file.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	want, _ := m.model.Load()
	if len(got.Batches) != len(want.Batches) {
		t.Fatalf("file has %d batches, model %d", len(got.Batches), len(want.Batches))
	}
	for i := range got.Batches {
		if string(got.Batches[i].Raw) != string(want.Batches[i].Raw) {
			t.Fatalf("batch %d differs", i)
		}
	}
	var cache EpochCache
	for _, b := range want.Batches {
		cache.Assign(b.Epoch, b.BaseOffset)
	}
	if e := m.file.EpochEntries(); !slices.Equal(e, cache.Entries()) {
		t.Fatalf("epochs %v, want %v", e, cache.Entries())
	}
}

// memDir returns a scratch directory on tmpfs when there is one: this test checks
// bookkeeping, not durability, and thousands of real fsyncs would make it slow.
func memDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "raftlog-model-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func TestFileStorageMatchesModel(t *testing.T) {
	root := memDir(t)
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp(root, "run")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		// Segments of about three batches and short time rolls exercise rolling,
		// cross-segment truncation and reopening of many files.
		opts := FileOptions{SegmentBytes: 300, SegmentMs: 2000}
		s, err := OpenFileStorage(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		m := &fileVsModel{dir: dir, opts: opts, file: s, model: NewMemStorage(), epoch: 1}
		defer func() { _ = m.file.Close() }()
		t.Repeat(map[string]func(*rapid.T){
			"append":   m.appendBatch,
			"append2":  m.appendBatch, // appends twice as often: logs grow past a few segments
			"truncate": m.truncate,
			"sync":     m.sync,
			"reopen":   m.reopen,
			"":         m.check,
		})
	})
}
