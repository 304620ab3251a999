package controller

import (
	"flag"
	"fmt"
	"maps"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchLarge adds the 1,000,000-partition sizes to the large-cluster
// benchmarks; without it they stop at 100,000 so `go test -bench .` stays
// short. Reproduce the 1M figures with
//
//	go test ./metadata/controller -run '^$' -bench 'Large' -bench.large -benchtime 3x -benchmem
var benchLarge = flag.Bool("bench.large", false, "run the 1M-partition sizes of the large-cluster benchmarks")

func largeSizes(b *testing.B) []int {
	if *benchLarge {
		return []int{100_000, 1_000_000}
	}
	return []int{100_000}
}

// largeCluster is an active core over 3 brokers with partitions RF-3
// partitions in topics of 1,000 (each broker leads a third and is in every
// ISR), everything committed, and what it takes to rewind the core to that
// point: views are immutable and the log is append-only, so a benchmark
// builds the cluster once and restores it between iterations.
type largeCluster struct {
	c        *core
	fl       *fakeLog
	brokers  int32
	saved    core
	sessions map[int32]session
	batches  int
}

func newLargeCluster(b *testing.B, partitions int) *largeCluster {
	b.Helper()
	const brokers = 3
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(b, fl, brokers)
	const perTopic = 1000
	const perCreate = 9 // topics per CreateTopics: 9,009 records, under Kafka's 10,000 per request
	for t := 0; t*perTopic < partitions; t += perCreate {
		req := createTopic(fmt.Sprintf("t%07d", t), perTopic, 3)
		req.Topics = req.Topics[:0]
		for i := t; i < t+perCreate && i*perTopic < partitions; i++ {
			tt := kmsg.NewCreateTopicsRequestTopic()
			tt.Topic, tt.NumPartitions, tt.ReplicationFactor = fmt.Sprintf("t%07d", i), perTopic, 3
			req.Topics = append(req.Topics, tt)
		}
		if r := run(b, c, fl, req).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
			b.Fatalf("create: error %d", r.Topics[0].ErrorCode)
		}
	}
	if n := c.committed.img.NumPartitions(); n != partitions {
		b.Fatalf("%d partitions, want %d", n, partitions)
	}
	lc := &largeCluster{c: c, fl: fl, brokers: brokers}
	lc.save()
	return lc
}

func (lc *largeCluster) save() {
	lc.saved = *lc.c
	lc.sessions = map[int32]session{}
	for id, s := range lc.c.sessions.byID {
		lc.sessions[id] = *s
	}
	lc.batches = len(lc.fl.batches)
}

// restore rewinds the core and the log to the saved point.
func (lc *largeCluster) restore() {
	*lc.c = lc.saved
	lc.c.sessions = &sessions{timeoutMs: lc.saved.sessions.timeoutMs, byID: map[int32]*session{}}
	for id, s := range maps.All(lc.sessions) {
		lc.c.sessions.byID[id] = &s
	}
	clear(lc.fl.batches[lc.batches:])
	lc.fl.batches = lc.fl.batches[:lc.batches]
	lc.fl.delivered = lc.batches
}

// processCPU is the process's user+system CPU time, GC included: on a
// shared machine it stays meaningful when wall time does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimer accumulates process CPU time between start and stop, alongside
// the benchmark timer.
type cpuTimer struct {
	total, began time.Duration
}

func (t *cpuTimer) start() { t.began = processCPU() }
func (t *cpuTimer) stop()  { t.total += processCPU() - t.began }

func (t *cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(t.total)/float64(b.N), "cpu-ns/op")
}

func (lc *largeCluster) epoch(id int32) int64 {
	br, _ := lc.c.pending.img.Broker(id)
	return br.Epoch
}

// BenchmarkControlledShutdownLarge is the controller's side of a controlled
// shutdown of broker 1 of 3, which leads a third of the partitions and is
// in every ISR (the scenario 2): from its WantShutdown heartbeat,
// through generating, encoding, appending, replaying and committing every
// leader move and ISR shrink (one record per partition), until its next
// heartbeat is answered SHUTDOWN_NOW after the others report the offset.
// The cluster is built once per size.
func BenchmarkControlledShutdownLarge(b *testing.B) {
	for _, n := range largeSizes(b) {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			lc := newLargeCluster(b, n)
			c, fl := lc.c, lc.fl
			led := c.committed.img.LeaderCount(1)
			var cpu cpuTimer
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cpu.start()
				req := heartbeat(1, lc.epoch(1), fl.endOffset()-1)
				req.WantShutdown = true
				if r := run(b, c, fl, req).(*kmsg.BrokerHeartbeatResponse); r.ShouldShutdown || r.ErrorCode != 0 {
					b.Fatalf("first heartbeat: %+v", r)
				}
				end := fl.endOffset() - 1
				for id := int32(2); id <= lc.brokers; id++ {
					run(b, c, fl, heartbeat(id, lc.epoch(id), end))
				}
				req = heartbeat(1, lc.epoch(1), end)
				req.WantShutdown = true
				if r := run(b, c, fl, req).(*kmsg.BrokerHeartbeatResponse); !r.ShouldShutdown {
					b.Fatalf("second heartbeat: %+v", r)
				}
				b.StopTimer()
				cpu.stop()
				if led == 0 || c.committed.img.LeaderCount(1) != 0 {
					b.Fatalf("broker 1 led %d, leads %d after", led, c.committed.img.LeaderCount(1))
				}
				lc.restore()
				b.StartTimer()
			}
			b.ReportMetric(float64(led), "moved/op")
			cpu.report(b)
		})
	}
}

// BenchmarkBrokerLossLarge is the controller's side of an uncontrolled loss
// of broker 1 of 3 (it leads a third of the partitions, is in every ISR):
// from the tick that finds its session expired, through the fencing
// records (a leader move or ISR shrink per partition, then the fence),
// until they are committed.
func BenchmarkBrokerLossLarge(b *testing.B) {
	for _, n := range largeSizes(b) {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			lc := newLargeCluster(b, n)
			c, fl := lc.c, lc.fl
			led := c.committed.img.LeaderCount(1)
			nowMs := c.sessions.timeoutMs + 1
			var cpu cpuTimer
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for id := int32(2); id <= lc.brokers; id++ {
					c.sessions.byID[id].lastContactMs = nowMs
				}
				b.StartTimer()
				cpu.start()
				c.tick(nowMs)
				commitAll(b, c, fl)
				b.StopTimer()
				cpu.stop()
				if br, _ := c.committed.img.Broker(1); !br.Fenced || c.committed.img.LeaderCount(1) != 0 {
					b.Fatalf("broker 1 fenced %t, leads %d", br.Fenced, c.committed.img.LeaderCount(1))
				}
				lc.restore()
				b.StartTimer()
			}
			b.ReportMetric(float64(led), "moved/op")
			cpu.report(b)
		})
	}
}

// BenchmarkCreateTopicLarge is the controller's side of the kraftd bench's
// propagation scenario (issue 17): one CreateTopics of one partition at RF 3
// on a cluster of 1k to 100k partitions (1M with -bench.large), through
// validation, placement, encoding, appending, replay and commit. The name
// has a '_', which Kafka's collision check (a name equal to another once
// '.' and '_' are unified) must compare against the existing topics. The
// cost must not grow with the partitions.
func BenchmarkCreateTopicLarge(b *testing.B) {
	sizes := append([]int{1_000, 10_000}, largeSizes(b)...)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			lc := newLargeCluster(b, n)
			var cpu cpuTimer
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				cpu.start()
				r := run(b, lc.c, lc.fl, createTopic(fmt.Sprintf("prop_%d", i), 1, 3)).(*kmsg.CreateTopicsResponse)
				cpu.stop()
				if r.Topics[0].ErrorCode != 0 {
					b.Fatalf("create: error %d", r.Topics[0].ErrorCode)
				}
			}
			cpu.report(b)
		})
	}
}
