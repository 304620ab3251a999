package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceN produces n records with an idempotent (kgo's default) acks=-1
// producer, keys spreading them over the partitions, and waits for every ack.
func produceN(t *testing.T, ctx context.Context, servers []string, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(servers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("v%06d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads n records of topic from the start, with a read_committed
// consumer (librdkafka's and kcat's default isolation too).
func consumeAll(t *testing.T, ctx context.Context, servers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(servers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// checkExactlyOnceInOrder checks that every value v000000..v(n-1) was read
// once, that each partition's offsets run 0, 1, 2, ... and that each key's
// values come in production order (one key maps to one partition).
func checkExactlyOnceInOrder(t *testing.T, recs []*kgo.Record, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("read %d records, produced %d", len(recs), n)
	}
	seen := map[string]bool{}
	nextOffset := map[int32]int64{}
	lastByKey := map[string]string{}
	for _, r := range recs {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("record %s read twice", v)
		}
		seen[v] = true
		if r.Offset != nextOffset[r.Partition] {
			t.Fatalf("partition %d: offset %d where %d was next", r.Partition, r.Offset, nextOffset[r.Partition])
		}
		nextOffset[r.Partition]++
		if prev := lastByKey[string(r.Key)]; prev != "" && prev > v {
			t.Fatalf("key %s: %s after %s", r.Key, v, prev)
		}
		lastByKey[string(r.Key)] = v
	}
}

// franz-go produces with its defaults (idempotent, acks=-1, snappy batches)
// through two brokers leading a topic's partitions, and a read_committed
// consumer reads every record exactly once and in order; after both brokers
// restart (logs recovered from disk) the records read back the same.
func TestProduceConsumeFranzIdempotent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin)
	if _, err := adm.adm.CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	produceN(t, ctx, c.bootstrap(), "orders", n)
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "orders", n), n)

	offsets, err := adm.adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offsets.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("ListOffsets %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		total += o.Offset
	})
	if total != n {
		t.Fatalf("end offsets sum to %d, produced %d", total, n)
	}

	for nid := range c.brokerPorts {
		c.stop(nid)
		c.start(nid, c.overrides)
	}
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "orders", n), n)
	// Appends continue after the restart.
	produceN(t, ctx, c.bootstrap(), "orders", 10)
}

// A producer writing to a topic nobody created gets it auto-created
// (auto.create.topics.enable defaults to true, as in Kafka).
func TestProduceAutoCreatesTopic(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produceN(t, ctx, c.bootstrap(), "auto", 50, kgo.AllowAutoTopicCreation())
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "auto", 50), 50)
}

// kcat (librdkafka) produces lines with -P and reads them back with -C -e,
// the README's quick start.
func TestKcatProduceConsume(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs Debian's kcat)")
	}
	kcatProduceConsume(t, newCluster(t, Controllers(1), Brokers(1)), bin)
}

// kcatProduceConsume is the test body against c, a KRaft or zk-legacy cluster.
func kcatProduceConsume(t *testing.T, c *cluster, bin string) {
	c.waitBrokersListed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	servers := strings.Join(c.bootstrap(), ",")
	var want []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		lines := []string{"hello-" + codec, "world-" + codec}
		cmd := exec.CommandContext(ctx, bin, "-P", "-b", servers, "-t", "demo", "-z", codec)
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P -z %s: %v: %s", codec, err, out)
		}
		want = append(want, lines...)
	}
	out, err := exec.CommandContext(ctx, bin, "-C", "-b", servers, "-t", "demo", "-e", "-q", "-f", "%o %s\n").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	var expect bytes.Buffer
	for i, l := range want {
		fmt.Fprintf(&expect, "%d %s\n", i, l)
	}
	if string(out) != expect.String() {
		t.Fatalf("kcat -C printed\n%s\nwant\n%s", out, expect.String())
	}
}

// A topic deleted while a broker was down leaves no log behind: once the
// restarted broker has caught up with the metadata, its directory for the
// topic is deleted as a stray, while the logs of live topics stay.
func TestStrayLogDeletedAfterRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin)
	for _, topic := range []string{"doomed", "alive"} {
		if _, err := adm.adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		produceN(t, ctx, c.bootstrap(), topic, 40)
	}
	// Pick a broker holding a partition of each topic.
	var down int32 = -1
	for nid := range c.brokerPorts {
		if dirExists(filepath.Join(c.dirs[nid], "doomed-0")) || dirExists(filepath.Join(c.dirs[nid], "doomed-1")) {
			down = nid
		}
	}
	if down < 0 {
		t.Fatal("no broker holds doomed-0 or doomed-1")
	}
	doomedDirs, _ := filepath.Glob(filepath.Join(c.dirs[down], "doomed-*"))
	aliveDirs, _ := filepath.Glob(filepath.Join(c.dirs[down], "alive-*"))
	c.stop(down)
	if _, err := adm.adm.DeleteTopics(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	c.start(down, c.overrides)
	waitFor(t, "the stray logs to go", 20*time.Second, func() bool {
		for _, d := range doomedDirs {
			if dirExists(d) {
				return false
			}
		}
		return true
	})
	for _, d := range aliveDirs {
		if !dirExists(d) {
			t.Fatalf("live log %s was deleted", d)
		}
	}
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
