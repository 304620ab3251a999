package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var groupsBenchDelayMs = flag.Int("groups.initial-delay-ms", 3000, "BenchmarkProcessGroups: group.initial.rebalance.delay.ms of the brokers (Kafka's default 3000)")

// BenchmarkProcessGroups measures the group coordinator in both modes with
// every node its own process (KRaft: 3 controllers and 3 brokers;
// zk-legacy: a ZooKeeper and 3 brokers; __consumer_offsets RF 3):
//
//   - rebalance: 3 kgo members (session.timeout.ms 6000,
//     heartbeat.interval.ms 300, rebalance.timeout.ms 60000, the cooperative-sticky
//     balancer) start on a fresh group of a 6-partition topic; join-ms is
//     the time until DescribeGroups shows the group Stable with all 6
//     partitions held (group.initial.rebalance.delay.ms applies: the first
//     member's JoinGroup waits it out); then one member leaves (LeaveGroup)
//     and leave-ms is the time until the other two are Stable holding all 6.
//     Stable is seen by polling DescribeGroups every 20 ms.
//
//   - commit: one kadm client commits one partition's offset (an Empty
//     group, generation -1) 400 times in a row per op: p50-us and p99-us of the
//     OffsetCommit round trip (written to __consumer_offsets, answered once
//     its high watermark passes it, so after both followers fetched it).
//
//     go test ./cmd/kraftd -run '^$' -bench ProcessGroups -benchtime 5x   # 5 rebalances, 2000 commits per mode
func BenchmarkProcessGroups(b *testing.B) {
	bin := buildBinary(b)
	for _, mode := range faultModes {
		b.Run(mode.name, func(b *testing.B) {
			c := startGroupCluster(b, bin, mode, fmt.Sprintf("group.initial.rebalance.delay.ms=%d", *groupsBenchDelayMs))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			adm := adminOf(b, c)
			createGroupsBenchTopic(b, ctx, adm, "bench-groups", 6)
			round := 0
			b.Run("rebalance", func(b *testing.B) {
				var join, leave []time.Duration
				for range b.N {
					round++
					j, l := benchRebalance(b, ctx, c, fmt.Sprintf("bench-group-%d", round))
					join, leave = append(join, j), append(leave, l)
				}
				b.ReportMetric(float64(percentile(join, 50).Milliseconds()), "join-ms")
				b.ReportMetric(float64(slices.Max(join).Milliseconds()), "join-max-ms")
				b.ReportMetric(float64(percentile(leave, 50).Milliseconds()), "leave-ms")
				b.ReportMetric(float64(slices.Max(leave).Milliseconds()), "leave-max-ms")
			})
			b.Run("commit", func(b *testing.B) {
				commit := func(i int) error {
					var os kadm.Offsets
					os.AddOffset("bench-groups", 0, int64(i), -1)
					resp, err := adm.CommitOffsets(ctx, "bench-commits", os)
					if err != nil {
						return err
					}
					return resp.Error()
				}
				eventually(b, "a coordinator taking commits", 30*time.Second, func() bool { return commit(0) == nil })
				const perOp = 400
				lat := make([]time.Duration, b.N*perOp)
				b.ResetTimer()
				for i := range b.N * perOp {
					start := time.Now()
					if err := commit(i); err != nil {
						b.Fatal(err)
					}
					lat[i] = time.Since(start)
				}
				b.StopTimer()
				b.ReportMetric(float64(percentile(lat, 50).Microseconds()), "p50-us")
				b.ReportMetric(float64(percentile(lat, 99).Microseconds()), "p99-us")
			})
		})
	}
}

// createGroupsBenchTopic creates topic with parts partitions and RF 3 and waits
// for every ISR to be whole.
func createGroupsBenchTopic(b *testing.B, ctx context.Context, adm *kadm.Client, topic string, parts int32) {
	b.Helper()
	if r, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || r.Err != nil {
		b.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	eventually(b, topic+" with whole ISRs", 30*time.Second, func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || len(td[topic].Partitions) != int(parts) {
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

// benchRebalance starts 3 members of group, times them to Stable, closes
// one and times the other two to Stable.
func benchRebalance(b *testing.B, ctx context.Context, c faultCluster, group string) (join, leave time.Duration) {
	b.Helper()
	adm := adminOf(b, c)
	stable := func(members int) bool {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false
		}
		g := described[group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != members {
			return false
		}
		held := 0
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			for _, tp := range ca.Topics {
				held += len(tp.Partitions)
			}
		}
		return held == 6
	}
	wait := func(members int) time.Duration {
		start := time.Now()
		eventually(b, fmt.Sprintf("%s Stable with %d members", group, members), 60*time.Second, func() bool { return stable(members) })
		return time.Since(start)
	}
	pollCtx, stop := context.WithCancel(ctx)
	var members []*kgo.Client
	var done []chan struct{}
	start := time.Now()
	for range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("bench-groups"),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond), kgo.RebalanceTimeout(60*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		members = append(members, cl)
		ch := make(chan struct{})
		done = append(done, ch)
		go func() {
			defer close(ch)
			for pollCtx.Err() == nil {
				if cl.PollFetches(pollCtx).IsClientClosed() {
					return
				}
			}
		}()
	}
	wait(3)
	join = time.Since(start)
	members[2].Close()
	leave = wait(2)
	stop()
	for i, cl := range members {
		cl.Close()
		<-done[i]
	}
	return join, leave
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
