package app

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/legacyzk/zktest"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// A zk-legacy broker lists in DescribeLogDirs every partition log it loaded
// at startup, as Kafka's ReplicaManager.describeLogDirs lists every log of
// its LogManager (loaded by LogManager.startup, before any LeaderAndIsr),
// with its size and OffsetLag -1 when no partition hosts it
// (getLogEndOffsetLag's INVALID_OFFSET_LAG). Here "stray-0" is a log left
// in the directory of a topic ZooKeeper does not know: no LeaderAndIsr ever
// names it, so kraftd held it loaded but never listed it.
func TestLegacyDescribeLogDirsListsLoadedLogs(t *testing.T) {
	zk := zktest.Run(t)
	dir := t.TempDir()
	cfg := func() Config {
		c, err := LoadConfig(nil, []Setting{{"mode", "zk-legacy"}, {"node.id", "1"},
			{"listeners", "PLAINTEXT://127.0.0.1:0"}, {"log.dirs", dir},
			{"zookeeper.connect", zk.Addr}, {"zookeeper.session.timeout.ms", "4000"},
			{"offsets.topic.replication.factor", "1"}, {"transaction.state.log.replication.factor", "1"},
			{"transaction.state.log.min.isr", "1"}})
		if err != nil {
			t.Fatal(err)
		}
		c.Logger = zap.NewNop()
		return c
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "log-dirs-test"})
	defer cl.Close()
	resp, err := cl.Request(ctx, a.Addr("PLAINTEXT").String(), createTopicsReq("loaded", 1))
	if err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(a.Addr("PLAINTEXT").String()), kgo.DefaultProduceTopic("loaded"))
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("kept on disk")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "stray-0"), os.DirFS(filepath.Join(dir, "loaded-0"))); err != nil {
		t.Fatal(err)
	}

	a, err = New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	pollWithin(t, "loaded-0 hosted again", 30*time.Second, func() bool {
		return slices.Contains(a.LegacyReplicas().Hosted(), replica.TopicPartition{Topic: "loaded", Partition: 0})
	})
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(4)
	raw, err := cl.Request(ctx, a.Addr("PLAINTEXT").String(), req)
	if err != nil {
		t.Fatal(err)
	}
	dirs := raw.(*kmsg.DescribeLogDirsResponse).Dirs
	if len(dirs) != 1 {
		t.Fatalf("%d log dirs answered, want 1", len(dirs))
	}
	got := map[string]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	for _, tt := range dirs[0].Topics {
		for _, p := range tt.Partitions {
			if p.Partition == 0 {
				got[tt.Topic] = p
			}
		}
	}
	hosted, ok := got["loaded"]
	if !ok || hosted.Size <= 0 || hosted.OffsetLag != 0 {
		t.Fatalf("loaded-0: listed %t, size %d, lag %d; want listed with its record, lag 0", ok, hosted.Size, hosted.OffsetLag)
	}
	stray, ok := got["stray"]
	if !ok {
		t.Fatalf("stray-0, loaded at startup and hosted by no partition, is not listed: %+v", dirs[0].Topics)
	}
	if stray.Size != hosted.Size || stray.OffsetLag != -1 {
		t.Fatalf("stray-0: size %d, lag %d; want %d (a copy of loaded-0) and -1", stray.Size, stray.OffsetLag, hosted.Size)
	}
	// Asked for by name too, and only what is asked for.
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "stray", Partitions: []int32{0}}}
	raw, err = cl.Request(ctx, a.Addr("PLAINTEXT").String(), req)
	if err != nil {
		t.Fatal(err)
	}
	topics := raw.(*kmsg.DescribeLogDirsResponse).Dirs[0].Topics
	if len(topics) != 1 || topics[0].Topic != "stray" || len(topics[0].Partitions) != 1 {
		t.Fatalf("asked for stray-0: %+v", topics)
	}
}
