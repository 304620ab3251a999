package interop

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/storage"
)

// checkpointSum parses an offset checkpoint file and sums topic's offsets.
func checkpointSum(t *testing.T, dir, file, topic string) (sum int64, lines int) {
	t.Helper()
	entries, err := storage.ReadOffsetCheckpoint(dir, file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Topic == topic {
			sum += e.Offset
			lines++
		}
	}
	return sum, lines
}

func endOffsetSum(t *testing.T, ctx context.Context, servers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(servers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("list offsets %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		sum += o.Offset
	})
	return sum
}

// copyDir copies a directory tree (a crash image of a running node's data
// directory: what is in the page cache is what a crash of the process
// leaves).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) { // a .tmp renamed meanwhile
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A broker's partition logs across restarts. Clean: the stop writes
// recovery-point-offset-checkpoint and replication-offset-checkpoint with
// every partition at its log end (Kafka's format, checked through the
// decoder), an empty log-start-offset-checkpoint and .kafka_cleanshutdown;
// the restarted broker removes the marker and serves every record once, in
// order, with the same end offsets. Unclean: a crash image of the running
// broker's directory (no marker, the high watermarks of the periodic
// checkpoint, torn bytes after each partition's last batch) restarts into
// the same records and end offsets.
func TestLogCheckpointsAcrossRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1), Override("replica.high.watermark.checkpoint.interval.ms", "50"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin)
	if _, err := adm.adm.CreateTopic(ctx, 2, 1, nil, "ckpt"); err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, c.bootstrap(), "ckpt", 300)
	const broker = int32(2)
	dir := c.dirs[broker]

	c.stop(broker)
	for _, file := range []string{storage.RecoveryPointCheckpointFile, storage.ReplicationOffsetCheckpointFile} {
		if sum, lines := checkpointSum(t, dir, file, "ckpt"); sum != 300 || lines != 2 {
			t.Fatalf("%s: %d lines summing to %d, want 2 summing to 300", file, lines, sum)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, storage.LogStartOffsetCheckpointFile)); err != nil || string(data) != "0\n0\n" {
		t.Fatalf("log-start-offset-checkpoint %q (%v)", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after a clean stop: %v", err)
	}
	c.start(broker, c.overrides)
	checkExactlyOnceInOrder(t, consumeAll(t, ctx, c.bootstrap(), "ckpt", 300), 300)
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker left after the start: %v", err)
	}
	if sum := endOffsetSum(t, ctx, c.bootstrap(), "ckpt"); sum != 300 {
		t.Fatalf("end offsets sum to %d after a clean restart", sum)
	}

	// Unclean: 300 more, wait for the periodic high watermark checkpoint,
	// then take a crash image and tear each partition's tail.
	produceN(t, ctx, c.bootstrap(), "ckpt", 300, kgo.DefaultProduceTopic("ckpt"))
	waitFor(t, "the periodic high watermark checkpoint", 10*time.Second, func() bool {
		sum, _ := checkpointSum(t, dir, storage.ReplicationOffsetCheckpointFile, "ckpt")
		return sum == 600
	})
	crash := t.TempDir()
	copyDir(t, dir, crash)
	for p := range 2 {
		seg := filepath.Join(crash, "ckpt-"+strconv.Itoa(p), storage.SegmentFileName(0, storage.LogSuffix))
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(strings.Repeat("\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00torn", 3))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	c.stop(broker)
	c.dirs[broker] = crash
	c.start(broker, c.overrides)
	recs := consumeAll(t, ctx, c.bootstrap(), "ckpt", 600)
	if len(recs) != 600 {
		t.Fatalf("read %d records after the crash", len(recs))
	}
	if sum := endOffsetSum(t, ctx, c.bootstrap(), "ckpt"); sum != 600 {
		t.Fatalf("end offsets sum to %d after the crash, want 600 (torn tails cut)", sum)
	}
}
