package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFlushTopicIDsBatch: a batch of new logs gets every partition.metadata
// written with the id (no temporary file left), in two file system syncs
// on Linux instead of two fsyncs per log, after which the logs' closes
// need no fsync (their directories were synced by the batch); a log whose
// id is on disk already or that is closed is skipped.
func TestFlushTopicIDsBatch(t *testing.T) {
	const n = 40
	root := t.TempDir()
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	var logs []*Log
	for i := range n {
		l, err := OpenLog(filepath.Join(root, fmt.Sprintf("demo-%d", i)), LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetTopicID(id); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	if err := logs[0].FlushTopicID(); err != nil { // written already
		t.Fatal(err)
	}
	if err := logs[1].Close(); err != nil { // closed: Close wrote it
		t.Fatal(err)
	}
	before := Fsyncs()
	wrote, errs := FlushTopicIDs(logs)
	if len(errs) > 0 || wrote != n-2 {
		t.Fatalf("FlushTopicIDs: went through %d, errors %v; want %d, none", wrote, errs, n-2)
	}
	syncs := Fsyncs() - before
	if syncfsReportsErrors() && syncs != 2 {
		t.Errorf("%d syncs for %d logs, want 2 (syncfs before and after the renames)", syncs, n-2)
	}
	for i, l := range logs {
		data, err := os.ReadFile(filepath.Join(l.Dir(), PartitionMetadataFile))
		if err != nil || string(data) != string(EncodePartitionMetadata(id)) {
			t.Fatalf("demo-%d: partition.metadata %q %v", i, data, err)
		}
		if _, err := os.Stat(filepath.Join(l.Dir(), PartitionMetadataFile+".tmp")); !os.IsNotExist(err) {
			t.Fatalf("demo-%d: temporary file left: %v", i, err)
		}
		if !l.TopicIDFlushed() {
			t.Fatalf("demo-%d: not flushed", i)
		}
	}
	before = Fsyncs()
	for _, l := range logs[2:] {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := Fsyncs() - before; syncfsReportsErrors() && got != 0 {
		t.Errorf("closing %d new logs after the batch: %d fsyncs, want 0", n-2, got)
	}
	// Reopened: each log reads its id back.
	for i := range n {
		l, err := OpenLog(filepath.Join(root, fmt.Sprintf("demo-%d", i)), LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := l.TopicID(); !ok || got != id {
			t.Fatalf("demo-%d reopened: topic id %x %v", i, got, ok)
		}
		_ = l.Close()
	}
}

// A log written to after its topic id was recorded keeps the directory
// fsync of its own flush: the batch clears a log's unsynced directory only
// for a log that still has nothing but its empty first segment.
func TestFlushTopicIDsLeavesWrittenLogsDirectoryToFlush(t *testing.T) {
	l, err := OpenLog(filepath.Join(t.TempDir(), "demo-0"), LogConfig{IndexIntervalBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetTopicID([16]byte{9}); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.active().size = 1 // as if a batch were in the page cache
	l.mu.Unlock()
	if _, errs := FlushTopicIDs([]*Log{l}); len(errs) > 0 {
		t.Fatal(errs)
	}
	l.mu.Lock()
	unsynced := l.dirUnsynced
	l.active().size = 0
	l.mu.Unlock()
	if !unsynced {
		t.Fatal("a log with data had its directory marked synced by the batch")
	}
}

func TestKernelVersion(t *testing.T) {
	for release, want := range map[string][3]int{
		"6.18.44-fc-v1045": {6, 18, 1}, "5.8.0": {5, 8, 1}, "5.10": {5, 10, 1}, "4.19.0-rc1": {4, 19, 1},
		"5.7-custom": {5, 7, 1}, "junk": {0, 0, 0},
	} {
		major, minor, ok := kernelVersion(release)
		if got := [3]int{major, minor, map[bool]int{true: 1}[ok]}; got != want {
			t.Errorf("kernelVersion(%q) = %v, want %v", release, got, want)
		}
	}
}
