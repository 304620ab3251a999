package legacyzk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// opLog is a Store that records every call touching a path under prefix:
// "create <path>" for a plain Create, "multi <op paths>" for a Multi,
// "getData", "exists" or "getChildren <path>" for a read, with how many
// Multis were in flight at once.
type opLog struct {
	Store
	prefix string
	delay  time.Duration // held inside each matching Multi, so overlap shows

	mu               sync.Mutex
	calls            []string
	inFlight, maxPar int
}

func (o *opLog) Create(ctx context.Context, p string, data []byte, mode CreateMode) (string, error) {
	if strings.HasPrefix(p, o.prefix) {
		o.mu.Lock()
		o.calls = append(o.calls, "create "+p)
		o.mu.Unlock()
	}
	return o.Store.Create(ctx, p, data, mode)
}

func (o *opLog) read(kind, p string) {
	if strings.HasPrefix(p, o.prefix) {
		o.mu.Lock()
		o.calls = append(o.calls, kind+" "+p)
		o.mu.Unlock()
	}
}

func (o *opLog) Get(ctx context.Context, p string, watch bool) ([]byte, Stat, error) {
	o.read("getData", p)
	return o.Store.Get(ctx, p, watch)
}

func (o *opLog) Exists(ctx context.Context, p string, watch bool) (Stat, bool, error) {
	o.read("exists", p)
	return o.Store.Exists(ctx, p, watch)
}

func (o *opLog) Children(ctx context.Context, p string, watch bool) ([]string, error) {
	o.read("getChildren", p)
	return o.Store.Children(ctx, p, watch)
}

func (o *opLog) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	var paths []string
	match := false
	for _, op := range ops {
		p := opPath(op)
		paths = append(paths, strings.TrimPrefix(fmt.Sprintf("%T:%s", op, p), "legacyzk."))
		match = match || strings.HasPrefix(p, o.prefix)
	}
	if !match {
		return o.Store.Multi(ctx, ops...)
	}
	o.mu.Lock()
	o.calls = append(o.calls, "multi "+strings.Join(paths, " "))
	o.inFlight++
	o.maxPar = max(o.maxPar, o.inFlight)
	o.mu.Unlock()
	time.Sleep(o.delay) // a ZooKeeper round trip's latency, not a wait for readiness
	res, err := o.Store.Multi(ctx, ops...)
	o.mu.Lock()
	o.inFlight--
	o.mu.Unlock()
	return res, err
}

// TestMemNewPartitionZnodesFencedAndPipelined: a new topic's
// /partitions, /partitions/<p> and state znodes are created as Kafka's
// createTopicPartitionStatesRaw does: every create inside a Multi whose
// first op checks /controller_epoch (fenced), /partitions once per topic,
// then one pipelined Multi per partition for each of the two levels: 1 +
// 2*8 round trips for 8 partitions, none of them serial per path level
// (before: 8 unfenced serial creates of each parent, 5 round trips a
// partition). Nothing under /partitions is read: Kafka's controller puts a
// new partition in NewPartition in memory and creates its state znode
// (onNewPartitionCreation, initializeLeaderAndIsrForPartitions); kraftd
// read each new state znode first (a getData answered NONODE, 25 calls
// for 8 partitions instead of 17).
func TestMemNewPartitionZnodesFencedAndPipelined(t *testing.T) {
	srv := NewMemServer()
	var logs []*opLog
	var mu sync.Mutex
	dial := func(context.Context) (Store, error) {
		l := &opLog{Store: srv.Connect(), prefix: PartitionsPath("t"), delay: 2 * time.Millisecond}
		mu.Lock()
		logs = append(logs, l)
		mu.Unlock()
		return l, nil
	}
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: dial, mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	for id := int32(1); id <= 3; id++ {
		c.start(id)
	}
	ctrl := c.controller()
	c.createTopic(ctrl, "t", 8, 3)
	c.converged()
	mu.Lock()
	defer mu.Unlock()
	var calls []string
	maxPar := 0
	for _, l := range logs {
		l.mu.Lock()
		calls = append(calls, l.calls...)
		maxPar = max(maxPar, l.maxPar)
		l.mu.Unlock()
	}
	var parents, partitions, states int
	for _, call := range calls {
		if !strings.HasPrefix(call, "multi CheckOp:"+ControllerEpochPath+" CreateOp:") {
			t.Errorf("not a fenced create: %s", call)
			continue
		}
		switch target := call[strings.LastIndex(call, ":")+1:]; {
		case target == PartitionsPath("t"):
			parents++
		case strings.HasSuffix(target, "/state"):
			states++
		default:
			partitions++
		}
	}
	if parents != 1 || partitions != 8 || states != 8 || len(calls) != 17 {
		t.Errorf("round trips under %s: %d for /partitions, %d for /partitions/<p>, %d for state znodes, %d in all; want 1, 8, 8, 17:\n%s",
			PartitionsPath("t"), parents, partitions, states, len(calls), strings.Join(calls, "\n"))
	}
	if maxPar < 2 {
		t.Errorf("at most %d Multi in flight: not pipelined", maxPar)
	}
}

// TestMemStateWriteAbortsOnNewerControllerEpoch: a partition state znode
// whose controller_epoch is newer than the controller's own (written by a
// controller elected after it, while /controller_epoch's check still
// passes) is left alone, as Kafka's state machines abort such a change;
// the other partition of the same state change is written.
func TestMemStateWriteAbortsOnNewerControllerEpoch(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	ctrl := c.controller()
	ctx := context.Background()
	a := TopicAssignment{ID: [16]byte{7}, Partitions: map[int32][]int32{0: {1, 2, 3}, 1: {1, 2, 3}}}
	if _, err := c.admin.Create(ctx, TopicPath("t"), EncodeTopic(a), Persistent); err != nil {
		t.Fatal(err)
	}
	c.converged()
	epoch := ctrl.ActiveControllerEpoch()
	newer := c.state("t", 0)
	newer.ControllerEpoch = epoch + 1
	if _, err := c.admin.Set(ctx, PartitionStatePath("t", 0), EncodeState(newer), -1); err != nil {
		t.Fatal(err)
	}
	victim := int32(1)
	for victim == ctrl.ID() || victim == newer.Leader {
		victim++
	}
	c.brokers[victim].Close() // the controller drops it from both ISRs
	waitFor(t, 5*time.Second, "t-1's ISR shrink", func() (bool, string) {
		s := c.state("t", 1)
		return !slices.Contains(s.ISR, victim), fmt.Sprint(s)
	})
	if s := c.state("t", 0); s.ControllerEpoch != epoch+1 || !slices.Contains(s.ISR, victim) || s.LeaderEpoch != newer.LeaderEpoch {
		t.Fatalf("t-0 written over a newer controller epoch: %+v (was %+v)", s, newer)
	}
	if !ctrl.IsController() || ctrl.ActiveControllerEpoch() != epoch {
		t.Fatalf("the controller resigned or moved: epoch %d", ctrl.ActiveControllerEpoch())
	}
}

// TestMemControllerIDFromUpdateMetadata: a broker names the controller the
// last UpdateMetadata came from (Kafka's ZkMetadataCache), not the one its
// /controller watch saw: while a newly elected controller is held before
// its first push, the other live broker still names the old controller;
// once the push arrives it names the new one.
func TestMemControllerIDFromUpdateMetadata(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	old := c.controller()
	c.createTopic(old, "t", 2, 3)
	c.converged()
	for _, b := range c.liveBrokers() {
		if b != old {
			b.Faults().PauseBeforePush.Store(true)
		}
	}
	old.Close()
	var next, other *Broker
	waitFor(t, 5*time.Second, "a new controller held before its first push", func() (bool, string) {
		for _, b := range c.liveBrokers() {
			if b.IsController() && b.Faults().Paused() {
				next = b
			}
		}
		return next != nil, "none"
	})
	for _, b := range c.liveBrokers() {
		if b != next {
			other = b
		}
	}
	other.Faults().PauseBeforePush.Store(false)
	if got := other.ControllerID(); got != old.ID() {
		t.Fatalf("broker %d names controller %d before any push from %d; want the old %d", other.ID(), got, next.ID(), old.ID())
	}
	next.Faults().Resume()
	waitFor(t, 5*time.Second, "the new controller named after its push", func() (bool, string) {
		return other.ControllerID() == next.ID(), fmt.Sprint(other.ControllerID())
	})
}
