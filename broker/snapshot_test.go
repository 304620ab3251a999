package broker

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// snapshotOf encodes img's records as the quorum would write and read them back.
func snapshotOf(t *testing.T, img *image.Image, id raftlog.SnapshotID) quorum.Snapshot {
	t.Helper()
	var recs []raftlog.Record
	for _, r := range img.Records() {
		v, err := r.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, raftlog.Record{Value: v})
	}
	var file []byte
	err := quorum.EncodeSnapshot(id, 77, quorum.SnapshotRecords(recs), 1<<10, func(b raftlog.Batch) error {
		file = append(file, b.Raw...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := quorum.ParseSnapshot(id, file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPublisherLoadsSnapshot: a snapshot replaces the published image in one swap
// (nothing of the old image survives), reports the snapshot's position, and later
// commits apply on top of it.
func TestPublisherLoadsSnapshot(t *testing.T) {
	p := newTestPublisher(t, nil)
	commitTo(p, []raftlog.Batch{encodeBatch(t, 0, mvRecord(14), topicRecord("old", uuid(1)))})
	waitOffset(t, p, 1)

	// The leader's image: another topic with a partition, and a broker.
	src := newTestPublisher(t, nil)
	commitTo(src, []raftlog.Batch{encodeBatch(t, 0, mvRecord(14), brokerRecord(1, 1, false, nil, ep("PLAINTEXT", 9092)),
		topicRecord("new", uuid(2)), partitionRecord(uuid(2), 0, 1, []int32{1}, []int32{1}))})
	waitOffset(t, src, 3)
	want := src.image()

	id := raftlog.SnapshotID{EndOffset: 20, Epoch: 4}
	p.HandleLoadSnapshot(snapshotOf(t, want, id))
	waitOffset(t, p, 19)
	got := p.image()
	if prov := got.Provenance(); prov.Offset != 19 || prov.Epoch != 4 || prov.TimestampMs != 77 {
		t.Fatalf("provenance %+v", prov)
	}
	if _, ok := got.TopicByName("old"); ok {
		t.Fatal("the old topic survived the snapshot")
	}
	if got.NumPartitions() != 1 || len(got.Brokers()) != 1 || got.MetadataVersion() != 14 {
		t.Fatalf("snapshot image: %d partitions, %d brokers, mv %d", got.NumPartitions(), len(got.Brokers()), got.MetadataVersion())
	}
	commitTo(p, []raftlog.Batch{encodeBatch(t, 20, topicRecord("later", uuid(3)))})
	waitOffset(t, p, 20)
	if _, ok := p.image().TopicByName("later"); !ok || p.image().NumTopics() != 2 {
		t.Fatal("commit after the snapshot not applied on top of it")
	}
}

// TestPublisherHoldsSnapshotDuringCatchUp: a snapshot loaded at start, below
// the high watermark the quorum reported, is not published on its own: the
// catch-up continues from it and publishes once, at the high watermark, an
// image holding the snapshot and the batches after it.
func TestPublisherHoldsSnapshotDuringCatchUp(t *testing.T) {
	src := newTestPublisher(t, nil)
	commitTo(src, []raftlog.Batch{encodeBatch(t, 0, mvRecord(14), topicRecord("snap", uuid(2)))})
	waitOffset(t, src, 1)

	p := newPublisher(zaptest.NewLogger(t), nil, nil) // steps driven by hand below
	empty := p.image()
	p.HandleHighWatermark(23)
	if err := p.loadSnapshot(snapshotOf(t, src.image(), raftlog.SnapshotID{EndOffset: 20, Epoch: 4})); err != nil {
		t.Fatal(err)
	}
	p.applyAll([]raftlog.Batch{encodeBatch(t, 20, topicRecord("a", uuid(3)))})
	if p.image() != empty || p.toSync.Load() != nil {
		t.Fatalf("published during the catch-up: offset %d", p.image().Provenance().Offset)
	}
	p.applyAll([]raftlog.Batch{encodeBatch(t, 21, topicRecord("b", uuid(4)), topicRecord("c", uuid(5)))})
	img := p.image()
	if img.Provenance().Offset != 22 || p.toSync.Load() != img {
		t.Fatalf("caught up at 22: published offset %d", img.Provenance().Offset)
	}
	for _, name := range []string{"snap", "a", "b", "c"} {
		if _, ok := img.TopicByName(name); !ok {
			t.Fatalf("caught-up image lacks topic %s", name)
		}
	}
}
