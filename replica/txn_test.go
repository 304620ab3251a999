package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// txnBatch is batchAt with the transactional attribute set.
func txnBatch(n int, pid int64, epoch int16, seq int32, tsMs int64) []byte {
	raw := batchAt(n, pid, epoch, seq, tsMs)
	binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

var txnOK = AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 1, LogAppendTimeMs: -1,
	VerifyTxn: func(int64, int16) error { return nil }}

func appendTxn(t *testing.T, p *Partition, raw []byte) AppendResult {
	t.Helper()
	res, err := p.AppendAsLeader(raw, txnOK)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func marker(t *testing.T, p *Partition, pid int64, epoch int16, coordEpoch int32, commit bool) int64 {
	t.Helper()
	off, err := p.AppendTxnMarker(TxnMarker{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch, Commit: commit})
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// readCommittedOffsets reads everything read_committed sees from 0: the
// base offsets of its batches and the aborted transactions.
func readCommitted(t *testing.T, p *Partition) ([]int64, []storage.AbortedTxn, int64) {
	t.Helper()
	rr, err := p.ReadAsLeaderIsolated(0, 1<<20, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	bs, _, err := storage.SplitBatches(rr.Records)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, b := range bs {
		offs = append(offs, b.BaseOffset)
	}
	return offs, rr.AbortedTxns, rr.LastStableOffset
}

// A transactional batch needs the coordinator's word; without it (no
// transaction coordinator) it is INVALID_TXN_STATE and nothing is appended,
// so no client can hold the last stable offset with a transaction nobody
// ends.
func TestTransactionalBatchNeedsVerification(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	now := time.Now().UnixMilli()
	if _, err := p.AppendAsLeader(txnBatch(1, 10, 0, 0, now), acksAll); !errors.Is(err, ErrTransactionsUnsupported) {
		t.Fatalf("unverified transactional batch: %v", err)
	}
	refuse := acksAll
	refuse.VerifyTxn = func(int64, int16) error { return errors.New("partition not in the transaction") }
	if _, err := p.AppendAsLeader(txnBatch(1, 10, 0, 0, now), refuse); !errors.Is(err, ErrTransactionsUnsupported) {
		t.Fatalf("refused transactional batch: %v", err)
	}
	if p.log.EndOffset() != 0 || p.LastStableOffset() != 0 {
		t.Fatalf("log end %d, lso %d after refused batches", p.log.EndOffset(), p.LastStableOffset())
	}
	appendTxn(t, p, txnBatch(1, 10, 0, 0, now))
	if p.LastStableOffset() != 0 || p.HighWatermark() != 1 {
		t.Fatalf("lso %d hw %d with a transaction open at 0", p.LastStableOffset(), p.HighWatermark())
	}
}

// The last stable offset stops at the earliest open transaction;
// read_committed reads below it; an ABORT enters the .txnindex (Kafka's
// layout) and read_committed fetches list it; markers are fenced by
// producer and coordinator epochs; all of it survives a clean restart and
// a crash (rebuilt from snapshot and log, no duplicate index entry).
func TestLastStableOffsetAndAbortedTransactions(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	p := lead(t, m)
	now := time.Now().UnixMilli()
	appendOK(t, p, batchAt(2, 7, 0, 0, now))    // 0-1
	appendTxn(t, p, txnBatch(3, 10, 0, 0, now)) // 2-4
	appendTxn(t, p, txnBatch(2, 11, 0, 0, now)) // 5-6
	if lso := p.LastStableOffset(); lso != 2 || p.HighWatermark() != 7 {
		t.Fatalf("lso %d hw %d, want 2 and 7", lso, p.HighWatermark())
	}
	if offs, aborted, _ := readCommitted(t, p); !slices.Equal(offs, []int64{0}) || len(aborted) != 0 {
		t.Fatalf("read_committed %v %v, want only the batch at 0", offs, aborted)
	}
	if _, err := p.AppendAsLeader(batchAt(1, 10, 0, 3, now), acksAll); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v", err)
	}
	if _, err := p.AppendAsLeader(batchAt(1, 10, 1, 0, now), acksAll); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch at a newer epoch inside a transaction: %v", err) // as Kafka's ProducerAppendInfo
	}
	if off := marker(t, p, 10, 0, 5, false); off != 7 { // abort 10
		t.Fatalf("abort marker at %d", off)
	}
	if lso := p.LastStableOffset(); lso != 5 {
		t.Fatalf("lso %d after aborting 10, want 5 (11 still open)", lso)
	}
	if _, err := p.AppendTxnMarker(TxnMarker{ProducerID: 11, ProducerEpoch: 0, CoordinatorEpoch: 5}); err != nil {
		t.Fatal(err) // 8: abort 11 too (Commit unset)
	}
	if lso := p.LastStableOffset(); lso != 9 || p.HighWatermark() != 9 {
		t.Fatalf("lso %d hw %d after both markers", lso, p.HighWatermark())
	}
	want := []storage.AbortedTxn{{ProducerID: 10, FirstOffset: 2, LastOffset: 7, LastStableOffset: 5},
		{ProducerID: 11, FirstOffset: 5, LastOffset: 8, LastStableOffset: 9}}
	offs, aborted, lso := readCommitted(t, p)
	if !slices.Equal(offs, []int64{0, 2, 5, 7, 8}) || !slices.Equal(aborted, want) || lso != 9 {
		t.Fatalf("read_committed %v aborted %+v lso %d", offs, aborted, lso)
	}
	raw, err := os.ReadFile(filepath.Join(p.log.Dir(), "00000000000000000000.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := append(storage.EncodeTxnIndexEntry(want[0]), storage.EncodeTxnIndexEntry(want[1])...)
	if !bytes.Equal(raw, wantIdx) || len(raw) != 68 || raw[0] != 0 || raw[1] != 0 || raw[9] != 10 || raw[17] != 2 || raw[25] != 7 || raw[33] != 5 {
		t.Fatalf(".txnindex %x", raw)
	}
	// Fencing: an older producer epoch, an older coordinator epoch.
	if _, err := p.AppendTxnMarker(TxnMarker{ProducerID: 10, ProducerEpoch: 0, CoordinatorEpoch: 4}); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("zombie coordinator's marker: %v", err)
	}
	appendTxn(t, p, txnBatch(1, 12, 3, 0, now)) // 9: 12 opens a transaction at epoch 3
	if _, err := p.AppendTxnMarker(TxnMarker{ProducerID: 12, ProducerEpoch: 2, CoordinatorEpoch: 5}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of a fenced producer epoch: %v", err)
	}
	if _, err := p.AppendTxnMarker(TxnMarker{ProducerID: -1, ProducerEpoch: 0}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("marker for producer -1: %v", err)
	}
	if p.LastStableOffset() != 9 || p.log.EndOffset() != 10 {
		t.Fatalf("lso %d end %d after refused markers", p.LastStableOffset(), p.log.EndOffset())
	}
	// A crash: the files as they are, without a shutdown snapshot.
	crashed := t.TempDir()
	copyDir(t, p.log.Dir(), filepath.Join(crashed, "demo-0"))
	for name, dir := range map[string]string{"clean restart": dir, "crash": crashed} {
		if name == "clean restart" {
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
		}
		p2 := lead(t, newManager(t, dir))
		offs, aborted, lso := readCommitted(t, p2)
		if !slices.Equal(offs, []int64{0, 2, 5, 7, 8}) || !slices.Equal(aborted, want) || lso != 9 {
			t.Errorf("%s: read_committed %v aborted %+v lso %d", name, offs, aborted, lso)
		}
		if raw2, _ := os.ReadFile(filepath.Join(p2.log.Dir(), "00000000000000000000.txnindex")); !bytes.Equal(raw2, wantIdx) {
			t.Errorf("%s: .txnindex %x", name, raw2)
		}
		marker(t, p2, 12, 3, 5, true)
		if lso := p2.LastStableOffset(); lso != 11 {
			t.Errorf("%s: lso %d after committing 12, want 11", name, lso)
		}
	}
}

// The LSO also waits for the marker to be committed: a decided transaction
// whose marker is above the high watermark is still unstable. A follower
// builds the same transaction state and aborted index from the batches it
// replicates, so after a failover the new leader answers read_committed the
// same way.
func TestLastStableOffsetWaitsForMarkerCommitAndFailover(t *testing.T) {
	// Broker 2 stays in the ISR while it is down for the marker (a 200 ms
	// lag time under load let the leader shrink it first, and the marker
	// then committed at once: "hw 4 lso 4").
	c := newMemClusterLag(t, FetchConfig{MaxWaitMs: 50, BackoffMs: 20}, true, 60_000, 1, 2)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	c.publish(st)
	leader := c.part(1)
	now := time.Now().UnixMilli()
	appendTxn(t, leader, txnBatch(2, 10, 0, 0, now)) // 0-1
	appendOK(t, leader, batchAt(1, 7, 0, 0, now))    // 2
	eventually(t, "hw 3", func() bool { return leader.HighWatermark() == 3 })
	if lso := leader.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d with 10's transaction open", lso)
	}
	c.mu.Lock()
	c.down[2] = true
	c.mu.Unlock()
	marker(t, leader, 10, 0, 1, false) // 3: abort, not replicated
	if hw, lso := leader.HighWatermark(), leader.LastStableOffset(); hw != 3 || lso != 0 {
		t.Fatalf("hw %d lso %d with the abort marker above the hw, want 3 and 0", hw, lso)
	}
	c.mu.Lock()
	c.down[2] = false
	c.mu.Unlock()
	eventually(t, "the marker commits", func() bool { return leader.LastStableOffset() == 4 })
	want := []storage.AbortedTxn{{ProducerID: 10, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}}
	eventually(t, "follower hw 4", func() bool { return c.part(2).HighWatermark() == 4 })
	c.elect(2)
	offs, aborted, lso := readCommitted(t, c.part(2))
	if !slices.Equal(offs, []int64{0, 2, 3}) || !slices.Equal(aborted, want) || lso != 4 {
		t.Fatalf("new leader: read_committed %v aborted %+v lso %d", offs, aborted, lso)
	}
	if _, err := c.part(2).AppendTxnMarker(TxnMarker{ProducerID: 10, ProducerEpoch: 0, CoordinatorEpoch: 0}); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("new leader took a marker from an older coordinator: %v", err)
	}
}

// The coordinator is asked once per transaction on a partition: later
// batches of the open transaction are admitted by the partition's own
// state (KIP-890's verification guard); after the marker, the next
// transaction's first batch asks again.
func TestVerifyTxnOncePerTransaction(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	now := time.Now().UnixMilli()
	calls := 0
	opts := acksAll
	opts.VerifyTxn = func(int64, int16) error { calls++; return nil }
	for seq := range int32(3) {
		if _, err := p.AppendAsLeader(txnBatch(1, 10, 0, seq, now), opts); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("coordinator asked %d times for one transaction", calls)
	}
	marker(t, p, 10, 0, 1, true)
	opts.VerifyTxn = func(int64, int16) error { calls++; return errors.New("not in a transaction") }
	if _, err := p.AppendAsLeader(txnBatch(1, 10, 0, 3, now), opts); !errors.Is(err, ErrTransactionsUnsupported) || calls != 2 {
		t.Fatalf("a batch after the commit marker: %v (%d calls)", err, calls)
	}
}

// A coordinator's transactional write (TxnOffsetCommit's offsets: the
// producer's id and epoch, sequence -1, Kafka's AppendOrigin.COORDINATOR) is
// appended without a sequence check and opens the producer's transaction,
// holding the last stable offset until its marker; a client's batch with
// sequence -1 stays INVALID_RECORD, and an older epoch is fenced either way.
func TestCoordinatorTxnBatchWithoutSequence(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	now := time.Now().UnixMilli()
	if _, err := p.AppendAsLeader(txnBatch(1, 20, 3, -1, now), txnOK); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client batch with sequence -1: %v", err)
	}
	coord := txnOK
	coord.Coordinator = true
	for i := range 2 {
		res, err := p.AppendAsLeader(txnBatch(1, 20, 3, -1, now), coord)
		if err != nil || res.Duplicate || res.BaseOffset != int64(i) {
			t.Fatalf("coordinator write %d: %+v %v", i, res, err)
		}
	}
	if lso := p.LastStableOffset(); lso != 0 || p.HighWatermark() != 2 {
		t.Fatalf("lso %d hw %d with the coordinator's transaction open at 0", lso, p.HighWatermark())
	}
	if _, err := p.AppendAsLeader(txnBatch(1, 20, 2, -1, now), coord); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("coordinator write at an older epoch: %v", err)
	}
	appendTxn(t, p, txnBatch(1, 20, 3, 0, now)) // the producer's own batch in the same transaction
	marker(t, p, 20, 3, 0, true)
	if lso := p.LastStableOffset(); lso != 4 {
		t.Fatalf("lso %d after the commit marker, want 4", lso)
	}
}
