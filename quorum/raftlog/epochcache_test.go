package raftlog

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEpochCheckpointFileFollowsLog(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkBatch(0, 1, 3), mkBatch(3, 1, 2), mkBatch(5, 2, 1), mkBatch(6, 5, 4))
	syncTest(t, s)
	readCheckpoint := func() string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := readCheckpoint(); got != "0\n3\n1 0\n2 5\n5 6\n" {
		t.Fatalf("after appends: %q", got)
	}
	if err := s.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	syncTest(t, s)
	if got := readCheckpoint(); got != "0\n1\n1 0\n" {
		t.Fatalf("after truncation: %q", got)
	}
	// A damaged checkpoint is rebuilt from the batches at open.
	if err := os.WriteFile(filepath.Join(dir, LeaderEpochCheckpointFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	s = openTest(t, dir, FileOptions{})
	if got := readCheckpoint(); got != "0\n1\n1 0\n" {
		t.Fatalf("after reopen: %q", got)
	}
	if e, end := s.EndOffsetForEpoch(1); e != 1 || end != 5 {
		t.Fatalf("EndOffsetForEpoch: %d %d", e, end)
	}
}
