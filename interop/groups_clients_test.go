package interop

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

// groupReaders are the other bundled clients' consumer-group readers: each
// reads n records of topic through group and commits what it read.
var groupReaders = []struct {
	name string
	read func(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int)
}{
	{"sarama-2.8", func(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int) {
		saramaGroupRead(t, ctx, c, sarama.DefaultVersion, group, topic, n)
	}},
	{"sarama-4.0", func(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int) {
		saramaGroupRead(t, ctx, c, sarama.V4_0_0_0, group, topic, n)
	}},
	{"kafka-go", kafkaGoGroupRead},
	{"kcat", kcatGroupRead},
	{"kafka-python", pythonGroupRead},
}

// TestGroupConsumersOfEveryClient: sarama (at its default protocol level and
// at Kafka 4.0's), segmentio/kafka-go, kcat (librdkafka's balanced
// consumer, -G) and kafka-python's KafkaConsumer each read a topic through a consumer group of their own and
// commit; the group's committed offsets, read with kadm, are the topic's end
// offsets.
func TestGroupConsumersOfEveryClient(t *testing.T) {
	t.Parallel()
	groupConsumersOfEveryClient(t, newCluster(t, append(groupOpts(1), Controllers(1), Brokers(1))...))
}

// TestLegacyGroupConsumersOfEveryClient is TestGroupConsumersOfEveryClient
// against a zk-legacy broker: the group coordinator of the ZooKeeper era
// serves every bundled client too.
func TestLegacyGroupConsumersOfEveryClient(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 1,
		app.Setting{Key: "offsets.topic.replication.factor", Value: "1"},
		app.Setting{Key: "group.initial.rebalance.delay.ms", Value: "200"})
	groupConsumersOfEveryClient(t, c)
}

// groupConsumersOfEveryClient is the body of TestGroupConsumersOfEveryClient
// against cluster c (one broker).
func groupConsumersOfEveryClient(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "multi"); err != nil {
		t.Fatal(err)
	}
	const n = 40
	// Uncompressed: Debian's kafka-python has no snappy (franz-go's default).
	produceN(t, ctx, c.bootstrap(), "multi", n, kgo.ProducerBatchCompression(kgo.NoCompression()))
	ends, err := adm.ListEndOffsets(ctx, "multi")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range groupReaders {
		t.Run(r.name, func(t *testing.T) {
			group := "readers-" + r.name
			start := time.Now()
			r.read(t, ctx, c, group, "multi", n)
			t.Logf("%s read %d records through group %s in %v", r.name, n, group, time.Since(start))
			var got map[int32]int64
			waitFor(t, "the group's commits", 15*time.Second, func() bool {
				got, err = tryCommitted(ctx, adm, group, "multi")
				ok := err == nil
				ends.Each(func(o kadm.ListedOffset) { ok = ok && got[o.Partition] == o.Offset })
				return ok
			})
		})
	}
}

type saramaHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done func()
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		if len(h.seen) >= h.want {
			s.Commit()
			h.done()
		}
		h.mu.Unlock()
	}
	return nil
}

func saramaGroupRead(t *testing.T, ctx context.Context, c *cluster, version sarama.KafkaVersion, group, topic string, n int) {
	t.Helper()
	conf := saramaConfig(version)
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup(c.bootstrap(), group, conf)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	defer cg.Close()
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	h := &saramaHandler{seen: map[string]bool{}, want: n, done: stop}
	for cctx.Err() == nil {
		if err := cg.Consume(cctx, []string{topic}, h); err != nil && cctx.Err() == nil {
			t.Fatalf("sarama consume: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("sarama read %d of %d records: %v", len(h.seen), n, ctx.Err())
	}
}

func kafkaGoGroupRead(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.bootstrap(), GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second})
	defer r.Close()
	for i := range n {
		if _, err := r.ReadMessage(ctx); err != nil { // commits synchronously (CommitInterval 0)
			t.Fatalf("kafka-go read %d of %d: %v", i, n, err)
		}
	}
}

func kcatGroupRead(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int) {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs Debian's kcat)")
	}
	// -G: librdkafka's KafkaConsumer; -e: exit at the end of every
	// partition; offsets committed at close (enable.auto.commit).
	cmd := exec.CommandContext(ctx, bin, "-b", strings.Join(c.bootstrap(), ","), "-G", group,
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-e", "-q", "-f", "%s\n", topic)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kcat -G: %v: %s", err, stderr)
	}
	if got := strings.Count(string(out), "\n"); got != n {
		t.Fatalf("kcat -G read %d records, want %d:\n%s", got, n, out)
	}
}

// pythonGroupScript reads argv[4] records of topic argv[3] through group
// argv[2] from bootstrap servers argv[1] with kafka-python's KafkaConsumer,
// commits synchronously, and prints how many it read.
const pythonGroupScript = `
import sys
from kafka import KafkaConsumer
servers, group, topic, n = sys.argv[1].split(","), sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, group_id=group, bootstrap_servers=servers, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300,
                  consumer_timeout_ms=30000)
seen = 0
for _ in c:
    seen += 1
    if seen == n:
        break
c.commit()
c.close()
print(seen)
`

func pythonGroupRead(t *testing.T, ctx context.Context, c *cluster, group, topic string, n int) {
	t.Helper()
	if !pythonUsable() {
		t.Skip("kafka-python not installed for " + systemPython + " (Debian's python3-kafka)")
	}
	out, err := exec.CommandContext(ctx, systemPython, "-c", pythonGroupScript,
		strings.Join(c.bootstrap(), ","), group, topic, strconv.Itoa(n)).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kafka-python consumer: %v: %s", err, stderr)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(n) {
		t.Fatalf("kafka-python read %s records, want %d", got, n)
	}
}
