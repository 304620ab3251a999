package legacyzk

import (
	"context"
	"testing"
	"time"
)

func TestMemElectionAndTopicCreation(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	ctrl := c.controller()
	if got := ctrl.ActiveControllerEpoch(); got != 1 {
		t.Fatalf("first controller epoch = %d, want 1", got)
	}
	ctx := context.Background()
	a := TopicAssignment{ID: [16]byte{1}, Partitions: map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}}
	if _, err := c.admin.Create(ctx, TopicPath("foo"), EncodeTopic(a), Persistent); err != nil {
		t.Fatal(err)
	}
	c.converged()
	img := c.brokers[2].Image()
	topic, ok := img.TopicByName("foo")
	if !ok || topic.NumPartitions() != 3 {
		t.Fatalf("broker 2 cache: foo ok=%v", ok)
	}
	p1, _ := topic.Partition(1)
	if p1.Leader != 2 || p1.LeaderEpoch != 0 {
		t.Fatalf("foo-1 leader %d epoch %d, want preferred leader 2 at epoch 0", p1.Leader, p1.LeaderEpoch)
	}
	waitFor(t, 5*time.Second, "LeaderAndIsr at broker 3", func() (bool, string) {
		r, ok := c.brokers[3].Replica("foo", 2)
		return ok && r.Leader == 3, "no replica state"
	})
}
