package broker

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// largeUUID is topic t's id (uuid above has 256 values only).
func largeUUID(t int) records.UUID {
	return records.UUID{byte(t >> 16), byte(t >> 8), byte(t), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
}

// txnBatches frames msgs as the controller writes a large operation: a
// metadata transaction (Begin first, End last) in batches of at most 10,000
// records (its MaxRecordsPerBatch), from offset base.
func txnBatches(b *testing.B, base int64, msgs []records.Message) []raftlog.Batch {
	all := append([]records.Message{&records.BeginTransactionRecord{}}, msgs...)
	all = append(all, &records.EndTransactionRecord{})
	var out []raftlog.Batch
	for len(all) > 0 {
		n := min(len(all), 10_000)
		out = append(out, encodeBatch(b, base, all[:n]...))
		base += int64(n)
		all = all[n:]
	}
	return out
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublishControlledShutdownLarge: what a metadata-only broker's
// publisher does with the controlled shutdown of broker 1 of 3 at 100,000
// (and with -bench.large 1,000,000) partitions in topics of 1,000 at RF 3
// (broker 1 leads a third and is in every ISR): decode the committed
// transaction's PartitionChangeRecords (one per partition), replay them into
// a delta and publish the image: the decode and image-apply stages of
// BenchmarkControlledShutdownEndToEnd (cmd/kraftd/app), without the replica
// manager (a million partition logs do not fit this machine). Reports CPU
// time per op besides wall time.
//
//	go test ./broker -run '^$' -bench PublishControlledShutdownLarge -benchtime 3x -benchmem [-bench.large]
func BenchmarkPublishControlledShutdownLarge(b *testing.B) {
	sizes := []int{100_000}
	if *benchLarge {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			const brokers, perTopic = 3, 1000
			setup := []records.Message{mvRecord(14)}
			for id := int32(1); id <= brokers; id++ {
				setup = append(setup, brokerRecord(id, int64(id), false, nil, ep("PLAINTEXT", uint16(9000+id))))
			}
			moves := []records.Message{&records.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 1, InControlledShutdown: 1}}
			for t := 0; t*perTopic < n; t++ {
				id := largeUUID(t)
				setup = append(setup, topicRecord(fmt.Sprintf("t%05d", t), id))
				for p := range perTopic {
					f := (t*perTopic + p) % brokers
					reps := []int32{int32(f) + 1, int32((f+1)%brokers) + 1, int32((f+2)%brokers) + 1}
					setup = append(setup, partitionRecord(id, int32(p), reps[0], reps, reps))
					ch := records.NewPartitionChangeRecord()
					ch.TopicID, ch.PartitionID = id, int32(p)
					ch.ISR = slices.DeleteFunc(slices.Clone(reps), func(r int32) bool { return r == 1 })
					if reps[0] == 1 {
						ch.Leader = ch.ISR[0]
					}
					moves = append(moves, ch)
				}
			}
			first := txnBatches(b, 0, setup)
			second := txnBatches(b, first[len(first)-1].NextOffset(), moves)
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				pub := newPublisher(zap.NewNop(), nil, nil)
				pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
				pub.applyAll(first)
				if pub.failed.Load() || pub.image().NumPartitions() != n || pub.image().LeaderCount(1) == 0 {
					b.Fatalf("setup: failed %v, %d partitions", pub.failed.Load(), pub.image().NumPartitions())
				}
				runtime.GC()
				c0 := cpuNow()
				b.StartTimer()
				pub.applyAll(second)
				b.StopTimer()
				cpu += cpuNow() - c0
				if pub.failed.Load() || pub.image().LeaderCount(1) != 0 {
					b.Fatalf("after the moves: failed %v, broker 1 leads %d", pub.failed.Load(), pub.image().LeaderCount(1))
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(moves)), "records/op")
		})
	}
}
