package interop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/replica"
)

// groupOpts are the cluster settings of the group tests: a short initial
// rebalance delay keeps them fast (Kafka's default is 3000 ms).
func groupOpts(rf int) []Opt {
	return []Opt{Override("offsets.topic.replication.factor", fmt.Sprint(rf)),
		Override("group.initial.rebalance.delay.ms", "200")}
}

// groupConsumer is a kgo consumer-group member that counts what it reads and
// commits by hand.
func groupConsumer(t *testing.T, servers []string, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(servers...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// pollN polls cl until it read n records, committing what it read.
func pollN(t *testing.T, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	return pollNTolerating(t, ctx, cl, n, nil)
}

// pollNTolerating is pollN that lets the group session end once for an
// error gaveUp records (a member's own give-up, see sessionEnds).
func pollNTolerating(t *testing.T, ctx context.Context, cl *kgo.Client, n int, gaveUp *sessionEnds) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			// kgo injects the session's error as a fetch just before it
			// calls the hook: give the hook a moment.
			if gaveUp != nil && isDialErr(err) && waitUntil(5*time.Second, func() bool { return gaveUp.dialGiveUps() > 0 }) {
				t.Logf("fetch %s[%d]: %v (the member's session ended on a failed dial; it rejoins)", topic, p, err)
				return
			}
			t.Fatalf("fetch %s[%d]: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return out
}

// committed is the group's committed offsets per partition of topic, as
// kadm reads them (OffsetFetch to the coordinator).
func committed(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	out, err := tryCommitted(ctx, adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets: %w", err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil && err == nil {
			err = fmt.Errorf("fetch offsets %s[%d]: %w", o.Topic, o.Partition, o.Err)
		}
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out, err
}

// TestFranzConsumerGroupConsumesAndCommits: a kgo consumer group reads a
// topic and commits; __consumer_offsets was created on the first
// FindCoordinator; the committed offsets are the end offsets; a second
// member of the same group, started later, reads only what came after.
func TestFranzConsumerGroupConsumesAndCommits(t *testing.T) {
	t.Parallel()
	c := newCluster(t, append(groupOpts(1), Controllers(1), Brokers(1))...)
	b := c.nodes[2].Broker()
	franzGroupConsumesAndCommits(t, c, b.Image, b.Replicas())
}

// franzGroupConsumesAndCommits is the body of
// TestFranzConsumerGroupConsumesAndCommits against cluster c, whose broker
// has the metadata image img and the replica manager replicas (the KRaft
// broker's or the zk-legacy broker's).
func franzGroupConsumesAndCommits(t *testing.T, c *cluster, img func() *image.Image, replicas *replica.Manager) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, c.bootstrap(), "events", 300)
	cl := groupConsumer(t, c.bootstrap(), "readers", "events")
	checkExactlyOnceInOrder(t, pollN(t, ctx, cl, 300), 300)
	cl.Close() // leaves the group

	// __consumer_offsets came with the first FindCoordinator, as the
	// coordinator wants it: 50 partitions, compacted.
	if tt, ok := img().TopicByName("__consumer_offsets"); !ok || tt.NumPartitions() != 50 {
		t.Fatalf("__consumer_offsets in the image: %v", ok)
	}
	if cfg := replicas.TopicConfig("__consumer_offsets"); !cfg.Compact || cfg.Delete {
		t.Fatalf("__consumer_offsets topic config %+v, want cleanup.policy=compact only", cfg)
	}
	got := committed(t, ctx, adm, "readers", "events")
	ends, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if got[o.Partition] != o.Offset {
			t.Errorf("partition %d: committed %d, end offset %d", o.Partition, got[o.Partition], o.Offset)
		}
	})
	described, err := adm.DescribeGroups(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	if g := described["readers"]; g.Err != nil || g.State != "Empty" || len(g.Members) != 0 {
		t.Fatalf("after the only member left: %+v", g)
	}

	produceN(t, ctx, c.bootstrap(), "events", 20)
	cl2 := groupConsumer(t, c.bootstrap(), "readers", "events")
	defer cl2.Close()
	recs := pollN(t, ctx, cl2, 20)
	if len(recs) != 20 {
		t.Fatalf("the second member read %d records, want the 20 new ones", len(recs))
	}
	for _, r := range recs {
		if r.Offset < got[r.Partition] {
			t.Fatalf("re-read %s[%d]@%d below the committed %d", r.Topic, r.Partition, r.Offset, got[r.Partition])
		}
	}
}

// assigned is the partitions of topic each member of a Stable group holds.
func stableAssignment(ctx context.Context, adm *kadm.Client, group, topic string) (members int, parts []int32, generation int32, ok bool) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, nil, 0, false
	}
	g := described[group]
	if g.Err != nil || g.State != "Stable" {
		return 0, nil, 0, false
	}
	for _, m := range g.Members {
		ca, ok := m.Assigned.AsConsumer()
		if !ok {
			return 0, nil, 0, false
		}
		for _, t := range ca.Topics {
			if t.Topic == topic {
				parts = append(parts, t.Partitions...)
			}
		}
	}
	slices.Sort(parts)
	return len(g.Members), parts, -1, true
}

// TestFranzGroupRebalancesWhenAMemberLeaves: three kgo members share six
// partitions; one closes (LeaveGroup); the other two rebalance and hold all
// six partitions between them, each exactly once.
func TestFranzGroupRebalancesWhenAMemberLeaves(t *testing.T) {
	t.Parallel()
	c := newCluster(t, append(groupOpts(1), Controllers(1), Brokers(1))...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "shared"); err != nil {
		t.Fatal(err)
	}
	var members []*kgo.Client
	var wg sync.WaitGroup
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer func() {
		stopPolling()
		wg.Wait()
		for _, m := range members {
			m.Close()
		}
	}()
	for range 3 {
		cl := groupConsumer(t, c.bootstrap(), "trio", "shared")
		members = append(members, cl)
		wg.Go(func() {
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx)
			}
		})
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	start := time.Now()
	waitFor(t, "3 members holding 6 partitions", 30*time.Second, func() bool {
		n, parts, _, ok := stableAssignment(ctx, adm, "trio", "shared")
		return ok && n == 3 && slices.Equal(parts, all)
	})
	t.Logf("3 members joined and synced in %v (group.initial.rebalance.delay.ms 200)", time.Since(start))

	leaver := members[2]
	members = members[:2]
	start = time.Now()
	leaver.Close() // its poll loop ends with pollCtx
	waitFor(t, "2 members holding 6 partitions", 30*time.Second, func() bool {
		n, parts, _, ok := stableAssignment(ctx, adm, "trio", "shared")
		return ok && n == 2 && slices.Equal(parts, all)
	})
	t.Logf("rebalanced to 2 members in %v after one left", time.Since(start))
}

// groupCoordinator is the broker kadm finds coordinating group.
func groupCoordinator(ctx context.Context, adm *kadm.Client, group string) (int32, bool) {
	found := adm.FindGroupCoordinators(ctx, group)
	for _, f := range found {
		if f.Err == nil && f.Name == group {
			return f.NodeID, true
		}
	}
	return -1, false
}

// TestFranzGroupSurvivesCoordinatorKill is issue 16's promise for a
// coordinator move: the broker coordinating a group (leader of its
// __consumer_offsets partition, replication factor 3) is killed; the group's
// partition gets a new leader, which loads the group from its log. The
// member keeps its member id and generation (no rebalance), every committed
// offset is still there, and the member goes on consuming and committing.
func TestFranzGroupSurvivesCoordinatorKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t, append(groupOpts(3), Controllers(1), Brokers(3))...)
	waitRunning(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "moving"); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "moving")
	produceN(t, ctx, c.bootstrap(), "moving", 100)
	ends := &sessionEnds{}
	cl := groupConsumer(t, c.bootstrap(), "movers", "moving", kgo.RetryTimeout(60*time.Second), kgo.WithHooks(ends))
	defer cl.Close()
	pollN(t, ctx, cl, 100)
	before := committed(t, ctx, adm, "movers", "moving")
	memberID, generation := cl.GroupMetadata()
	var coordinator int32
	waitFor(t, "the group's coordinator", 10*time.Second, func() bool {
		for _, f := range adm.FindGroupCoordinators(ctx, "movers") {
			if f.Name == "movers" && f.Err != nil {
				t.Logf("FindCoordinator: %v", f.Err)
			} else if f.Name == "movers" {
				coordinator = f.NodeID
				return true
			}
		}
		return false
	})
	waitFullISR(t, ctx, adm, "__consumer_offsets", 10*time.Second)

	t.Logf("killing coordinator %d of member %s, generation %d", coordinator, memberID, generation)
	killed := time.Now()
	c.nodes[coordinator].Kill()
	delete(c.nodes, coordinator)
	// A fresh admin client for every try: kgo keeps a group's coordinator
	// cached while dials to it fail, and an early FindCoordinator may still
	// name the dead broker.
	var after map[int32]int64
	var lastErr error
	waitFor(t, "the committed offsets from a new coordinator", 30*time.Second, func() bool {
		fresh, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...))
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		fadm := kadm.NewClient(fresh)
		if id, ok := groupCoordinator(ctx, fadm, "movers"); !ok || id == coordinator {
			return false
		}
		after, lastErr = tryCommitted(ctx, fadm, "movers", "moving")
		return lastErr == nil
	})
	adm = newFranzAdmin(t, c).(*franzAdmin).adm
	t.Logf("a new coordinator served the offsets %v after the kill (broker.session.timeout.ms 1500)", time.Since(killed).Round(time.Millisecond))
	if !mapsEqual(after, before) {
		t.Fatalf("committed offsets after the move %v, before %v", after, before)
	}

	produceN(t, ctx, c.bootstrap(), "moving", 50)
	recs := pollNTolerating(t, ctx, cl, 50, ends)
	for _, r := range recs {
		if r.Offset < before[r.Partition] {
			t.Fatalf("re-read %s[%d]@%d below the committed %d", r.Topic, r.Partition, r.Offset, before[r.Partition])
		}
	}
	// The move itself must not rebalance: only the member's own give-up
	// (sessionEnds) may change its generation.
	if id, gen := cl.GroupMetadata(); id != memberID || gen != generation {
		if n := ends.dialGiveUps(); n == 0 {
			t.Fatalf("member %s generation %d after the move, was %s generation %d: the group rebalanced, and the member's session never ended on a failed dial", id, gen, memberID, generation)
		} else {
			t.Logf("member %s generation %d after the move, was %s generation %d: its session ended %d time(s) on a failed dial to the dead broker, and it rejoined", id, gen, memberID, generation, n)
		}
	}
	described, err := adm.DescribeGroups(ctx, "movers")
	if err != nil {
		t.Fatal(err)
	}
	if g := described["movers"]; g.Err != nil || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != memberID {
		t.Fatalf("the group on its new coordinator: %+v", g)
	}
}

// sessionEnds records the errors that ended a kgo member's group session
// (kgo.HookGroupManageError). kgo ends a session when a heartbeat's dial to
// a killed coordinator fails and the FindCoordinator it then sends reaches
// the same dead address (through its seed entry, for one): the member
// rejoins on its own, and its rejoin without its owned partitions
// rebalances the group, on Apache Kafka as on kraftd.
type sessionEnds struct {
	mu   sync.Mutex
	errs []error
}

func (s *sessionEnds) OnGroupManageError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *sessionEnds) dialGiveUps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, err := range s.errs {
		if isDialErr(err) {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 10 ms until it holds (true) or d passes (false).
func waitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(10 * time.Millisecond)
	}
	return true
}

func isDialErr(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
