package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupOverrides are the settings of the group and transaction process
// tests, for every broker of both modes: Kafka's replication of the
// internal topics (RF 3, __transaction_state min ISR 2, spelled out so the
// test does not lean on the defaults) and a short initial rebalance delay
// (Kafka's is 3000 ms).
var groupOverrides = []string{
	"offsets.topic.replication.factor=3",
	"transaction.state.log.replication.factor=3",
	"transaction.state.log.min.isr=2",
	"group.initial.rebalance.delay.ms=200",
}

// startGroupCluster starts mode's cluster (KRaft: 3 controllers and 3
// brokers; zk-legacy: a ZooKeeper and 3 brokers) with groupOverrides and the
// process tests' short timeouts, then the overrides more (key=value, later
// ones win), and waits for every broker to be listed.
func startGroupCluster(t testing.TB, bin string, mode faultMode, more ...string) faultCluster {
	t.Helper()
	overrides := append(slices.Clone(groupOverrides), more...)
	to := faultTimeouts{sessionMs: procSessionMs, zkSessionMs: zkShortSessionMs,
		overrides: overrides, zkOverrides: overrides}
	c := mode.start(t, bin, to)
	waitBrokers(t, c)
	return c
}

// adminOf is a kadm client on c's running brokers; closed with the test.
func adminOf(t testing.TB, c faultCluster, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createRF3 creates topic with parts partitions, RF 3 and min.insync.replicas
// 2, and waits until every ISR is whole.
func createRF3(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, parts int32) {
	t.Helper()
	two := "2"
	if r, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": &two}, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	eventually(t, topic+" with 3 replicas in every ISR", 30*time.Second, func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil || len(td[topic].Partitions) != int(parts) {
			return false
		}
		for _, p := range td[topic].Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// produceValues writes values to topic (idempotent, acks=-1), spread over
// its partitions, in batches of at most 10 records (a fetch returns whole
// batches: small ones keep a consume-transform-produce loop's transactions
// small).
func produceValues(t *testing.T, ctx context.Context, c faultCluster, topic string, values []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for chunk := range slices.Chunk(values, 10) {
		recs := make([]*kgo.Record, len(chunk))
		for i, v := range chunk {
			recs[i] = &kgo.Record{Value: []byte(v)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// readCommitted reads topic from the start with read_committed until it has
// read want records, then a second longer for anything past them (a
// duplicate), and returns how often each value was read.
func readCommitted(t *testing.T, ctx context.Context, c faultCluster, topic string, want int) (map[string]int, int) {
	t.Helper()
	out, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	seen := map[string]int{}
	total := 0
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	for total < want && rctx.Err() == nil {
		out.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	for sctx.Err() == nil {
		out.PollFetches(sctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	return seen, total
}

// groupCaughtUp is nil once group's committed offsets of topic are topic's
// end offsets on every partition, or says what differs.
func groupCaughtUp(ctx context.Context, adm *kadm.Client, group, topic string) error {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return err
	}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		got, found := resp.Lookup(topic, o.Partition)
		if o.Err != nil || (found || o.Offset > 0) && got.At != o.Offset {
			errs = append(errs, fmt.Errorf("%s[%d]: end %d (%v), committed %d (%v)", topic, o.Partition, o.Offset, o.Err, got.At, found))
		}
	})
	return errors.Join(errs...)
}

// TestProcessGroupTransactSessionKill is issue 16's exactly-once promise
// under a broker crash, in both modes, every node its own process: 3
// brokers, input and output topics of 3 partitions with RF 3 and
// min.insync.replicas 2, __consumer_offsets and __transaction_state RF 3.
// franz-go's GroupTransactSession runs the consume-transform-produce loop
// (TxnOffsetCommit in every transaction) over 600 input records; a third of
// the way in, the broker coordinating its transactional id is killed with
// SIGKILL (it leads partitions of the topics and of the internal topics
// too). A transaction that fails is aborted or, if the session cannot go on,
// the session is started again with the same transactional id and group.
// The output topic read read_committed holds every input record exactly
// once.
//
//	go test ./cmd/kraftd -run TestProcessGroupTransactSessionKill -v
func TestProcessGroupTransactSessionKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			c := startGroupCluster(t, bin, mode)
			groupTransactSessionKill(t, c, mode)
		})
	}
}

func groupTransactSessionKill(t *testing.T, c faultCluster, mode faultMode) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := adminOf(t, c)
	createRF3(t, ctx, adm, "eos-in", 3)
	createRF3(t, ctx, adm, "eos-out", 3)
	const n = 600
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("r%03d", i)
	}
	produceValues(t, ctx, c, "eos-in", values)

	newSession := func() *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("eos-tx"),
			kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("eos-in"), kgo.DefaultProduceTopic("eos-out"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionTimeout(10*time.Second),
			kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.MetadataMinAge(50*time.Millisecond), kgo.FetchMaxPartitionBytes(200), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSession()
	defer func() { s.Close() }()
	done, aborted, restarts, victim := 0, 0, 0, -1
	var killedAt time.Time
	var lag error
	for {
		if ctx.Err() != nil {
			t.Fatalf("after %d records committed: %v (group: %v)", done, ctx.Err(), lag)
		}
		if victim < 0 && done >= n/3 {
			var err error
			if victim, err = txnCoordinator(ctx, adm, "eos-tx"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d records committed; kill -9 of broker %d, the coordinator of eos-tx", done, victim)
			killedAt = time.Now()
			if err := c.stop(victim, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			adm = adminOf(t, c) // seeds without the dead broker
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := s.PollFetches(pctx)
		pcancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, &kgo.Record{Value: append([]byte("out-"), r.Value...)})
		})
		if len(recs) == 0 {
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			lag = groupCaughtUp(cctx, adm, "eos", "eos-in")
			ccancel()
			if lag == nil {
				break
			}
			continue
		}
		if err := s.Begin(); err != nil {
			// A producer ID failed by a fatal error (franz-go fails
			// AddPartitionsToTxn with "unknown broker" when a metadata
			// refresh drops the dead coordinator between its
			// coordinator-cache check and the send, and that is
			// fatal): the session cannot go on, so a new one with the
			// same transactional id fences it. The records it
			// polled were not committed and are fetched again.
			t.Logf("Begin after %d records: %v; starting the session again", done, err)
			restarts++
			s.Close()
			s = newSession()
			continue
		}
		var produceErr error
		for _, r := range recs {
			s.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil && produceErr == nil {
					produceErr = err
				}
			})
		}
		if err := s.Client().Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		try := kgo.TryCommit
		if produceErr != nil {
			t.Logf("produce failed (%v): aborting", produceErr)
			try = kgo.TryAbort
		}
		committed, err := s.End(ctx, try)
		switch {
		case err != nil:
			// The session's producer may be unusable (fenced after
			// its transaction timed out, or in a failed state): a
			// new session with the same transactional id fences the
			// old epoch and aborts whatever it left open.
			t.Logf("End after %d records: %v; starting the session again", done, err)
			restarts++
			s.Close()
			s = newSession()
		case committed:
			done += len(recs)
		default:
			aborted++
		}
	}
	t.Logf("%s: consumed %d records in committed transactions (%d aborted, %d session restarts); caught up %v after the kill",
		mode.name, done, aborted, restarts, time.Since(killedAt).Round(time.Millisecond))
	if victim < 0 {
		t.Fatal("the loop finished before the kill")
	}
	seen, total := readCommitted(t, ctx, c, "eos-out", n)
	for _, v := range values {
		if seen["out-"+v] != 1 {
			t.Errorf("out-%s read %d times", v, seen["out-"+v])
		}
	}
	if total != n {
		t.Fatalf("read %d output records read_committed, want %d, each once", total, n)
	}
}

// txnCoordinator is the broker FindCoordinator names for transactional id.
func txnCoordinator(ctx context.Context, adm *kadm.Client, id string) (int, error) {
	var last error
	for range 50 {
		for _, f := range adm.FindTxnCoordinators(ctx, id) {
			if f.Err == nil && f.Name == id {
				return int(f.NodeID), nil
			}
			last = f.Err
		}
		<-time.After(100 * time.Millisecond)
	}
	return -1, fmt.Errorf("no coordinator for %s: %w", id, last)
}

// groupCoordinatorOf is the broker FindCoordinator names for group.
func groupCoordinatorOf(ctx context.Context, adm *kadm.Client, group string) (int, error) {
	for _, f := range adm.FindGroupCoordinators(ctx, group) {
		if f.Name == group {
			if f.Err != nil {
				return -1, f.Err
			}
			return int(f.NodeID), nil
		}
	}
	return -1, errors.New("no FindCoordinator answer")
}

// groupMember is one kgo member of a consumer group polling on its own
// goroutine and committing by hand after every poll; it records every value
// it read and the offsets of its last acknowledged commit.
type groupMember struct {
	cl   *kgo.Client
	done chan struct{}
	mu   sync.Mutex
	seen map[string]int
	// acked is, per partition, the highest offset a commit of this
	// member was acknowledged for.
	acked map[int32]int64
	// log holds the client's own log (info and above), printed when the
	// test fails: why a member rejoined is in there.
	log lockedBuffer
	// manageErrs are the errors that ended this client's group session
	// (kgo's HookGroupManageError): after one, the client rejoins on its
	// own, and a rejoin with its owned partitions dropped rebalances the
	// group whatever the coordinator did.
	manageErrs []error
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (m *groupMember) OnGroupManageError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.manageErrs = append(m.manageErrs, err)
}

// dialGiveUps counts the session-ending errors that were a failed dial:
// kgo ends a session when the FindCoordinator it sends after a heartbeat's
// failed dial also reaches the dead broker (through its seed entry, for
// one), so a member may rejoin after a coordinator's kill -9 on Apache
// Kafka too.
func (m *groupMember) dialGiveUps() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, err := range m.manageErrs {
		if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
			n++
		}
	}
	return n
}

// lockedBuffer is a bytes.Buffer that kgo's logger and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// groupSessionTimeout is the members' session.timeout.ms. A coordinator move
// after kill -9 takes up to about 4 s in zk-legacy (ZooKeeper's session expiry,
// then LeaderAndIsr and the group's load), longer on a loaded machine; members
// that cannot heartbeat for a whole session rejoin, and the test would then see a
// rebalance that a coordinator move does not cause. Kafka's default is 45 s.
const groupSessionTimeout = 15 * time.Second

func startGroupMember(t *testing.T, ctx context.Context, c faultCluster, group, topic string) *groupMember {
	t.Helper()
	m := &groupMember{done: make(chan struct{}), seen: map[string]int{}, acked: map[int32]int64{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryTimeout(30*time.Second),
		kgo.WithLogger(kgo.BasicLogger(&m.log, kgo.LogLevelInfo, func() string { return time.Now().UTC().Format("15:04:05.000 ") })),
		kgo.WithHooks(m))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(func() {
		if t.Failed() {
			id, gen := cl.GroupMetadata()
			t.Logf("group member %s (generation %d) client log:\n%s", id, gen, m.log.String())
		}
	})
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
			m.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { m.seen[string(r.Value)]++ })
			m.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cl.CommitUncommittedOffsets(cctx)
			cancel()
			// CommittedOffsets holds what the coordinator acknowledged.
			m.mu.Lock()
			for _, parts := range cl.CommittedOffsets() {
				for p, o := range parts {
					m.acked[p] = max(m.acked[p], o.Offset)
				}
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// close leaves the group (LeaveGroup) and waits for the poll loop.
func (m *groupMember) close() {
	m.cl.Close()
	<-m.done
}

// waitStable waits until group is Stable with members members holding
// every partition of topic (parts) exactly once, and returns the time it
// took and the members' ids.
func waitStable(t *testing.T, ctx context.Context, c faultCluster, group, topic string, members int, parts int32) (time.Duration, []string) {
	t.Helper()
	start := time.Now()
	var ids []string
	eventually(t, fmt.Sprintf("%s Stable with %d members holding %d partitions", group, members, parts), 60*time.Second, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		described, err := adminOf(t, c).DescribeGroups(cctx, group)
		if err != nil {
			return false
		}
		g := described[group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != members {
			return false
		}
		ids = ids[:0]
		var held []int32
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			for _, tp := range ca.Topics {
				if tp.Topic == topic {
					held = append(held, tp.Partitions...)
				}
			}
			ids = append(ids, m.MemberID)
		}
		slices.Sort(held)
		slices.Sort(ids)
		return slices.Equal(held, slices.Collect(func(yield func(int32) bool) {
			for p := range parts {
				if !yield(p) {
					return
				}
			}
		}))
	})
	return time.Since(start), ids
}

// TestProcessGroupCoordinatorMoves is issue 16's coordinator-move promise
// with every node its own process, in both modes (zk-legacy: the
// coordinator's broker is found dead by its ZooKeeper session and
// __consumer_offsets is led again as LeaderAndIsr says): 3 kgo members of
// one group share 6 partitions (RF 3) and commit after every poll; the
// group's coordinator is killed with SIGKILL, then, restarted, the next
// coordinator is stopped with SIGTERM (controlled shutdown). After each
// move the new coordinator serves committed offsets at or past every
// commit a member had acknowledged, every member keeps its member id and
// generation (no rebalance) and the group consumes on; then one member
// leaves and the other two rebalance to hold all 6 partitions. Every
// produced record was read. Then a transactional producer writes
// transactions spanning a topic's 3 partitions, led by 3 brokers,
// committed and aborted alternately: read_committed reads exactly the
// committed ones, read_uncommitted all of them.
//
//	go test ./cmd/kraftd -run TestProcessGroupCoordinatorMoves -v
func TestProcessGroupCoordinatorMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			c := startGroupCluster(t, bin, mode)
			groupCoordinatorMoves(t, c, mode)
			transactionsSpanningBrokers(t, c)
		})
	}
}

var groupsLong = flag.Bool("groups.long", false, "run the long group process tests (make groups-faults)")

// TestProcessGroupCoordinatorMovesSarama is the coordinator move for a
// sarama consumer group, in both modes (saramaThroughCoordinatorMove). It
// takes about 40 s a mode, most of it sarama dialing the dead coordinator
// before it asks FindCoordinator again, so it runs only with -groups.long:
//
//	make groups-faults
func TestProcessGroupCoordinatorMovesSarama(t *testing.T) {
	if testing.Short() || !*groupsLong {
		t.Skip("long multi-process test: -groups.long (make groups-faults)")
	}
	bin := buildBinary(t)
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			saramaThroughCoordinatorMove(t, startGroupCluster(t, bin, mode))
		})
	}
}

func groupCoordinatorMoves(t *testing.T, c faultCluster, mode faultMode) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := adminOf(t, c)
	createRF3(t, ctx, adm, "moves", 6)
	var values []string
	produce := func(n int) {
		t.Helper()
		more := make([]string, n)
		for i := range more {
			more[i] = fmt.Sprintf("m%04d", len(values)+i)
		}
		produceValues(t, ctx, c, "moves", more)
		values = append(values, more...)
	}
	produce(300)

	var members []*groupMember
	defer func() {
		for _, m := range members {
			m.close()
		}
	}()
	for range 3 {
		members = append(members, startGroupMember(t, ctx, c, "movers", "moves"))
	}
	took, ids := waitStable(t, ctx, c, "movers", "moves", 3, 6)
	t.Logf("%s: 3 members Stable with 6 partitions %v after they started (group.initial.rebalance.delay.ms 200, session.timeout.ms %d, heartbeat.interval.ms 300)", mode.name, took.Round(time.Millisecond), groupSessionTimeout.Milliseconds())
	caughtUp := func(what string) {
		t.Helper()
		var lag error
		eventually(t, what, 60*time.Second, func() bool {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			lag = groupCaughtUp(cctx, adminOf(t, c), "movers", "moves")
			return lag == nil
		})
	}
	caughtUp("the members to commit the first 300 records")
	type gm struct {
		id  string
		gen int32
	}
	var before []gm
	for _, m := range members {
		id, gen := m.cl.GroupMetadata()
		before = append(before, gm{id, gen})
	}

	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		coordinator, err := groupCoordinatorOf(ctx, adminOf(t, c), "movers")
		if err != nil {
			t.Fatal(err)
		}
		acked := map[int32]int64{}
		for _, m := range members {
			m.mu.Lock()
			for p, o := range m.acked {
				acked[p] = max(acked[p], o)
			}
			m.mu.Unlock()
		}
		givenUpBefore := map[*groupMember]int{}
		for _, m := range members {
			givenUpBefore[m] = m.dialGiveUps()
		}
		stoppedAt := time.Now()
		if err := c.stop(coordinator, sig); err != nil {
			t.Fatal(err)
		}
		// The new coordinator serves the offsets: fresh clients, as kgo
		// caches a coordinator while dials to it fail.
		var served time.Duration
		eventually(t, "a new coordinator to serve the group's offsets", 60*time.Second, func() bool {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			fadm := adminOf(t, c)
			if id, err := groupCoordinatorOf(cctx, fadm, "movers"); err != nil || id == coordinator {
				return false
			}
			resp, err := fadm.FetchOffsets(cctx, "movers")
			if err != nil || resp.Error() != nil {
				return false
			}
			served = time.Since(stoppedAt)
			for p, o := range acked {
				got, ok := resp.Lookup("moves", p)
				if !ok || got.At < o {
					t.Fatalf("after %v of broker %d: partition %d committed %d (%v), a member's commit of %d was acknowledged", sig, coordinator, p, got.At, ok, o)
				}
			}
			return true
		})
		produce(300)
		caughtUp(fmt.Sprintf("the members to commit through the new coordinator after %v", sig))
		t.Logf("%s: %v of coordinator %d: offsets served by the new coordinator after %v; members caught up with 300 more records %v after the stop",
			mode.name, sig, coordinator, served.Round(time.Millisecond), time.Since(stoppedAt).Round(time.Millisecond))
		// The coordinator's move must not rebalance the group: members keep
		// their generation. The one exception is a client that gave up on
		// a dial to the dead broker and rejoined by itself (see
		// dialGiveUps); its rejoin rebalances, as it would on Kafka.
		giveUps := 0
		for _, m := range members {
			giveUps += m.dialGiveUps() - givenUpBefore[m]
		}
		rebalanced := false
		for i, m := range members {
			if id, gen := m.cl.GroupMetadata(); id != before[i].id || gen != before[i].gen {
				if giveUps == 0 {
					t.Fatalf("after %v of coordinator %d member %d is %s generation %d, was %s generation %d: the group rebalanced, and no member's session ended on a failed dial",
						sig, coordinator, i, id, gen, before[i].id, before[i].gen)
				}
				rebalanced = true
			}
		}
		if _, now := waitStable(t, ctx, c, "movers", "moves", 3, 6); !slices.Equal(now, ids) {
			t.Fatalf("members %v after the move, %v before", now, ids)
		}
		if rebalanced {
			t.Logf("%s: the group rebalanced after the %v: %d member session(s) ended on a failed dial to the dead broker (a client-side rejoin)", mode.name, sig, giveUps)
			caughtUp("the members to commit after their rejoin")
			before = before[:0]
			for _, m := range members {
				id, gen := m.cl.GroupMetadata()
				before = append(before, gm{id, gen})
			}
		}
		c.restart(coordinator)
		waitBrokers(t, c)
	}

	leaver := members[2]
	members = members[:2]
	leaver.close()
	took, _ = waitStable(t, ctx, c, "movers", "moves", 2, 6)
	t.Logf("%s: 2 members Stable with 6 partitions %v after the third left", mode.name, took.Round(time.Millisecond))
	produce(60)
	caughtUp("the two members to commit the last 60 records")
	seen := map[string]int{}
	for _, m := range append(members, leaver) {
		m.mu.Lock()
		for v, n := range m.seen {
			seen[v] += n
		}
		m.mu.Unlock()
	}
	for _, v := range values {
		if seen[v] == 0 {
			t.Errorf("%s was never read", v)
		}
	}
}

// transactionsSpanningBrokers: a transactional producer writes 10
// transactions of one record to each of 3 partitions led by 3 brokers,
// committing the even ones and aborting the odd ones; read_committed reads
// exactly the committed records, read_uncommitted all of them.
func transactionsSpanningBrokers(t *testing.T, c faultCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := adminOf(t, c)
	createRF3(t, ctx, adm, "spanning", 3)
	// createRF3 saw the ISRs through one broker; in zk-legacy the others
	// learn the topic from UpdateMetadata, one broker at a time.
	leaders := map[int32]bool{}
	for p := range int32(3) {
		var err error
		eventually(t, fmt.Sprintf("the first broker to serve spanning-%d's leader", p), 30*time.Second, func() bool {
			var l int
			l, err = c.partitionLeader("spanning", p)
			if err == nil {
				leaders[int32(l)] = true
			}
			return err == nil
		})
	}
	if len(leaders) != 3 {
		t.Logf("spanning's 3 partitions are led by %d brokers only", len(leaders))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("spanning-tx"),
		kgo.DefaultProduceTopic("spanning"), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]bool{}
	for i := range 10 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			v := fmt.Sprintf("t%02d-p%d", i, p)
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want[v] = i%2 == 0
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(i%2 == 0)); err != nil {
			t.Fatalf("EndTransaction %d: %v", i, err)
		}
	}
	seen, total := readCommitted(t, ctx, c, "spanning", 15)
	for v, committed := range want {
		if n := seen[v]; committed && n != 1 || !committed && n != 0 {
			t.Errorf("read_committed read %s %d times (committed: %v)", v, n, committed)
		}
	}
	if total != 15 {
		t.Errorf("read_committed read %d records, want the 15 committed", total)
	}
	all, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("spanning"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	n := 0
	for n < 30 && ctx.Err() == nil {
		n += len(all.PollFetches(ctx).Records())
	}
	if n != 30 {
		t.Fatalf("read_uncommitted read %d records, want all 30", n)
	}
}

// saramaMover is a sarama consumer-group handler that marks and commits
// every message and records each session's generation.
type saramaMover struct {
	mu          sync.Mutex
	seen        map[string]int
	generations []int32
}

func (h *saramaMover) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.generations = append(h.generations, s.GenerationID())
	h.mu.Unlock()
	return nil
}
func (h *saramaMover) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaMover) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
		s.Commit()
	}
	return nil
}

// saramaThroughCoordinatorMove: a sarama consumer group (Kafka 2.8's
// protocol, sarama's default) reads and commits a topic; its coordinator's
// broker is killed with SIGKILL; the new coordinator serves offsets at or
// past what was committed before, and the group reads and commits the
// records produced after the kill. sarama rejoins after losing its
// coordinator (its session ends), so unlike kgo's members it comes back
// in the next generation; that is the client's doing.
func saramaThroughCoordinatorMove(t *testing.T, c faultCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := adminOf(t, c)
	createRF3(t, ctx, adm, "sarama-moves", 3)
	var values []string
	produce := func(n int) {
		more := make([]string, n)
		for i := range more {
			more[i] = fmt.Sprintf("s%04d", len(values)+i)
		}
		produceValues(t, ctx, c, "sarama-moves", more)
		values = append(values, more...)
	}
	produce(100)
	conf := sarama.NewConfig()
	conf.ClientID = "process-sarama"
	conf.Metadata.Retry.Backoff = 50 * time.Millisecond
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Offsets.AutoCommit.Enable = false
	conf.Consumer.Group.Session.Timeout = groupSessionTimeout
	conf.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	// sarama retries a JoinGroup to a dead coordinator every 2 s by
	// default before it asks FindCoordinator again.
	conf.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(c.bootstrap(), "sarama-movers", conf)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaMover{seen: map[string]int{}}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{"sarama-moves"}, h); err != nil && cctx.Err() == nil {
				t.Logf("sarama consume: %v", err)
				<-time.After(100 * time.Millisecond) // sarama's own retry pacing, not a readiness wait
			}
		}
	}()
	defer func() {
		stop()
		<-done
		cg.Close()
	}()
	caughtUp := func(what string) {
		t.Helper()
		eventually(t, what, 60*time.Second, func() bool {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			return groupCaughtUp(cctx, adminOf(t, c), "sarama-movers", "sarama-moves") == nil
		})
	}
	caughtUp("sarama to commit the first 100 records")
	before, err := adm.FetchOffsets(ctx, "sarama-movers")
	if err != nil {
		t.Fatal(err)
	}
	coordinator, err := groupCoordinatorOf(ctx, adm, "sarama-movers")
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := c.stop(coordinator, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	produce(100)
	caughtUp("sarama to commit through the new coordinator")
	after, err := adminOf(t, c).FetchOffsets(ctx, "sarama-movers")
	if err != nil {
		t.Fatal(err)
	}
	before.Each(func(o kadm.OffsetResponse) {
		if got, ok := after.Lookup(o.Topic, o.Partition); !ok || got.At < o.At {
			t.Errorf("%s[%d] committed %d before the kill, %d (%v) after", o.Topic, o.Partition, o.At, got.At, ok)
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("sarama: kill -9 of coordinator %d; caught up with 100 more records %v after; sessions' generations %v",
		coordinator, time.Since(killed).Round(time.Millisecond), h.generations)
	for _, v := range values {
		if h.seen[v] == 0 {
			t.Errorf("sarama never read %s", v)
		}
	}
	c.restart(coordinator)
	waitBrokers(t, c)
}
