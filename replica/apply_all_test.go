package replica

import (
	"errors"
	"testing"

	"github.com/kraftd/kraftd/storage"
)

// TestApplyAll: one ApplyAll hosts many partitions (concurrently) with the
// outcome of applying them one by one: each in its role and epoch, a
// partition named twice ends in its later state, a directory left by an
// older topic of the same name is replaced, and leaders start their epoch
// in the log.
func TestApplyAll(t *testing.T) {
	dir := t.TempDir()
	older := [16]byte{9}
	// An older topic's log in demo-7's directory.
	l, err := storage.OpenLog(dir+"/demo-7", storage.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetTopicID(older); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir)
	const n = 100
	var states []PartitionState
	for p := range int32(n) {
		states = append(states, PartitionState{TopicPartition: TopicPartition{"demo", p}, TopicID: topicID,
			Leader: 1 + p%2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	}
	// Partition 3 again, later: broker 1 takes over at epoch 2.
	states = append(states, PartitionState{TopicPartition: TopicPartition{"demo", 3}, TopicID: topicID,
		Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}})
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	if got := len(m.Hosted()); got != n {
		t.Fatalf("hosted %d partitions, want %d", got, n)
	}
	for p := range int32(n) {
		part, ok := m.Partition(TopicPartition{"demo", p})
		if !ok {
			t.Fatalf("demo-%d not hosted", p)
		}
		st := part.State()
		wantLeader, wantEpoch := 1+p%2, int32(1)
		if p == 3 {
			wantLeader, wantEpoch = 1, 2
		}
		if st.Leader != wantLeader || st.LeaderEpoch != wantEpoch {
			t.Fatalf("demo-%d: leader %d epoch %d, want %d at %d", p, st.Leader, st.LeaderEpoch, wantLeader, wantEpoch)
		}
		if id, _ := part.Log().TopicID(); id != topicID {
			t.Fatalf("demo-%d: topic id %x", p, id)
		}
		e := part.Log().EpochEntries()
		if wantLeader == 1 && (len(e) == 0 || e[len(e)-1].Epoch != wantEpoch) {
			t.Fatalf("demo-%d led here: epochs %v, want %d last", p, e, wantEpoch)
		}
	}
	// Applying the same states again changes nothing and fails nothing.
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyAll(states[:1]); !errors.Is(err, ErrClosed) {
		t.Fatalf("ApplyAll after Close: %v, want ErrClosed", err)
	}
}
