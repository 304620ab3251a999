package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// localMarkers writes markers through the replica manager's partitions, as
// the WriteTxnMarkers handler does on their leader; fail makes it refuse.
type localMarkers struct {
	m    *replica.Manager
	fail atomic.Bool
	mu   sync.Mutex
	sent []Markers
}

func (l *localMarkers) WriteTxnMarkers(ctx context.Context, mk Markers) error {
	if l.fail.Load() {
		return errors.New("leader unreachable")
	}
	for _, tp := range mk.Partitions {
		p, ok := l.m.Partition(replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		if !ok {
			return replica.ErrUnknownPartition
		}
		off, err := p.AppendTxnMarker(replica.TxnMarker{ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch,
			CoordinatorEpoch: mk.CoordinatorEpoch, Commit: mk.Commit})
		if err != nil {
			return err
		}
		if err := p.WaitCommitted(ctx, off); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.sent = append(l.sent, mk)
	l.mu.Unlock()
	return nil
}

type env struct {
	t       *testing.T
	m       *replica.Manager
	markers *localMarkers
	nowMs   atomic.Int64
	nextPID atomic.Int64
	orders  *replica.Partition
}

func newEnv(t *testing.T) *env {
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e := &env{t: t, m: m, markers: &localMarkers{m: m}}
	e.nowMs.Store(time.Now().UnixMilli())
	e.nextPID.Store(1000)
	for _, st := range []replica.PartitionState{
		{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: PartitionFor("tx-a", DefaultNumPartitions)},
			TopicID: [16]byte{9}, Leader: 1, LeaderEpoch: 5, Replicas: []int32{1}, ISR: []int32{1}},
		{TopicPartition: replica.TopicPartition{Topic: "orders", Partition: 0}, TopicID: [16]byte{8}, Leader: 1, LeaderEpoch: 1,
			Replicas: []int32{1}, ISR: []int32{1}},
	} {
		if err := m.Apply(st); err != nil {
			t.Fatal(err)
		}
	}
	e.orders, _ = m.Partition(replica.TopicPartition{Topic: "orders", Partition: 0})
	return e
}

func (e *env) coordinator() *Coordinator {
	c, err := New(Config{BrokerID: 1, Replicas: e.m, Markers: e.markers, NowMs: e.nowMs.Load,
		ProducerIDs: func(context.Context) (int64, error) { return e.nextPID.Add(1) - 1, nil }})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	c.Tick(e.nowMs.Load())
	return c
}

// produce appends a transactional batch of the producer to orders-0, with
// the coordinator's word on whether the partition is in its transaction.
func (e *env) produce(c *Coordinator, pid int64, epoch int16, seq int32) error {
	raw := storage.EncodeBatch(0, -1, e.nowMs.Load(), false, []storage.Record{{Value: []byte("x")}}).Raw
	binary.BigEndian.PutUint16(raw[21:], 0x10)
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	_, err := e.orders.AppendAsLeader(raw, replica.AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 1, LogAppendTimeMs: -1,
		VerifyTxn: func(p int64, ep int16) error {
			m, kerrv := c.Describe("tx-a")
			if kerrv != nil {
				return kerrv
			}
			if _, in := m.Partitions[TopicPartition{"orders", 0}]; m.ProducerID != p || m.ProducerEpoch != ep || m.State != Ongoing || !in {
				return errors.New("partition not in the producer's transaction")
			}
			return nil
		}})
	return err
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func state(c *Coordinator) State {
	m, err := c.Describe("tx-a")
	if err != nil {
		return Dead
	}
	return m.State
}

// A transactional producer against the coordinator and a real partition:
// init, a batch refused before its partition was added, commit (markers
// written, the LSO released), abort (the aborted index), a coordinator
// reload from __transaction_state that keeps the state, fencing by a new
// producer instance, and a timed-out transaction aborted with its producer
// fenced.
func TestCoordinatorCommitAbortReloadTimeout(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	pid, epoch, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || pid != 1000 || epoch != 0 {
		t.Fatalf("init: %d %d %v", pid, epoch, err)
	}
	if err := e.produce(c, pid, epoch, 0); !errors.Is(err, replica.ErrTransactionsUnsupported) {
		t.Fatalf("a batch before AddPartitions: %v", err)
	}
	orders := []TopicPartition{{"orders", 0}}
	if err := c.AddPartitions(context.Background(), "tx-a", pid, epoch, orders); err != nil {
		t.Fatal(err)
	}
	if err := e.produce(c, pid, epoch, 0); err != nil {
		t.Fatal(err)
	}
	if lso := e.orders.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d with the transaction open", lso)
	}
	if err := c.EndTxn(context.Background(), "tx-a", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	e.eventually("the commit completes", func() bool { return state(c) == CompleteCommit })
	if lso, hw := e.orders.LastStableOffset(), e.orders.HighWatermark(); lso != 2 || hw != 2 {
		t.Fatalf("after the commit: lso %d hw %d, want 2 (batch and marker)", lso, hw)
	}
	// The second transaction is aborted.
	if err := c.AddPartitions(context.Background(), "tx-a", pid, epoch, orders); err != nil {
		t.Fatal(err)
	}
	if err := e.produce(c, pid, epoch, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(context.Background(), "tx-a", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	e.eventually("the abort completes", func() bool { return state(c) == CompleteAbort })
	rr, rerr := e.orders.ReadAsLeaderIsolated(0, 1<<20, -1, true)
	if rerr != nil || len(rr.AbortedTxns) != 1 || rr.AbortedTxns[0].ProducerID != pid || rr.AbortedTxns[0].FirstOffset != 2 {
		t.Fatalf("read_committed after the abort: %+v %v", rr.AbortedTxns, rerr)
	}
	if e.markers.sent[0].CoordinatorEpoch != 5 {
		t.Fatalf("markers sent at coordinator epoch %d, want the partition's leader epoch 5", e.markers.sent[0].CoordinatorEpoch)
	}
	// The coordinator moves (here: a new one over the same log).
	c.Close()
	c = e.coordinator()
	if m, err := c.Describe("tx-a"); err != nil || m.State != CompleteAbort || m.ProducerID != pid || m.ProducerEpoch != epoch {
		t.Fatalf("reloaded: %+v %v", m, err)
	}
	// A new instance of the producer fences the old one.
	pid2, epoch2, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || pid2 != pid || epoch2 != 1 {
		t.Fatalf("second init: %d %d %v", pid2, epoch2, err)
	}
	if err := c.AddPartitions(context.Background(), "tx-a", pid, epoch, orders); err != kerr.ProducerFenced {
		t.Fatalf("the old instance: %v", err)
	}
	if err := c.AddPartitions(context.Background(), "tx-a", pid2, epoch2, orders); err != nil {
		t.Fatal(err)
	}
	if err := e.produce(c, pid2, epoch2, 0); err != nil {
		t.Fatal(err)
	}
	// The producer goes silent past its 1 s timeout: the coordinator
	// aborts at epoch 2, so its late batches are fenced at the partition.
	e.nowMs.Add(1001)
	c.Tick(e.nowMs.Load())
	e.eventually("the timed-out transaction is aborted", func() bool { return state(c) == CompleteAbort })
	if m, _ := c.Describe("tx-a"); m.ProducerEpoch != 2 {
		t.Fatalf("epoch %d after the timeout, want 2", m.ProducerEpoch)
	}
	if lso, hw := e.orders.LastStableOffset(), e.orders.HighWatermark(); lso != hw {
		t.Fatalf("lso %d hw %d: the timed-out transaction still holds consumers", lso, hw)
	}
	if err := e.produce(c, pid2, epoch2, 1); !errors.Is(err, replica.ErrInvalidProducerEpoch) {
		t.Fatalf("the timed-out producer's late batch: %v", err)
	}
}

// Markers that cannot be written keep the transaction prepared (requests
// are CONCURRENT_TRANSACTIONS); ticks retry them, also after the
// coordinator reloaded its partition, until the transaction completes.
func TestCoordinatorRetriesMarkers(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	pid, epoch, _ := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1})
	if err := c.AddPartitions(context.Background(), "tx-a", pid, epoch, []TopicPartition{{"orders", 0}}); err != nil {
		t.Fatal(err)
	}
	if err := e.produce(c, pid, epoch, 0); err != nil {
		t.Fatal(err)
	}
	e.markers.fail.Store(true)
	if err := c.EndTxn(context.Background(), "tx-a", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(context.Background(), "tx-a", pid, epoch, true); err != kerr.ConcurrentTransactions {
		t.Fatalf("commit retried while the markers fail: %v", err)
	}
	if _, _, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1}); err != kerr.ConcurrentTransactions {
		t.Fatalf("init while committing: %v", err)
	}
	c.Close()
	c = e.coordinator() // reloaded in PrepareCommit
	if s := state(c); s != PrepareCommit {
		t.Fatalf("reloaded in %s", s)
	}
	e.markers.fail.Store(false)
	e.eventually("the commit completes after a tick", func() bool {
		c.Tick(e.nowMs.Load())
		return state(c) == CompleteCommit
	})
	if lso := e.orders.LastStableOffset(); lso != 2 {
		t.Fatalf("lso %d after the retried commit", lso)
	}
}

// Requests for an id whose partition this broker does not lead are
// NOT_COORDINATOR; unknown ids and bad timeouts are refused.
func TestCoordinatorErrors(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	other := "tx-b"
	for PartitionFor(other, DefaultNumPartitions) == PartitionFor("tx-a", DefaultNumPartitions) {
		other += "x"
	}
	if _, _, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: other, TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); err != kerr.NotCoordinator {
		t.Fatalf("an id led elsewhere: %v", err)
	}
	if err := c.EndTxn(context.Background(), "tx-a", 1, 0, true); err != kerr.InvalidProducerIDMapping {
		t.Fatalf("EndTxn for an unknown id: %v", err)
	}
	if _, _, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: DefaultMaxTimeoutMs + 1, ProducerID: -1, ProducerEpoch: -1}); err != kerr.InvalidTransactionTimeout {
		t.Fatalf("timeout above the max: %v", err)
	}
	// Java: "abc".hashCode() == 96354; "polygenelubricants".hashCode() ==
	// Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0; a character
	// outside the BMP hashes as its two UTF-16 code units.
	for _, tc := range []struct {
		id   string
		n    int32
		want int32
	}{{"", 50, 0}, {"abc", 1 << 30, 96354}, {"polygenelubricants", 50, 0}, {"😀", 1 << 30, 31*0xD83D + 0xDE00}} {
		if got := PartitionFor(tc.id, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}

// A partition whose high watermark trails its log end when this broker
// comes to lead it is not loaded yet; a later tick loads it once it caught
// up, and only then goes on with its transactions (here: aborting one past
// its timeout), with no request needed.
func TestCoordinatorLoadsWhenCaughtUp(t *testing.T) {
	e := newEnv(t)
	tp := replica.TopicPartition{Topic: Topic, Partition: PartitionFor("tx-a", DefaultNumPartitions)}
	st := replica.PartitionState{TopicPartition: tp, TopicID: [16]byte{9}, Leader: 1, LeaderEpoch: 6, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := e.m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ := e.m.Partition(tp)
	old := &Metadata{TransactionalID: "tx-a", ProducerID: 77, ProducerEpoch: 0, TimeoutMs: 1000, State: Ongoing,
		Partitions: map[TopicPartition]struct{}{{"orders", 0}: {}}, LastUpdateMs: 1, StartMs: e.nowMs.Load() - 5000}
	b := storage.EncodeBatch(0, 0, e.nowMs.Load(), false, []storage.Record{{Key: EncodeKey("tx-a"), Value: EncodeValue(old)}})
	if _, err := p.AppendAsLeader(b.Raw, replica.AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 0 {
		t.Fatalf("hw %d: the record should wait for broker 2", p.HighWatermark())
	}
	c := e.coordinator() // ticks once: not loaded
	st.ISR, st.PartitionEpoch = []int32{1}, 2
	if err := e.m.Apply(st); err != nil { // broker 2 leaves the ISR: the record commits
		t.Fatal(err)
	}
	if p.HighWatermark() != 1 {
		t.Fatalf("hw %d after the ISR shrank", p.HighWatermark())
	}
	e.eventually("the timed-out transaction's abort markers", func() bool {
		c.Tick(e.nowMs.Load())
		e.markers.mu.Lock()
		defer e.markers.mu.Unlock()
		return len(e.markers.sent) == 1 && !e.markers.sent[0].Commit && e.markers.sent[0].ProducerEpoch == 1
	})
}

// A transactional id idle for transactional.id.expiration.ms with no
// transaction in flight is deleted: a tombstone, so a reloaded coordinator
// does not bring it back; the next InitProducerId gets a new producer id.
func TestCoordinatorExpiresIdleIDs(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	pid, _, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(e.nowMs.Load() + DefaultIDExpirationMs - 1)
	if _, err := c.Describe("tx-a"); err != nil {
		t.Fatalf("expired early: %v", err)
	}
	e.eventually("the idle id expires", func() bool {
		c.Tick(e.nowMs.Load() + DefaultIDExpirationMs)
		_, err := c.Describe("tx-a")
		return err == kerr.TransactionalIDNotFound
	})
	c.Close()
	c = e.coordinator()
	if _, err := c.Describe("tx-a"); err != kerr.TransactionalIDNotFound {
		t.Fatalf("reloaded after the tombstone: %v", err)
	}
	pid2, epoch2, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || pid2 == pid || epoch2 != 0 {
		t.Fatalf("init after expiry: %d %d %v (old producer id %d)", pid2, epoch2, err, pid)
	}
}

// A client that hangs up while its write waits for the ISR does not undo
// the write: the record commits in __transaction_state once the ISR shrinks,
// and the coordinator's memory follows it (before: the wait gave up with the
// client's context, COORDINATOR_NOT_AVAILABLE, and the id stayed Empty in
// memory while the log said Ongoing).
func TestWriteOutlivesTheClient(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	pid, epoch, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	tp := replica.TopicPartition{Topic: Topic, Partition: PartitionFor("tx-a", DefaultNumPartitions)}
	st := replica.PartitionState{TopicPartition: tp, TopicID: [16]byte{9}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := e.m.Apply(st); err != nil { // broker 2 never fetches: the high watermark stalls
		t.Fatal(err)
	}
	p, _ := e.m.Partition(tp)
	end := p.Log().EndOffset()
	gone, hangUp := context.WithCancel(context.Background())
	done := make(chan *kerr.Error, 1)
	go func() { done <- c.AddPartitions(gone, "tx-a", pid, epoch, []TopicPartition{{"orders", 0}}) }()
	e.eventually("the Ongoing record is appended", func() bool { return p.Log().EndOffset() > end })
	hangUp()
	st.ISR, st.PartitionEpoch = []int32{1}, 2
	if err := e.m.Apply(st); err != nil { // broker 2 leaves the ISR: the record commits
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AddPartitions of a client that hung up: %v", err)
	}
	if m, err := c.Describe("tx-a"); err != nil || m.State != Ongoing {
		t.Fatalf("in memory after the record committed: %+v %v, want Ongoing", m, err)
	}
}

// InitProducerId of a new transactional id fetches its producer id (a
// controller round trip) without the coordinator's lock: other ids are
// served meanwhile, and the id gets the fetched producer id.
func TestProducerIDFetchDoesNotBlockOthers(t *testing.T) {
	e := newEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	c, err := New(Config{BrokerID: 1, Replicas: e.m, Markers: e.markers, NowMs: e.nowMs.Load,
		ProducerIDs: func(context.Context) (int64, error) {
			close(entered)
			<-release
			return 4242, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.Tick(e.nowMs.Load())
	type init struct {
		pid   int64
		epoch int16
		err   *kerr.Error
	}
	first := make(chan init, 1)
	go func() {
		pid, epoch, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: "tx-a", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1})
		first <- init{pid, epoch, err}
	}()
	<-entered
	other := make(chan *kerr.Error, 1)
	go func() {
		_, err := c.Describe("tx-b")
		other <- err
	}()
	select {
	case err := <-other:
		if err != kerr.NotCoordinator {
			t.Errorf("another id while a producer id is fetched: %v, want NOT_COORDINATOR (its partition is led elsewhere)", err)
		}
	case <-time.After(2 * time.Second): // a bound on a failure, not a readiness wait
		t.Errorf("another id waited for the producer id fetch")
	}
	close(release)
	if r := <-first; r.err != nil || r.pid != 4242 || r.epoch != 0 {
		t.Fatalf("init: %+v", r)
	}
	if m, err := c.Describe("tx-a"); err != nil || m.ProducerID != 4242 || m.State != Empty {
		t.Fatalf("after init: %+v %v", m, err)
	}
}

// Once __transaction_state exists its partition count decides the
// partition of a transactional id, not transaction.state.log.num.partitions
// (Kafka's partitionFor): a broker set to 3 whose topic has 5 partitions
// serves an id of partition 4 (NOT_COORDINATOR before: it looked at the
// partition the setting names, which it does not lead), and its ticks follow
// partition 4 too.
func TestTopicPartitionCountDecides(t *testing.T) {
	e := newEnv(t)
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("id-%d", i); PartitionFor(cand, 5) == 4 {
			id = cand
		}
	}
	if err := e.m.Apply(replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: 4}, TopicID: [16]byte{9},
		Leader: 1, LeaderEpoch: 2, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{BrokerID: 1, Replicas: e.m, Markers: e.markers, NowMs: e.nowMs.Load, NumPartitions: 3,
		TopicPartitions: func() int32 { return 5 },
		ProducerIDs:     func(context.Context) (int64, error) { return e.nextPID.Add(1) - 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if got := c.PartitionFor(id); got != 4 {
		t.Fatalf("partition %d, want 4", got)
	}
	c.Tick(e.nowMs.Load())
	c.mu.Lock()
	sh := c.shards[4]
	c.mu.Unlock()
	if sh == nil || !sh.loaded {
		t.Fatalf("a tick did not load partition 4: %+v", sh)
	}
	if _, _, err := c.InitProducerID(context.Background(), InitRequest{TransactionalID: id, TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
}

// TestTickIgnoresOtherPartitions: a Tick follows the leadership of
// __transaction_state without listing every partition the broker hosts
// (issue 17; see the group coordinator's test of the same name): with 300
// partitions of another topic hosted it allocates about what it does
// without them (their sorted list, 7 KB, before).
func TestTickIgnoresOtherPartitions(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator()
	tickBytes := func() uint64 {
		const ticks = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range ticks {
			c.Tick(e.nowMs.Load())
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / ticks
	}
	base := tickBytes()
	states := make([]replica.PartitionState, 300)
	for i := range states {
		states[i] = replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: "other", Partition: int32(i)},
			TopicID: [16]byte{7}, Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}}
	}
	if err := e.m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	if with := tickBytes(); with > base+2048 {
		t.Fatalf("a Tick allocates %d bytes with 300 other partitions hosted, %d without", with, base)
	}
	c.mu.Lock()
	loaded := len(c.shards)
	c.mu.Unlock()
	if loaded != 1 {
		t.Fatalf("%d shards loaded, want the one partition of %s led here", loaded, Topic)
	}
}
