package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// keyedBatch is a producer batch of n records; keys[i] nil makes record i
// keyless. Values are 500 compressible bytes.
func keyedBatch(keys ...[]byte) []byte {
	recs := make([]storage.Record, len(keys))
	for i, k := range keys {
		recs[i] = storage.Record{Key: k, Value: bytes.Repeat([]byte{'v'}, 500), TimestampMs: 1000}
	}
	return storage.EncodeBatch(0, -1, 1000, false, recs).Raw
}

// TopicConfig.With layers values over defaults in TopicConfigKeys order; a
// value that does not parse leaves the default and is reported by name.
func TestTopicConfigWith(t *testing.T) {
	vals := map[string]string{
		"segment.bytes": "1000", "log.roll.ms": "60000", "retention.ms": "-1", "log.retention.bytes": "-5",
		"max.message.bytes": "x", "compression.type": "ZSTD", "cleanup.policy": "compact", "min.insync.replicas": "2",
		"log.cleaner.delete.retention.ms": "5000",
	}
	cfg, err := DefaultTopicConfig().With(func(topicKey, brokerKey string) (string, bool) {
		if v, ok := vals[topicKey]; ok {
			return v, true
		}
		v, ok := vals[brokerKey]
		return v, ok
	})
	want := TopicConfig{SegmentBytes: 1000, SegmentMs: 60000, RetentionMs: -1, RetentionBytes: -1,
		MaxMessageBytes: DefaultMaxMessageBytes, CompressionType: "zstd", Compact: true, MinInsyncReplicas: 2, DeleteRetentionMs: 5000}
	if cfg != want {
		t.Fatalf("config %+v, want %+v", cfg, want)
	}
	if err == nil || !strings.Contains(err.Error(), "max.message.bytes") || strings.Contains(err.Error(), "segment.bytes") {
		t.Fatalf("error %v, want one naming max.message.bytes only", err)
	}
	if _, err := DefaultTopicConfig().With(func(k, _ string) (string, bool) { return "brotli", k == "compression.type" }); err == nil {
		t.Fatal("unknown codec accepted")
	}
}

// cleanup.policy=compact: a record without a key is INVALID_RECORD naming
// that record (Kafka's per-record error); keyed batches append.
func TestCompactedTopicRequiresKeys(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	appendOK(t, p, keyedBatch([]byte("a"), nil)) // delete policy: keys optional
	cfg := DefaultTopicConfig()
	cfg.Delete, cfg.Compact = false, true
	m.SetTopicConfig("demo", cfg)
	_, err := p.AppendAsLeader(keyedBatch([]byte("a"), nil), acksLeader)
	var re *RecordError
	if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRecord) || re.Index != 1 ||
		re.Message != "Compacted topic cannot accept message without key in topic partition demo-0." {
		t.Fatalf("keyless record on a compacted topic: %v", err)
	}
	appendOK(t, p, keyedBatch([]byte("a"), []byte("b")))
	if end := p.Log().EndOffset(); end != 4 {
		t.Fatalf("log end %d, want 4", end)
	}
}

// compression.type other than producer: batches of another codec are stored
// recompressed (and checked against max.message.bytes again); producer keeps
// them as sent.
func TestTopicCompressionType(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	stored := func(offset int64) storage.Batch {
		t.Helper()
		data, err := p.Log().Read(offset, 1<<20, offset+100)
		if err != nil {
			t.Fatal(err)
		}
		bs, _, err := storage.SplitBatches(data)
		if err != nil || len(bs) == 0 {
			t.Fatalf("read at %d: %d batches, %v", offset, len(bs), err)
		}
		return bs[0]
	}
	appendOK(t, p, keyedBatch(nil, nil))
	if c := stored(0).Compression(); c != storage.CompressionNone {
		t.Fatalf("producer: stored with codec %d", c)
	}
	cfg := DefaultTopicConfig()
	cfg.CompressionType = "zstd"
	m.SetTopicConfig("demo", cfg)
	res := appendOK(t, p, keyedBatch(nil, nil))
	b := stored(res.BaseOffset)
	if b.Compression() != storage.CompressionZstd || b.Size() >= len(keyedBatch(nil, nil)) || b.BaseOffset != 2 || b.Epoch != 3 {
		t.Fatalf("zstd topic: stored codec %d, %d bytes, base %d, epoch %d", b.Compression(), b.Size(), b.BaseOffset, b.Epoch)
	}
	n := 0
	if err := b.ScanRecords(func(int, storage.RecordHeader) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("recompressed records: %d, %v", n, err)
	}
	// Decompressed to uncompressed, a small zstd batch outgrows max.message.bytes.
	cfg.CompressionType, cfg.MaxMessageBytes = CompressionUncompressed, 400
	m.SetTopicConfig("demo", cfg)
	small, err := storage.ParseBatch(keyedBatch(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if small, err = small.Recompress(storage.CompressionZstd); err != nil || small.Size() > 400 {
		t.Fatalf("zstd batch of %d bytes, %v", small.Size(), err)
	}
	if _, err := p.AppendAsLeader(small.Raw, acksLeader); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("recompressed past max.message.bytes: %v", err)
	}
}

// A topic config update applies to the open log: segment.bytes rolls the
// next append, max.message.bytes refuses it.
func TestTopicConfigUpdateAppliesToOpenLog(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	appendOK(t, p, keyedBatch(nil))
	appendOK(t, p, keyedBatch(nil))
	if base := p.Log().ActiveSegmentBase(); base != 0 {
		t.Fatalf("rolled at %d with the default segment.bytes", base)
	}
	cfg := DefaultTopicConfig()
	cfg.SegmentBytes = 1000
	m.SetTopicConfig("demo", cfg)
	appendOK(t, p, keyedBatch(nil))
	if base := p.Log().ActiveSegmentBase(); base != 2 {
		t.Fatalf("active segment at %d after segment.bytes 1000, want 2", base)
	}
	if _, err := p.AppendAsLeader(keyedBatch(nil, nil, nil), acksLeader); !errors.Is(err, ErrRecordListTooLarge) {
		t.Fatalf("records larger than segment.bytes: %v", err)
	}
	cfg.MaxMessageBytes = 100
	m.SetTopicConfig("demo", cfg)
	if _, err := p.AppendAsLeader(keyedBatch(nil), acksLeader); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("batch over the new max.message.bytes: %v", err)
	}
	// A partition opened later gets the topic's config.
	m2 := newManager(t, t.TempDir())
	m2.SetTopicConfig("demo", cfg)
	if got := lead(t, m2).Config(); got != cfg {
		t.Fatalf("new partition config %+v, want %+v", got, cfg)
	}
}

// A topic's partitions share one configuration (a pointer each, not a
// copy: issue 17's memory per hosted partition), and sharing loses no
// update: SetTopicConfig replaces it in every partition of the topic and
// in those hosted later, and leaves other topics' alone; an unchanged
// config keeps the one shared. A deleted topic's config is forgotten: the
// partitions of a topic created again with that name start from the
// defaults.
func TestTopicConfigSharedPerTopic(t *testing.T) {
	m := newManager(t, t.TempDir())
	apply := func(topic string, partition int32) *Partition {
		t.Helper()
		tp := TopicPartition{topic, partition}
		if err := m.Apply(PartitionState{TopicPartition: tp, TopicID: topicID, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
			t.Fatal(err)
		}
		p, _ := m.Partition(tp)
		return p
	}
	a0, a1, b0 := apply("a", 0), apply("a", 1), apply("b", 0)
	if a0.cfg.Load() != a1.cfg.Load() || a0.cfg.Load() != b0.cfg.Load() {
		t.Fatal("partitions without topic configs do not share the default")
	}
	cfg := DefaultTopicConfig()
	cfg.RetentionMs, cfg.MaxMessageBytes = 1000, 500
	m.SetTopicConfig("a", cfg)
	shared := a0.cfg.Load()
	if a1.cfg.Load() != shared || a0.Config() != cfg || a1.Config() != cfg {
		t.Fatalf("topic a after its update: %+v and %+v (shared %v), want %+v", a0.Config(), a1.Config(), a1.cfg.Load() == shared, cfg)
	}
	if b0.Config() != DefaultTopicConfig() {
		t.Fatalf("topic b changed by topic a's update: %+v", b0.Config())
	}
	a2 := apply("a", 2)
	if a2.cfg.Load() != shared {
		t.Fatalf("partition hosted after the update: %+v, not the topic's shared config", a2.Config())
	}
	m.SetTopicConfig("a", cfg) // unchanged
	if a0.cfg.Load() != shared {
		t.Fatal("an unchanged config replaced the shared one")
	}
	cfg.RetentionMs = 2000
	m.SetTopicConfig("a", cfg)
	for _, p := range []*Partition{a0, a1, a2} {
		if p.Config() != cfg || p.cfg.Load() != a0.cfg.Load() {
			t.Fatalf("%s after the second update: %+v, want %+v shared", p.TopicPartition(), p.Config(), cfg)
		}
	}
	if got := m.TopicConfig("a"); got != cfg {
		t.Fatalf("manager's topic a config %+v, want %+v", got, cfg)
	}
	m.ForgetTopicConfig("a")
	if got := m.TopicConfig("a"); got != DefaultTopicConfig() {
		t.Fatalf("forgotten topic config %+v, want the defaults", got)
	}
}

// Retention through the manager: CleanupLogs deletes by the topic's
// retention.ms below the high watermark; ListOffsets earliest then answers
// the new log start offset and a read below it is OFFSET_OUT_OF_RANGE. A
// compact-only topic keeps everything.
func TestCleanupLogs(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	cfg := DefaultTopicConfig()
	cfg.SegmentBytes, cfg.RetentionMs = int64(len(batch(2, -1, 0, 0))), 60000
	m.SetTopicConfig("demo", cfg)
	for range 3 {
		appendOK(t, p, batch(2, -1, 0, 0)) // record timestamps 1000-1001
	}
	compactOnly := cfg
	compactOnly.Delete, compactOnly.Compact = false, true
	m.SetTopicConfig("demo", compactOnly)
	if n := m.CleanupLogs(1 << 40); n != 0 {
		t.Fatalf("compact-only topic lost %d segments", n)
	}
	m.SetTopicConfig("demo", cfg)
	if n := m.CleanupLogs(1000 + 60000); n != 0 {
		t.Fatalf("deleted %d segments not yet past retention.ms", n)
	}
	if n := m.CleanupLogs(1001 + 60001); n != 3 {
		t.Fatalf("deleted %d segments, want all 3 (the log rolls)", n)
	}
	if off, _, _, _, err := p.OffsetForTimestamp(EarliestTimestamp, -1); err != nil || off != 6 {
		t.Fatalf("earliest %d (%v), want 6", off, err)
	}
	if _, err := p.ReadAsLeader(4, 1<<20, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if res := appendOK(t, p, batch(1, -1, 0, 0)); res.BaseOffset != 6 || res.LogStartOffset != 6 {
		t.Fatalf("append after retention: %+v", res)
	}
}

// Start's goroutine runs retention every log.retention.check.interval.ms
// and Close stops it (synctest: the bubble fails if it leaks).
func TestRetentionRunsInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := New(Config{Dir: t.TempDir(), BrokerID: 1, RetentionCheckIntervalMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		p := lead(t, m)
		cfg := DefaultTopicConfig()
		cfg.SegmentBytes = int64(len(batch(2, -1, 0, 0)))
		m.SetTopicConfig("demo", cfg)
		appendOK(t, p, batch(2, -1, 0, 0)) // from 1970: older than 7 days in the bubble's 2000
		appendOK(t, p, batch(2, -1, 0, 0))
		m.Start()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if s := p.Log().StartOffset(); s != 0 {
			t.Fatalf("retention ran early: start %d", s)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if s := p.Log().StartOffset(); s != 4 {
			t.Fatalf("log start %d after the first retention check, want 4", s)
		}
		// replica.high.watermark.checkpoint.interval.ms: 5 s.
		hwFile := filepath.Join(m.cfg.Dir, storage.ReplicationOffsetCheckpointFile)
		if _, err := os.Stat(hwFile); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("high watermarks checkpointed before the interval: %v", err)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if got := readFile(t, hwFile); got != "0\n1\ndemo 0 4\n" {
			t.Fatalf("periodic checkpoint %q", got)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// hwBelowEnd leads demo-0 with high watermark 4 and log end 6: alone in the
// ISR for 4 records, then with follower 2 (not heard from) for 2 more.
func hwBelowEnd(t *testing.T, m *Manager) *Partition {
	t.Helper()
	p := lead(t, m)
	appendOK(t, p, batch(4, -1, 0, 0))
	p = lead(t, m, 1, 2)
	if _, err := p.AppendAsLeader(batch(2, -1, 0, 0), acksLeader); err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 4 || p.Log().EndOffset() != 6 {
		t.Fatalf("hw %d end %d", p.HighWatermark(), p.Log().EndOffset())
	}
	return p
}

// A clean Close writes the three checkpoint files in Kafka's format and the
// clean-shutdown marker; the next start removes the marker, opens the log
// without a scan and restores the high watermark (not the log end: a
// follower in the ISR may not have the rest).
func TestCheckpointsAtCleanShutdown(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	p := hwBelowEnd(t, m)
	p.Log().SetStartOffset(1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		storage.RecoveryPointCheckpointFile:     "0\n1\ndemo 0 6\n",
		storage.ReplicationOffsetCheckpointFile: "0\n1\ndemo 0 4\n",
		storage.LogStartOffsetCheckpointFile:    "0\n1\ndemo 0 1\n",
		storage.CleanShutdownFile:               `{"version":0,"brokerEpoch":-1}`,
	} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	m = newManager(t, dir)
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker still there after the start: %v", err)
	}
	p = lead(t, m, 1, 2)
	if p.HighWatermark() != 4 || p.Log().EndOffset() != 6 || p.Log().StartOffset() != 1 || p.Log().RecoveryPoint() != 6 {
		t.Fatalf("after restart: hw %d end %d start %d recovery point %d, want 4 6 1 6",
			p.HighWatermark(), p.Log().EndOffset(), p.Log().StartOffset(), p.Log().RecoveryPoint())
	}
	// A partition's entries go with its deleted log.
	if err := m.Remove(p.TopicPartition(), true); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, storage.ReplicationOffsetCheckpointFile)); got != "0\n0\n" {
		t.Fatalf("after the delete: %q", got)
	}
}

// After a crash (no Close, no marker) the log is recovered from the
// checkpointed recovery point, cutting a torn tail, and the high watermark
// comes from the last replication-offset-checkpoint; a partition not
// opened yet keeps its entries in the files written meanwhile.
func TestRecoveryAfterUncleanShutdown(t *testing.T) {
	dir := t.TempDir()
	m, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	hwBelowEnd(t, m)
	if err := m.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	// The crash: m is abandoned, and the last append was torn.
	seg := filepath.Join(dir, "demo-0", storage.SegmentFileName(0, storage.LogSuffix))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(batch(3, -1, 0, 0)[:40]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m2 := newManager(t, dir)
	if err := m2.WriteCheckpoints(); err != nil { // demo-0 not opened yet
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, storage.ReplicationOffsetCheckpointFile)); got != "0\n1\ndemo 0 4\n" {
		t.Fatalf("entries of an unopened log lost: %q", got)
	}
	p := lead(t, m2, 1, 2)
	if p.HighWatermark() != 4 || p.Log().EndOffset() != 6 {
		t.Fatalf("after the crash: hw %d end %d, want 4 6", p.HighWatermark(), p.Log().EndOffset())
	}
	if got := readAllOffsets(t, p); got != 6 {
		t.Fatalf("read %d records after recovery", got)
	}
}

// readAllOffsets counts the records in the log.
func readAllOffsets(t *testing.T, p *Partition) int {
	t.Helper()
	data, err := p.Log().Read(p.Log().StartOffset(), 1<<20, p.Log().EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	bs, _, err := storage.SplitBatches(data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range bs {
		n += int(b.LastOffset - b.BaseOffset + 1)
	}
	return n
}

// A deleted partition's directory is renamed at once (Kafka's
// "<topic>-<partition>.<id>-delete") and removed by the background
// goroutine; a leftover from before a restart goes with DeleteStrays.
func TestDeletedLogRemovedInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := New(Config{Dir: dir, BrokerID: 1})
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		p := lead(t, m)
		appendOK(t, p, batch(2, -1, 0, 0))
		if err := m.Remove(p.TopicPartition(), true); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "demo-0")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("partition directory still there after Remove: %v", err)
		}
		synctest.Wait()
		if left, _ := filepath.Glob(filepath.Join(dir, "demo-0.*-delete")); len(left) != 0 {
			t.Fatalf("left %v", left)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// tearLastAppend appends the first 40 bytes of a batch to demo-0's first
// segment: the write a crash cut short.
func tearLastAppend(t *testing.T, dir string) {
	t.Helper()
	seg := filepath.Join(dir, "demo-0", storage.SegmentFileName(0, storage.LogSuffix))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(batch(3, -1, 0, 0)[:40]); err != nil {
		t.Fatal(err)
	}
}

// After a crash, a manager closed before it opened every log of its
// directory does not write the clean-shutdown marker (Kafka's LogManager
// writes it only for a directory that had one at start or whose logs were
// all recovered): the crashed log is still recovered at its next open. Once
// a later run has opened (recovered) it, the marker comes back; a directory
// that was clean at start stays clean with logs never opened.
func TestNoCleanShutdownMarkerOverUnrecoveredLogs(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, storage.CleanShutdownFile)
	m, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	hwBelowEnd(t, m)
	tearLastAppend(t, dir) // the crash: m is abandoned
	// A start that fails before hosting demo-0 (broker.New failing after
	// replica.New, or a zk-legacy broker not assigned demo-0) closes the
	// manager.
	m2, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker written over a log never recovered: %v", err)
	}
	m3, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := lead(t, m3, 1, 2)
	if got := readAllOffsets(t, p); got != 6 || p.Log().EndOffset() != 6 {
		t.Fatalf("after the crash: %d records, end %d, want 6 6 (torn tail cut)", got, p.Log().EndOffset())
	}
	if err := m3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("every log recovered and closed, no marker: %v", err)
	}
	// Clean at start: logs not opened are as clean as they were.
	m4, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m4.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("clean directory lost its marker: %v", err)
	}
}

// TestNewPartitionsFsyncOffThePublisher: hosting new partitions costs no
// fsync in ApplyAll (the metadata publisher's call): their
// partition.metadata files are written by the manager's background
// goroutine, as Kafka's UnifiedLog schedules them, and by Close for a
// manager never started. It cost two per partition (file and directory).
func TestNewPartitionsFsyncOffThePublisher(t *testing.T) {
	const n = 20
	states := func(topic string) []PartitionState {
		out := make([]PartitionState, n)
		for p := range int32(n) {
			out[p] = PartitionState{TopicPartition: TopicPartition{topic, p}, TopicID: topicID, Leader: 1 + p%2,
				LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
		}
		return out
	}
	metaFiles := func(dir, topic string) int {
		found := 0
		for p := range n {
			data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p), storage.PartitionMetadataFile))
			if err == nil && string(data) == string(storage.EncodePartitionMetadata(topicID)) {
				found++
			}
		}
		return found
	}
	dir := t.TempDir()
	m := newManager(t, dir) // not started: no background flush
	before := storage.Fsyncs()
	if err := m.ApplyAll(states("demo")); err != nil {
		t.Fatal(err)
	}
	if got := storage.Fsyncs() - before; got != 0 {
		t.Fatalf("ApplyAll of %d new partitions: %d fsyncs, want 0", n, got)
	}
	if got := metaFiles(dir, "demo"); got != 0 {
		t.Fatalf("%d partition.metadata files before any flush", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := metaFiles(dir, "demo"); got != n {
		t.Fatalf("%d of %d partition.metadata files after Close", got, n)
	}
	// Started: the background goroutine writes them.
	m2 := newManager(t, t.TempDir())
	m2.Start()
	if err := m2.ApplyAll(states("other")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metaFiles(m2.cfg.Dir, "other") < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d partition.metadata files written in the background", metaFiles(m2.cfg.Dir, "other"), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, tp := range m2.Hosted() {
		if p, _ := m2.Partition(tp); !p.Log().TopicIDFlushed() {
			t.Fatalf("%s: topic id not flushed", tp)
		}
	}
}

// TestCrashBeforeTopicIDFlush: a broker crashes after creating
// partitions and before their partition.metadata files reach the disk;
// while it is down the topic is deleted and recreated (another topic id).
// At restart a directory without the file holds no batch (each append
// flushes the file first), so it is adopted empty by the new topic when
// the metadata assigns the partition here again, and deleted as a stray
// otherwise; a directory of the old topic that got data carries the old
// id and is a stray by it. No log of the old topic is taken over.
func TestCrashBeforeTopicIDFlush(t *testing.T) {
	dir := t.TempDir()
	oldID, newID := [16]byte{1, 1}, [16]byte{2, 2}
	m, err := New(Config{Dir: dir, BrokerID: 1}) // never started, never closed: the crash
	if err != nil {
		t.Fatal(err)
	}
	var states []PartitionState
	for p := range int32(3) {
		states = append(states, PartitionState{TopicPartition: TopicPartition{"demo", p}, TopicID: oldID,
			Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}})
	}
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	p2, _ := m.Partition(TopicPartition{"demo", 2})
	if _, err := p2.AppendAsLeader(batch(2, -1, 0, 0), acksLeader); err != nil {
		t.Fatal(err)
	}
	meta := func(p int) ([16]byte, error) {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("demo-%d", p), storage.PartitionMetadataFile))
		if err != nil {
			return [16]byte{}, err
		}
		return storage.DecodePartitionMetadata(data)
	}
	for p := range 2 {
		if _, err := meta(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("demo-%d: partition.metadata before the crash: %v", p, err)
		}
	}
	if id, err := meta(2); err != nil || id != oldID {
		t.Fatalf("demo-2 was appended to: partition.metadata %x %v, want the old id", id, err)
	}
	// The restart: the new topic's demo-0 is assigned here, demo-1 and
	// demo-2 are not. The publisher applies the image, then deletes strays.
	m2 := newManager(t, dir)
	if err := m2.Apply(PartitionState{TopicPartition: TopicPartition{"demo", 0}, TopicID: newID,
		Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	removed, err := m2.DeleteStrays(func(tp TopicPartition, id [16]byte) bool {
		return id == newID && tp.Partition == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Fatalf("removed %v, want demo-1 and demo-2", removed)
	}
	for _, p := range []int{1, 2} {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("demo-%d", p))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("demo-%d left: %v", p, err)
		}
	}
	p0, _ := m2.Partition(TopicPartition{"demo", 0})
	if id, _ := p0.Log().TopicID(); id != newID || p0.Log().EndOffset() != 0 {
		t.Fatalf("demo-0: topic id %x end %d, want the new id and an empty log", id, p0.Log().EndOffset())
	}
}

// TestRestartRecoversEveryLog: a broker hosting many partitions (empty
// ones, ones with a few small batches and no index entry, ones with index
// entries, all opened concurrently by ApplyAll) restarts after a clean
// shutdown and after a crash (no Close, no marker, a torn tail on one
// log): every log comes back with its end offset and topic id, the torn
// tail cut, and a clean restart rewrites nothing.
func TestRestartRecoversEveryLog(t *testing.T) {
	const n = 30
	dir := t.TempDir()
	states := make([]PartitionState, n)
	for p := range int32(n) {
		states[p] = PartitionState{TopicPartition: TopicPartition{"demo", p}, TopicID: topicID, Leader: 1,
			LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	}
	records := func(p int32) int { return []int{0, 3, 400}[p%3] } // 400: index entries
	m, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	for p := range int32(n) {
		part, _ := m.Partition(TopicPartition{"demo", p})
		for i := 0; i < records(p); i += 50 {
			k := min(50, records(p)-i)
			if _, err := part.AppendAsLeader(batch(k, -1, 0, 0), acksLeader); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(m *Manager, torn int32) {
		t.Helper()
		if err := m.ApplyAll(states); err != nil {
			t.Fatal(err)
		}
		for p := range int32(n) {
			part, ok := m.Partition(TopicPartition{"demo", p})
			if !ok {
				t.Fatalf("demo-%d not hosted", p)
			}
			if id, _ := part.Log().TopicID(); id != topicID {
				t.Fatalf("demo-%d: topic id %x", p, id)
			}
			if got := part.Log().EndOffset(); got != int64(records(p)) {
				t.Fatalf("demo-%d (torn %v): end %d, want %d", p, p == torn, got, records(p))
			}
			if got := readAllOffsets(t, part); got != records(p) {
				t.Fatalf("demo-%d: read %d records, want %d", p, got, records(p))
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := storage.Fsyncs()
	check(m2, -1)
	if got := storage.Fsyncs() - before; got != 0 {
		t.Fatalf("clean restart of %d logs: %d fsyncs, want 0", n, got)
	}
	// The crash: m2 is abandoned, demo-2's last append torn.
	seg := filepath.Join(dir, "demo-2", storage.SegmentFileName(0, storage.LogSuffix))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(batch(3, -1, 0, 0)[:40]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	check(newManager(t, dir), 2)
}

// TestPendingTopicIDWrites: the count the broker exports
// (PendingTopicIDWrites) covers every queued partition.metadata write until
// the writer went through it; a writer stopped early (Close cancels it)
// queues what it did not reach again, and Close writes those before it
// closes the logs, so none is left pending and every file holds the id.
func TestPendingTopicIDWrites(t *testing.T) {
	const n = 30
	dir := t.TempDir()
	m := newManager(t, dir) // not started: the test drives the writer
	states := make([]PartitionState, n)
	for p := range int32(n) {
		states[p] = PartitionState{TopicPartition: TopicPartition{"demo", p}, TopicID: topicID, Leader: 1 + p%2,
			LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	}
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	var logs []*storage.Log
	for _, tp := range m.Hosted() {
		p, _ := m.Partition(tp)
		logs = append(logs, p.Log())
	}
	m.flushTopicIDsLater(logs)
	if got := m.PendingTopicIDWrites(); got != n {
		t.Fatalf("pending after queueing %d: %d", n, got)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if wrote := m.flushTopicIDs(cancelled); wrote != 0 {
		t.Fatalf("a cancelled writer went through %d logs", wrote)
	}
	if got := m.PendingTopicIDWrites(); got != n {
		t.Fatalf("pending after a cancelled writer: %d, want %d", got, n)
	}
	m.unflushedMu.Lock()
	requeued := len(m.unflushed)
	m.unflushedMu.Unlock()
	if requeued != n {
		t.Fatalf("%d logs queued again after a cancelled writer, want %d", requeued, n)
	}
	for _, l := range logs {
		if l.TopicIDFlushed() {
			t.Fatalf("%s: flushed before Close", l.Dir())
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.PendingTopicIDWrites(); got != 0 {
		t.Fatalf("pending after Close: %d", got)
	}
	for p := range n {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("demo-%d", p), storage.PartitionMetadataFile))
		if err != nil || string(data) != string(storage.EncodePartitionMetadata(topicID)) {
			t.Fatalf("demo-%d: partition.metadata %q %v", p, data, err)
		}
	}

	// Started: the background writer brings the count to zero.
	m2 := newManager(t, t.TempDir())
	m2.Start()
	if err := m2.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m2.PendingTopicIDWrites() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d partition.metadata writes still pending", m2.PendingTopicIDWrites())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, tp := range m2.Hosted() {
		if p, _ := m2.Partition(tp); !p.Log().TopicIDFlushed() {
			t.Fatalf("%s: pending count zero, topic id not flushed", tp)
		}
	}
}
