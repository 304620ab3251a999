package quorum

import (
	"slices"
	"testing"
	"testing/quick"
)

// naiveMajorityOffset is the definition: the largest offset o such that a majority of
// voters have reached at least o.
func naiveMajorityOffset(offsets []int64) int64 {
	best := int64(-1 << 62)
	for _, cand := range offsets {
		n := 0
		for _, o := range offsets {
			if o >= cand {
				n++
			}
		}
		if n >= len(offsets)/2+1 && cand > best {
			best = cand
		}
	}
	return best
}

func TestMajorityOffsetMatchesNaive(t *testing.T) {
	f := func(raw []int16) bool {
		if len(raw) == 0 {
			return true
		}
		if len(raw) > 9 {
			raw = raw[:9]
		}
		offsets := make([]int64, len(raw))
		for i, v := range raw {
			offsets[i] = int64(v)
		}
		before := slices.Clone(offsets)
		got := majorityOffset(offsets)
		return got == naiveMajorityOffset(offsets) && slices.Equal(before, offsets)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
}
