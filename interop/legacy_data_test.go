package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// The zk-legacy data plane (issue 13, its ZooKeeper-era part): brokers
// started through app in zk-legacy mode on a real ZooKeeper host partition
// logs from LeaderAndIsr, replicate them with follower fetches, change ISRs
// through AlterPartition to the ZooKeeper-era controller, and serve
// Produce, Fetch, ListOffsets and InitProducerId with the KRaft handlers.

// waitLegacyTopicEverywhere waits until every running legacy broker's
// metadata cache has topic and its replica manager hosts every partition
// assigned to it.
func waitLegacyTopicEverywhere(t testing.TB, c *cluster, topic string) {
	t.Helper()
	waitFor(t, "topic "+topic+" hosted on every broker", 15*time.Second, func() bool {
		for _, a := range c.nodes {
			lb := a.LegacyBroker()
			if lb == nil {
				return false
			}
			tp, ok := lb.Image().TopicByName(topic)
			if !ok {
				return false
			}
			for id, p := range tp.Partitions() {
				if slices.Contains(p.Replicas(), lb.ID()) {
					if _, hosted := lb.Replica(topic, id); !hosted {
						return false
					}
				}
			}
		}
		return true
	})
}

// zkState reads a partition state znode through a fresh session.
func zkState(t *testing.T, ctx context.Context, zkAddr, topic string, p int32) legacyzk.LeaderIsr {
	t.Helper()
	st, err := legacyzk.DialZk(ctx, legacyzk.ZkConfig{Connect: zkAddr, SessionTimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data, stat, err := st.Get(ctx, legacyzk.PartitionStatePath(topic, p), false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := legacyzk.DecodeState(data, stat.Version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// franz-go produces (idempotent, acks=-1) to an RF 3 topic on three
// zk-legacy brokers and a read_committed consumer reads every record once
// and in order; producer ids came from a block this cluster claimed in
// /latest_producer_id_block, written as Kafka 3.3 writes it; the data-plane
// APIs are advertised at Kafka 3.3's versions.
func TestLegacyProduceConsumeFranzRF3(t *testing.T) {
	t.Parallel()
	c, zk := newLegacyCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	waitLegacyTopicEverywhere(t, c, "orders")
	const n = 900
	produceN(t, ctx, c.bootstrap(), "orders", n)
	waitFullISR(t, ctx, adm, "orders", 10*time.Second)
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "orders", n), n)
	ends, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != n {
		t.Fatalf("end offsets sum to %d, produced %d", total, n)
	}
	// Every replica holds every record: followers fetched them.
	for nid, a := range c.nodes {
		for p := int32(0); p < 3; p++ {
			part, ok := a.LegacyReplicas().Partition(replica.TopicPartition{Topic: "orders", Partition: p})
			if !ok {
				t.Fatalf("broker %d does not host orders-%d", nid, p)
			}
			total -= part.Log().EndOffset()
		}
	}
	if total != -2*n {
		t.Fatalf("the replicas' log end offsets sum to %d, want 3x%d", n-total, n)
	}

	st, err := legacyzk.DialZk(ctx, legacyzk.ZkConfig{Connect: zk.Addr, SessionTimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data, _, err := st.Get(ctx, legacyzk.ProducerIDBlockPath, false)
	if err != nil {
		t.Fatal(err)
	}
	var block map[string]any
	if err := json.Unmarshal(data, &block); err != nil {
		t.Fatal(err)
	}
	if block["version"] != 1.0 || block["block_start"] == nil || block["block_end"] == nil || block["broker"] == nil {
		t.Fatalf("/latest_producer_id_block = %s", data)
	}
	if _, ok := block["block_end"].(string); !ok {
		t.Fatalf("block_end is not a string as Kafka writes it: %s", data)
	}

	// The data plane is advertised at Kafka 3.3's versions (no KIP-951
	// leader hints: Produce v10 and Fetch v16 are 3.7's).
	pc := protocol.NewClient(protocol.ClientConfig{ClientID: "versions"})
	defer pc.Close()
	versions, err := pc.PeerVersions(ctx, c.brokerAddr(1))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[int16][2]int16{0: {3, 9}, 1: {4, 13}, 2: {1, 7}, 22: {0, 4}, 23: {0, 4}, 56: {0, 2}} {
		if versions[key] != want {
			t.Errorf("API %d advertised v%d-v%d, want v%d-v%d", key, versions[key][0], versions[key][1], want[0], want[1])
		}
	}
}

// A follower that stops fetching leaves the ISR through the leader's
// AlterPartition to the ZooKeeper-era controller (one conditional write of
// the state znode: ISR without it, same leader epoch, a new zkVersion),
// and after it restarts and catches up the leader's AlterPartition brings
// it back; acks=-1 produces complete throughout. The follower either hangs
// (its fetcher stops, it stays registered) or is killed (its session
// lingers 4 s, longer than replica.lag.time.max.ms, so the leader notices
// first, and it can register again only once the session is gone).
func TestLegacyISRShrinksAndGrowsBack(t *testing.T) {
	for _, fault := range []string{"hung-fetcher", "killed"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			legacyISRShrinksAndGrowsBack(t, fault)
		})
	}
}

func legacyISRShrinksAndGrowsBack(t *testing.T, fault string) {
	lag := app.Setting{Key: "replica.lag.time.max.ms", Value: "600"}
	c, zk := newLegacyCluster(t, 3, lag)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "isr"); err != nil {
		t.Fatal(err)
	}
	waitLegacyTopicEverywhere(t, c, "isr")
	produceN(t, ctx, c.bootstrap(), "isr", 100)
	waitFullISR(t, ctx, adm, "isr", 10*time.Second)
	before := zkState(t, ctx, zk.Addr, "isr", 0)
	// A follower that is not the controller: a dead controller would be
	// replaced after its session expired, and the new one would take the
	// dead follower out of the ISR itself (a new leader epoch).
	ctrl := legacyController(t, c)
	var follower int32 = -1
	for _, r := range before.ISR {
		if r != before.Leader && r != ctrl {
			follower = r
			break
		}
	}
	if fault == "killed" {
		c.nodes[follower].Kill()
		delete(c.nodes, follower)
	} else {
		c.nodes[follower].LegacyReplicas().StopReplication()
	}
	produceNFrom(t, ctx, c.bootstrap(), "isr", 100, 100)
	waitFor(t, fmt.Sprintf("broker %d out of the ISR", follower), 15*time.Second, func() bool {
		parts, err := partitionISR(ctx, adm, "isr")
		return err == nil && len(parts[0].ISR) == 2 && !slices.Contains(parts[0].ISR, follower)
	})
	shrunk := zkState(t, ctx, zk.Addr, "isr", 0)
	if shrunk.LeaderEpoch != before.LeaderEpoch || shrunk.Leader != before.Leader || shrunk.ZkVersion <= before.ZkVersion ||
		slices.Contains(shrunk.ISR, follower) {
		t.Fatalf("state after the shrink %+v, before %+v: want the same leader and leader epoch, a newer zkVersion", shrunk, before)
	}

	if fault == "killed" {
		waitFor(t, fmt.Sprintf("broker %d's session to expire", follower), 15*time.Second, func() bool {
			_, ok := c.nodes[ctrl].LegacyBroker().Image().Broker(follower)
			return !ok
		})
	} else {
		c.stop(follower)
	}
	startLegacy(c, follower, zk.Addr, lag)
	produceNFrom(t, ctx, c.bootstrap(), "isr", 200, 100)
	waitFullISR(t, ctx, adm, "isr", 15*time.Second)
	grown := zkState(t, ctx, zk.Addr, "isr", 0)
	if grown.LeaderEpoch != before.LeaderEpoch || !slices.Contains(grown.ISR, follower) || grown.ZkVersion <= shrunk.ZkVersion {
		t.Fatalf("state after the expansion %+v, after the shrink %+v", grown, shrunk)
	}
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "isr", 300), 300)
}

// No acknowledged record is lost when a zk-legacy partition leader goes
// away (RF 3, min.insync.replicas 2, an idempotent acks=-1 producer
// throughout): a controlled shutdown moves its leaderships first; after a
// kill its ZooKeeper session lingers until it would expire
// (zookeeper.session.timeout.ms 4000 here), then the controller elects new
// leaders from the ISR and pushes LeaderAndIsr; a killed controller is
// replaced only then, and its successor reads everything back before it
// elects leaders for what the dead broker led.
func TestLegacyNoAckedRecordLostWhenLeaderStops(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test")
	}
	for _, fault := range []string{"controlled-shutdown", "kill", "kill-controller"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			c, _ := newLegacyCluster(t, 3, app.Setting{Key: "min.insync.replicas", Value: "2"})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			adm := newFranzAdmin(t, c).(*franzAdmin).adm
			if _, err := adm.CreateTopic(ctx, 3, 3, nil, "ledger"); err != nil {
				t.Fatal(err)
			}
			waitLegacyTopicEverywhere(t, c, "ledger")
			waitFullISR(t, ctx, adm, "ledger", 10*time.Second)
			p := startSteadyProducer(t, c.bootstrap(), "ledger")
			pctx, stopProducing := context.WithCancel(ctx)
			var done sync.WaitGroup
			done.Go(func() { p.run(pctx) })
			waitFor(t, "500 acknowledged records", 30*time.Second, func() bool { return p.ackedCount() >= 500 })
			victim := leaderOf(t, ctx, adm, "ledger")
			if fault == "kill-controller" {
				victim = legacyController(t, c)
			}
			led := ledBy(t, ctx, adm, "ledger", victim)
			before := p.ackedCount()
			if fault == "controlled-shutdown" {
				c.stop(victim)
			} else {
				c.nodes[victim].Kill()
				delete(c.nodes, victim)
			}
			waitFor(t, fmt.Sprintf("new leaders for partitions %v", led), 30*time.Second, func() bool {
				parts, err := partitionISR(ctx, adm, "ledger")
				if err != nil {
					return false
				}
				for _, id := range led {
					if parts[id].Leader < 0 || parts[id].Leader == victim {
						return false
					}
				}
				return true
			})
			waitFor(t, "500 more acknowledged records", 30*time.Second, func() bool { return p.ackedCount() >= before+500 })
			stopProducing()
			done.Wait()
			p.finish()
			recs := readToEnd(t, ctx, c.bootstrap(), adm, "ledger")
			checkNoAckedLoss(t, recs, p.acked)
			if p.maxGap > 8*time.Second {
				t.Errorf("no acknowledgement for %v", p.maxGap)
			}
			t.Logf("zk-legacy %s of broker %d (leading partitions %v): %d sent, %d acknowledged, %d failed, %d read; longest time without an acknowledgement %v",
				fault, victim, led, p.sent, len(p.acked), p.fails, len(recs), p.maxGap.Round(time.Millisecond))
		})
	}
}

// ledBy lists the partitions of topic broker id leads.
func ledBy(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, id int32) []int32 {
	t.Helper()
	parts, err := partitionISR(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for p, d := range parts {
		if d.Leader == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// The other clients of the interop suite produce and consume against one
// zk-legacy broker exactly as against a KRaft cluster (the same test
// bodies; topics are auto-created through ZooKeeper).
func TestLegacySaramaProduceConsume(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 1)
	saramaProduceConsume(t, c)
}

func TestLegacyKafkaGoProduceConsume(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 1)
	kafkaGoProduceConsume(t, c)
}

func TestLegacyKafkaPythonProduceConsume(t *testing.T) {
	t.Parallel()
	if !pythonUsable() {
		t.Skipf("kafka-python not importable by %s (make deps installs python3-kafka)", systemPython)
	}
	c, _ := newLegacyCluster(t, 1)
	kafkaPythonProduceConsume(t, c)
}

func TestLegacyKcatProduceConsume(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs Debian's kcat)")
	}
	c, _ := newLegacyCluster(t, 1)
	kcatProduceConsume(t, c, bin)
}

// A zk-legacy broker whose log directory belongs to another cluster does
// not start, and leaves that directory as it found it: no checkpoint files
// and no clean-shutdown marker (which would make the other cluster's next
// start skip its recovery scan).
func TestLegacyForeignLogDirLeftUntouched(t *testing.T) {
	t.Parallel()
	c, zk := newLegacyCluster(t, 1)
	dir := t.TempDir()
	if err := app.WriteMetaProperties(dir, app.MetaProperties{Version: 0, ClusterID: "AAAAAAAAAAAAAAAAAAAAAA", NodeID: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg, err := app.LoadConfig([]app.Setting{
		{Key: "mode", Value: "zk-legacy"}, {Key: "node.id", Value: "2"},
		{Key: "listeners", Value: fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", freePort(t))},
		{Key: "log.dirs", Value: dir}, {Key: "zookeeper.connect", Value: zk.Addr},
		{Key: "zookeeper.session.timeout.ms", Value: "4000"},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); !errors.Is(err, app.ErrClusterIDMismatch) {
		_ = a.Stop(context.Background())
		t.Fatalf("start with another cluster's log directory: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != app.MetaPropertiesFile {
			t.Errorf("the failed start left %s in the other cluster's directory", e.Name())
		}
	}
	waitFor(t, "the refused broker gone from the metadata", 10*time.Second, func() bool {
		_, ok := c.nodes[1].LegacyBroker().Image().Broker(2)
		return !ok
	})
}

// A franz-go consumer group consumes and commits against a zk-legacy
// broker (issue 16): the first FindCoordinator creates __consumer_offsets
// through the ZooKeeper-era CreateTopics (50 partitions, compacted, as
// Kafka 3.3 creates it through ZooKeeper), the broker comes to lead the
// group's partition through LeaderAndIsr, and the body of
// TestFranzConsumerGroupConsumesAndCommits passes against it.
func TestLegacyFranzConsumerGroupConsumesAndCommits(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 1,
		app.Setting{Key: "offsets.topic.replication.factor", Value: "1"},
		app.Setting{Key: "group.initial.rebalance.delay.ms", Value: "200"})
	a := c.nodes[1]
	franzGroupConsumesAndCommits(t, c, a.LegacyBroker().Image, a.LegacyReplicas())
}

// franz-go's transactional producer against a zk-legacy broker (issue 16):
// __transaction_state created through the ZooKeeper-era CreateTopics on the
// first FindCoordinator for the transactional id, led as LeaderAndIsr
// says; the body of TestFranzTransactions passes against it.
func TestLegacyFranzTransactions(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 1,
		app.Setting{Key: "transaction.state.log.replication.factor", Value: "1"},
		app.Setting{Key: "transaction.state.log.min.isr", Value: "1"},
		app.Setting{Key: "transaction.state.log.num.partitions", Value: "4"})
	franzTransactions(t, c, waitLegacyTopicEverywhere, 1, 9) // Produce v9: Kafka 3.3's
}
