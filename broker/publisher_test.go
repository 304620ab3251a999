package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// newTestPublisher runs a publisher until the test ends, following a quorum
// from its start (high watermark 0: no initial catch-up to hold).
func newTestPublisher(t *testing.T, onFatal func(error)) *publisher {
	t.Helper()
	p := newPublisher(zaptest.NewLogger(t), nil, onFatal)
	p.HandleHighWatermark(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func waitOffset(t *testing.T, p *publisher, off int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.waitApplied(ctx, off); err != nil {
		t.Fatal(err)
	}
}

func controlBatch(base int64) raftlog.Batch {
	return raftlog.EncodeBatch(base, 1, 1, true, []raftlog.Record{{Key: []byte{0, 0, 0, 2}, Value: []byte{0, 0}}})
}

// TestPublisherAppliesInOrder: control batches advance the offset, data
// batches change the image, provenance follows the last batch.
func TestPublisherAppliesInOrder(t *testing.T) {
	p := newTestPublisher(t, nil)
	if p.image().Provenance().Offset != -1 || p.appliedOffset.Load() != -1 {
		t.Fatal("fresh publisher is not at -1")
	}
	b0 := controlBatch(0)
	b1 := encodeBatch(t, 1, mvRecord(14), topicRecord("a", uuid(1)))
	b2 := encodeBatch(t, 3, partitionRecord(uuid(1), 0, -1, []int32{1}, []int32{1}))
	commitTo(p, []raftlog.Batch{b0})
	commitTo(p, []raftlog.Batch{b1, b2})
	waitOffset(t, p, 3)
	img := p.image()
	if prov := img.Provenance(); prov.Offset != 3 || prov.Epoch != 1 || prov.TimestampMs != b2.MaxTimestampMs {
		t.Errorf("provenance %+v", prov)
	}
	top, ok := img.TopicByName("a")
	if !ok || top.NumPartitions() != 1 || img.MetadataVersion() != 14 {
		t.Errorf("image after 3 batches: topic %v ok %v mv %d", top, ok, img.MetadataVersion())
	}
	commitTo(p, []raftlog.Batch{controlBatch(4)})
	waitOffset(t, p, 4)
	if p.image().NumTopics() != 1 || p.appliedTsMs.Load() != 1 {
		t.Errorf("control batch changed the image or ts %d", p.appliedTsMs.Load())
	}
}

// TestPublisherAtomicBatches: a reader polling the image while batches
// arrive only ever sees whole batches (each batch adds a topic and its
// partition together).
func TestPublisherAtomicBatches(t *testing.T) {
	p := newTestPublisher(t, nil)
	const n = 50
	stop := make(chan struct{})
	bad := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			img := p.image()
			for tp := range img.Topics() {
				if tp.NumPartitions() != 2 {
					select {
					case bad <- tp.Name():
					default:
					}
				}
			}
		}
	}()
	for i := range n {
		id := uuid(byte(i + 1))
		base := int64(3 * i)
		commitTo(p, []raftlog.Batch{encodeBatch(t, base, topicRecord("t"+string(rune('A'+i)), id),
			partitionRecord(id, 0, -1, []int32{1}, nil), partitionRecord(id, 1, -1, []int32{1}, nil))})
	}
	waitOffset(t, p, 3*n-1)
	close(stop)
	<-done
	select {
	case name := <-bad:
		t.Fatalf("saw topic %s with a partial batch", name)
	default:
	}
	if p.image().NumTopics() != n {
		t.Fatalf("%d topics", p.image().NumTopics())
	}
}

// TestPublisherTransactions: records inside BeginTransaction..EndTransaction
// publish together; an aborted transaction leaves no trace but its offset.
func TestPublisherTransactions(t *testing.T) {
	p := newTestPublisher(t, nil)
	commitTo(p, []raftlog.Batch{encodeBatch(t, 0, mvRecord(14), &records.BeginTransactionRecord{}, topicRecord("x", uuid(1)))})
	// Mid-transaction: the pre-transaction image (metadata.version) may be
	// published, the topic may not.
	commitTo(p, []raftlog.Batch{controlBatch(3)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.waitApplied(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.image().TopicByName("x"); ok || p.appliedOffset.Load() > 0 {
		t.Fatalf("published inside a transaction (offset %d)", p.appliedOffset.Load())
	}
	commitTo(p, []raftlog.Batch{encodeBatch(t, 4, &records.EndTransactionRecord{})})
	waitOffset(t, p, 4)
	if _, ok := p.image().TopicByName("x"); !ok {
		t.Fatal("committed transaction not published")
	}
	commitTo(p, []raftlog.Batch{
		encodeBatch(t, 5, &records.BeginTransactionRecord{}, topicRecord("y", uuid(2))),
		encodeBatch(t, 7, &records.AbortTransactionRecord{}),
	})
	waitOffset(t, p, 7)
	if _, ok := p.image().TopicByName("y"); ok {
		t.Fatal("aborted transaction published")
	}
	if _, ok := p.image().TopicByName("x"); !ok {
		t.Fatal("abort lost earlier state")
	}
}

// TestPublisherStopsOnBadRecord: an undecodable record is fatal; nothing
// after it is applied and the image stays at the last good batch.
func TestPublisherStopsOnBadRecord(t *testing.T) {
	fatal := make(chan error, 1)
	p := newTestPublisher(t, func(err error) { fatal <- err })
	good := encodeBatch(t, 0, mvRecord(14))
	bad := raftlog.EncodeBatch(1, 1, 1, false, []raftlog.Record{{Value: []byte{1, 99, 0}}}) // record type 99
	after := encodeBatch(t, 2, topicRecord("z", uuid(3)))
	commitTo(p, []raftlog.Batch{good})
	waitOffset(t, p, 0)
	commitTo(p, []raftlog.Batch{bad, after})
	select {
	case err := <-fatal:
		if !errors.Is(err, ErrApply) || !errors.Is(err, records.ErrUnknownType) {
			t.Fatalf("fatal error %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no fatal error for an unknown record type")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.waitApplied(ctx, 2); !errors.Is(err, ErrApply) {
		t.Errorf("waitApplied after failure: %v", err)
	}
	if p.appliedOffset.Load() != 0 || p.image().NumTopics() != 0 {
		t.Errorf("applied past the bad record: offset %d", p.appliedOffset.Load())
	}
	commitTo(p, []raftlog.Batch{encodeBatch(t, 3, topicRecord("w", uuid(4)))})
	if p.image().NumTopics() != 0 {
		t.Error("applied after failure")
	}
}

// TestPublisherCoalescesCatchUp: a backlog handed over at once is published
// once, at its end.
func TestPublisherCoalescesCatchUp(t *testing.T) {
	p := newPublisher(zaptest.NewLogger(t), nil, nil)
	var backlog []raftlog.Batch
	for i := range 100 {
		backlog = append(backlog, encodeBatch(t, int64(i), &records.NoOpRecord{}))
	}
	commitTo(p, backlog) // queued before the publisher runs, as during a Node's startup
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitOffset(t, p, 99)
	if n := p.publishes.Load(); n != 1 {
		t.Errorf("%d publishes for one backlog, want 1", n)
	}
}

func TestMetrics(t *testing.T) {
	now := time.UnixMilli(10_000)
	h := newHarness(t, func(c *Config) { c.Now = func() time.Time { return now } })
	h.runPublisher()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range h.b.Collectors() {
		reg.MustRegister(c)
	}
	b := raftlog.EncodeBatch(0, 1, 9_000, false, []raftlog.Record{{Value: mustEncode(t, mvRecord(14))}})
	commitTo(h.b.Listener(), []raftlog.Batch{b})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.b.WaitApplied(ctx, 0); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		if m.GetGauge() != nil {
			got[f.GetName()] = m.GetGauge().GetValue()
		} else {
			got[f.GetName()] = m.GetCounter().GetValue()
		}
	}
	if got["kraftd_broker_last_applied_record_lag_ms"] != 1000 || got["kraftd_broker_metadata_applied_offset"] != 0 ||
		got["kraftd_broker_fenced"] != 1 || got["kraftd_broker_metadata_images_published_total"] != 1 {
		t.Errorf("metrics %v", got)
	}
}

func mustEncode(t *testing.T, m records.Message) []byte {
	t.Helper()
	v, err := records.Record{Version: versionFor(m), Message: m}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPublishDoesNotWaitForReplicaApply: while the replica manager still
// applies one image (creating and fsyncing partition logs), the next
// committed change is published to handlers at once; the applied offset
// (heartbeats) follows only once the replica manager caught up, and it is
// handed the images from the last one it synced to the newest. Before, each
// publish waited for the previous one's replica apply.
func TestPublishDoesNotWaitForReplicaApply(t *testing.T) {
	p := newPublisher(zaptest.NewLogger(t), nil, nil)
	release := make(chan struct{})
	type step struct{ from, to int64 }
	synced := make(chan step, 4)
	p.onPublish = func(prev, next *image.Image) {
		synced <- step{prev.Provenance().Offset, next.Provenance().Offset}
		if next.Provenance().Offset == 1 {
			<-release // the first topic's logs take long
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	defer close(release)

	commitTo(p, []raftlog.Batch{encodeBatch(t, 0, mvRecord(14), topicRecord("a", uuid(1)))})
	if s := <-synced; s.to != 1 {
		t.Fatalf("first replica sync %+v", s)
	}
	commitTo(p, []raftlog.Batch{encodeBatch(t, 2, topicRecord("b", uuid(2)))})
	commitTo(p, []raftlog.Batch{encodeBatch(t, 3, topicRecord("c", uuid(3)))})
	deadline := time.Now().Add(2 * time.Second)
	for p.image().Provenance().Offset != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("image at offset %d while the replica manager applies offset 1, want 3", p.image().Provenance().Offset)
		}
		time.Sleep(time.Millisecond)
	}
	if _, ok := p.image().TopicByName("c"); !ok {
		t.Fatal("topic c not served")
	}
	if got := p.appliedOffset.Load(); got != -1 {
		t.Fatalf("applied offset %d before the replica manager finished offset 1", got)
	}
	release <- struct{}{}
	waitOffset(t, p, 3)
	if s := <-synced; s.from != 1 || s.to != 3 {
		t.Fatalf("second replica sync %+v, want from 1 to 3", s)
	}
}
