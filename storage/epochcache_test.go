package storage

import (
	"errors"
	"slices"
	"testing"
)

func TestEpochCheckpointGolden(t *testing.T) {
	entries := []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 57}, {Epoch: 4, StartOffset: 1200}}
	want := "0\n3\n1 0\n3 57\n4 1200\n"
	if got := string(EncodeEpochCheckpoint(entries)); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := DecodeEpochCheckpoint([]byte(want))
	if err != nil || !slices.Equal(back, entries) {
		t.Fatalf("decode: %v %v", back, err)
	}
	if got := string(EncodeEpochCheckpoint(nil)); got != "0\n0\n" {
		t.Fatalf("empty: %q", got)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\n1\nx 0\n", "0\n0\n1 0\n", "0\n-1\n"} {
		if _, err := DecodeEpochCheckpoint([]byte(bad)); !errors.Is(err, ErrCorruptEpochCheckpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestEpochCacheAssignAndTruncate(t *testing.T) {
	var c EpochCache
	for _, a := range []EpochEntry{{1, 0}, {1, 5}, {2, 10}, {4, 20}, {3, 25}} {
		c.Assign(a.Epoch, a.StartOffset)
	}
	want := []EpochEntry{{1, 0}, {2, 10}, {4, 20}}
	if !slices.Equal(c.Entries(), want) {
		t.Fatalf("assign: %v", c.Entries())
	}
	if !c.TruncateFromEnd(20) || !slices.Equal(c.Entries(), want[:2]) {
		t.Fatalf("truncate end: %v", c.Entries())
	}
	if c.TruncateFromEnd(30) {
		t.Fatal("no-op truncation reported a change")
	}
	// A newer epoch starting before stale entries replaces them.
	c.Assign(5, 8)
	if want := []EpochEntry{{1, 0}, {5, 8}}; !slices.Equal(c.Entries(), want) {
		t.Fatalf("assign over stale: %v", c.Entries())
	}
	if !c.TruncateFromStart(9) || !slices.Equal(c.Entries(), []EpochEntry{{5, 9}}) {
		t.Fatalf("truncate start: %v", c.Entries())
	}
	if c.TruncateFromStart(9) {
		t.Fatal("no-op start truncation reported a change")
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	var c EpochCache
	c.Assign(2, 10)
	c.Assign(4, 30)
	c.Assign(7, 50)
	const leo = 64
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{1, 1, 10},  // older than every entry: the first entry's start
		{2, 2, 30},  // exact
		{3, 2, 30},  // between: the floor epoch, ending where 4 starts
		{4, 4, 50},  // exact
		{7, 7, leo}, // latest: the log end
		{8, -1, -1}, // unknown future epoch
	}
	for _, tc := range tests {
		e, end := c.EndOffsetFor(tc.epoch, leo)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("epoch %d: got (%d,%d) want (%d,%d)", tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
}
