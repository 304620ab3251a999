package app

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var snapshotPartitions = flag.Int("snapshot.partitions", 20000,
	"partitions (RF 3) in the snapshot benchmarks; the issue's figure is 1000000")

// benchImage is a cluster of three brokers with partitions spread over topics of
// 100 partitions, replication factor 3, built by replaying records as a log would.
func benchImage(tb testing.TB, partitions int) *image.Image {
	tb.Helper()
	d := image.NewDelta(nil)
	off := int64(0)
	replay := func(m records.Message) {
		if err := d.Replay(off, 1, records.Record{Message: m}); err != nil {
			tb.Fatal(err)
		}
		off++
	}
	replay(&records.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 14})
	for id := int32(1); id <= 3; id++ {
		r := records.NewRegisterBrokerRecord()
		r.BrokerID, r.BrokerEpoch, r.IncarnationID = id, off, records.UUID{byte(id), 1}
		r.EndPoints = []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9090 + id)}}
		replay(r)
	}
	for t := 0; t*100 < partitions; t++ {
		id := records.UUID{byte(t >> 24), byte(t >> 16), byte(t >> 8), byte(t), 0xaa}
		replay(&records.TopicRecord{Name: "topic-" + itoa(t), TopicID: id})
		for p := int32(0); p < 100 && t*100+int(p) < partitions; p++ {
			pr := records.NewPartitionRecord()
			first := (int32(t) + p) % 3
			pr.PartitionID, pr.TopicID = p, id
			pr.Replicas = []int32{first + 1, (first+1)%3 + 1, (first+2)%3 + 1}
			pr.ISR = pr.Replicas
			pr.Leader, pr.LeaderEpoch, pr.PartitionEpoch = pr.Replicas[0], 0, 0
			replay(pr)
		}
	}
	return d.Apply()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkSnapshotWrite writes a snapshot of a -snapshot.partitions image the
// way a node does (encode from the immutable image, write, fsync, rename) and
// reports its size per partition. Goal: <= 100 bytes per partition, < 2 s for 1M.
func BenchmarkSnapshotWrite(b *testing.B) {
	img := benchImage(b, *snapshotPartitions)
	id := raftlog.SnapshotID{EndOffset: img.Provenance().Offset + 1, Epoch: 1}
	var size int64
	b.ResetTimer()
	for b.Loop() {
		dir := b.TempDir()
		fs, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		w, err := fs.CreateSnapshot(id)
		if err != nil {
			b.Fatal(err)
		}
		if err := quorum.EncodeSnapshot(id, 0, imageRecords(img), 1<<20, w.WriteBatch); err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		size = w.Size()
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		fs.Close()
	}
	b.ReportMetric(float64(size)/float64(*snapshotPartitions), "bytes/partition")
	b.ReportMetric(float64(size), "snapshot-bytes")
}

// BenchmarkSnapshotLoad reads, validates and loads a snapshot into a fresh image,
// the part of a fresh broker's join that grows with the cluster.
func BenchmarkSnapshotLoad(b *testing.B) {
	img := benchImage(b, *snapshotPartitions)
	id := raftlog.SnapshotID{EndOffset: img.Provenance().Offset + 1, Epoch: 1}
	var file []byte
	if err := quorum.EncodeSnapshot(id, 0, imageRecords(img), 1<<20, func(bt raftlog.Batch) error {
		file = append(file, bt.Raw...)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := quorum.ParseSnapshot(id, file)
		if err != nil {
			b.Fatal(err)
		}
		// As the broker and the controller load one (publisher.loadSnapshot, SnapshotImage).
		got, err := image.FromRecords(records.DecodeAll(s.Values()), image.Provenance{Offset: id.EndOffset - 1, Epoch: 1})
		if err != nil {
			b.Fatal(err)
		}
		if got.NumPartitions() != *snapshotPartitions {
			b.Fatalf("loaded %d partitions", got.NumPartitions())
		}
	}
}

// TestSnapshotOfImageRoundTrips: the records a node snapshots from its image load
// back into an equal image (SnapshotEqualsReplay for the app's encoding).
func TestSnapshotOfImageRoundTrips(t *testing.T) {
	img := benchImage(t, 1000)
	id := raftlog.SnapshotID{EndOffset: img.Provenance().Offset + 1, Epoch: 1}
	var file []byte
	start := time.Now()
	if err := quorum.EncodeSnapshot(id, 5, imageRecords(img), 4096, func(b raftlog.Batch) error {
		file = append(file, b.Raw...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s, err := quorum.ParseSnapshot(id, file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []records.Record
	for _, b := range s.Batches {
		raw, _ := b.Records()
		for _, r := range raw {
			rec, err := records.Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
	}
	got, err := image.FromSnapshot(recs, img.Provenance())
	if err != nil {
		t.Fatal(err)
	}
	if got.Dump() != img.Dump() {
		t.Fatal("image loaded from its snapshot differs")
	}
	// The control records decode with the metadata codecs, as kafka-dump-log reads them.
	all, _, err := raftlog.SplitBatches(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]records.ControlType{0: records.ControlSnapshotHeader, len(all) - 1: records.ControlSnapshotFooter} {
		recs, err := all[i].Records()
		if err != nil || !all[i].Control || len(recs) != 1 || all[i].Epoch != id.Epoch {
			t.Fatalf("batch %d: control %t, %d records, epoch %d: %v", i, all[i].Control, len(recs), all[i].Epoch, err)
		}
		typ, err := records.DecodeControlKey(recs[0].Key)
		if err != nil || typ != want {
			t.Fatalf("batch %d: control type %v (%v), want %v", i, typ, err, want)
		}
		v, err := records.DecodeControlValue(typ, recs[0].Value)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if h, ok := v.(*records.SnapshotHeaderRecord); ok && h.LastContainedLogTimestamp != 5 {
			t.Fatalf("header timestamp %d, want 5", h.LastContainedLogTimestamp)
		}
	}
	if all[0].BaseOffset != 0 {
		t.Fatalf("snapshot offsets start at %d, want 0", all[0].BaseOffset)
	}
	if per := len(file) / 1000; per > 100 {
		t.Errorf("snapshot is %d bytes per partition, goal <= 100", per)
	}
	t.Logf("1000 partitions: %d bytes (%d per partition) in %v", len(file), len(file)/1000, time.Since(start))
}

// BenchmarkNodeSnapshotWrite writes a -snapshot.partitions image snapshot through a
// running quorum node (one voter, real files): the paced writer goroutine, the
// incremental writeback and the commit on the driver, as a controller does.
func BenchmarkNodeSnapshotWrite(b *testing.B) {
	img := benchImage(b, *snapshotPartitions)
	store, err := raftlog.OpenFileStorage(b.TempDir(), raftlog.FileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	node, err := quorum.NewNode(quorum.NodeConfig{
		Raft:       quorum.Config{NodeID: 1, Voters: []int32{1}, AppendLingerMs: quorum.AppendLingerMsNone},
		Storage:    store,
		VoterAddrs: map[int32]string{1: "127.0.0.1:9"},
	})
	if err != nil {
		b.Fatal(err)
	}
	node.Start()
	defer node.Close(context.Background())
	ctx := context.Background()
	var size int64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		st := waitLeading(b, node)
		// Each iteration snapshots a new offset: commit one record first.
		last, err := node.Propose(ctx, st.Epoch, []raftlog.Record{{Value: []byte("x")}})
		if err != nil {
			b.Fatal(err)
		}
		for st.AppliedOffset <= last {
			st = waitLeading(b, node)
		}
		id := raftlog.SnapshotID{EndOffset: st.AppliedOffset, Epoch: st.Epoch}
		b.StartTimer()
		done, err := node.WriteSnapshot(ctx, id, 0, imageRecords(img))
		if err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fi, err := os.Stat(filepath.Join(store.Dir(), raftlog.SnapshotFileName(id)))
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/float64(*snapshotPartitions), "bytes/partition")
}

func waitLeading(tb testing.TB, node *quorum.Node) quorum.Status {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := node.Status(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if st.Role == quorum.Leader && st.HighWatermark > st.EpochStartOffset {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatalf("node not leading: %+v", st)
		}
		<-time.After(time.Millisecond)
	}
}
