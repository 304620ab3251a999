package interop

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// TestCompactedTopicReadByClients: a topic with cleanup.policy=compact and
// small segments takes 600 single-record batches over 6 keys (half from an
// idempotent producer, half from a plain one); the broker's background pass
// compacts the closed segments (log.retention.check.interval.ms 100). kgo
// and kcat then read the topic from the start to its end: every key's last
// value is there, offsets only grow, and the closed segments hold no
// superseded value: clients read batches whose records have gaps, and
// batches left with no record at all.
func TestCompactedTopicReadByClients(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1), Override("log.retention.check.interval.ms", "100"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	configs := map[string]*string{"cleanup.policy": kgoStr("compact"), "segment.bytes": kgoStr("4096")}
	if _, err := adm.CreateTopic(ctx, 1, 1, configs, "table"); err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for phase, opts := range [][]kgo.Opt{nil, {kgo.DisableIdempotentWrite()}} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("table")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			k, v := fmt.Sprintf("k%d", i%6), fmt.Sprintf("v%d-%03d", phase, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			last[k] = v
		}
		cl.Close()
	}
	broker := int32(2)
	p, ok := c.nodes[broker].Broker().Replicas().Partition(replica.TopicPartition{Topic: "table", Partition: 0})
	if !ok {
		t.Fatal("table-0 not hosted")
	}
	full := p.Log().Size()
	waitFor(t, "the closed segments compacted to one record per key", 30*time.Second, func() bool {
		n, err := recordsBelow(p.Log(), p.Log().ActiveSegmentBase())
		return err == nil && n <= 6
	})
	end := p.HighWatermark()
	cleanEnd := p.Log().ActiveSegmentBase()
	t.Logf("table-0: %d bytes compacted to %d; end offset %d, closed segments below %d", full, p.Log().Size(), end, cleanEnd)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("table"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	seen := map[string]int{}
	next := int64(-1)
	for next < end-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read up to offset %d of %d: %v", next, end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		for _, r := range fs.Records() {
			if r.Offset <= next {
				t.Fatalf("offset %d after %d", r.Offset, next)
			}
			next = r.Offset
			got[string(r.Key)] = string(r.Value)
			if r.Offset < cleanEnd {
				seen[string(r.Key)]++
			}
		}
	}
	for k, v := range last {
		if got[k] != v {
			t.Errorf("kgo: key %s ends at %q, want %q", k, got[k], v)
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("kgo: key %s appears %d times in the compacted segments", k, n)
		}
	}

	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	out, err := exec.CommandContext(ctx, bin, "-C", "-b", strings.Join(c.bootstrap(), ","), "-t", "table",
		"-o", "beginning", "-e", "-q", "-f", "%k=%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	kc := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		kc[k] = v
	}
	for k, v := range last {
		if kc[k] != v {
			t.Errorf("kcat: key %s ends at %q, want %q", k, kc[k], v)
		}
	}
}

func kgoStr(s string) *string { return &s }

// recordsBelow counts the records of l below offset end.
func recordsBelow(l *storage.Log, end int64) (int, error) {
	n := 0
	for off := l.StartOffset(); off < end; {
		data, err := l.Read(off, 1<<20, end)
		if err != nil || len(data) == 0 {
			return n, err
		}
		batches, _, err := storage.SplitBatches(data)
		if err != nil || len(batches) == 0 {
			return n, fmt.Errorf("batches at %d: %w", off, err)
		}
		for _, b := range batches {
			n += int(b.RecordCount())
			off = b.NextOffset()
		}
	}
	return n, nil
}
