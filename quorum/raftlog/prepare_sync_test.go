package raftlog

import (
	"errors"
	"testing"
)

// TestPrepareSyncKeepsLaterWritesDirty: a PrepareSync whose work runs while the owner
// appends more clears nothing on finish (the later bytes were not covered), so the next
// one syncs again; a quiet one clears the marks; a failed one fails the storage.
func TestPrepareSyncKeepsLaterWritesDirty(t *testing.T) {
	s, err := OpenFileStorage(t.TempDir(), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append([]Batch{mkBatch(0, 1, 2)}); err != nil {
		t.Fatal(err)
	}
	work, finish := s.PrepareSync()
	if err := s.Append([]Batch{mkBatch(2, 1, 2)}); err != nil { // during the fsync
		t.Fatal(err)
	}
	if err := finish(work()); err != nil {
		t.Fatal(err)
	}
	if !s.active().dirty || !s.epochsDirty {
		t.Fatalf("after a sync that missed later writes: segment dirty %t, epochs dirty %t; want both still dirty",
			s.active().dirty, s.epochsDirty)
	}
	work, finish = s.PrepareSync()
	if err := finish(work()); err != nil {
		t.Fatal(err)
	}
	if s.active().dirty || s.epochsDirty || s.dirDirty {
		t.Fatal("a quiet sync left dirty marks")
	}
	if again, err := OpenFileStorage(s.dir, FileOptions{}); err != nil || again.EndOffset() != 4 {
		t.Fatalf("reopened after the syncs: %v", err)
	} else {
		again.Close()
	}

	boom := errors.New("disk gone")
	if err := s.Append([]Batch{mkBatch(4, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	_, finish = s.PrepareSync()
	if err := finish(boom); !errors.Is(err, boom) {
		t.Fatalf("finish of a failed fsync: %v", err)
	}
	if err := s.Append([]Batch{mkBatch(5, 1, 1)}); !errors.Is(err, boom) {
		t.Fatalf("append after a failed fsync: %v, want the sticky failure", err)
	}
}
