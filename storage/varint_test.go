package storage

import (
	"encoding/binary"
	"math"
	"testing"
)

// varintLen must agree with what binary.AppendVarint writes, or appendRecord's
// length prefix would lie about the record that follows it.
func TestVarintLen(t *testing.T) {
	vals := []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	for shift := range 63 {
		vals = append(vals, 1<<shift, -(1 << shift), 1<<shift-1, -(1<<shift)+1)
	}
	for _, v := range vals {
		if got, want := varintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintLen(%d) = %d, AppendVarint writes %d bytes", v, got, want)
		}
	}
}
