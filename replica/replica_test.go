package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/storage"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch builds a producer's batch of n records (offsets from 0, as clients send
// them); pid < 0 makes a non-idempotent batch.
func batch(n int, pid int64, epoch int16, seq int32) []byte {
	return batchAt(n, pid, epoch, seq, 1000)
}

// batchAt is batch with record timestamps from tsMs.
func batchAt(n int, pid int64, epoch int16, seq int32, tsMs int64) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{Value: []byte{byte(i)}, TimestampMs: tsMs + int64(i)}
	}
	raw := storage.EncodeBatch(0, -1, tsMs, false, recs).Raw
	if pid >= 0 {
		binary.BigEndian.PutUint64(raw[43:], uint64(pid))
		binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
		binary.BigEndian.PutUint32(raw[53:], uint32(seq))
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	}
	return raw
}

var topicID = [16]byte{1, 2, 3}

// The produce options of acks=-1 and acks=1 (CreateTime, min.insync.replicas 1).
var (
	acksAll    = AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}
	acksLeader = AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}
)

func newManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func lead(t *testing.T, m *Manager, isr ...int32) *Partition {
	t.Helper()
	if len(isr) == 0 {
		isr = []int32{1}
	}
	st := PartitionState{TopicPartition: TopicPartition{"demo", 0}, TopicID: topicID, Leader: 1, LeaderEpoch: 3,
		Replicas: isr, ISR: isr}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, ok := m.Partition(st.TopicPartition)
	if !ok {
		t.Fatal("not hosted")
	}
	return p
}

func appendOK(t *testing.T, p *Partition, records []byte) AppendResult {
	t.Helper()
	res, err := p.AppendAsLeader(records, acksAll)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLeaderAppendReadAndReopen(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	p := lead(t, m)
	for i := range 3 {
		res := appendOK(t, p, batch(2, -1, 0, 0))
		if res.BaseOffset != int64(2*i) || res.LastOffset != int64(2*i+1) {
			t.Fatalf("append %d at %+v", i, res)
		}
	}
	if p.HighWatermark() != 6 {
		t.Fatalf("hw %d with the leader alone in the ISR", p.HighWatermark())
	}
	if err := p.WaitCommitted(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	rr, err := p.ReadAsLeader(2, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	bs, _, err := storage.SplitBatches(rr.Records)
	if err != nil || len(bs) != 2 || bs[0].BaseOffset != 2 || bs[0].Epoch != 3 || rr.HighWatermark != 6 {
		t.Fatalf("read: %d batches %+v hw %d %v", len(bs), bs, rr.HighWatermark, err)
	}
	if _, err := p.ReadAsLeader(7, 100, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := p.ReadAsLeader(0, 100, 2); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("old leader epoch: %v", err)
	}
	if _, err := p.ReadAsLeader(0, 100, 4); !errors.Is(err, ErrUnknownLeaderEpoch) {
		t.Fatalf("new leader epoch: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "demo-0", storage.PartitionMetadataFile))
	if err != nil || string(data) != string(storage.EncodePartitionMetadata(topicID)) {
		t.Fatalf("partition.metadata %q %v", data, err)
	}
	m = newManager(t, dir)
	p = lead(t, m)
	if p.Log().EndOffset() != 6 || p.HighWatermark() != 6 {
		t.Fatalf("after reopen: end %d hw %d", p.Log().EndOffset(), p.HighWatermark())
	}
}

func TestFollowerAndNotLeader(t *testing.T) {
	m := newManager(t, t.TempDir())
	st := PartitionState{TopicPartition: TopicPartition{"demo", 0}, TopicID: topicID, Leader: 2, LeaderEpoch: 1,
		Replicas: []int32{2, 1}, ISR: []int32{2, 1}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Partition(st.TopicPartition)
	if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), acksLeader); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on a follower: %v", err)
	}
	if _, err := p.ReadAsLeader(0, 100, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read on a follower: %v", err)
	}
}

// With a follower in the ISR and no replication yet, the high watermark stays:
// acks=1 appends, acks=-1 waits until its deadline, min.insync.replicas gates.
func TestHighWatermarkWaitsForISR(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m, 1, 2)
	res, err := p.AppendAsLeader(batch(1, -1, 0, 0), acksLeader)
	if err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 0 {
		t.Fatalf("hw %d with a silent follower in the ISR", p.HighWatermark())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.WaitCommitted(ctx, res.LastOffset); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acks=-1 wait: %v", err)
	}
	if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 3, LogAppendTimeMs: -1}); err != nil {
		t.Fatalf("min.insync.replicas 3 on 2 replicas counts as 2 (effectiveMinIsr): %v", err)
	}
	st := p.State()
	st.Replicas, st.PartitionEpoch = []int32{1, 2, 3}, st.PartitionEpoch+1
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 3, LogAppendTimeMs: -1}); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("min.insync.replicas 3 with 2 of 3 in sync: %v", err)
	}
	// Losing leadership wakes a waiting acks=-1 produce.
	done := make(chan error, 1)
	go func() { done <- p.WaitCommitted(context.Background(), res.LastOffset) }()
	if err := m.Apply(PartitionState{TopicPartition: p.TopicPartition(), TopicID: topicID, Leader: 2, LeaderEpoch: 4,
		PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait after losing leadership: %v", err)
	}
}

func TestIdempotentSequences(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	first := appendOK(t, p, batch(3, 7, 0, 0))
	appendOK(t, p, batch(2, 7, 0, 3))
	// A retry of the first batch is answered with its original offsets.
	dup := appendOK(t, p, batch(3, 7, 0, 0))
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset || p.Log().EndOffset() != 5 {
		t.Fatalf("duplicate: %+v, end %d", dup, p.Log().EndOffset())
	}
	if _, err := p.AppendAsLeader(batch(1, 7, 0, 9), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := p.AppendAsLeader(batch(1, 7, 1, 4), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	appendOK(t, p, batch(1, 7, 1, 0))
	if _, err := p.AppendAsLeader(batch(1, 7, 0, 5), acksAll); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// Sequences wrap from MaxInt32 to 0.
	appendOK(t, p, batch(2, 8, 0, math.MaxInt32-1))
	appendOK(t, p, batch(2, 8, 0, 0))
	if _, err := p.AppendAsLeader(batch(1, 8, 0, 0), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("after wrap: %v", err)
	}
	// A batch straddling the wrap ends at sequence 1.
	appendOK(t, p, batch(4, 9, 0, math.MaxInt32-1))
	appendOK(t, p, batch(1, 9, 0, 2))
	// Only the last five batches are remembered.
	for i := range 6 {
		appendOK(t, p, batch(1, 10, 0, int32(i)))
	}
	if _, err := p.AppendAsLeader(batch(1, 10, 0, 0), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a sixth-oldest retry: %v", err)
	}
	if res := appendOK(t, p, batch(1, 10, 0, 1)); !res.Duplicate {
		t.Fatalf("fifth-oldest retry not a duplicate: %+v", res)
	}
}

func TestAppendValidation(t *testing.T) {
	m, err := New(Config{Dir: t.TempDir(), BrokerID: 1, Topic: TopicConfig{MaxMessageBytes: 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := lead(t, m)
	corrupt := batch(1, -1, 0, 0)
	corrupt[len(corrupt)-1] ^= 1
	control := storage.EncodeBatch(0, 0, 0, true, []storage.Record{{Key: storage.ControlKey(storage.ControlCommit), Value: []byte{0, 0, 0, 0, 0, 0}}}).Raw
	countLie := batch(2, -1, 0, 0)
	binary.BigEndian.PutUint32(countLie[57:], 3)
	binary.BigEndian.PutUint32(countLie[17:], crc32.Checksum(countLie[21:], castagnoli))
	big := storage.EncodeBatch(0, 0, 0, false, []storage.Record{{Value: make([]byte, 300)}}).Raw
	// A zstd batch whose header claims 3 records (lastOffsetDelta 2) but whose
	// compressed data holds 2: only decompressing shows it.
	zstdLie := zstdBatch(t, 2)
	binary.BigEndian.PutUint32(zstdLie[23:], 2) // lastOffsetDelta
	binary.BigEndian.PutUint32(zstdLie[57:], 3) // record count
	binary.BigEndian.PutUint32(zstdLie[17:], crc32.Checksum(zstdLie[21:], castagnoli))
	for _, tc := range []struct {
		name    string
		records []byte
		want    error
	}{
		{"crc", corrupt, ErrCorruptRecords},
		{"truncated", batch(1, -1, 0, 0)[:30], ErrCorruptRecords},
		{"two batches", append(batch(1, -1, 0, 0), batch(1, -1, 0, 0)...), ErrInvalidRecord},
		{"control", control, ErrInvalidRecord},
		{"count", countLie, ErrInvalidRecord},
		{"too large", big, ErrMessageTooLarge},
		{"empty", nil, ErrInvalidRecord},
		{"zstd count", zstdLie, ErrInvalidRecord},
	} {
		if _, err := p.AppendAsLeader(tc.records, acksLeader); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if p.Log().EndOffset() != 0 {
		t.Fatalf("rejected batches reached the log: end %d", p.Log().EndOffset())
	}
	// An honest zstd batch is appended as sent.
	good := zstdBatch(t, 2)
	appendOK(t, p, good)
	data, err := p.Log().Read(0, 1<<20, 2)
	if err != nil || len(data) != len(good) || !bytes.Equal(data[61:], good[61:]) {
		t.Fatalf("stored zstd batch differs from the one sent (%v)", err)
	}
}

// zstdBatch is a producer's zstd batch of n records (franz-go's compressor).
func zstdBatch(t *testing.T, n int) []byte {
	t.Helper()
	plain := batch(n, -1, 0, 0)
	c, err := kgo.DefaultCompressor(kgo.ZstdCompression())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := c.Compress(new(bytes.Buffer), plain[61:])
	raw := append(append([]byte(nil), plain[:61]...), body...)
	raw[22] |= 4 // zstd
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func TestListOffsets(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	appendOK(t, p, batch(3, -1, 0, 0)) // timestamps 1000-1002
	appendOK(t, p, batch(3, -1, 0, 0)) // the same again: MAX_TIMESTAMP ties go to the earliest
	for _, tc := range []struct {
		ts, offset int64
		found      bool
	}{{LatestTimestamp, 6, true}, {EarliestTimestamp, 0, true}, {1001, 1, true}, {1002, 2, true}, {1003, -1, false}, {MaxTimestamp, 2, true}} {
		off, _, _, found, err := p.OffsetForTimestamp(tc.ts, -1)
		if err != nil || off != tc.offset || found != tc.found {
			t.Errorf("ts %d: offset %d found %v err %v, want %d %v", tc.ts, off, found, err, tc.offset, tc.found)
		}
	}
}

func TestApplyReplacesLogOfOlderTopic(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	p := lead(t, m)
	appendOK(t, p, batch(2, -1, 0, 0))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = newManager(t, dir)
	st := PartitionState{TopicPartition: TopicPartition{"demo", 0}, TopicID: [16]byte{9}, Leader: 1, LeaderEpoch: 0,
		Replicas: []int32{1}, ISR: []int32{1}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ = m.Partition(st.TopicPartition)
	if p.Log().EndOffset() != 0 {
		t.Fatalf("recreated topic sees the old topic's %d records", p.Log().EndOffset())
	}
	if err := m.Remove(st.TopicPartition, true); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("left %v", entries)
		}
	}
}

// A retry of a batch appended before a broker restart is still a duplicate:
// producer state is snapshotted at shutdown and loaded when the log opens.
func TestProducerStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	p := lead(t, m)
	now := time.Now().UnixMilli()
	appendOK(t, p, batchAt(3, 7, 0, 0, now))
	appendOK(t, p, batchAt(2, 7, 0, 3, now))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = newManager(t, dir)
	p = lead(t, m)
	if res := appendOK(t, p, batchAt(2, 7, 0, 3, now)); !res.Duplicate || res.BaseOffset != 3 {
		t.Fatalf("retry after restart: %+v", res)
	}
	if _, err := p.AppendAsLeader(batchAt(1, 7, 0, 9, now), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after restart: %v", err)
	}
	if _, err := p.AppendAsLeader(batchAt(1, 7, 0, 5, now), acksAll); err != nil {
		t.Fatalf("next sequence after restart: %v", err)
	}
}

func TestDeleteStrays(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	lead(t, m) // demo-0, hosted
	mk := func(name string, id *[16]byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if id != nil {
			if err := os.WriteFile(filepath.Join(dir, name, storage.PartitionMetadataFile), storage.EncodePartitionMetadata(*id), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	gone, kept := [16]byte{5}, [16]byte{6}
	mk("gone-0", &gone)             // topic deleted while down
	mk("kept-1", &kept)             // still assigned here (keep says so)
	mk("__cluster_metadata-0", nil) // the metadata log: no partition.metadata
	mk("old-0.0506-delete", nil)    // an interrupted delete
	mk("not a partition", &gone)    // no "-<n>" suffix
	mk("new-2", nil)                // created, crashed before its topic id's flush
	removed, err := m.DeleteStrays(func(tp TopicPartition, id [16]byte) bool { return id == kept })
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"__cluster_metadata-0", "demo-0", "kept-1", "not a partition"}
	if len(removed) != 3 || !slices.Equal(left, want) {
		t.Fatalf("removed %v, left %v, want %v", removed, left, want)
	}
}

// A partition name that would leave the log directory or land on the metadata
// log is refused before anything touches the disk.
func TestApplyRefusesDangerousNames(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	for _, topic := range []string{"..", "a/b", "__cluster_metadata", ""} {
		st := PartitionState{TopicPartition: TopicPartition{topic, 0}, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}
		if err := m.Apply(st); err == nil {
			t.Errorf("topic %q accepted", topic)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("created %v", entries)
	}
}

// message.timestamp.type=LogAppendTime: the stored batch carries the broker's
// time as its max timestamp and the timestamp-type attribute, with a valid CRC.
func TestLogAppendTime(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	res, err := p.AppendAsLeader(batch(2, -1, 0, 0), AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: 1234567})
	if err != nil || res.LogAppendTimeMs != 1234567 {
		t.Fatalf("append: %+v %v", res, err)
	}
	data, err := p.Log().Read(0, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := storage.ParseBatch(data)
	if err != nil || !b.LogAppendTime() || b.MaxTimestampMs != 1234567 {
		t.Fatalf("stored batch: append time %v max ts %d err %v", b.LogAppendTime(), b.MaxTimestampMs, err)
	}
	if res := appendOK(t, p, batch(1, -1, 0, 0)); res.LogAppendTimeMs != -1 {
		t.Fatalf("CreateTime append reports %d", res.LogAppendTimeMs)
	}
}

// min.insync.replicas counts at most the replicas there are (Kafka's
// effectiveMinIsr), and a batch that commits after the ISR shrank below it is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND.
func TestNotEnoughReplicasAfterAppend(t *testing.T) {
	m := newManager(t, t.TempDir())
	minISR2 := AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 2, LogAppendTimeMs: -1}
	p := lead(t, m) // RF 1
	if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), minISR2); err != nil {
		t.Fatalf("RF 1 with min.insync.replicas 2: %v", err)
	}
	if err := p.CheckReplicasAfterCommit(2); err != nil {
		t.Fatalf("RF 1 after commit: %v", err)
	}
	st := PartitionState{TopicPartition: TopicPartition{"two", 0}, TopicID: topicID, Leader: 1, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ = m.Partition(st.TopicPartition)
	res, err := p.AppendAsLeader(batch(1, -1, 0, 0), minISR2)
	if err != nil {
		t.Fatal(err)
	}
	st.ISR, st.PartitionEpoch = []int32{1}, 2 // follower 2 dropped before it fetched
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCommitted(context.Background(), res.LastOffset); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckReplicasAfterCommit(2); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("committed with ISR [1], min.insync.replicas 2: %v", err)
	}
	if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), minISR2); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("next append: %v", err)
	}
}

// The leader's high watermark does not move while the committed ISR is
// smaller than the topic's min.insync.replicas (Kafka 3.7+, KAFKA-15583):
// acks=1 appends stay invisible to consumers until a follower rejoins the
// ISR, or the setting is lowered; min.insync.replicas above the replication
// factor counts as the replication factor.
func TestHighWatermarkWaitsForMinISR(t *testing.T) {
	m := newManager(t, t.TempDir())
	cfg := DefaultTopicConfig()
	cfg.MinInsyncReplicas = 2
	m.SetTopicConfig("min", cfg)
	st := PartitionState{TopicPartition: TopicPartition{"min", 0}, TopicID: topicID, Leader: 1, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Partition(st.TopicPartition)
	acks1 := AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 2, LogAppendTimeMs: -1}
	if _, err := p.AppendAsLeader(batch(3, -1, 0, 0), acks1); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d with ISR [1] under min.insync.replicas 2", hw)
	}
	if res, _ := p.ReadAsLeader(0, 1<<20, -1); len(res.Records) != 0 {
		t.Fatal("a consumer reads records only the leader has")
	}
	// Follower 2 rejoins (the metadata says so) and fetches everything.
	st.ISR, st.PartitionEpoch = []int32{1, 2}, 2
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadForFollower(FollowerFetch{ReplicaID: 2, BrokerEpoch: -1, FetchOffset: 3, LogStartOffset: 0,
		CurrentLeaderEpoch: 1, LastFetchedEpoch: 1, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d with ISR [1 2] at the log end, want 3", hw)
	}
	// Back to ISR [1]: nothing moves until min.insync.replicas drops to 1.
	st.ISR, st.PartitionEpoch = []int32{1}, 3
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsLeader(batch(2, -1, 0, 0), acks1); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3", hw)
	}
	ch := p.Changed()
	cfg.MinInsyncReplicas = 1
	m.SetTopicConfig("min", cfg)
	select {
	case <-ch:
	default:
		t.Fatal("lowering min.insync.replicas woke no waiter")
	}
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d after min.insync.replicas 1, want 5", hw)
	}
	// RF 1 with min.insync.replicas 3: effectively 1.
	cfg.MinInsyncReplicas = 3
	m.SetTopicConfig("demo", cfg)
	solo := lead(t, m)
	appendOK(t, solo, batch(1, -1, 0, 0))
	if hw := solo.HighWatermark(); hw != 1 {
		t.Fatalf("RF 1, min.insync.replicas 3: high watermark %d, want 1", hw)
	}
}

// A follower's truncation is fsynced before it fetches on (its recovery
// point covers the cut log: a crash cannot bring the cut records back under
// offsets it reports to the leader), and the follower takes the leader's log
// start offset from fetch answers (Kafka's maybeIncrementLogStartOffset),
// never past its high watermark.
func TestFollowerTruncationSyncedAndLeaderLogStart(t *testing.T) {
	m := newManager(t, t.TempDir())
	st := PartitionState{TopicPartition: TopicPartition{"fol", 0}, TopicID: topicID, Leader: 2, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Partition(st.TopicPartition)
	at := func(base int64, n int) []byte {
		recs := make([]storage.Record, n)
		for i := range recs {
			recs[i] = storage.Record{Value: []byte{byte(i)}, TimestampMs: 1000}
		}
		return storage.EncodeBatch(base, 1, 1000, false, recs).Raw
	}
	if err := p.AppendAsFollower(1, 0, append(at(0, 3), at(3, 2)...), 3, 0); err != nil {
		t.Fatal(err)
	}
	if end, rp := p.Log().EndOffset(), p.Log().RecoveryPoint(); end != 5 || rp != 0 {
		t.Fatalf("after the append: end %d recovery point %d, want 5 and 0 (no fsync on the append path)", end, rp)
	}
	if err := p.TruncateOnDivergence(1, EpochEndOffset{Epoch: 1, EndOffset: 4}); err != nil {
		t.Fatal(err)
	}
	if end, rp := p.Log().EndOffset(), p.Log().RecoveryPoint(); end != 3 || rp != 3 {
		// (Batch [3, 4] holds offset 4, so the log is cut at its base.)
		t.Fatalf("after the truncation: end %d recovery point %d, want 3 and 3", end, rp)
	}
	// The leader's log start: 2 moves it (hw 3); 6 would be past the
	// follower's high watermark (5 after this append) and does not.
	if err := p.AppendAsFollower(1, 3, at(3, 2), 5, 2); err != nil {
		t.Fatal(err)
	}
	if start := p.Log().StartOffset(); start != 2 {
		t.Fatalf("log start %d after the leader's 2", start)
	}
	if err := p.AppendAsFollower(1, 5, nil, 5, 6); err != nil {
		t.Fatal(err)
	}
	if start := p.Log().StartOffset(); start != 2 {
		t.Fatalf("log start %d after the leader's 6, past the high watermark 5", start)
	}
}

// A follower's read tells the leader's fetch session whether the leader
// owes that follower a state update its later fetches must drive although
// they ask nothing new (FollowerRead.OutOfISR): it is outside the
// committed ISR (here with no broker view, so it cannot be added), or an
// ISR change is in flight; a follower in the ISR with nothing in flight is
// not.
func TestReadForFollowerReportsOutOfISR(t *testing.T) {
	m := newManager(t, t.TempDir())
	st := PartitionState{TopicPartition: TopicPartition{"owe", 0}, TopicID: topicID, Leader: 1, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}}
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Partition(st.TopicPartition)
	read := func(replica int32) bool {
		t.Helper()
		res, err := p.ReadForFollower(FollowerFetch{ReplicaID: replica, BrokerEpoch: -1, FetchOffset: 0,
			LogStartOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return res.OutOfISR
	}
	if !read(2) || read(3) {
		t.Fatalf("ISR [1 3]: follower 2 out %v, follower 3 out %v; want true, false", read(2), read(3))
	}
	// A shrink in flight may take 3 out: its reads keep counting until the
	// controller answers.
	p.mu.Lock()
	p.proposeISRLocked([]int32{1}, []int32{1, 3})
	p.mu.Unlock()
	if !read(3) {
		t.Fatal("follower 3 with an ISR change in flight: not reported")
	}
	st.ISR, st.PartitionEpoch = []int32{1, 2, 3}, 2
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if read(2) || read(3) {
		t.Fatal("a follower in the ISR with no change in flight reported out of it")
	}
}

// A follower in the ISR that holds the whole log of a partition left idle
// for longer than replica.lag.time.max.ms, and whose fetches therefore did
// not read the partition meanwhile (a fetch session reads an idle partition
// only when it changes), is not out of sync at the first append after the
// idle spell: it was caught up until that append, and has
// replica.lag.time.max.ms from it to fetch the batch. Before, its last
// caught-up time was its last read, long ago, and the ISR check right after
// the append shrank the ISR (Kafka's follower fetches name every session
// partition at most replica.fetch.wait.max.ms apart, so Kafka's leader
// never sees such a gap). One that does not fetch the batch is shrunk.
func TestIdleCaughtUpFollowerStaysInISRAtNextAppend(t *testing.T) {
	// Kafka's follower names every partition of its fetch session at each
	// fetch, so its leader's lastCaughtUpTimeMs for an idle partition is the
	// time of the follower's latest fetch. kraftd's session does not read an
	// idle partition; the partition takes that time from the session's clock
	// (FollowerFetch.SessionFetchMs) at the next append instead.
	for _, tc := range []struct {
		name           string
		sessionFetches bool // the follower's session keeps fetching while the partition idles
	}{
		{"session fetching", true},
		{"session stopped", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nowMs, sessionMs atomic.Int64
			nowMs.Store(1_000_000)
			m, err := New(Config{Dir: t.TempDir(), BrokerID: 1, ReplicaLagTimeMaxMs: 30_000,
				Now: func() time.Time { return time.UnixMilli(nowMs.Load()) }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			st := PartitionState{TopicPartition: TopicPartition{"idle", 0}, TopicID: topicID, Leader: 1, LeaderEpoch: 1,
				PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
			if err := m.Apply(st); err != nil {
				t.Fatal(err)
			}
			p, _ := m.Partition(st.TopicPartition)
			acks1 := AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}
			if _, err := p.AppendAsLeader(batch(2, -1, 0, 0), acks1); err != nil {
				t.Fatal(err)
			}
			sessionMs.Store(nowMs.Load())
			if _, err := p.ReadForFollower(FollowerFetch{ReplicaID: 2, BrokerEpoch: -1, FetchOffset: 2, LogStartOffset: 0,
				CurrentLeaderEpoch: 1, LastFetchedEpoch: 1, MaxBytes: 1 << 20, SessionFetchMs: &sessionMs}); err != nil {
				t.Fatal(err)
			}
			nowMs.Add(60_000) // idle, not read
			if tc.sessionFetches {
				sessionMs.Store(nowMs.Load() - 400) // the session's latest fetch, 400 ms ago
			}
			if item := p.maybeShrinkISR(nowMs.Load()); item != nil {
				t.Fatalf("idle partition, follower at the log end: shrink %v", item)
			}
			if _, err := p.AppendAsLeader(batch(1, -1, 0, 0), acks1); err != nil {
				t.Fatal(err)
			}
			nowMs.Add(1)
			item := p.maybeShrinkISR(nowMs.Load())
			if !tc.sessionFetches {
				// Kafka: last caught up at the last fetch, a minute ago: out of sync
				// as soon as the log end moves past it.
				if item == nil {
					t.Fatal("first append after the follower's session stopped a minute ago: no shrink, want one (Kafka shrinks it)")
				}
				return
			}
			if item != nil {
				t.Fatalf("first append after an idle minute: shrink %v, want none (the follower held the whole log at its session's latest fetch)", item)
			}
			nowMs.Add(30_000) // the follower never fetches the new batch
			if item := p.maybeShrinkISR(nowMs.Load()); item == nil {
				t.Fatal("a follower that did not fetch for replica.lag.time.max.ms after the append stays in the ISR")
			}
		})
	}
}
