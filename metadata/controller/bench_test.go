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

// create100k creates 100,000 partitions at RF 3 in topics of 1,000 named
// prefix-N, nine topics per CreateTopics (9,009 records: Kafka's
// controller takes at most 10,000 records, MAX_RECORDS_PER_USER_OP, and
// 10,000 partitions in one request), committing each, and fails b on any
// error.
func create100k(b *testing.B, c *core, fl *fakeLog, prefix string) {
	const topics, perCreate = 100, 9
	for r := 0; r < topics; r += perCreate {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		for i := r; i < min(r+perCreate, topics); i++ {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = fmt.Sprintf("%s-%d", prefix, i), 1000, 3
			req.Topics = append(req.Topics, t)
		}
		var resp kmsg.Response
		c.handle(req, 0, func(r kmsg.Response) { resp = r })
		commitAll(b, c, fl)
		for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if rt.ErrorCode != 0 {
				b.Fatalf("%s: error %d", rt.Topic, rt.ErrorCode)
			}
		}
	}
}

// BenchmarkCreateTopics100kPartitions creates 100,000 partitions (RF 3 over
// 3 brokers, topics of 1,000, nine per CreateTopics: 9,009 records, under
// Kafka's 10,000 per request) per iteration through the whole write path:
// validation, placement, record generation, encoding, transaction split
// into batches, replay into the pending image, and commit.
func BenchmarkCreateTopics100kPartitions(b *testing.B) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(b, fl, 3)
	commitAll(b, c, fl)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		create100k(b, c, fl, fmt.Sprintf("big%d", i))
	}
	b.StopTimer()
	b.ReportMetric(float64(c.committed.img.NumPartitions())/float64(b.N), "partitions/op")
}

// BenchmarkStandbyReplay100kPartitions measures what a standby controller
// (or broker) does with that log: decode and replay every batch.
func BenchmarkStandbyReplay100kPartitions(b *testing.B) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(b, fl, 3)
	create100k(b, c, fl, "big")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		img := replayLog(b, fl.batches)
		if img.NumPartitions() != 100_000 {
			b.Fatalf("%d partitions", img.NumPartitions())
		}
	}
}

// BenchmarkControlledShutdown10k: the controller's side of a controlled
// shutdown of broker 1 of 6 (10,000 partitions at RF 3 in 10 topics of
// 1,000, about a sixth led by broker 1 and half of them with it in the ISR):
// the WantShutdown heartbeat generates every leader move and ISR shrink in
// one result, which is appended and committed; the other brokers report
// the offset; broker 1's next heartbeat is answered SHUTDOWN_NOW.
func BenchmarkControlledShutdown10k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fl := &fakeLog{leaderEpoch: -1}
		c := activeCore(b, fl, 6)
		for t := range 10 {
			run(b, c, fl, createTopic(fmt.Sprintf("t%d", t), 1000, 3))
		}
		led := c.committed.img.LeaderCount(1)
		epoch := func(id int32) int64 { b, _ := c.pending.img.Broker(id); return b.Epoch }
		b.StartTimer()
		req := heartbeat(1, epoch(1), fl.endOffset()-1)
		req.WantShutdown = true
		if r := run(b, c, fl, req).(*kmsg.BrokerHeartbeatResponse); r.ShouldShutdown || r.ErrorCode != 0 {
			b.Fatalf("first heartbeat: %+v", r)
		}
		end := fl.endOffset() - 1
		for id := int32(2); id <= 6; id++ {
			run(b, c, fl, heartbeat(id, epoch(id), end))
		}
		req = heartbeat(1, epoch(1), end)
		req.WantShutdown = true
		if r := run(b, c, fl, req).(*kmsg.BrokerHeartbeatResponse); !r.ShouldShutdown {
			b.Fatalf("second heartbeat: %+v", r)
		}
		b.StopTimer()
		if led == 0 || c.committed.img.LeaderCount(1) != 0 {
			b.Fatalf("broker 1 led %d, leads %d after", led, c.committed.img.LeaderCount(1))
		}
		b.ReportMetric(float64(led), "moved/op")
		b.StartTimer()
	}
}
