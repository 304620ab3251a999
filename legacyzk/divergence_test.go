package legacyzk

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// divergent returns the differences between broker b's cache and ZooKeeper.
func (c *cluster) divergent(b *Broker) []string {
	c.t.Helper()
	d, err := Diverge(context.Background(), c.admin, b.ID(), b.Image())
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

func otherThan(c *cluster, not ...int32) *Broker {
	for _, b := range c.liveBrokers() {
		skip := false
		for _, n := range not {
			skip = skip || b.ID() == n
		}
		if !skip {
			return b
		}
	}
	return nil
}

// Write-then-crash: the controller writes the new leaders to ZooKeeper
// and dies before pushing. Until its session expires and a new controller
// finishes failover, the surviving broker serves the old leader (a dead
// broker): divergent. Failover heals it.
func TestZkDivergenceCrashAfterZkWrite(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.createTopic(ctrl, "foo", 3, 3)
	c.converged()
	victim := otherThan(c, ctrl.ID())
	survivor := otherThan(c, ctrl.ID(), victim.ID())
	ctrl.Faults().CrashAfterZkWrite.Store(true)
	victim.Close()
	waitFor(t, 5*time.Second, "the crash", func() (bool, string) { return ctrl.ctrl.crashed.Load(), "not crashed" })
	delete(c.brokers, ctrl.ID()) // dead; its session lingers
	defer ctrl.Close()
	waitFor(t, 5*time.Second, "divergence to show", func() (bool, string) {
		d := c.divergent(survivor)
		return len(d) > 0 && strings.Contains(strings.Join(d, ";"), "leader"), strings.Join(d, ";")
	})
	next := c.controller() // elected once the crashed session expires
	if next.ID() != survivor.ID() || next.ActiveControllerEpoch() != 2 {
		t.Fatalf("controller %d epoch %d", next.ID(), next.ActiveControllerEpoch())
	}
	c.converged()
}

// A dropped UpdateMetadata: one broker misses the push and, with no
// anti-entropy, stays stale while the others converge; the next full push
// (a controller failover) heals it.
func TestZkDivergenceDroppedUpdateMetadata(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.createTopic(ctrl, "foo", 3, 3)
	c.converged()
	deaf := otherThan(c, ctrl.ID())
	ctrl.Faults().DropUpdateMetadataTo(deaf.ID())
	c.createTopic(ctrl, "bar", 2, 3)
	waitFor(t, 5*time.Second, "the controller's own cache", func() (bool, string) {
		d := c.divergent(ctrl)
		return len(d) == 0, strings.Join(d, ";")
	})
	d := c.divergent(deaf)
	if len(d) == 0 || !strings.Contains(strings.Join(d, ";"), "bar") {
		t.Fatalf("broker %d should miss topic bar: %v", deaf.ID(), d)
	}
	if _, ok := deaf.Replica("bar", 0); !ok {
		t.Fatal("LeaderAndIsr should still have reached the deaf broker")
	}
	ctrl.Faults().DropUpdateMetadataTo(-1)
	ctrl.Close() // failover: the next controller pushes everything to everybody
	c.controller()
	c.converged()
}

// A zombie controller: paused with pushes queued, it loses its session; a
// new controller takes over with a higher epoch. When the zombie resumes,
// its queued pushes carry the old epoch and every broker that has seen the
// new one rejects them (STALE_CONTROLLER_EPOCH): fencing by epoch only.
func TestZkZombieControllerFencedByEpoch(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	zombie := c.controller()
	c.createTopic(zombie, "foo", 3, 3)
	c.converged()
	zombie.Faults().PauseBeforePush.Store(true)
	victim := otherThan(c, zombie.ID())
	victim.Close() // the zombie elects new leaders, then freezes before pushing
	waitFor(t, 5*time.Second, "the pause", func() (bool, string) { return zombie.Faults().Paused(), "not paused" })
	zombie.LoseSession()
	delete(c.brokers, zombie.ID())
	next := c.controller()
	if next.ActiveControllerEpoch() != 2 {
		t.Fatalf("new controller epoch %d", next.ActiveControllerEpoch())
	}
	c.converged()
	zombie.Faults().Resume()
	waitFor(t, 5*time.Second, "the zombie's pushes to be rejected", func() (bool, string) {
		n := zombie.Stats().RejectedPushes()[kerr.StaleControllerEpoch.Code]
		return n > 0, "none rejected yet"
	})
	c.brokers[zombie.ID()] = zombie // it re-registers as a plain broker
	c.controller()
	c.converged()
	if zombie.IsController() {
		t.Fatal("the zombie must not be controller again")
	}
}

func TestCompareMetadata(t *testing.T) {
	tr := &Truth{
		Brokers: []int32{1, 2},
		Topics:  map[string]TopicAssignment{"a": {Partitions: map[int32][]int32{0: {1, 2}}}},
		States:  map[TopicPartition]LeaderIsr{{"a", 0}: {Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}}},
	}
	name := "a"
	m := kmsg.NewPtrMetadataResponse()
	m.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 2}, {NodeID: 1}}
	m.Topics = []kmsg.MetadataResponseTopic{{Topic: &name, Partitions: []kmsg.MetadataResponseTopicPartition{
		{Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}}}
	if d := tr.CompareMetadata(2, m); len(d) != 0 {
		t.Fatalf("identical views differ: %v", d)
	}
	m.Topics[0].Partitions[0].Leader, m.Topics[0].Partitions[0].LeaderEpoch = 2, 2
	d := tr.CompareMetadata(2, m)
	if len(d) != 1 || !strings.Contains(d[0], "broker 2: a-0 leader 2 epoch 2") {
		t.Fatalf("%v", d)
	}
}

// controllerDiffs compares the active controller's view with ZooKeeper.
func (c *cluster) controllerDiffs(ctrl *Broker) []string {
	c.t.Helper()
	ctx := context.Background()
	v, ok, err := ctrl.ControllerView(ctx)
	if err != nil || !ok {
		c.t.Fatalf("controller view of %d: active %v, %v", ctrl.ID(), ok, err)
	}
	tr, err := ReadTruth(ctx, c.admin)
	if err != nil {
		c.t.Fatal(err)
	}
	return tr.CompareController(v)
}

// The third divergence case: ZooKeeper and the controller's in-memory
// state disagree. lose-zk-write-ack: a broker loss's ISR shrink lands in
// ZooKeeper but the controller takes the write as failed (its view keeps
// the dead broker in the ISR and nothing is pushed); lose-zk-write: the
// write never lands but the controller takes it as applied (its view and
// the brokers drop the dead broker, ZooKeeper keeps it). CompareController
// names the partitions; a failover (the next controller reads ZooKeeper)
// heals the controller's side.
func TestMemZkAndControllerDisagree(t *testing.T) {
	for _, fault := range []string{"lose-zk-write-ack", "lose-zk-write"} {
		t.Run(fault, func(t *testing.T) {
			c := newMemCluster(t, 1, 2, 3)
			ctrl := c.controller()
			c.createTopic(ctrl, "foo", 2, 3)
			c.converged()
			if d := c.controllerDiffs(ctrl); len(d) != 0 {
				t.Fatalf("before the fault: %v", d)
			}
			if err := ctrl.Faults().Apply(fault); err != nil {
				t.Fatal(err)
			}
			victim := otherThan(c, ctrl.ID())
			victim.Close()
			delete(c.brokers, victim.ID())
			waitFor(t, 5*time.Second, "the controller's view and ZooKeeper to disagree", func() (bool, string) {
				d := c.controllerDiffs(ctrl)
				return len(d) > 0 && strings.Contains(strings.Join(d, ";"), "foo-"), strings.Join(d, ";")
			})
			zkHasVictim := false
			for p := range int32(2) {
				zkHasVictim = zkHasVictim || slices.Contains(c.state("foo", p).ISR, victim.ID())
			}
			if zkHasVictim != (fault == "lose-zk-write") {
				t.Fatalf("%s: ZooKeeper's ISRs still name broker %d: %v", fault, victim.ID(), zkHasVictim)
			}
			ctrl.Close()
			delete(c.brokers, ctrl.ID())
			next := c.controller()
			waitFor(t, 5*time.Second, "the next controller's view to match ZooKeeper", func() (bool, string) {
				d := c.controllerDiffs(next)
				return len(d) == 0, strings.Join(d, ";")
			})
		})
	}
}
