package broker

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
	"github.com/kraftd/kraftd/replica"
)

// BenchmarkPublishControlledShutdown10k: what broker 2 of 6 does with the
// metadata of broker 1's controlled shutdown at 10,000 partitions (RF 3, 10
// topics of 1,000): replay the batch of leader moves and ISR shrinks into a
// delta, publish, and sync its replica manager (real logs in a temporary
// directory): it hosts 5,000 partitions and becomes leader of about 830.
func BenchmarkPublishControlledShutdown10k(b *testing.B) {
	const brokers, topics, perTopic = 6, 10, 1000
	replicasOf := func(t, p int) []int32 {
		first := (t*perTopic + p) % brokers
		return []int32{int32(first%brokers) + 1, int32((first+1)%brokers) + 1, int32((first+2)%brokers) + 1}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m, err := replica.New(replica.Config{Dir: b.TempDir(), BrokerID: 2})
		if err != nil {
			b.Fatal(err)
		}
		pub := newPublisher(zap.NewNop(), nil, nil)
		pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
		pub.onPublish = func(prev, next *image.Image) { SyncReplicas(m, 2, prev, next, zap.NewNop()) }
		setup := []records.Message{mvRecord(14)}
		for id := int32(1); id <= brokers; id++ {
			setup = append(setup, brokerRecord(id, int64(id), false, nil, ep("PLAINTEXT", uint16(9000+id))))
		}
		var moves []records.Message
		moves = append(moves, &records.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 1, InControlledShutdown: 1})
		for t := range topics {
			id := uuid(byte(t + 1))
			setup = append(setup, topicRecord(fmt.Sprintf("t%d", t), id))
			for p := range perTopic {
				reps := replicasOf(t, p)
				setup = append(setup, partitionRecord(id, int32(p), reps[0], reps, reps))
				if !slices.Contains(reps, 1) {
					continue
				}
				isr := slices.DeleteFunc(slices.Clone(reps), func(r int32) bool { return r == 1 })
				ch := records.NewPartitionChangeRecord()
				ch.TopicID, ch.PartitionID, ch.ISR = id, int32(p), isr
				if reps[0] == 1 {
					ch.Leader = isr[0]
				}
				moves = append(moves, ch)
			}
		}
		first := encodeBatch(b, 0, setup...)
		pub.applyAll([]raftlog.Batch{first})
		if pub.failed.Load() || len(m.Hosted()) != topics*perTopic/2 {
			b.Fatalf("setup: failed %v, %d hosted", pub.failed.Load(), len(m.Hosted()))
		}
		second := encodeBatch(b, first.NextOffset(), moves...)
		b.StartTimer()
		pub.applyAll([]raftlog.Batch{second})
		b.StopTimer()
		if pub.failed.Load() || pub.image().LeaderCount(1) != 0 {
			b.Fatalf("after the moves: failed %v, broker 1 leads %d", pub.failed.Load(), pub.image().LeaderCount(1))
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// benchTopics is the metadata of topics t0..t(n-1) of perTopic partitions
// each at RF 3 over brokers 1-6 (as kraftd bench lays them out), with the
// brokers registered first when withBrokers.
func benchTopics(first, n, perTopic int, withBrokers bool) []records.Message {
	const brokers = 6
	var out []records.Message
	if withBrokers {
		out = append(out, mvRecord(14))
		for id := int32(1); id <= brokers; id++ {
			out = append(out, brokerRecord(id, int64(id), false, nil, ep("PLAINTEXT", uint16(9000+id))))
		}
	}
	for t := first; t < first+n; t++ {
		id := uuid(byte(t + 1))
		out = append(out, topicRecord(fmt.Sprintf("t%d", t), id))
		for p := range perTopic {
			f := (t*perTopic + p) % brokers
			reps := []int32{int32(f) + 1, int32((f+1)%brokers) + 1, int32((f+2)%brokers) + 1}
			out = append(out, partitionRecord(id, int32(p), reps[0], reps, reps))
		}
	}
	return out
}

// BenchmarkPublishCreateTopic1k: what broker 2 of 6 does with a
// CreateTopics of 1,000 partitions at RF 3 (kraftd bench's unit): replay
// the batch, publish, and sync its replica manager (started, as in a
// broker: real logs in a temporary directory), which creates the 500
// replicas it hosts. The time until the broker may report the offset
// applied.
func BenchmarkPublishCreateTopic1k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m, err := replica.New(replica.Config{Dir: b.TempDir(), BrokerID: 2})
		if err != nil {
			b.Fatal(err)
		}
		m.Start()
		pub := newPublisher(zap.NewNop(), nil, nil)
		pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
		pub.onPublish = func(prev, next *image.Image) { SyncReplicas(m, 2, prev, next, zap.NewNop()) }
		first := encodeBatch(b, 0, benchTopics(0, 0, 0, true)...)
		pub.applyAll([]raftlog.Batch{first})
		create := encodeBatch(b, first.NextOffset(), benchTopics(0, 1, 1000, false)...)
		b.StartTimer()
		pub.applyAll([]raftlog.Batch{create})
		b.StopTimer()
		if pub.failed.Load() || len(m.Hosted()) != 500 {
			b.Fatalf("failed %v, %d hosted", pub.failed.Load(), len(m.Hosted()))
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkPublishRestart10k: broker 2 of 6 restarted after a clean
// shutdown at 10,000 partitions (RF 3, 10 topics of 1,000): a new replica
// manager over its directory, and the publisher's first publish of the
// replayed metadata, which opens the 5,000 logs it hosts. The time until
// the broker may report the offset applied, and so be unfenced.
func BenchmarkPublishRestart10k(b *testing.B) {
	dir := b.TempDir()
	all := encodeBatch(b, 0, benchTopics(0, 10, 1000, true)...)
	start := func() (*replica.Manager, *publisher) {
		m, err := replica.New(replica.Config{Dir: dir, BrokerID: 2})
		if err != nil {
			b.Fatal(err)
		}
		m.Start()
		pub := newPublisher(zap.NewNop(), nil, nil)
		pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
		pub.onPublish = func(prev, next *image.Image) { SyncReplicas(m, 2, prev, next, zap.NewNop()) }
		return m, pub
	}
	m, pub := start()
	pub.applyAll([]raftlog.Batch{all})
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m, pub := start()
		b.StartTimer()
		pub.applyAll([]raftlog.Batch{all})
		b.StopTimer()
		if pub.failed.Load() || len(m.Hosted()) != 5000 {
			b.Fatalf("failed %v, %d hosted", pub.failed.Load(), len(m.Hosted()))
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// benchLarge adds 1,000,000 partitions to BenchmarkPropagateCreateLarge.
var benchLarge = flag.Bool("bench.large", false, "run the 1M-partition sizes of BenchmarkPropagateCreateLarge and BenchmarkPublishControlledShutdownLarge")

// BenchmarkPropagateCreateLarge is a broker's side of the kraftd bench's
// propagation scenario (issue 17) on a cluster of 1k to 100k partitions
// (1M with -bench.large; RF 3 over 6 brokers, topics of 1,000): the
// publisher applies one committed topic create (1 partition) and publishes
// the image, then a Metadata request for that topic (the bench's poll) is
// answered from it. The cost must not grow with the partitions.
//
//	go test ./broker -run '^$' -bench PropagateCreateLarge -bench.large -benchmem
func BenchmarkPropagateCreateLarge(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000}
	if *benchLarge {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			pub := newPublisher(zap.NewNop(), nil, nil)
			pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
			// Topics of 1,000 as benchTopics lays them out, with ids of
			// their own past its 255 topics, 50 topics a batch.
			batches := []raftlog.Batch{encodeBatch(b, 0, benchTopics(0, 0, 0, true)...)}
			for first := 0; first < n/1000; first += 50 {
				var msgs []records.Message
				for t := first; t < min(first+50, n/1000); t++ {
					for _, m := range benchTopics(t, 1, 1000, false) {
						switch r := m.(type) {
						case *records.TopicRecord:
							r.TopicID = records.UUID{0: 0xaa, 1: byte(t >> 8), 2: byte(t), 15: 3}
						case *records.PartitionRecord:
							r.TopicID = records.UUID{0: 0xaa, 1: byte(t >> 8), 2: byte(t), 15: 3}
						}
						msgs = append(msgs, m)
					}
				}
				batches = append(batches, encodeBatch(b, batches[len(batches)-1].NextOffset(), msgs...))
			}
			pub.applyAll(batches)
			setup := batches[len(batches)-1]
			if got := pub.image().NumPartitions(); pub.failed.Load() || got != n {
				b.Fatalf("setup: failed %v, %d partitions", pub.failed.Load(), got)
			}
			api, err := NewClientAPI(ClientAPIConfig{NodeID: 2, ClusterID: testCluster, Metadata: publisherSource{pub}, Admin: &recordingAdmin{},
				InterBrokerListener: "PLAINTEXT", Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			defer api.Close()
			next := setup.NextOffset()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				name := fmt.Sprintf("prop-%d", i)
				id := records.UUID{0: 0xee, 1: byte(i >> 16), 2: byte(i >> 8), 3: byte(i), 15: 2}
				create := encodeBatch(b, next, topicRecord(name, id), partitionRecord(id, 0, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
				next = create.NextOffset()
				pub.applyAll([]raftlog.Batch{create})
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(12)
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
				raw, err := api.handleMetadata(context.Background(), &protocol.Request{Key: req.Key(), Version: 12, Body: req, Listener: "PLAINTEXT"})
				if err != nil {
					b.Fatal(err)
				}
				resp := raw.(*kmsg.MetadataResponse)
				if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].Leader != 1 {
					b.Fatalf("Metadata for %s: %+v", name, resp.Topics)
				}
			}
		})
	}
}

// publisherSource serves a publisher's images as a broker does.
type publisherSource struct{ p *publisher }

func (s publisherSource) Image() *image.Image { return s.p.image() }

// BenchmarkDeleteTopicHosting: a broker hosting about 500 or 2,500 partitions
// (of 1,000 or 5,000 at RF 3 over 6 brokers)
// applies the delete of a topic of one partition it hosts (each op also
// creates that topic first): the replica sync's cost per deleted topic
// must not grow with the partitions hosted (issue 17).
func BenchmarkDeleteTopicHosting(b *testing.B) {
	for _, n := range []int{1_000, 5_000} {
		b.Run(fmt.Sprintf("hosted=%d", n), func(b *testing.B) {
			m, err := replica.New(replica.Config{Dir: b.TempDir(), BrokerID: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			pub := newPublisher(zap.NewNop(), nil, nil)
			pub.HandleHighWatermark(0) // a fresh quorum: nothing to catch up
			pub.onPublish = func(prev, next *image.Image) { SyncReplicas(m, 2, prev, next, zap.NewNop()) }
			setup := encodeBatch(b, 0, benchTopics(0, n/1000, 1000, true)...)
			pub.applyAll([]raftlog.Batch{setup})
			img := pub.image()
			SyncReplicas(m, 2, image.Empty(), img, zap.NewNop())
			hosted := len(m.Hosted())
			off := img.Provenance().Offset
			i := 0
			for b.Loop() {
				i++
				id := records.UUID{0: 0xee, 1: byte(i >> 16), 2: byte(i >> 8), 3: byte(i), 15: 2}
				next := image.NewDelta(img)
				for _, msg := range []records.Message{topicRecord(fmt.Sprintf("prop-%d", i), id), partitionRecord(id, 0, 2, []int32{2}, []int32{2})} {
					off++
					if err := next.Replay(off, 1, records.Record{Version: versionFor(msg), Message: msg}); err != nil {
						b.Fatal(err)
					}
				}
				created := next.Apply()
				SyncReplicas(m, 2, img, created, zap.NewNop())
				del := image.NewDelta(created)
				off++
				if err := del.Replay(off, 1, records.Record{Message: &records.RemoveTopicRecord{TopicID: id}}); err != nil {
					b.Fatal(err)
				}
				img = del.Apply()
				SyncReplicas(m, 2, created, img, zap.NewNop())
			}
			if got := len(m.Hosted()); got != hosted {
				b.Fatalf("%d partitions hosted, want %d", got, hosted)
			}
		})
	}
}
