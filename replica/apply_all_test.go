package replica

import (
	"context"
	"errors"
	"testing"
	"time"

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

// A publish that moves the leadership of one partition and changes only
// the ISR of another (a controlled shutdown: the broker leaves every ISR
// and its leaderships move) points the moved partition's fetcher at its
// new leader without waiting for the other partition's change: before,
// every change of the publish had to finish first (1.2 to 1.7 s for 1,004
// partitions in a loaded kraftd bench), and the new leader's high
// watermark, and so every acks=-1 produce, waited for that follower.
func TestApplyAllMovesLeadersFirst(t *testing.T) {
	m := newManager(t, t.TempDir())
	moved := PartitionState{TopicPartition: TopicPartition{"demo", 0}, TopicID: topicID, Leader: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	shrunk := PartitionState{TopicPartition: TopicPartition{"demo", 1}, TopicID: topicID, Leader: 2,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	if err := m.ApplyAll([]PartitionState{moved, shrunk}); err != nil {
		t.Fatal(err)
	}
	pm, _ := m.Partition(moved.TopicPartition)
	ps, _ := m.Partition(shrunk.TopicPartition)
	res, err := pm.AppendAsLeader(batch(1, -1, 0, 0), acksAll)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- pm.WaitCommitted(context.Background(), res.LastOffset) }()

	moved.Leader, moved.LeaderEpoch, moved.PartitionEpoch, moved.ISR = 2, 1, 1, []int32{2, 3}
	shrunk.PartitionEpoch, shrunk.ISR = 1, []int32{2, 3}
	ps.notifyMu.Lock() // the ISR change's become waits to notify its waiters
	applied := make(chan error, 1)
	go func() { applied <- m.ApplyAll([]PartitionState{shrunk, moved}) }()
	following := func() bool {
		m.fetchers.mu.Lock()
		defer m.fetchers.mu.Unlock()
		key, ok := m.fetchers.assigned[moved.TopicPartition]
		return ok && key.leader == 2
	}
	deadline := time.Now().Add(2 * time.Second)
	for !following() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ok := following()
	ps.notifyMu.Unlock()
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("the moved partition's fetcher waited for the other partition's ISR change")
	}
	if err := <-waited; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("acks=-1 wait on the old leader: %v", err)
	}
	if st := ps.State(); st.PartitionEpoch != 1 || len(st.ISR) != 2 {
		t.Fatalf("ISR change not applied: %+v", st)
	}
}
