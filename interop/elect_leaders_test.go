package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electEnv is what the ElectLeaders scenario needs from a mode: its
// cluster, brokers that may be stopped without moving the controller, and
// how to restart one.
type electEnv struct {
	c       *cluster
	movable []int32 // brokers that are not the (zk-legacy) controller
	restart func(nid int32)
}

// TestElectLeadersFranz: kadm.Client.ElectLeaders in both modes. After a
// broker's controlled shutdown and restart, PREFERRED moves leadership of
// a partition it is the first replica of back to it, and every broker's
// Metadata shows it; asked again, ELECTION_NOT_NEEDED; an unknown
// partition UNKNOWN_TOPIC_OR_PARTITION; every partition (null) reports
// none. A partition whose only in-sync
// replica is gone gets, with UNCLEAN, the out-of-sync replica that is
// back.
func TestElectLeadersFranz(t *testing.T) {
	t.Run("kraft", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, Controllers(1), Brokers(3))
		electLeadersScenario(t, electEnv{c: c, movable: []int32{2, 3, 4},
			restart: func(nid int32) { c.start(nid, c.overrides) }})
	})
	t.Run("zk-legacy", func(t *testing.T) {
		t.Parallel()
		c, zk := newLegacyCluster(t, 3)
		legacyBrokerIDs(t, c)
		ctrl := legacyController(t, c)
		var movable []int32
		for _, id := range []int32{1, 2, 3} {
			if id != ctrl {
				movable = append(movable, id)
			}
		}
		electLeadersScenario(t, electEnv{c: c, movable: movable,
			restart: func(nid int32) { startLegacy(c, nid, zk.Addr) }})
	})
}

// createAssigned creates topic with one partition on replicas (in order).
func createAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{ra}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// waitLeaderEverywhere waits until every running broker's Metadata names
// leader for partition 0 of topic.
func waitLeaderEverywhere(t *testing.T, c *cluster, topic string, leader int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s-0 led by %d on every broker", topic, leader), 15*time.Second, func() bool {
		for nid := range c.brokerPorts {
			if c.nodes[nid] == nil {
				continue
			}
			v, err := partitionView(t, c.brokerAddr(nid), topic)
			if err != nil || v[0][0] != leader {
				return false
			}
		}
		return true
	})
}

func electOne(t *testing.T, ctx context.Context, adm *kadm.Client, how kadm.ElectLeadersHow, topic string, p int32) error {
	t.Helper()
	rs, err := adm.ElectLeaders(ctx, how, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rs[topic][p]
	if !ok {
		t.Fatalf("no result for %s-%d: %+v", topic, p, rs)
	}
	return r.Err
}

func electLeadersScenario(t *testing.T, e electEnv) {
	c := e.c
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fa := newFranzAdmin(t, c).(*franzAdmin)
	adm := fa.adm
	x, y := e.movable[0], e.movable[1]
	var third int32
	for nid := range c.brokerPorts {
		if nid != x && nid != y {
			third = nid
		}
	}

	// PREFERRED after a restart.
	createAssigned(t, ctx, fa.cl, "preferred", x, y, third)
	waitFullISR(t, ctx, adm, "preferred", 15*time.Second)
	produceN(t, ctx, c.bootstrap(), "preferred", 50)
	if err := electOne(t, ctx, adm, kadm.ElectPreferredReplica, "preferred", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred replica leading: %v", err)
	}
	c.stop(x)
	waitFor(t, fmt.Sprintf("broker %d out of the ISR", x), 15*time.Second, func() bool {
		parts, err := partitionISR(ctx, adm, "preferred")
		return err == nil && parts[0].Leader != x && !slices.Contains(parts[0].ISR, x)
	})
	e.restart(x)
	waitFullISR(t, ctx, adm, "preferred", 20*time.Second)
	if err := electOne(t, ctx, adm, kadm.ElectPreferredReplica, "preferred", 0); err != nil {
		t.Fatalf("preferred election after the restart: %v", err)
	}
	waitLeaderEverywhere(t, c, "preferred", x)
	if err := electOne(t, ctx, adm, kadm.ElectPreferredReplica, "preferred", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("asked again: %v", err)
	}
	if err := electOne(t, ctx, adm, kadm.ElectPreferredReplica, "preferred", 7); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	// Every partition (a null topic list): nothing needs an election, and
	// partitions that need none are left out of the answer.
	all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	for topic, ps := range all {
		for p, r := range ps {
			t.Errorf("every partition: %s-%d answered %v", topic, p, r.Err)
		}
	}

	// UNCLEAN: "unclean" on {x, y}; y stops (the ISR is {x}), then x
	// stops (no leader, ISR {x}); y comes back out of sync.
	createAssigned(t, ctx, fa.cl, "unclean", x, y)
	waitFullISR(t, ctx, adm, "unclean", 15*time.Second)
	c.stop(y)
	waitFor(t, fmt.Sprintf("broker %d out of the ISR", y), 15*time.Second, func() bool {
		parts, err := partitionISR(ctx, adm, "unclean")
		return err == nil && slices.Equal(parts[0].ISR, []int32{x})
	})
	c.stop(x)
	e.restart(y)
	c.waitBrokersListed(t) // y registered and unfenced: it may lead
	waitFor(t, "unclean-0 leaderless", 15*time.Second, func() bool {
		v, err := partitionView(t, c.brokerAddr(third), "unclean")
		return err == nil && v[0][0] == -1
	})
	if err := electOne(t, ctx, adm, kadm.ElectPreferredReplica, "unclean", 0); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred with the preferred replica gone: %v", err)
	}
	if err := electOne(t, ctx, adm, kadm.ElectLiveReplica, "unclean", 0); err != nil {
		t.Fatalf("unclean election: %v", err)
	}
	waitLeaderEverywhere(t, c, "unclean", y)
}
