package raftlog

import (
	"errors"
	"reflect"
	"testing"
)

func TestMemStorageCrashDropsUnsynced(t *testing.T) {
	m := NewMemStorage()
	synced := []Batch{mkBatch(0, 1, 2), mkBatch(2, 1, 1)}
	appendTest(t, m, synced...)
	syncTest(t, m)
	appendTest(t, m, mkBatch(3, 2, 4)) // never synced
	st := QuorumState{LeaderID: -1, LeaderEpoch: 2, VotedID: 3}
	if err := m.SaveQuorumState(st); err != nil {
		t.Fatal(err)
	}
	if n := len(load(t, m).Batches); n != 3 {
		t.Fatalf("before crash: %d batches", n)
	}
	after := m.Crash()
	sameBatches(t, after.Batches, synced)
	if !reflect.DeepEqual(after.State, st) {
		t.Fatalf("quorum state lost: %+v", after.State)
	}
	sameBatches(t, load(t, m).Batches, synced)
	// The node restarts and writes on.
	appendTest(t, m, mkBatch(3, 2, 1))
	syncTest(t, m)
	if n := len(m.Durable()); n != 3 {
		t.Fatalf("durable %d", n)
	}
}

func TestMemStorageCrashUndoesUnsyncedTruncation(t *testing.T) {
	m := NewMemStorage()
	orig := []Batch{mkBatch(0, 1, 2), mkBatch(2, 1, 2), mkBatch(4, 1, 2)}
	appendTest(t, m, orig...)
	syncTest(t, m)
	if err := m.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	appendTest(t, m, mkBatch(2, 2, 1))
	// Neither the truncation nor the new batch was synced: the old suffix is back.
	sameBatches(t, m.Crash().Batches, orig)

	if err := m.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	replacement := mkBatch(2, 2, 1)
	appendTest(t, m, replacement)
	syncTest(t, m)
	sameBatches(t, m.Crash().Batches, []Batch{orig[0], replacement})
}

func TestMemStorageValidationAndFailure(t *testing.T) {
	m := NewMemStorage()
	appendTest(t, m, mkBatch(0, 3, 1))
	if err := m.Append([]Batch{mkBatch(2, 3, 1)}); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("gap: %v", err)
	}
	if err := m.Append([]Batch{mkBatch(1, 2, 1)}); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("regression: %v", err)
	}
	m.Fail(errors.New("injected EIO"))
	for name, op := range map[string]func() error{
		"append": func() error { return m.Append([]Batch{mkBatch(1, 3, 1)}) },
		"sync":   m.Sync,
		"trunc":  func() error { return m.TruncateTo(0) },
		"state":  func() error { return m.SaveQuorumState(EmptyQuorumState()) },
	} {
		if err := op(); !errors.Is(err, ErrStorageFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A reboot clears the failure; the unsynced batch is gone.
	if l := m.Crash(); len(l.Batches) != 0 {
		t.Fatalf("after crash %d batches", len(l.Batches))
	}
	appendTest(t, m, mkBatch(0, 1, 1))
}
