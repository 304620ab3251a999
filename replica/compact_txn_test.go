package replica

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// keyedBatch is one record k=v, transactional for producer pid when pid >= 0.
func keyedTxnBatch(k, v string, pid int64, tsMs int64) []byte {
	raw := storage.EncodeBatch(0, -1, tsMs, false, []storage.Record{{Key: []byte(k), Value: []byte(v), TimestampMs: tsMs}}).Raw
	if pid >= 0 {
		binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10)
		binary.BigEndian.PutUint64(raw[43:], uint64(pid))
		binary.BigEndian.PutUint16(raw[51:], 0)
		binary.BigEndian.PutUint32(raw[53:], 0)
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	}
	return raw
}

// A compacted topic's committed record is not superseded by a later record
// of a transaction that is still open (compaction stops at the last stable
// offset, as Kafka's cleaner stops at the first unstable offset) nor by one
// of a transaction that was then aborted: read_committed consumers still
// read the committed value after both passes.
func TestCompactionKeepsCommittedBelowTransactions(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	cfg := DefaultTopicConfig()
	cfg.Delete, cfg.Compact, cfg.SegmentBytes = false, true, 100 // one batch per segment
	m.SetTopicConfig("demo", cfg)
	now := time.Now().UnixMilli()
	appendOK(t, p, keyedTxnBatch("k", "committed", -1, now)) // 0
	appendTxn(t, p, keyedTxnBatch("k", "in-txn", 10, now))   // 1: transaction open
	appendOK(t, p, keyedTxnBatch("pad", "a", -1, now))       // 2
	appendOK(t, p, keyedTxnBatch("pad", "b", -1, now))       // 3
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != 1 || hw != 4 {
		t.Fatalf("lso %d hw %d, want 1 and 4", lso, hw)
	}
	committed := func(what string) {
		t.Helper()
		rr, err := p.ReadAsLeaderIsolated(0, 1<<20, -1, true)
		if err != nil {
			t.Fatal(err)
		}
		bs, _, err := storage.SplitBatches(rr.Records)
		if err != nil || len(bs) == 0 || bs[0].BaseOffset != 0 {
			t.Fatalf("%s: batches %d (%v)", what, len(bs), err)
		}
		recs, err := bs[0].Records()
		if err != nil || len(recs) != 1 || string(recs[0].Value) != "committed" {
			t.Fatalf("%s: offset 0 holds %d records (%v): the committed k is gone", what, len(recs), err)
		}
	}
	if _, err := p.compact(now); err != nil {
		t.Fatal(err)
	}
	committed("compacted with the transaction open")
	marker(t, p, 10, 0, 5, false) // abort: 4
	appendOK(t, p, keyedTxnBatch("pad", "c", -1, now))
	if _, err := p.compact(now); err != nil {
		t.Fatal(err)
	}
	committed("compacted after the abort")
	if rr, err := p.ReadAsLeader(2, 1<<20, -1); err != nil || len(rr.Records) == 0 {
		t.Fatalf("read at 2: %v", err) // the pass did run: pad a at 2 went (b supersedes it)
	} else if bs, _, _ := storage.SplitBatches(rr.Records); len(bs) == 0 || bs[0].BaseOffset != 2 {
		t.Fatalf("read at 2: %d batches", len(bs))
	} else if recs, _ := bs[0].Records(); len(recs) != 0 {
		t.Fatalf("pad a at offset 2 kept: compaction did not run")
	}
}
