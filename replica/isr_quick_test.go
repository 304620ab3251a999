package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"
)

// naiveHighWatermark is the high watermark by definition: the smallest log
// end offset among the leader and the followers that hold it, found by
// sorting every candidate.
func naiveHighWatermark(leaderEnd int64, replicas []hwReplica) int64 {
	ends := []int64{leaderEnd}
	for _, r := range replicas {
		if r.holds {
			ends = append(ends, r.endOffset)
		}
	}
	slices.Sort(ends)
	return ends[0]
}

// TestHighWatermarkCandidateQuick compares highWatermarkCandidate with the
// naive version on random replica sets (unknown end offsets included).
func TestHighWatermarkCandidateQuick(t *testing.T) {
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		leaderEnd := r.Int64N(1000)
		replicas := make([]hwReplica, r.IntN(6))
		for i := range replicas {
			replicas[i] = hwReplica{endOffset: r.Int64N(leaderEnd+2) - 1, holds: r.IntN(2) == 0}
		}
		return highWatermarkCandidate(leaderEnd, replicas) == naiveHighWatermark(leaderEnd, replicas)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerCaughtUpQuick checks followerState's last caught-up time
// against its definition, replaying random fetch sequences: after each
// fetch, lastCaughtUpMs is the latest time t (among fetch times) at which
// the follower had everything the leader had at t, i.e. the latest fetch i
// with a later fetch j (or i itself) whose offset reaches the leader's log
// end seen at fetch i.
func TestFollowerCaughtUpQuick(t *testing.T) {
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		st := newFollowerState(false, 0)
		var fetches []quickFetch
		leaderEnd, offset, nowMs := int64(0), int64(0), int64(0)
		for range 1 + r.IntN(12) {
			leaderEnd += r.Int64N(3)
			offset = min(leaderEnd, offset+r.Int64N(4))
			nowMs += 1 + r.Int64N(10)
			fetches = append(fetches, quickFetch{offset, leaderEnd, nowMs})
			st.updateFetch(offset, 0, leaderEnd, nowMs, -1)
			// Kafka credits a fetch i as caught up when it asked for the
			// leader's end then, or when the next fetch reached the
			// leader's end seen at i (the follower had it all at i's time).
			want := int64(0)
			for i, fi := range fetches {
				if fi.offset >= fi.leaderEnd || i+1 < len(fetches) && fetches[i+1].offset >= maxEnd(fetches[:i+1]) {
					want = max(want, fi.nowMs)
				}
			}
			if st.lastCaughtUpMs != want {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

type quickFetch struct{ offset, leaderEnd, nowMs int64 }

func maxEnd(fs []quickFetch) int64 {
	m := int64(0)
	for _, f := range fs {
		m = max(m, f.leaderEnd)
	}
	return m
}
