package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// answered is what an incremental answer carries, by partition.
func answered(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, sp := range rt.Partitions {
			out[sp.Partition] = sp
		}
	}
	return out
}

// A follower's incremental fetch session on a leader of 1,000 partitions
// (issue 17): once the session is open and its partitions watched, a fetch
// parked on all of them and woken by an append to one reads that one
// partition, not all 1,000 on each pass (fetchReads: it read 2n = 2,000
// before, the pass that parks and the pass after the wake). What it does
// not read it need not answer: an idle fetch answers nothing.
func TestSessionFetchReadsWhatChanged(t *testing.T) {
	const n = 1000
	fw := newFollowerWait(t, n, nil)
	fw.openSession(t)
	before := fw.c.fetchReads.Load()
	sp, _, _ := fw.round(t, 734)
	if reads := fw.c.fetchReads.Load() - before; reads > 2 {
		t.Fatalf("a fetch woken by an append to 1 of %d partitions read %d partitions, want the woken one", n, reads)
	}
	if len(sp.RecordBatches) == 0 {
		t.Fatal("woken fetch carries no records")
	}
	// The next fetch names partition 734 at its new log end: reading it
	// moves the high watermark (ISR [1 2]), which the answer after carries.
	fw.incremental(0)
	before = fw.c.fetchReads.Load()
	fw.fetch(t, context.Background(), fw.req)
	if hw, end := fw.parts[734].HighWatermark(), fw.parts[734].Log().EndOffset(); hw != end {
		t.Fatalf("high watermark %d after the follower fetched at the log end %d", hw, end)
	}
	fw.named = -1
	fw.incremental(0)
	got := answered(fw.fetch(t, context.Background(), fw.req))
	if sp, ok := got[734]; len(got) != 1 || !ok || sp.HighWatermark != fw.parts[734].HighWatermark() {
		t.Fatalf("answer after the high watermark moved: %+v, want partition 734 at %d", got, fw.parts[734].HighWatermark())
	}
	if reads := fw.c.fetchReads.Load() - before; reads > 4 {
		t.Fatalf("two fetches naming or woken by one partition read %d partitions of %d", reads, n)
	}
	fw.incremental(0)
	if got := answered(fw.fetch(t, context.Background(), fw.req)); len(got) != 0 {
		t.Fatalf("idle fetch answered %+v", got)
	}
}

// Changes to partitions the fetch does not name are answered by the next
// fetch: a new log start (DeleteRecords), records whose answer the
// response's byte budget cut, and an append while no fetch was parked; as
// in Kafka, records the client was sent come again while it does not name
// the partition at a new offset.
func TestSessionFetchAnswersUnnamedChanges(t *testing.T) {
	fw := newFollowerWait(t, 50, nil)
	fw.openSession(t)
	appendTo := func(i, records int) {
		t.Helper()
		if _, err := fw.parts[i].AppendAsLeader(recordBatch(records), replica.AppendOptions{RequiredAcks: 1,
			MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(maxBytes int32) map[int32]kmsg.FetchResponseTopicPartition {
		t.Helper()
		fw.incremental(0)
		fw.req.MaxBytes = maxBytes
		return answered(fw.fetch(t, context.Background(), fw.req))
	}

	// Appends to 7 and 9 while no fetch waits; a response budget of one
	// batch answers one of them, the next fetch both (the follower did not
	// take the first).
	appendTo(7, 3)
	appendTo(9, 3)
	withRecords := func(ans map[int32]kmsg.FetchResponseTopicPartition) []int32 {
		var out []int32
		for p, sp := range ans {
			if len(sp.RecordBatches) > 0 {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := withRecords(fetch(1)); len(got) != 1 {
		t.Fatalf("answer within one batch's budget carried records of %v, want one partition", got)
	}
	if got := withRecords(fetch(10 << 20)); !slices.Equal(got, []int32{7, 9}) {
		t.Fatalf("next fetch answered records of %v, want 7 and 9", got)
	}

	// The follower takes 7 and 9 (its fetches name them at the log end),
	// which moves their high watermarks to 3.
	for _, i := range []int{7, 9} {
		fw.named = i
		fetch(10 << 20)
	}
	fw.named = -1
	fetch(10 << 20)
	if hw := fw.parts[9].HighWatermark(); hw != 3 {
		t.Fatalf("partition 9's high watermark %d, want 3", hw)
	}
	// DeleteRecords moves partition 9's log start: answered unasked.
	if _, err := fw.parts[9].DeleteRecords(2); err != nil {
		t.Fatal(err)
	}
	if sp, ok := fetch(10 << 20)[9]; !ok || sp.LogStartOffset != 2 {
		t.Fatalf("answer after DeleteRecords: %+v (present %v), want partition 9 with log start 2", sp, ok)
	}
}

// A fetch abandoned while parked (its client went away after it read
// partitions) leaves them to the next fetch: an append that woke it is
// answered by the next one.
func TestSessionFetchAbandonedLeavesNewsToTheNext(t *testing.T) {
	fw := newFollowerWait(t, 20, nil)
	fw.openSession(t)
	fw.incremental(60_000)
	fw.req.MinBytes = 1 << 20 // one small batch does not end the wait
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := fw.c.handleFetch(ctx, &protocol.Request{Key: fw.req.Key(), Version: fw.req.GetVersion(), Body: fw.req, Listener: "PLAINTEXT"})
		done <- err
	}()
	waitForCond(t, func() bool { return fw.c.fetchWaiting.Load() == 1 })
	before := fw.c.fetchReads.Load()
	if _, err := fw.parts[4].AppendAsLeader(recordBatch(1), replica.AppendOptions{RequiredAcks: 1,
		MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, func() bool {
		return fw.c.fetchReads.Load() > before && fw.c.fetchWaiting.Load() == 1
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("abandoned fetch answered")
	}
	fw.incremental(0)
	fw.req.MinBytes = 1
	if sp, ok := answered(fw.fetch(t, context.Background(), fw.req))[4]; !ok || len(sp.RecordBatches) == 0 {
		t.Fatalf("fetch after the abandoned one: partition 4 %+v (present %v), want its records", sp, ok)
	}
}

// alterRecorder is an AlterPartition transport that records the ISR
// changes it is sent and commits them.
type alterRecorder struct {
	mu    sync.Mutex
	items []replica.AlterPartitionItem
}

func (a *alterRecorder) AlterPartition(_ context.Context, _ int32, _ int64, items []replica.AlterPartitionItem) ([]replica.AlterPartitionResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.items = append(a.items, items...)
	out := make([]replica.AlterPartitionResult, len(items))
	for i, it := range items {
		isr := make([]int32, 0, len(it.NewISR))
		for _, m := range it.NewISR {
			isr = append(isr, m.BrokerID)
		}
		out[i] = replica.AlterPartitionResult{Outcome: replica.AlterCommitted, LeaderID: 1, LeaderEpoch: it.LeaderEpoch,
			PartitionEpoch: it.PartitionEpoch + 1, ISR: isr}
	}
	return out, nil
}

func (a *alterRecorder) expanded(p int32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range a.items {
		if it.Partition == p && len(it.NewISR) == 2 {
			return true
		}
	}
	return false
}

type eligibleBrokers struct{}

func (eligibleBrokers) ISRBroker(id int32) (int64, bool, bool) { return 10 + int64(id) - 1, true, true }

type noFetches struct{}

func (noFetches) Fetch(context.Context, int32, *replica.FetchRequest) ([]replica.FetchedPartition, error) {
	return nil, context.Canceled
}

func (noFetches) ListOffset(context.Context, int32, replica.ListOffsetRequest) (int64, error) {
	return -1, context.Canceled
}

// A follower out of the ISR of one partition of its session catches up
// through incremental fetches that name only that partition: the leader
// expands the ISR (an AlterPartition adding it).
func TestSessionFetchExpandsISR(t *testing.T) {
	fw := newFollowerWait(t, 100, func(i int) []int32 {
		if i == 42 {
			return []int32{1}
		}
		return []int32{1, 2}
	})
	alters := &alterRecorder{}
	if err := fw.m.StartReplication(replica.Replication{Fetch: noFetches{}, AlterPartition: alters,
		Brokers: eligibleBrokers{}, BrokerEpoch: func() int64 { return 10 }}); err != nil {
		t.Fatal(err)
	}
	fw.openSession(t)
	// The follower is behind on 42: it fetched from 0 and the leader has 5.
	if _, err := fw.parts[42].AppendAsLeader(recordBatch(5), replica.AppendOptions{RequiredAcks: 1,
		MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
		t.Fatal(err)
	}
	fw.incremental(0)
	if sp, ok := answered(fw.fetch(t, context.Background(), fw.req))[42]; !ok || len(sp.RecordBatches) == 0 {
		t.Fatalf("answer after the append to 42: %+v (present %v), want its records", sp, ok)
	}
	fw.named = 42
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	waitForCond(t, func() bool { return alters.expanded(42) })
	if hw := fw.parts[42].HighWatermark(); hw != 5 {
		t.Fatalf("partition 42's high watermark %d after the follower fetched at 5, want 5", hw)
	}
}

// fencedFollower is a broker view in which broker 2 (the follower) is
// fenced until unfenced: a restarted broker's fetches catch up before the
// leader's metadata shows it unfenced.
type fencedFollower struct{ unfenced atomic.Bool }

func (v *fencedFollower) ISRBroker(id int32) (int64, bool, bool) {
	return 10 + int64(id) - 1, id != 2 || v.unfenced.Load(), true
}

// A follower that reaches the log end of a partition while outside its ISR
// and while the leader's metadata still has its broker fenced (so the
// expansion cannot happen yet), and then names nothing in its incremental
// fetches (it is caught up), is still added once its broker is unfenced:
// the leader's session reads the partitions whose follower is outside the
// ISR on every fetch (Kafka updates the follower state of every session
// partition on each fetch). Before, such a partition was never read again
// (nothing fires on an unfence), and TestReplicationISRGrowsBackAfterRestart
// (interop) left a restarted broker out of one ISR. A caught-up follower in
// the ISR still costs nothing: once it is in, an idle fetch reads nothing.
func TestSessionFetchAddsCaughtUpFollowerOnceUnfenced(t *testing.T) {
	fw := newFollowerWait(t, 100, func(i int) []int32 {
		if i == 42 {
			return []int32{1}
		}
		return []int32{1, 2}
	})
	alters := &alterRecorder{}
	view := &fencedFollower{}
	if err := fw.m.StartReplication(replica.Replication{Fetch: noFetches{}, AlterPartition: alters,
		Brokers: view, BrokerEpoch: func() int64 { return 10 }}); err != nil {
		t.Fatal(err)
	}
	fw.openSession(t)
	if _, err := fw.parts[42].AppendAsLeader(recordBatch(5), replica.AppendOptions{RequiredAcks: 1,
		MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
		t.Fatal(err)
	}
	fw.incremental(0)
	if sp, ok := answered(fw.fetch(t, context.Background(), fw.req))[42]; !ok || len(sp.RecordBatches) == 0 {
		t.Fatalf("answer after the append to 42: %+v (present %v), want its records", sp, ok)
	}
	// The follower takes the records and fetches at the log end (5) while
	// fenced: no expansion; then it names nothing.
	fw.named = 42
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	fw.named = -1
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)

	view.unfenced.Store(true)
	before := fw.c.fetchReads.Load()
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	if reads := fw.c.fetchReads.Load() - before; reads != 1 {
		t.Fatalf("an idle fetch read %d of 100 partitions, want 1 (the one whose follower is outside the ISR)", reads)
	}
	waitForCond(t, func() bool { return alters.expanded(42) })
	waitForCond(t, func() bool { return len(fw.parts[42].State().ISR) == 2 })
	// Read once more (it was outside the ISR when last read), then never.
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	before = fw.c.fetchReads.Load()
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	if reads := fw.c.fetchReads.Load() - before; reads != 0 {
		t.Fatalf("an idle fetch of a follower in every ISR read %d partitions, want 0", reads)
	}
}

// refusingAlters is an AlterPartition transport that refuses its first
// refuse expansions (INELIGIBLE_REPLICA: the controller saw the broker
// fenced) and commits the rest, recording what it committed.
type refusingAlters struct {
	mu        sync.Mutex
	refuse    int
	refused   int
	committed []replica.AlterPartitionItem
}

func (a *refusingAlters) AlterPartition(_ context.Context, _ int32, _ int64, items []replica.AlterPartitionItem) ([]replica.AlterPartitionResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]replica.AlterPartitionResult, len(items))
	for i, it := range items {
		if a.refused < a.refuse {
			a.refused++
			out[i] = replica.AlterPartitionResult{Outcome: replica.AlterRejected, ErrorCode: kerr.IneligibleReplica.Code}
			continue
		}
		a.committed = append(a.committed, it)
		isr := make([]int32, 0, len(it.NewISR))
		for _, m := range it.NewISR {
			isr = append(isr, m.BrokerID)
		}
		out[i] = replica.AlterPartitionResult{Outcome: replica.AlterCommitted, LeaderID: 1, LeaderEpoch: it.LeaderEpoch,
			PartitionEpoch: it.PartitionEpoch + 1, ISR: isr}
	}
	return out, nil
}

func (a *refusingAlters) counts() (refused, committed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused, len(a.committed)
}

// An ISR expansion the controller refuses is retried by the follower's
// next fetches although they name nothing (the follower is caught up): the
// partition is read again while its follower is outside the ISR. Before,
// the refused partition was never read again and the follower stayed out.
func TestSessionFetchRetriesRefusedExpansion(t *testing.T) {
	fw := newFollowerWait(t, 100, func(i int) []int32 {
		if i == 42 {
			return []int32{1}
		}
		return []int32{1, 2}
	})
	alters := &refusingAlters{refuse: 1}
	view := &fencedFollower{} // no expansion while the session opens at the log end
	if err := fw.m.StartReplication(replica.Replication{Fetch: noFetches{}, AlterPartition: alters,
		Brokers: view, BrokerEpoch: func() int64 { return 10 }}); err != nil {
		t.Fatal(err)
	}
	fw.openSession(t)
	view.unfenced.Store(true)
	// The follower, at the log end, names 42: the leader proposes adding it,
	// and the controller refuses.
	fw.named = 42
	fw.incremental(0)
	fw.fetch(t, context.Background(), fw.req)
	fw.named = -1
	waitForCond(t, func() bool { refused, _ := alters.counts(); return refused == 1 })
	if _, committed := alters.counts(); committed != 0 || len(fw.parts[42].State().ISR) != 1 {
		t.Fatalf("ISR %v (%d committed) after the only expansion was refused", fw.parts[42].State().ISR, committed)
	}
	// Idle fetches (naming nothing) until the expansion is proposed again
	// and committed.
	waitForCond(t, func() bool {
		fw.incremental(0)
		fw.fetch(t, context.Background(), fw.req)
		return len(fw.parts[42].State().ISR) == 2
	})
	if refused, committed := alters.counts(); refused != 1 || committed != 1 {
		t.Fatalf("%d expansions refused and %d committed, want 1 and 1", refused, committed)
	}
}
