package interop

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionISR returns the leader and ISR of topic's partitions from a
// Metadata request.
func partitionISR(ctx context.Context, adm *kadm.Client, topic string) (map[int32]kadm.PartitionDetail, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// waitTopicEverywhere waits until every running broker's published image
// has topic and its replica manager has applied that image, so producers do
// not race the metadata or the log creation to a leader.
func waitTopicEverywhere(t testing.TB, c *cluster, topic string) {
	t.Helper()
	waitFor(t, "topic "+topic+" on every broker", 10*time.Second, func() bool {
		for nid := range c.brokerPorts {
			if a := c.nodes[nid]; a != nil {
				// Served to Metadata and applied by the replica manager: a broker
				// serves an image before it has created its partitions' logs (as
				// Kafka's does), and answers NOT_LEADER_OR_FOLLOWER until then.
				b := a.Broker()
				img := b.Image()
				if _, ok := img.TopicByName(topic); !ok || b.AppliedOffset() < img.Provenance().Offset {
					return false
				}
			}
		}
		return true
	})
}

// waitFullISR waits until every partition of topic has a leader and an ISR
// of all its replicas.
func waitFullISR(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, timeout time.Duration) {
	t.Helper()
	var last map[int32]kadm.PartitionDetail
	deadline := time.Now().Add(timeout)
	for {
		parts, err := partitionISR(ctx, adm, topic)
		if err == nil {
			last = parts
			full := len(parts) > 0
			for _, p := range parts {
				full = full && p.Leader >= 0 && len(p.ISR) == len(p.Replicas)
			}
			if full {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR of %s not full after %v: %+v (%v)", topic, timeout, last, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not a readiness guess
	}
}

// RF 3 replication: an acks=-1 produce completes only through followers
// (the HW waits for the ISR); followers' logs match the leader's; a broker
// that restarts (controlled shutdown: it leaves every ISR) catches up and
// every ISR is back to 3 replicas in Metadata, as after a rolling restart.
func TestReplicationISRGrowsBackAfterRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "replicated"); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "replicated")
	const n = 600
	produceN(t, ctx, c.bootstrap(), "replicated", n)
	waitFullISR(t, ctx, adm, "replicated", 10*time.Second)
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "replicated", n), n)

	// Rolling restart: each broker in turn stops (controlled shutdown takes it
	// out of every ISR), more records arrive, it comes back and rejoins.
	total := n
	for _, nid := range slices.Sorted(maps.Keys(c.brokerPorts)) {
		c.stop(nid)
		waitFor(t, fmt.Sprintf("broker %d out of every ISR", nid), 15*time.Second, func() bool {
			parts, err := partitionISR(ctx, adm, "replicated")
			if err != nil {
				return false
			}
			for _, p := range parts {
				if slices.Contains(p.ISR, nid) {
					return false
				}
			}
			return true
		})
		produceNFrom(t, ctx, c.bootstrap(), "replicated", total, 200)
		total += 200
		c.start(nid, c.overrides)
		waitFullISR(t, ctx, adm, "replicated", 20*time.Second)
	}
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "replicated", total), total)
}

// produceNFrom produces records v<from>..v<from+n-1> (keys as produceN).
func produceNFrom(t *testing.T, ctx context.Context, servers []string, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(servers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("v%06d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// ackedRecord is a record the producer saw acknowledged, where it landed.
type ackedRecord struct {
	partition int32
	offset    int64
}

// steadyProducer produces v000000, v000001, ... with franz-go's defaults
// (idempotent, acks=-1) until stop is closed, remembering where each
// acknowledged record landed and which records failed for good.
type steadyProducer struct {
	cl    *kgo.Client
	mu    sync.Mutex
	acked map[string]ackedRecord
	// lastAck and maxGap measure the longest time without any
	// acknowledgement (what a steady producer feels during a failover).
	lastAck, maxGap time.Duration
	start           time.Time
	sent            int
	fails           int
	wg              sync.WaitGroup
}

func startSteadyProducer(t *testing.T, servers []string, topic string) *steadyProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(servers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	return &steadyProducer{cl: cl, acked: map[string]ackedRecord{}, start: time.Now()}
}

// run produces until ctx ends.
func (p *steadyProducer) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%11)), Value: []byte(fmt.Sprintf("v%06d", i))}
		p.mu.Lock()
		p.sent++
		p.mu.Unlock()
		p.wg.Add(1)
		p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer p.wg.Done()
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.fails++
				return
			}
			p.acked[string(r.Value)] = ackedRecord{partition: r.Partition, offset: r.Offset}
			now := time.Since(p.start)
			p.maxGap = max(p.maxGap, now-p.lastAck)
			p.lastAck = now
		})
	}
}

func (p *steadyProducer) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// finish waits for every outstanding record's outcome and closes the client.
func (p *steadyProducer) finish() {
	p.wg.Wait()
	p.cl.Close()
}

// readToEnd reads every partition of topic from the start up to its end
// offset (read_committed, as consumeAll).
func readToEnd(t *testing.T, ctx context.Context, servers []string, adm *kadm.Client, topic string) []*kgo.Record {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("ListOffsets %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		total += o.Offset
	})
	return consumeAll(t, ctx, servers, topic, int(total))
}

// checkNoAckedLoss checks the consumer's view against the producer's:
// every acknowledged record is read exactly once at the partition and
// offset it was acknowledged at, each partition's offsets run 0, 1, 2, ...
// (so per-partition order is the log's), and no record is read twice
// (unacknowledged ones appear at most once).
func checkNoAckedLoss(t *testing.T, recs []*kgo.Record, acked map[string]ackedRecord) {
	t.Helper()
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range recs {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("record %s read twice", v)
		}
		seen[v] = true
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d where %d was next", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		if a, ok := acked[v]; ok && (a.partition != r.Partition || a.offset != r.Offset) {
			t.Fatalf("record %s acknowledged at %d@%d, read at %d@%d", v, a.partition, a.offset, r.Partition, r.Offset)
		}
	}
	for v := range acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s lost (%d acknowledged, %d read)", v, len(acked), len(recs))
		}
	}
}

// leaderOf is the leader of topic's partition 0.
func leaderOf(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int32 {
	t.Helper()
	parts, err := partitionISR(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	return parts[0].Leader
}

// No acknowledged record is lost when a partition leader goes away, RF 3,
// min.insync.replicas 2, an idempotent acks=-1 franz-go producer writing
// throughout: (a) the leader shuts down cleanly (controlled shutdown moves
// its leaderships first), (b) the leader is killed (no controlled shutdown:
// its partitions stay leaderless until the controller fences it after
// broker.session.timeout.ms). A consumer then reads everything from the new
// leaders.
func TestNoAckedRecordLostWhenLeaderStops(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test")
	}
	for _, kill := range []bool{false, true} {
		name := "controlled-shutdown"
		if kill {
			name = "kill"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, Controllers(1), Brokers(3), Override("min.insync.replicas", "2"))
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			adm := newFranzAdmin(t, c).(*franzAdmin).adm
			if _, err := adm.CreateTopic(ctx, 3, 3, nil, "ledger"); err != nil {
				t.Fatal(err)
			}
			waitTopicEverywhere(t, c, "ledger")
			waitFullISR(t, ctx, adm, "ledger", 10*time.Second)
			p := startSteadyProducer(t, c.bootstrap(), "ledger")
			pctx, stopProducing := context.WithCancel(ctx)
			var done sync.WaitGroup
			done.Go(func() { p.run(pctx) })
			waitFor(t, "500 acknowledged records", 30*time.Second, func() bool { return p.ackedCount() >= 500 })
			victim := leaderOf(t, ctx, adm, "ledger")
			before := p.ackedCount()
			if kill {
				c.nodes[victim].Kill()
				delete(c.nodes, victim)
			} else {
				c.stop(victim)
			}
			waitFor(t, "a new leader for partition 0", 30*time.Second, func() bool {
				parts, err := partitionISR(ctx, adm, "ledger")
				return err == nil && parts[0].Leader >= 0 && parts[0].Leader != victim
			})
			t.Cleanup(func() {
				if t.Failed() {
					dumpReplicas(t, c, "ledger")
				}
			})
			waitFor(t, "500 more acknowledged records", 30*time.Second, func() bool { return p.ackedCount() >= before+500 })
			stopProducing()
			done.Wait()
			p.finish()
			recs := readToEnd(t, ctx, c.bootstrap(), adm, "ledger")
			checkNoAckedLoss(t, recs, p.acked)
			// Writes resume once the controller fences the killed broker
			// (broker.session.timeout.ms 1500 here) and elects new leaders.
			// Before the replica manager judged eligibility by the image it
			// is synced to, the ISR shrink left the HW stuck until franz-go's
			// 10 s request timeout.
			if p.maxGap > 8*time.Second {
				t.Errorf("no acknowledgement for %v", p.maxGap)
			}
			t.Logf("%s of broker %d: %d sent, %d acknowledged, %d failed, %d read; longest time without an acknowledgement %v",
				name, victim, p.sent, len(p.acked), p.fails, len(recs), p.maxGap.Round(time.Millisecond))
		})
	}
}

// dumpReplicas logs every running broker's view of topic's partitions.
func dumpReplicas(t *testing.T, c *cluster, topic string) {
	for nid, a := range c.nodes {
		b := a.Broker()
		if b == nil || b.Replicas() == nil {
			continue
		}
		for _, tp := range b.Replicas().Hosted() {
			if tp.Topic != topic {
				continue
			}
			p, _ := b.Replicas().Partition(tp)
			st := p.State()
			t.Logf("broker %d %s: leader %d epoch %d partitionEpoch %d isr %v hw %d end %d epochs %v",
				nid, tp, st.Leader, st.LeaderEpoch, st.PartitionEpoch, st.ISR, p.HighWatermark(), p.Log().EndOffset(), p.Log().EpochEntries())
		}
	}
}
