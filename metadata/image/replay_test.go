package image

import (
	"errors"
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

// genLog builds n valid records by generating each against the image of
// the records before it, applying one delta per record. It also checks the
// invariants that must hold between every pair of consecutive images.
func genLog(t *testing.T, seed uint64, n int) ([]records.Record, []*Image) {
	t.Helper()
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	img := EmptyIndexed() // checkStructure then checks the broker index at every step
	var log []records.Record
	imgs := []*Image{img}
	for off := range int64(n) {
		r := records.Record{Message: g.next(img, off)}
		d := NewDelta(img)
		if err := d.Replay(off, 1, r); err != nil {
			t.Fatalf("seed %d: generated record %d invalid: %v", seed, off, err)
		}
		next := d.Apply()
		if err := errors.Join(next.checkStructure(), next.Check()); err != nil {
			t.Fatalf("seed %d offset %d: %v", seed, off, err)
		}
		checkSharing(t, d, img, next)
		if diff, changes := Diff(img, next), d.Changes(); !changes.Contains(diff) {
			t.Fatalf("seed %d offset %d: delta reports %+v, diff finds %+v", seed, off, changes, diff)
		}
		if emptyChanges(Diff(img, next)) && stateDump(img) != stateDump(next) {
			t.Fatalf("seed %d offset %d: images differ but Diff finds nothing", seed, off)
		}
		log = append(log, r)
		img = next
		imgs = append(imgs, img)
	}
	return log, imgs
}

// checkSharing verifies the delta's change report against the images: an
// unreported topic is the very same *Topic in both images.
func checkSharing(t *testing.T, d *Delta, prev, next *Image) {
	t.Helper()
	reported := map[records.UUID]TopicChange{}
	for _, c := range d.TopicChanges() {
		reported[c.ID] = c
	}
	for topic := range next.Topics() {
		c, ok := reported[topic.id]
		old, inPrev := prev.TopicByID(topic.id)
		switch {
		case !ok && (!inPrev || old != topic):
			t.Fatalf("topic %s changed but not reported", topic.name)
		case ok && c.Created == inPrev && !c.Created:
			// changed topic: fine
		case ok && c.Created && inPrev && old.name == topic.name && !hasDeleted(d, topic.id):
			t.Fatalf("topic %s reported created but existed", topic.name)
		}
	}
	for topic := range prev.Topics() {
		if _, ok := next.TopicByID(topic.id); !ok && !reported[topic.id].Deleted {
			t.Fatalf("topic %s deleted but not reported", topic.name)
		}
	}
}

func hasDeleted(d *Delta, id records.UUID) bool {
	for _, c := range d.TopicChanges() {
		if c.ID == id && c.Deleted {
			return true
		}
	}
	return false
}

func replayAll(t *testing.T, base *Image, log []records.Record, from int64) *Image {
	t.Helper()
	d := NewDelta(base)
	for i, r := range log {
		if err := d.Replay(from+int64(i), 1, r); err != nil {
			t.Fatal(err)
		}
	}
	return d.Apply()
}

var replaySeeds = flag.Int("image.seeds", 10, "random logs TestSnapshotEqualsReplay checks")

// TestSnapshotEqualsReplay checks that one delta, many random batches and
// a rebuild from Records() (encoded to bytes and decoded back) all give
// the image of one delta per record.
func TestSnapshotEqualsReplay(t *testing.T) {
	for seed := range uint64(*replaySeeds) {
		log, imgs := genLog(t, seed, 300)
		want := imgs[len(imgs)-1]

		if got := replayAll(t, Empty(), log, 0); !got.Equal(want) {
			t.Fatalf("seed %d: one delta differs:\n%s\nwant\n%s", seed, got.Dump(), want.Dump())
		}

		rng := rand.New(rand.NewPCG(seed, 7))
		img := Empty()
		for i := 0; i < len(log); {
			n := 1 + rng.IntN(40)
			n = min(n, len(log)-i)
			img = replayAll(t, img, log[i:i+n], int64(i))
			i += n
		}
		if !img.Equal(want) {
			t.Fatalf("seed %d: batched replay differs:\n%s\nwant\n%s", seed, img.Dump(), want.Dump())
		}

		// Snapshot at a random point, then the log tail.
		cut := rng.IntN(len(log))
		snap := rebuild(t, imgs[cut])
		if !snap.Equal(imgs[cut]) {
			t.Fatalf("seed %d: rebuild at %d differs:\n%s\nwant\n%s", seed, cut, snap.Dump(), imgs[cut].Dump())
		}
		if got := replayAll(t, snap, log[cut:], int64(cut)); !got.Equal(want) {
			t.Fatalf("seed %d: snapshot+tail differs", seed)
		}
		// A snapshot load shares nothing with the image it replaces, yet
		// Diff must see no difference between equal images.
		if diff := Diff(imgs[cut], snap); !emptyChanges(diff) {
			t.Fatalf("seed %d: diff of equal images: %+v", seed, diff)
		}
		if diff := Diff(snap, want); !Diff(imgs[cut], want).Contains(diff) || !diff.Contains(Diff(imgs[cut], want)) {
			t.Fatalf("seed %d: diff after snapshot load differs from diff before", seed)
		}
		if got, want := want.Hash(), imgs[len(imgs)-1].Hash(); got != want {
			t.Fatalf("hash unstable")
		}
	}
}

// rebuild replays img.Records(), round-tripped through the wire codec,
// into an empty image and restores the provenance, as a snapshot load does.
func rebuild(t *testing.T, img *Image) *Image {
	t.Helper()
	d := NewDelta(Empty())
	for i, r := range img.Records() {
		b, err := r.AppendTo(nil)
		if err != nil {
			t.Fatalf("encode %s v%d: %v", r.Message.Type(), r.Version, err)
		}
		back, err := records.Decode(b)
		if err != nil {
			t.Fatalf("decode %s: %v", r.Message.Type(), err)
		}
		if err := d.Replay(int64(i), 0, back); err != nil {
			t.Fatal(err)
		}
	}
	d.SetProvenance(img.Provenance())
	return d.Apply()
}

func TestReplayErrors(t *testing.T) {
	tid := records.UUID{9}
	base := replayAll(t, Empty(), []records.Record{
		rec(&records.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: true}),
		rec(&records.TopicRecord{Name: "foo", TopicID: tid}),
		rec(&records.PartitionRecord{TopicID: tid, PartitionID: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
	}, 0)
	change := func(f func(*records.PartitionChangeRecord)) records.Message {
		r := records.NewPartitionChangeRecord()
		r.TopicID = tid
		f(r)
		return r
	}
	tests := []struct {
		name string
		msg  records.Message
		want error
	}{
		{"partition of unknown topic", &records.PartitionRecord{TopicID: records.UUID{1}, Replicas: []int32{1}}, ErrUnknownTopic},
		{"change of unknown partition", change(func(r *records.PartitionChangeRecord) { r.PartitionID = 3 }), ErrUnknownPartition},
		{"change of unknown topic", &records.PartitionChangeRecord{TopicID: records.UUID{2}, Leader: -2, LeaderRecoveryState: -1}, ErrUnknownTopic},
		{"bad recovery state", change(func(r *records.PartitionChangeRecord) { r.PartitionID = 0; r.LeaderRecoveryState = 3 }), ErrInvalidRecord},
		{"directories mismatch", change(func(r *records.PartitionChangeRecord) {
			r.PartitionID = 0
			r.Replicas = []int32{1, 2}
			r.Directories = []records.UUID{{1}}
		}), ErrInvalidRecord},
		{"remove unknown topic", &records.RemoveTopicRecord{TopicID: records.UUID{3}}, ErrUnknownTopic},
		{"duplicate topic name", &records.TopicRecord{Name: "foo", TopicID: records.UUID{4}}, ErrDuplicateTopic},
		{"duplicate topic id", &records.TopicRecord{Name: "bar", TopicID: tid}, ErrDuplicateTopic},
		{"fence unknown broker", &records.FenceBrokerRecord{ID: 2, Epoch: 5}, ErrUnknownBroker},
		{"fence stale epoch", &records.FenceBrokerRecord{ID: 1, Epoch: 4}, ErrBrokerEpoch},
		{"unregister stale epoch", &records.UnregisterBrokerRecord{BrokerID: 1, BrokerEpoch: 6}, ErrBrokerEpoch},
		{"bad fence change", &records.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: 2}, ErrInvalidRecord},
		{"remove metadata.version", &records.FeatureLevelRecord{Name: MetadataVersionFeature}, ErrInvalidRecord},
		{"producer ids backwards", &records.ProducerIdsRecord{NextProducerID: -1}, ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDelta(base)
			err := d.Replay(10, 1, rec(tt.msg))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if d.Provenance().Offset != base.Provenance().Offset {
				t.Fatalf("failed record advanced the offset")
			}
			if got := d.Apply(); !got.Equal(base) {
				t.Fatalf("failed record changed the image:\n%s", got.Dump())
			}
		})
	}
	d := NewDelta(base)
	if err := d.Replay(2, 1, rec(&records.NoOpRecord{})); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("replaying an old offset: got %v", err)
	}
	d.Apply()
	if err := d.Replay(11, 1, rec(&records.NoOpRecord{})); !errors.Is(err, ErrDeltaApplied) {
		t.Fatalf("replay after apply: got %v", err)
	}
}

func TestBaseUntouchedByLaterDeltas(t *testing.T) {
	log, imgs := genLog(t, 99, 400)
	dumps := make([]string, len(imgs))
	for i, img := range imgs {
		dumps[i] = img.Dump()
	}
	// Replaying everything again on top of early images must not write
	// into any image already published.
	for i := 0; i < len(log); i += 50 {
		replayAll(t, imgs[i], log[i:], int64(i))
	}
	for i, img := range imgs {
		if img.Dump() != dumps[i] {
			t.Fatalf("image %d changed after publication", i)
		}
	}
}

func emptyChanges(c Changes) bool {
	return len(c.Topics) == 0 && len(c.Brokers) == 0 && len(c.Controllers) == 0 && len(c.Configs) == 0 &&
		!c.FeaturesChanged && !c.MetadataVersionChanged && !c.ProducerIDsChanged && !c.SecurityChanged
}

// stateDump is Dump without the provenance line.
func stateDump(img *Image) string {
	d := img.Dump()
	return d[strings.IndexByte(d, '\n')+1:]
}
