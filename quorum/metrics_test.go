package quorum

import (
	"testing"
	"time"
)

func TestCommitTimerObservesEachBatchOnceInOrder(t *testing.T) {
	var got []time.Duration
	ct := commitTimer{observe: func(d time.Duration) { got = append(got, d) }}
	t0 := time.Unix(1000, 0)
	ct.proposed(3, 4, t0)                          // offsets 0..4
	ct.proposed(3, 9, t0.Add(2*time.Millisecond))  // 5..9
	ct.proposed(3, 12, t0.Add(3*time.Millisecond)) // 10..12
	ct.delivered(5, t0.Add(10*time.Millisecond))   // only the first batch is committed
	ct.delivered(5, t0.Add(11*time.Millisecond))   // nothing new
	ct.delivered(13, t0.Add(20*time.Millisecond))  // the other two
	want := []time.Duration{10 * time.Millisecond, 18 * time.Millisecond, 17 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("observed %v, want %v", got, want)
		}
	}
	if len(ct.pending) != 0 {
		t.Fatalf("pending left: %v", ct.pending)
	}
}

// A batch proposed in an older epoch may be truncated and its offsets reused: its
// timing must not be reported against records of the new epoch.
func TestCommitTimerForgetsBatchesOfAnOldEpoch(t *testing.T) {
	var got []time.Duration
	ct := commitTimer{observe: func(d time.Duration) { got = append(got, d) }}
	t0 := time.Unix(1000, 0)
	ct.proposed(3, 4, t0)
	ct.reset() // leadership lost
	ct.delivered(5, t0.Add(time.Second))
	ct.proposed(3, 7, t0)
	ct.proposed(5, 8, t0.Add(time.Millisecond)) // re-elected in a later epoch: epoch 3's batch is dropped
	ct.delivered(9, t0.Add(4*time.Millisecond))
	if len(got) != 1 || got[0] != 3*time.Millisecond {
		t.Fatalf("observed %v, want [3ms]", got)
	}
}

func TestCommitTimerWithoutObserverKeepsNothing(t *testing.T) {
	var ct commitTimer
	ct.proposed(1, 10, time.Unix(0, 0))
	ct.delivered(11, time.Unix(1, 0))
	if len(ct.pending) != 0 {
		t.Fatal("a timer without observer must not queue")
	}
}
