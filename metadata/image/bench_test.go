package image

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kraftd/kraftd/metadata/records"
)

// Benchmark sizes stay modest by default so `go test -bench .` is quick;
// pass -image.partitions=1000000 for the 1M-partition figures.
var (
	benchPartitions    = flag.Int("image.partitions", 100_000, "partitions in benchmark images")
	benchPartsPerTopic = flag.Int("image.partsPerTopic", 100, "partitions per topic in benchmark images")
	benchIndexed       = flag.Bool("image.indexed", false, "build benchmark images with the broker index (the controller's)")
)

// buildImage replays a cluster of brokers, topics and RF-3 partitions into
// one delta, as a snapshot load would. withDirs adds KIP-858 directories.
func buildImage(tb testing.TB, partitions, perTopic int, withDirs bool) *Image {
	tb.Helper()
	base := Empty()
	if *benchIndexed {
		base = EmptyIndexed()
	}
	d := NewDelta(base)
	off := int64(0)
	replay := func(m records.Message) {
		if err := d.Replay(off, 1, records.Record{Message: m}); err != nil {
			tb.Fatal(err)
		}
		off++
	}
	replay(&records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 17})
	const brokers = 12
	dirs := make([]records.UUID, brokers)
	for b := range int32(brokers) {
		dirs[b] = records.UUID{0: byte(b + 1), 15: 0x77}
		replay(&records.RegisterBrokerRecord{BrokerID: b, BrokerEpoch: off, Fenced: false,
			EndPoints: []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9092 + b)}}})
	}
	for t := 0; t*perTopic < partitions; t++ {
		id := topicID(t)
		replay(&records.TopicRecord{Name: fmt.Sprintf("topic-%07d", t), TopicID: id})
		for p := range min(perTopic, partitions-t*perTopic) {
			r := records.NewPartitionRecord()
			r.TopicID, r.PartitionID = id, int32(p)
			b := int32((t + p) % brokers)
			r.Replicas = []int32{b, (b + 1) % brokers, (b + 2) % brokers}
			r.ISR = r.Replicas
			r.Leader, r.LeaderEpoch, r.PartitionEpoch = b, 0, 0
			if withDirs {
				r.Directories = []records.UUID{dirs[r.Replicas[0]], dirs[r.Replicas[1]], dirs[r.Replicas[2]]}
			}
			replay(r)
		}
	}
	return d.Apply()
}

func topicID(t int) records.UUID {
	return records.UUID{0: byte(t >> 24), 1: byte(t >> 16), 2: byte(t >> 8), 3: byte(t), 15: 1}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkImageMemory reports the heap held per partition by a published
// image of -image.partitions RF-3 partitions.
func BenchmarkImageMemory(b *testing.B) {
	for _, withDirs := range []bool{false, true} {
		b.Run(fmt.Sprintf("dirs=%t", withDirs), func(b *testing.B) {
			var perPartition float64
			for b.Loop() {
				before := heapInUse()
				img := buildImage(b, *benchPartitions, *benchPartsPerTopic, withDirs)
				after := heapInUse()
				perPartition = float64(after-before) / float64(img.NumPartitions())
				runtime.KeepAlive(img)
			}
			b.ReportMetric(perPartition, "bytes/partition")
		})
	}
}

// BenchmarkApplySinglePartitionChange measures publishing one leader change
// on a large image: NewDelta + Replay + Apply.
func BenchmarkApplySinglePartitionChange(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	topics := img.NumTopics()
	rng := rand.New(rand.NewPCG(1, 2))
	off := img.Provenance().Offset
	cpu := startCPU()
	for b.Loop() {
		t := rng.IntN(topics)
		r := records.NewPartitionChangeRecord()
		r.TopicID, r.PartitionID = topicID(t), int32(rng.IntN(min(*benchPartsPerTopic, *benchPartitions)))
		r.ISR = []int32{0, 1}
		r.Leader = 0
		off++
		d := NewDelta(img)
		if err := d.Replay(off, 1, records.Record{Message: r}); err != nil {
			b.Fatal(err)
		}
		img = d.Apply()
	}
	cpu.report(b)
}

// cpuClock measures process CPU time (user+system, GC included), which
// stays meaningful when the machine is shared and wall time is not.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCPU collects the garbage of the setup first so that its GC cost is
// not charged to the operations measured.
func startCPU() cpuClock {
	runtime.GC()
	return cpuClock{start: processCPU()}
}

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkReplayThroughput measures records/s for batches of 1000
// PartitionChangeRecords replayed into a delta and published.
func BenchmarkReplayThroughput(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	topics := img.NumTopics()
	rng := rand.New(rand.NewPCG(3, 4))
	const batch = 1000
	batchRecords := make([]records.Record, batch)
	for i := range batchRecords {
		r := records.NewPartitionChangeRecord()
		r.TopicID = topicID(rng.IntN(topics))
		r.PartitionID = int32(rng.IntN(min(*benchPartsPerTopic, *benchPartitions)))
		r.ISR = []int32{}
		r.Leader = NoLeader
		batchRecords[i] = records.Record{Message: r}
	}
	off := img.Provenance().Offset
	cpu := startCPU()
	for b.Loop() {
		d := NewDelta(img)
		for _, r := range batchRecords {
			off++
			if err := d.Replay(off, 1, r); err != nil {
				b.Fatal(err)
			}
		}
		img = d.Apply()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
	cpu.report(b)
}

// BenchmarkSnapshotLoad measures rebuilding an image from its Records(),
// the replay half of a snapshot load (no decoding).
func BenchmarkSnapshotLoad(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	recs := img.Records()
	for b.Loop() {
		d := NewDelta(Empty())
		if *benchIndexed {
			d = NewDelta(EmptyIndexed())
		}
		for i, r := range recs {
			if err := d.Replay(int64(i), 1, r); err != nil {
				b.Fatal(err)
			}
		}
		d.Apply()
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPartitionsLedBy measures the leadership scan the controller
// runs when fencing a broker.
func BenchmarkPartitionsLedBy(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	for b.Loop() {
		if len(img.PartitionsLedBy(3)) == 0 {
			b.Fatal("broker 3 leads nothing")
		}
	}
}

func BenchmarkPartitionsWithISRMember(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	for b.Loop() {
		if len(img.PartitionsWithISRMember(3)) == 0 {
			b.Fatal("broker 3 in no ISR")
		}
	}
}

// BenchmarkPublishCreateTopic measures what one topic create (1 partition, RF 3)
// costs a broker's publisher on an image of -image.partitions partitions: NewDelta,
// Replay of its two records, Apply, and the Diff the broker's replica sync runs
// between the two images. The propagation p99 at large sizes must not come from
// here: it should not grow with the partition count.
// Reproduce: go test ./metadata/image -run '^$' -bench PublishCreateTopic -image.partitions 1000000 -image.partsPerTopic 1000
func BenchmarkPublishCreateTopic(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	off := img.Provenance().Offset
	cpu := startCPU()
	n := 0
	for b.Loop() {
		n++
		id := records.UUID{0: 0xee, 1: byte(n >> 16), 2: byte(n >> 8), 3: byte(n), 15: 2}
		d := NewDelta(img)
		pr := records.NewPartitionRecord()
		pr.TopicID, pr.PartitionID, pr.Replicas, pr.ISR, pr.Leader = id, 0, []int32{0, 1, 2}, []int32{0, 1, 2}, 0
		for _, m := range []records.Message{&records.TopicRecord{Name: fmt.Sprintf("new-%07d", n), TopicID: id}, pr} {
			off++
			if err := d.Replay(off, 1, records.Record{Message: m}); err != nil {
				b.Fatal(err)
			}
		}
		next := d.Apply()
		if ch := Diff(img, next); len(ch.Topics) != 1 {
			b.Fatalf("diff lists %d topics, want 1", len(ch.Topics))
		}
		img = next
	}
	cpu.report(b)
}

// BenchmarkLeaderCount measures LeaderCount on a broker's image (no broker
// index), which a broker asks at every publish and heartbeat while some
// broker is in controlled shutdown.
// Reproduce: go test ./metadata/image -run '^$' -bench LeaderCount -image.partitions 1000000 -image.partsPerTopic 1000
func BenchmarkLeaderCount(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	for b.Loop() {
		if img.LeaderCount(3) == 0 {
			b.Fatal("broker 3 leads nothing")
		}
	}
}

// BenchmarkPublishBrokerLoss measures what a broker's publisher does with
// the controller's fencing of broker 0 (of 12): replay one
// PartitionChangeRecord per partition broker 0 was in (a new leader where it
// led, a smaller ISR everywhere), Apply, and the replica sync's Diff.
// Reproduce: go test ./metadata/image -run '^$' -bench PublishBrokerLoss -image.partitions 1000000 -image.partsPerTopic 1000 -benchmem
func BenchmarkPublishBrokerLoss(b *testing.B) {
	img := buildImage(b, *benchPartitions, *benchPartsPerTopic, true)
	var recs []records.Record
	for t := range img.Topics() {
		t.parts.scan(func(pid int32, p *Partition) bool {
			if !slices.Contains(p.ISR(), 0) {
				return true
			}
			r := records.NewPartitionChangeRecord()
			r.TopicID, r.PartitionID = t.id, pid
			r.ISR = slices.DeleteFunc(slices.Clone(p.ISR()), func(id int32) bool { return id == 0 })
			if p.Leader == 0 {
				r.Leader = r.ISR[0]
			}
			recs = append(recs, records.Record{Message: r})
			return true
		})
	}
	off := img.Provenance().Offset
	cpu := startCPU()
	for b.Loop() {
		d := NewDelta(img)
		for i, r := range recs {
			if err := d.Replay(off+1+int64(i), 1, r); err != nil {
				b.Fatal(err)
			}
		}
		next := d.Apply()
		if ch := Diff(img, next); len(ch.Topics) == 0 {
			b.Fatal("diff lists no topic")
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(len(recs)), "records/op")
}
