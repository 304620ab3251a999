package replica

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// smallSegments makes demo's segments roll every few batches.
func smallSegments(m *Manager) {
	cfg := m.DefaultTopicConfig()
	cfg.SegmentBytes = 400
	m.SetTopicConfig("demo", cfg)
}

// fillOlderSegments appends producer 7's batches (seq 0-8), then enough of
// producer 8's to push them into older segments, then producer 9's batch,
// the newest; it returns producer 7's last and producer 9's results.
func fillOlderSegments(t *testing.T, p *Partition, now int64) (last7, last9 AppendResult) {
	t.Helper()
	for i := range 3 {
		last7 = appendOK(t, p, batchAt(3, 7, 0, int32(3*i), now))
	}
	for i := range 12 {
		appendOK(t, p, batchAt(3, 8, 0, int32(3*i), now))
	}
	last9 = appendOK(t, p, batchAt(2, 9, 1, 0, now))
	if p.log.NumSegments() < 4 {
		t.Fatalf("%d segments; the test needs producer 7 in an older one", p.log.NumSegments())
	}
	return last7, last9
}

func snapshotOffsets(t *testing.T, dir string) []int64 {
	t.Helper()
	offs, err := storage.ProducerSnapshotOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// expectDuplicates retries producer 7's and 9's last batches: both must be
// answered with their original offsets and the log must not grow.
func expectDuplicates(t *testing.T, p *Partition, now int64, last7, last9 AppendResult) {
	t.Helper()
	end := p.log.EndOffset()
	if res := appendOK(t, p, batchAt(3, 7, 0, 6, now)); !res.Duplicate || res.BaseOffset != last7.BaseOffset {
		t.Errorf("retry of producer 7's last batch: %+v, want duplicate at %d", res, last7.BaseOffset)
	}
	if res := appendOK(t, p, batchAt(2, 9, 1, 0, now)); !res.Duplicate || res.BaseOffset != last9.BaseOffset {
		t.Errorf("retry of producer 9's batch: %+v, want duplicate at %d", res, last9.BaseOffset)
	}
	if p.log.EndOffset() != end {
		t.Errorf("log grew from %d to %d: a retry was appended twice", end, p.log.EndOffset())
	}
	if _, err := p.AppendAsLeader(batchAt(1, 7, 0, 10, now), acksAll); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Errorf("producer 7 skipping sequence 9: %v", err)
	}
}

// Snapshots are written at every roll (at the new segment's base) and at
// shutdown (at the log end); after a clean restart a producer whose batches
// are all in older segments still gets its retries answered as duplicates.
func TestProducerSnapshotsAtRollAndShutdown(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	smallSegments(m)
	p := lead(t, m)
	now := time.Now().UnixMilli()
	last7, last9 := fillOlderSegments(t, p, now)
	pdir := p.log.Dir()
	var bases []int64
	entries, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if o, ok := storage.ParseSegmentFileName(e.Name(), storage.LogSuffix); ok {
			bases = append(bases, o)
		}
	}
	if got := snapshotOffsets(t, pdir); !slices.Equal(got, bases[1:]) {
		t.Fatalf("snapshots %v, want one per rolled segment base %v", got, bases[1:])
	}
	end := p.log.EndOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, pdir); got[len(got)-1] != end {
		t.Fatalf("snapshots %v: none at the log end %d after shutdown", got, end)
	}
	es, err := storage.ReadProducerSnapshot(pdir, end)
	if err != nil || len(es) != 3 || es[0].ProducerID != 7 || es[0].LastSequence != 8 || es[0].LastOffset != last7.LastOffset ||
		es[0].OffsetDelta != 2 || es[0].TimestampMs != now+2 || es[2].ProducerEpoch != 1 || es[2].CurrentTxnFirstOffset != -1 {
		t.Fatalf("shutdown snapshot %+v %v", es, err)
	}
	m = newManager(t, dir)
	p = lead(t, m)
	expectDuplicates(t, p, now, last7, last9)
}

// After a crash (no shutdown snapshot), producer state comes from the
// latest roll snapshot plus the batches after it; a corrupt snapshot is
// deleted and the next older one used.
func TestProducerStateAfterCrash(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	smallSegments(m)
	p := lead(t, m)
	now := time.Now().UnixMilli()
	last7, last9 := fillOlderSegments(t, p, now)
	// The broker "crashes": its files are copied as they are, open.
	crashed := t.TempDir()
	copyDir(t, p.log.Dir(), filepath.Join(crashed, "demo-0"))
	offs := snapshotOffsets(t, filepath.Join(crashed, "demo-0"))
	m2 := newManager(t, crashed)
	p2 := lead(t, m2)
	expectDuplicates(t, p2, now, last7, last9)

	// Again, with the newest snapshot corrupt.
	crashed = t.TempDir()
	copyDir(t, p.log.Dir(), filepath.Join(crashed, "demo-0"))
	newest := filepath.Join(crashed, "demo-0", storage.SegmentFileName(offs[len(offs)-1], storage.ProducerSnapshotSuffix))
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(newest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m3 := newManager(t, crashed)
	p3 := lead(t, m3)
	if _, err := os.Stat(newest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt snapshot kept: %v", err)
	}
	expectDuplicates(t, p3, now, last7, last9)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A producer idle for producer.id.expiration.ms (by its last batch's
// timestamp) is forgotten: by the periodic check, and when a snapshot
// holding it is loaded. A forgotten producer's retry is appended again
// (an unknown producer may start at any sequence, as in Kafka).
func TestProducerExpiry(t *testing.T) {
	const expiryMs = 60000
	var nowMs atomic.Int64
	nowMs.Store(5_000_000)
	open := func(dir string) (*Manager, *Partition) {
		m, err := New(Config{Dir: dir, BrokerID: 1, ProducerIDExpirationMs: expiryMs,
			Now: func() time.Time { return time.UnixMilli(nowMs.Load()) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m, lead(t, m)
	}
	dir := t.TempDir()
	m, p := open(dir)
	const ts = 5_000_000
	appendOK(t, p, batchAt(2, 7, 0, 0, ts)) // max timestamp ts+1
	appendOK(t, p, batchAt(2, 8, 0, 0, ts+30000))
	if n := m.RemoveExpiredProducers(ts + 1 + expiryMs - 1); n != 0 {
		t.Fatalf("expired %d producers before their time", n)
	}
	if n := m.RemoveExpiredProducers(ts + 1 + expiryMs); n != 1 {
		t.Fatalf("expired %d producers, want producer 7", n)
	}
	if res := appendOK(t, p, batchAt(2, 7, 0, 0, ts)); res.Duplicate || res.BaseOffset != 4 {
		t.Fatalf("retry of an expired producer: %+v", res)
	}
	if res := appendOK(t, p, batchAt(2, 8, 0, 0, ts+30000)); !res.Duplicate {
		t.Fatalf("retry of a live producer: %+v", res)
	}
	// Producer 8's snapshot entry has expired by the time it is loaded.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	nowMs.Store(ts + 30001 + expiryMs)
	_, p = open(dir)
	if res := appendOK(t, p, batchAt(2, 8, 0, 0, ts+30000)); res.Duplicate {
		t.Fatalf("producer 8 survived its expiry across a restart: %+v", res)
	}
}

// A follower restarted with an idempotent producer's batches in older
// segments, then elected: the producer's retry across the leader change is
// answered as a duplicate with the original offset, and the log holds the
// batch once.
func TestIdempotentRetryAcrossRestartAndLeaderChange(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	for _, m := range c.mgrs {
		cfg := m.DefaultTopicConfig()
		cfg.SegmentBytes = 400
		m.SetTopicConfig(c.tp.Topic, cfg)
	}
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	c.publish(st)
	leader := c.part(1)
	now := time.Now().UnixMilli()
	var last AppendResult
	for i := range 3 {
		last = appendOK(t, leader, batchAt(3, 7, 0, int32(3*i), now))
	}
	for i := range 12 {
		appendOK(t, leader, batchAt(3, 8, 0, int32(3*i), now))
	}
	end := leader.log.EndOffset()
	eventually(t, "broker 2 caught up", func() bool { return c.part(2).HighWatermark() == end })
	// Broker 2 restarts (its fetches fail meanwhile)...
	c.mu.Lock()
	c.down[2] = true
	c.mu.Unlock()
	c.ctl.Lock()
	old := c.mgrs[2]
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Dir: old.cfg.Dir, BrokerID: 2, ReplicaLagTimeMaxMs: 200, Fetch: FetchConfig{MaxWaitMs: 50, BackoffMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.StartReplication(Replication{Fetch: c, AlterPartition: c, Brokers: c,
		BrokerEpoch: func() int64 { return c.brokerEpoch(2) }}); err != nil {
		t.Fatal(err)
	}
	m.SetTopicConfig(c.tp.Topic, old.TopicConfig(c.tp.Topic))
	c.mgrs[2] = m
	c.ctl.Unlock()
	// ... and is elected leader while the producer retries its last batch.
	c.elect(2)
	c.mu.Lock()
	c.down[2] = false
	c.mu.Unlock()
	newLeader := c.part(2)
	res, err := newLeader.AppendAsLeader(batchAt(3, 7, 0, 6, now), acksLeader)
	if err != nil || !res.Duplicate || res.BaseOffset != last.BaseOffset {
		t.Fatalf("retry on the new leader: %+v %v, want duplicate at %d", res, err, last.BaseOffset)
	}
	if newLeader.log.EndOffset() != end {
		t.Fatalf("new leader's log end %d, want %d: the retry was appended again", newLeader.log.EndOffset(), end)
	}
	res, err = newLeader.AppendAsLeader(batchAt(1, 7, 0, 9, now), acksAll)
	if err != nil || res.Duplicate {
		t.Fatalf("producer 7's next batch: %+v %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := newLeader.WaitCommitted(ctx, res.LastOffset); err != nil {
		t.Fatal(err)
	}
}
