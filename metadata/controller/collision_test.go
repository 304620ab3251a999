package controller

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// topicsImage is an image holding the given topics (no partitions).
func topicsImage(tb testing.TB, names []string) *image.Image {
	tb.Helper()
	d := image.NewDelta(image.Empty())
	for i, n := range names {
		id := records.UUID{0: byte(i >> 24), 1: byte(i >> 16), 2: byte(i >> 8), 3: byte(i), 15: 9}
		if err := d.Replay(int64(i), 1, records.Record{Message: &records.TopicRecord{Name: n, TopicID: id}}); err != nil {
			tb.Fatal(err)
		}
	}
	return d.Apply()
}

// scanColliding is the collision check as a scan of every topic.
func scanColliding(img *image.Image, name string) (string, bool) {
	for t := range img.Topics() {
		if t.Name() != name && unifyCollisionChars(t.Name()) == unifyCollisionChars(name) {
			return t.Name(), true
		}
	}
	return "", false
}

// TestCollidingTopicEqualsScan: collidingTopic, which looks up the other
// spellings of a name when they are fewer than the topics (issue 17),
// answers as a scan of every topic does, on random images whose topics do
// not collide with each other (CreateTopics keeps them so), for names with
// few '.' and '_' (looked up), many (compared with every topic) and the
// names of existing topics.
func TestCollidingTopicEqualsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte("ab._"[rng.IntN(4)])
		}
		return b.String()
	}
	for round := range 40 {
		var names []string
		unified := map[string]bool{}
		for range rng.IntN(60) {
			n := word(1 + rng.IntN(7))
			if !unified[unifyCollisionChars(n)] {
				unified[unifyCollisionChars(n)] = true
				names = append(names, n)
			}
		}
		img := topicsImage(t, names)
		for range 30 {
			name := word(1 + rng.IntN(9))
			if len(names) > 0 && rng.IntN(4) == 0 {
				name = names[rng.IntN(len(names))]
			}
			got, gotOK := collidingTopic(img, name)
			want, wantOK := scanColliding(img, name)
			if got != want || gotOK != wantOK {
				t.Fatalf("round %d, %d topics, name %q: collidingTopic %q %v, scan %q %v", round, len(names), name, got, gotOK, want, wantOK)
			}
		}
	}
}

// BenchmarkCollidingTopic: the collision check of one new name with two '_'
// against 1k, 10k and 100k topics (each with a '_', none colliding). It
// must not grow with the topics (issue 17); scan= is the comparison with
// every topic that it replaced.
func BenchmarkCollidingTopic(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("orders_%07d", i)
			}
			img := topicsImage(b, names)
			for _, f := range []struct {
				name string
				fn   func(*image.Image, string) (string, bool)
			}{{"lookup", collidingTopic}, {"scan", scanColliding}} {
				b.Run(f.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if other, ok := f.fn(img, "new_topic_x"); ok {
							b.Fatalf("collides with %s", other)
						}
					}
				})
			}
		})
	}
}
