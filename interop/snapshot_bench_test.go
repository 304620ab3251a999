package interop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// BenchmarkFreshBrokerJoin: on a cluster of -kraftd.partitions partitions whose
// controllers have snapshotted, a broker with an empty disk starts; measured is the
// time from its start to RUNNING (registered, caught up through the snapshot and
// the tail, unfenced). Its Fetch at offset 0 is answered with the snapshot id
// whatever the log's length, so the time depends on the image, not on the history.
// Goal for 1M partitions: under 3 s.
//
//	go test ./interop -run '^$' -bench FreshBrokerJoin -benchtime 3x -kraftd.partitions 1000000
func BenchmarkFreshBrokerJoin(b *testing.B) {
	rf := int16(min(3, *benchBrokers))
	// Snapshots every ~quarter of the fill (at most every 20 MiB, Kafka's default), none by time: the
	// metadata.max.idle.interval NoOps would otherwise make every node snapshot its
	// whole image on each interval and load the shared CPUs. The joining broker then
	// loads the latest snapshot and replays the tail after it, as in Kafka.
	every := min(20<<20, max(*benchPartitions*90/4, 4096))
	c := newBenchCluster(b, *benchControllers, *benchBrokers,
		app.Setting{Key: "metadata.log.max.record.bytes.between.snapshots", Value: fmt.Sprint(every)},
		app.Setting{Key: "metadata.log.max.snapshot.interval.ms", Value: "0"})
	c.waitBrokersRunning()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "bench"})
	defer cl.Close()
	ctrl := c.activeController()
	fill(b, cl, ctrl, *benchPartitions, rf)
	leader := c.leaderApp()
	hw := leader.Quorum().Metrics().HighWatermark
	var snap raftlog.SnapshotID
	waitFor(b, "a snapshot covering most of the filled cluster", 5*time.Minute, func() bool {
		id, ok, err := leader.Quorum().LatestSnapshot(context.Background())
		snap = id
		return err == nil && ok && id.EndOffset >= hw*3/4
	})
	next := slices.Max(slices.Collect(func(yield func(int32) bool) {
		for id := range c.brokerPorts {
			if !yield(id) {
				return
			}
		}
	})) + 1
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		nid := next
		next++
		c.brokerPorts[nid] = freePort(b)
		b.StartTimer()
		start := time.Now()
		a := c.start(nid, c.overrides)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := a.Broker().WaitState(ctx, broker.StateRunning)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		if got := a.Broker().Image().NumPartitions(); got < *benchPartitions {
			b.Fatalf("joined broker sees %d partitions, want %d", got, *benchPartitions)
		}
		c.crash(nid)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(ms(quantile(took, 0.5)), "unfenced-p50-ms")
	b.ReportMetric(ms(quantile(took, 1)), "unfenced-max-ms")
	b.Logf("partitions=%d: fresh broker start to unfenced p50 %.1f ms max %.1f ms over %d joins (snapshot ends at %d, log at %d)",
		*benchPartitions, ms(quantile(took, 0.5)), ms(quantile(took, 1)), len(took), snap.EndOffset, hw)
}

// leaderApp is the controller node leading the quorum.
func (c *benchCluster) leaderApp() *app.App {
	c.t.Helper()
	c.activeController()
	for nid := range c.ctrlPorts {
		if a := c.nodes[nid]; a != nil && a.Quorum() != nil && a.Quorum().Metrics().HighWatermark > 0 {
			if a.Quorum().Metrics().Role == quorum.Leader {
				return a
			}
		}
	}
	c.t.Fatal("no leader")
	return nil
}
