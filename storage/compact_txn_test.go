package storage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCompactTransactions: compaction swaps a segment holding a
// transaction's records and ABORT marker and keeps its .txnindex file and
// entries (read_committed fetches still learn of the abort, before and after
// a restart), and an aborted record does not supersede the committed record
// of its key: the aborted transaction never happened for read_committed
// consumers, so the older committed value must stay (Kafka's cleaner leaves
// aborted batches out of its offset map).
func TestCompactTransactions(t *testing.T) {
	const ts = 5000
	dir := t.TempDir()
	cfg := LogConfig{SegmentBytes: 700}
	l, err := OpenLog(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendAt := func(b Batch) {
		t.Helper()
		b.SetBaseOffset(l.EndOffset())
		b.SetLeaderEpoch(1)
		if err := l.Append([]Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
	one := func(k, v string) []Record { return []Record{{Key: []byte(k), Value: []byte(v), TimestampMs: ts}} }
	appendAt(EncodeBatch(0, 1, ts, false, one("k", "committed")))                      // 0
	appendAt(withProducer(EncodeBatch(0, 1, ts, false, one("k", "aborted")), 7, true)) // 1
	appendAt(EncodeTxnMarkerBatch(7, 0, 3, false, ts))                                 // 2: ABORT
	abort := AbortedTxn{ProducerID: 7, FirstOffset: 1, LastOffset: 2, LastStableOffset: 3}
	if err := l.AppendAbortedTxn(abort); err != nil {
		t.Fatal(err)
	}
	appendAt(EncodeBatch(0, 1, ts, false, one("j", "old"))) // 3: superseded by 4
	appendAt(EncodeBatch(0, 1, ts, false, one("j", "new"))) // 4
	for l.NumSegments() < 2 {
		appendAt(EncodeBatch(0, 1, ts, false, []Record{{Value: make([]byte, 100), TimestampMs: ts}}))
	}
	appendAt(EncodeBatch(0, 1, ts, false, one("pad", "x"))) // the active segment is not empty
	txnIndex := filepath.Join(dir, SegmentFileName(0, TxnIndexSuffix))
	check := func(what string, l *Log) {
		t.Helper()
		got := readModel(t, l)
		if k, ok := got[0]; !ok || k.value != "committed" {
			t.Fatalf("%s: offset 0 is %+v (present %v): the aborted record at 1 superseded the committed one", what, k, ok)
		}
		if _, ok := got[3]; ok {
			t.Fatalf("%s: offset 3 survived: the segment was not compacted", what)
		}
		if got := l.AbortedTxns(0, l.EndOffset()); !slices.Equal(got, []AbortedTxn{abort}) {
			t.Fatalf("%s: aborted transactions %+v, want %+v", what, got, abort)
		}
		data, err := os.ReadFile(txnIndex)
		if err != nil || !slices.Equal(data, EncodeTxnIndexEntry(abort)) {
			t.Fatalf("%s: %s holds %x (%v)", what, txnIndex, data, err)
		}
	}
	stats, err := l.Compact(ts+100, l.EndOffset(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Segments == 0 {
		t.Fatalf("nothing compacted: %+v", stats)
	}
	check("after the pass", l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check("after a restart", openLogTest(t, dir, cfg))
}
