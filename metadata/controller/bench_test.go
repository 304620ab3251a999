package controller

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum"
)

// activeCore is a core leading epoch 1 over fl with brokers 1..n
// registered and unfenced, everything committed; opts adjust its Config.
func activeCore(tb testing.TB, fl *fakeLog, brokers int, opts ...func(*Config)) *core {
	tb.Helper()
	cfg := Config{NodeID: 1, ClusterID: testClusterID, Quorum: nopQuorum{}, MaxIdleIntervalMs: -1,
		Rand: rand.New(rand.NewPCG(5, 6))}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	c := newCore(cfg, fl.propose)
	fl.leaderEpoch = 1
	start := fl.appendLeaderChange(1, 1)
	c.leaderChange(quorum.LeaderAndEpoch{LeaderID: 1, Epoch: 1, EpochStartOffset: start}, 0)
	commitAll(tb, c, fl)
	for id := int32(1); id <= int32(brokers); id++ {
		run(tb, c, fl, registration(id))
		run(tb, c, fl, heartbeat(id, c.pending.regOffsets[id], 1<<40))
	}
	return c
}

func commitAll(tb interface{ Fatal(...any) }, c *core, fl *fakeLog) {
	for bs := fl.undelivered(); len(bs) > 0; bs = fl.undelivered() {
		if err := c.commit(bs, 0); err != nil {
			tb.Fatal(err)
		}
	}
}

// run handles req on c, commits everything, and returns the response.
func run(tb testing.TB, c *core, fl *fakeLog, req kmsg.Request) kmsg.Response {
	tb.Helper()
	var resp kmsg.Response
	c.handle(req, 0, func(r kmsg.Response) { resp = r })
	commitAll(tb, c, fl)
	if resp == nil {
		tb.Fatal("no response after commit")
	}
	return resp
}

func createTopic(name string, partitions int32, rf int16) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, t)
	return req
}

// BenchmarkCreateTopics100kPartitions creates one topic of 100,000
// partitions (RF 3 over 3 brokers) per iteration through the whole write
// path: validation, placement, record generation, encoding, transaction
// split into batches, replay into the pending image, and commit.
func BenchmarkCreateTopics100kPartitions(b *testing.B) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(b, fl, 3)
	commitAll(b, c, fl)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var resp kmsg.Response
		c.handle(createTopic(fmt.Sprintf("big-%d", i), 100_000, 3), 0, func(r kmsg.Response) { resp = r })
		commitAll(b, c, fl)
		if r := resp.(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
			b.Fatalf("error %d", r.Topics[0].ErrorCode)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(c.committed.img.NumPartitions())/float64(b.N), "partitions/op")
}

// BenchmarkStandbyReplay100kPartitions measures what a standby controller
// (or broker) does with that log: decode and replay every batch.
func BenchmarkStandbyReplay100kPartitions(b *testing.B) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(b, fl, 3)
	c.handle(createTopic("big", 100_000, 3), 0, func(kmsg.Response) {})
	commitAll(b, c, fl)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		img := replayLog(b, fl.batches)
		if img.NumPartitions() != 100_000 {
			b.Fatalf("%d partitions", img.NumPartitions())
		}
	}
}
