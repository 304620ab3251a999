package interop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
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
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch offsets %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// TestFranzConsumerGroupConsumesAndCommits: a kgo consumer group reads a
// topic and commits; __consumer_offsets was created on the first
// FindCoordinator; the committed offsets are the end offsets; a second
// member of the same group, started later, reads only what came after.
func TestFranzConsumerGroupConsumesAndCommits(t *testing.T) {
	t.Parallel()
	c := newCluster(t, append(groupOpts(1), Controllers(1), Brokers(1))...)
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
