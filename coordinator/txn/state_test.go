package txn

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// apply commits a transition's record (a round trip through the log
// format, as a loading coordinator would read it back).
func apply(t *testing.T, cur *Metadata, tr Transition) *Metadata {
	t.Helper()
	if tr.Next == nil {
		return cur
	}
	m, err := DecodeValue(tr.Next.TransactionalID, EncodeValue(tr.Next))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pids(next int64) func() (int64, error) {
	return func() (int64, error) { next++; return next - 1, nil }
}

// A transactional id's life: init, add partitions, commit, a second
// producer fencing the first, a transaction timing out.
func TestTransactionLifecycle(t *testing.T) {
	newPID := pids(1000)
	tr, err := Init(nil, InitRequest{TransactionalID: "tx", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}, DefaultMaxTimeoutMs, 10, newPID)
	if err != nil || tr.Next.ProducerID != 1000 || tr.Next.ProducerEpoch != 0 || tr.Next.State != Empty {
		t.Fatalf("init: %+v %v", tr.Next, err)
	}
	m := apply(t, nil, tr)
	if _, err := Init(nil, InitRequest{TransactionalID: "tx", TimeoutMs: DefaultMaxTimeoutMs + 1}, DefaultMaxTimeoutMs, 10, newPID); err != kerr.InvalidTransactionTimeout {
		t.Fatalf("timeout above transaction.max.timeout.ms: %v", err)
	}
	a0, b1 := TopicPartition{"a", 0}, TopicPartition{"b", 1}
	tr, err = AddPartitions(m, 1000, 0, []TopicPartition{a0}, 20)
	if err != nil || tr.Next.State != Ongoing || tr.Next.StartMs != 20 {
		t.Fatalf("add: %+v %v", tr.Next, err)
	}
	m = apply(t, m, tr)
	if tr, err = AddPartitions(m, 1000, 0, []TopicPartition{a0}, 25); err != nil || tr.Next != nil {
		t.Fatalf("re-adding a partition wrote %+v %v", tr.Next, err)
	}
	tr, _ = AddPartitions(m, 1000, 0, []TopicPartition{b1}, 30)
	m = apply(t, m, tr)
	for _, bad := range []struct {
		pid   int64
		epoch int16
		want  *kerr.Error
	}{{999, 0, kerr.InvalidProducerIDMapping}, {1000, 1, kerr.ProducerFenced}} {
		if _, err := AddPartitions(m, bad.pid, bad.epoch, []TopicPartition{a0}, 30); err != bad.want {
			t.Errorf("add as %d/%d: %v, want %v", bad.pid, bad.epoch, err, bad.want)
		}
		if _, err := End(m, bad.pid, bad.epoch, true, 30); err != bad.want {
			t.Errorf("end as %d/%d: %v, want %v", bad.pid, bad.epoch, err, bad.want)
		}
	}
	tr, err = End(m, 1000, 0, true, 40)
	if err != nil || !tr.Markers || tr.Next.State != PrepareCommit || len(tr.Next.Partitions) != 2 {
		t.Fatalf("commit: %+v %v", tr, err)
	}
	m = apply(t, m, tr)
	if _, err := End(m, 1000, 0, true, 41); err != kerr.ConcurrentTransactions {
		t.Fatalf("commit retried while markers are written: %v", err)
	}
	if _, err := AddPartitions(m, 1000, 0, []TopicPartition{a0}, 41); err != kerr.ConcurrentTransactions {
		t.Fatalf("add while committing: %v", err)
	}
	done, cerr := CompleteMarkers(m, 50)
	if cerr != nil || done.State != CompleteCommit || len(done.Partitions) != 0 {
		t.Fatalf("complete: %+v %v", done, cerr)
	}
	m = apply(t, m, Transition{Next: done})
	if tr, err = End(m, 1000, 0, true, 51); err != nil || tr.Next != nil {
		t.Fatalf("commit retried after it completed: %+v %v", tr, err)
	}
	if _, err = End(m, 1000, 0, false, 51); err != kerr.InvalidTxnState {
		t.Fatalf("abort after commit: %v", err)
	}
	// A new producer instance with the same transactional id fences the old.
	tr, err = Init(m, InitRequest{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, DefaultMaxTimeoutMs, 60, newPID)
	if err != nil || tr.Next.ProducerID != 1000 || tr.Next.ProducerEpoch != 1 || tr.Next.State != Empty {
		t.Fatalf("second init: %+v %v", tr.Next, err)
	}
	m = apply(t, m, tr)
	if _, err := AddPartitions(m, 1000, 0, []TopicPartition{a0}, 61); err != kerr.ProducerFenced {
		t.Fatalf("the fenced producer: %v", err)
	}
	tr, _ = AddPartitions(m, 1000, 1, []TopicPartition{a0}, 100)
	m = apply(t, m, tr)
	// Timeout 1000 ms from the start at 100.
	if tr := Expire(m, 1100); tr.Next != nil {
		t.Fatalf("expired at its timeout: %+v", tr.Next)
	}
	tr = Expire(m, 1101)
	if tr.Next == nil || !tr.Markers || tr.Next.State != PrepareAbort || tr.Next.ProducerEpoch != 2 {
		t.Fatalf("timed-out transaction: %+v", tr)
	}
}

// InitProducerId during an open transaction fences and aborts it first
// (CONCURRENT_TRANSACTIONS until the abort completes); a KIP-360 producer
// naming another producer's id or epoch is fenced; an exhausted epoch gets
// a new producer id.
func TestInitFencesOpenTransaction(t *testing.T) {
	newPID := pids(7)
	m := &Metadata{TransactionalID: "tx", ProducerID: 5, ProducerEpoch: 3, TimeoutMs: 1000, State: Ongoing,
		Partitions: map[TopicPartition]struct{}{{"a", 0}: {}}, StartMs: 1}
	tr, err := Init(m, InitRequest{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, DefaultMaxTimeoutMs, 10, newPID)
	if err != kerr.ConcurrentTransactions || tr.Next == nil || !tr.Markers || tr.Next.State != PrepareAbort || tr.Next.ProducerEpoch != 4 {
		t.Fatalf("init during a transaction: %+v %v", tr, err)
	}
	if _, err := Init(m, InitRequest{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: 5, ProducerEpoch: 2}, DefaultMaxTimeoutMs, 10, newPID); err != kerr.ProducerFenced {
		t.Fatalf("KIP-360 init with a stale epoch: %v", err)
	}
	m.State, m.ProducerEpoch = CompleteAbort, math.MaxInt16-1
	tr, err = Init(m, InitRequest{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, DefaultMaxTimeoutMs, 10, newPID)
	if err != nil || tr.Next.ProducerID != 7 || tr.Next.ProducerEpoch != 0 {
		t.Fatalf("epoch exhausted: %+v %v", tr.Next, err)
	}
	failing := func() (int64, error) { return 0, errors.New("no block") }
	if _, err := Init(nil, InitRequest{TransactionalID: "new", TimeoutMs: 1000}, DefaultMaxTimeoutMs, 10, failing); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("no producer id: %v", err)
	}
	if _, cerr := CompleteMarkers(&Metadata{State: Ongoing}, 1); cerr == nil {
		t.Fatal("markers completed for an Ongoing transaction")
	}
}
