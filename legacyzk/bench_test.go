package legacyzk

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/legacyzk/zkserver"

	"github.com/kraftd/kraftd/metadata/records"
)

// seedTopics writes topics x partitions (RF = len(replicas)) with state
// znodes straight into ZooKeeper, pipelined, as a long-running cluster
// would have them.
func seedTopics(b testing.TB, st Store, topics, partitions int, replicas []int32) {
	ctx := context.Background()
	for _, p := range persistentPaths {
		if err := ensurePath(ctx, st, p); err != nil {
			b.Fatal(err)
		}
	}
	for t := range topics {
		name := fmt.Sprintf("t%04d", t)
		a := TopicAssignment{ID: records.UUID{byte(t >> 8), byte(t), 1}, Partitions: map[int32][]int32{}}
		for p := range partitions {
			r := make([]int32, len(replicas))
			for i := range replicas {
				r[i] = replicas[(p+i)%len(replicas)]
			}
			a.Partitions[int32(p)] = r
		}
		if _, err := st.Create(ctx, TopicPath(name), EncodeTopic(a), Persistent); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Create(ctx, PartitionsPath(name), nil, Persistent); err != nil {
			b.Fatal(err)
		}
		var batches [][]Op
		for p := range partitions {
			r := a.Partitions[int32(p)]
			batches = append(batches, []Op{
				CreateOp{Path: PartitionPath(name, int32(p)), Mode: Persistent},
				CreateOp{Path: PartitionStatePath(name, int32(p)), Mode: Persistent,
					Data: EncodeState(LeaderIsr{Leader: r[0], ISR: r, ControllerEpoch: 1})},
			})
		}
		if _, errs := multiAll(ctx, st, batches, DefaultMaxInFlightRequests); errs != nil {
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

var benchStandalone = flag.Bool("zk.standalone", false,
	"benchmarks: use the tests' standalone ZooKeeper (forceSync=no) instead of a 3-server ensemble with forceSync=yes")

// benchEnsemble is the benchmarks' ZooKeeper: by default a 3-server
// ensemble with forceSync=yes, as Kafka runs in production (ZooKeeper
// fsyncs every write on a quorum before acknowledging it), started once
// for the package run; -zk.standalone uses the tests' standalone server
// with forceSync=no instead. The output names which one ran.
var (
	benchEnsembleOnce sync.Once
	benchEnsemble     *zkserver.Ensemble
	benchEnsembleErr  error
	benchEnsembleDir  string
)

// benchZk returns a connect string with a fresh chroot on the benchmarks'
// ZooKeeper and logs which ZooKeeper it is.
func benchZk(b *testing.B) string {
	b.Helper()
	if *benchStandalone {
		b.Logf("ZooKeeper: standalone server, forceSync=no (-zk.standalone)")
		return needZk(b)
	}
	benchEnsembleOnce.Do(func() {
		if _, _, err := zkserver.Find(); err != nil {
			benchEnsembleErr = err
			return
		}
		benchEnsembleDir, benchEnsembleErr = os.MkdirTemp("", "legacyzk-ensemble")
		if benchEnsembleErr == nil {
			benchEnsemble, benchEnsembleErr = zkserver.StartEnsemble(zkserver.Config{Dir: benchEnsembleDir, TickMs: 200, HeapMb: 256, ForceSync: true}, 3)
		}
	})
	if errors.Is(benchEnsembleErr, zkserver.ErrNotInstalled) {
		zkserver.SkipOrFail(b, benchEnsembleErr)
	}
	if benchEnsembleErr != nil {
		b.Fatalf("ZooKeeper ensemble: %v", benchEnsembleErr)
	}
	b.Logf("ZooKeeper: %s", benchEnsemble.Describe())
	return fmt.Sprintf("%s/%s_%d", benchEnsemble.Addr, b.Name(), chrootSeq.Add(1))
}

// stopBenchEnsemble is called by TestMain after the run.
func stopBenchEnsemble() {
	if benchEnsemble != nil {
		benchEnsemble.Stop()
	}
	if benchEnsembleDir != "" {
		os.RemoveAll(benchEnsembleDir)
	}
}

// BenchmarkZkFailover measures a controller failover on a real ZooKeeper
// (a 3-server ensemble with forceSync=yes unless -zk.standalone; the log
// says which): 3 brokers, 100 topics x 10 partitions, RF 3. Reported: the
// ZooKeeper read-back time, the push time (until every broker answered),
// and the mean cost of one fenced partition-state write from the
// broker-loss elections that follow.
func BenchmarkZkFailover(b *testing.B) {
	b.StopTimer() // the ensemble's start is not the failover
	connect := benchZk(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := newZkClusterOn(b, fmt.Sprintf("%s_%d", connect, i))
		seedTopics(b, c.admin, 100, 10, []int32{1, 2, 3})
		for _, id := range []int32{1, 2, 3} {
			c.start(id)
		}
		ctrl := c.controller()
		c.converged()
		b.StartTimer()
		start := time.Now()
		ctrl.Close()
		next := c.controller()
		c.converged()
		b.StopTimer()
		waitFor(c.t, 10*time.Second, "push time", func() (bool, string) { return next.Stats().Failovers()[0].PushTime > 0, "" })
		f := next.Stats().Failovers()[0]
		mean, n := next.Stats().StateChangeCost()
		b.ReportMetric(float64(f.ZkReadTime.Microseconds())/1000, "zkread-ms")
		b.ReportMetric(float64(f.PushTime.Microseconds())/1000, "push-ms")
		b.ReportMetric(float64(f.ZkReads), "zk-reads")
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "converged-ms")
		if n > 0 {
			b.ReportMetric(float64(mean.Microseconds()), "us/state-write")
		}
		for _, br := range c.brokers {
			br.Close()
		}
	}
}
