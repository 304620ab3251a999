package replica

import (
	"errors"
	"testing"
)

// DeleteRecords raises the leader's log start up to the high watermark
// (-1: to it), refuses more, a follower and a compacted topic; the low
// watermark waits for the followers' log starts, which come with their
// fetches (-1 until the first one).
func TestDeleteRecordsAndLowWatermark(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := hwBelowEnd(t, m) // hw 4, end 6, ISR 1,2
	if _, err := p.DeleteRecords(5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("above the high watermark: %v", err)
	}
	if _, err := p.DeleteRecords(-2); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("offset -2: %v", err)
	}
	if got, err := p.DeleteRecords(2); err != nil || got != 2 || p.Log().StartOffset() != 2 {
		t.Fatalf("delete to 2: %d %v, log start %d", got, err, p.Log().StartOffset())
	}
	if got, err := p.DeleteRecords(-1); err != nil || got != 4 || p.Log().StartOffset() != 4 {
		t.Fatalf("delete to the high watermark: %d %v, log start %d", got, err, p.Log().StartOffset())
	}
	if got, err := p.DeleteRecords(1); err != nil || got != 1 || p.Log().StartOffset() != 4 {
		t.Fatalf("a lower offset moved the log start: %d %v, log start %d", got, err, p.Log().StartOffset())
	}
	if low, err := p.LowWatermark(); err != nil || low != -1 {
		t.Fatalf("low watermark before the follower fetched: %d %v", low, err)
	}
	changed := p.Changed() // the fetch below moves no high watermark (4 already)
	if _, err := p.ReadForFollower(FollowerFetch{ReplicaID: 2, BrokerEpoch: -1, FetchOffset: 4, LogStartOffset: 4,
		CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("a follower's new log start did not wake DeleteRecords waiters")
	}
	if low, err := p.LowWatermark(); err != nil || low != 4 {
		t.Fatalf("low watermark after the follower fetched: %d %v", low, err)
	}

	p.setConfig(&TopicConfig{Compact: true})
	if _, err := p.DeleteRecords(4); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("compacted topic: %v", err)
	}
	cfg := DefaultTopicConfig()
	p.setConfig(&cfg)
	st := p.State()
	st.Leader, st.LeaderEpoch = 2, st.LeaderEpoch+1
	if err := m.Apply(st); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(4); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower: %v", err)
	}
	if _, err := p.LowWatermark(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower low watermark: %v", err)
	}
}
