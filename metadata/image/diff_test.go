package image

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

// scanDiff is Diff by full scans of both images, as it was before it
// skipped shared structure: the reference the fast Diff must equal.
func scanDiff(prev, next *Image) Changes {
	var topics []TopicChange
	for t := range prev.Topics() {
		if _, ok := next.TopicByID(t.id); !ok {
			topics = append(topics, TopicChange{ID: t.id, Name: t.name, Deleted: true})
		}
	}
	for t := range next.Topics() {
		old, ok := prev.TopicByID(t.id)
		var parts []int32
		if ok && old == t {
			continue
		}
		parts = []int32{}
		t.parts.scan(func(id int32, p *Partition) bool {
			if q, inOld := old.partsOrNil(id); !ok || !inOld || !p.Equal(q) {
				parts = append(parts, id)
			}
			return true
		})
		if !ok {
			topics = append(topics, TopicChange{ID: t.id, Name: t.name, Created: true, Partitions: parts})
		} else if len(parts) > 0 {
			topics = append(topics, TopicChange{ID: t.id, Name: t.name, Partitions: parts})
		}
	}
	slices.SortFunc(topics, func(a, b TopicChange) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmpBool(!a.Deleted, !b.Deleted), compareUUID(a.ID, b.ID))
	})
	c := Diff(prev, next) // the scalar fields are compared directly there
	c.Topics = topics
	c.Brokers = scanTree(prev.brokers, next.brokers, (*Broker).Equal)
	c.Controllers = scanTree(prev.controllers, next.controllers, (*Controller).Equal)
	var configs []ConfigResource
	for res, set := range prev.configs.All() {
		if other, ok := next.configs.Get(res); !ok || !slices.Equal(set, other) {
			configs = append(configs, res)
		}
	}
	for res := range next.configs.All() {
		if _, ok := prev.configs.Get(res); !ok {
			configs = append(configs, res)
		}
	}
	slices.SortFunc(configs, compareResource)
	c.Configs = configs
	return c
}

func (t *Topic) partsOrNil(id int32) (Partition, bool) {
	if t == nil {
		return Partition{}, false
	}
	return t.parts.Get(id)
}

func scanTree[V any](a, b ptree[int32, *V], equal func(*V, *V) bool) []int32 {
	var out []int32
	for id, v := range a.All() {
		if w, ok := b.Get(id); !ok || (v != w && !equal(v, w)) {
			out = append(out, id)
		}
	}
	for id := range b.All() {
		if _, ok := a.Get(id); !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Diff skips what two images share; it must still report exactly what a
// full scan reports, between an image and its successors, its
// predecessors, and a rebuild that shares nothing. The base images have
// 1,000 topics (a trie two or three levels deep) and topics of 300 partitions
// (a radix vector of three levels); random valid records change them.
func TestDiffEqualsFullScan(t *testing.T) {
	for _, shape := range []struct{ partitions, perTopic int }{{2_000, 2}, {1_500, 300}} {
		for seed := range uint64(2) {
			rng := rand.New(rand.NewPCG(seed, 11))
			g := &gen{rng: rand.New(rand.NewPCG(seed, 12))}
			img := buildImage(t, shape.partitions, shape.perTopic, seed == 1)
			imgs := []*Image{img}
			off := img.Provenance().Offset
			for range 30 {
				// A delta of one generated record (any kind), or of a few
				// partition changes.
				var ms []records.Message
				if rng.IntN(2) == 0 {
					ms = append(ms, g.next(img, off+1))
				} else {
					for range 1 + rng.IntN(5) {
						r := records.NewPartitionChangeRecord()
						r.TopicID = topicID(rng.IntN(shape.partitions / shape.perTopic))
						r.PartitionID = int32(rng.IntN(shape.perTopic))
						if _, ok := img.Partition(r.TopicID, r.PartitionID); ok {
							r.ISR, r.Leader = []int32{int32(rng.IntN(12))}, records.NoLeaderChange
							ms = append(ms, r)
						}
					}
				}
				d := NewDelta(img)
				for _, m := range ms {
					off++
					if err := d.Replay(off, 1, records.Record{Message: m}); err != nil {
						t.Fatalf("seed %d: record %d: %v", seed, off, err)
					}
				}
				img = d.Apply()
				imgs = append(imgs, img)
			}
			check := func(what string, a, b *Image) {
				t.Helper()
				if got, want := Diff(a, b), scanDiff(a, b); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d %s: Diff\n%+v\nfull scan\n%+v", seed, what, got, want)
				}
			}
			for i := 1; i < len(imgs); i++ {
				check("successor", imgs[i-1], imgs[i])
				j := rng.IntN(len(imgs))
				check("any pair", imgs[j], imgs[i])
				check("any pair reversed", imgs[i], imgs[j])
			}
			snap := rebuild(t, imgs[len(imgs)/2])
			check("after a rebuild", snap, imgs[len(imgs)-1])
			check("before a rebuild", imgs[0], snap)
		}
	}
}

// Every image counts leaderships, also without the broker index (a
// broker's): after each random delta LeaderCount must equal a scan, and
// checkStructure (which compares the counts with the partitions) passes.
func TestLeaderCountWithoutIndexEqualsScan(t *testing.T) {
	for seed := range uint64(5) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 21))}
		img := Empty()
		for off := range int64(400) {
			d := NewDelta(img)
			if err := d.Replay(off, 1, records.Record{Message: g.next(img, off)}); err != nil {
				t.Fatalf("seed %d offset %d: %v", seed, off, err)
			}
			img = d.Apply()
			if img.Indexed() {
				t.Fatal("an image built on Empty keeps the broker index")
			}
			if err := img.checkStructure(); err != nil {
				t.Fatalf("seed %d offset %d: %v", seed, off, err)
			}
			for b := int32(0); b < 8; b++ {
				if got, want := img.LeaderCount(b), len(img.partitionsWhere(func(p *Partition) bool { return p.Leader == b })); got != want {
					t.Fatalf("seed %d offset %d: LeaderCount(%d) = %d, a scan finds %d", seed, off, b, got, want)
				}
			}
		}
	}
}
