package interop

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

func adminFor(t *testing.T, seeds ...string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// partitionView is what one broker says about a topic: partition -> (leader, epoch).
// It asks that broker itself over one connection, as a client would.
func partitionView(t *testing.T, addr, topic string) (map[int32][2]int32, error) {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop"})
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(-1)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("topic not visible at %s", addr)
	}
	out := map[int32][2]int32{}
	for _, p := range mr.Topics[0].Partitions {
		out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
	}
	return out, nil
}

// listBrokers is the broker ids a broker's Metadata answer lists.
func listBrokers(addr string) []int32 {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop"})
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(-1)
	req.Topics = []kmsg.MetadataRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return nil
	}
	var ids []int32
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

func waitRunning(t testing.TB, c *cluster) {
	t.Helper()
	for nid := range c.brokerPorts {
		b := c.nodes[nid].Broker()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := b.WaitState(ctx, broker.StateRunning); err != nil {
			cancel()
			t.Fatalf("broker %d not running: %v (state %v)", nid, err, b.State())
		}
		cancel()
	}
}

// TestKRaftCreateTopicsVisibleOnEveryBroker is issue 5's main scenario in-process: 3
// controllers + 3 brokers; kadm creates topics through one broker; every broker's
// Metadata answer shows them with the same leaders and leader epochs.
func TestKRaftCreateTopicsVisibleOnEveryBroker(t *testing.T) {
	c := newCluster(t, Controllers(3), Brokers(3))
	waitRunning(t, c)
	adm := adminFor(t, c.bootstrap()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	waitFor(t, "every broker to list all three brokers", 10*time.Second, func() bool {
		for nid := range c.brokerPorts {
			if fmt.Sprint(listBrokers(c.brokerAddr(nid))) != "[4 5 6]" {
				return false
			}
		}
		return true
	})
	resp, err := adm.CreateTopics(ctx, 6, 3, nil, "orders", "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	// Error paths through the broker's forwarding.
	dup, _ := adm.CreateTopics(ctx, 1, 1, nil, "orders")
	if r := dup["orders"]; r.Err == nil || !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("duplicate create: %v", r.Err)
	}
	bad, _ := adm.CreateTopics(ctx, 1, 5, nil, "too-replicated")
	if r := bad["too-replicated"]; r.Err == nil || !strings.Contains(r.Err.Error(), "INVALID_REPLICATION_FACTOR") {
		t.Fatalf("bad replication factor: %v", r.Err)
	}

	for _, topic := range []string{"orders", "payments"} {
		var want map[int32][2]int32
		waitFor(t, "every broker to show "+topic, 10*time.Second, func() bool {
			views := map[string]map[int32][2]int32{}
			for nid := range c.brokerPorts {
				v, err := partitionView(t, c.brokerAddr(nid), topic)
				if err != nil || len(v) != 6 {
					return false
				}
				views[c.brokerAddr(nid)] = v
			}
			want = nil
			for _, v := range views {
				if want == nil {
					want = v
				} else if fmt.Sprint(v) != fmt.Sprint(want) {
					return false
				}
			}
			return true
		})
		leaders := map[int32]bool{}
		for _, le := range want {
			leaders[le[0]] = true
		}
		if len(leaders) != 3 {
			t.Fatalf("%s: leaders %v not spread over the 3 brokers", topic, want)
		}
	}
}

// TestKRaftBrokerFencedAndLeadershipMoves: a stopped-without-notice broker is fenced
// after the session timeout and its leaderships move to the others; restarted, it is
// unfenced once caught up.
func TestKRaftBrokerFencedAndLeadershipMoves(t *testing.T) {
	c := newCluster(t, Controllers(1), Brokers(3))
	waitRunning(t, c)
	adm := adminFor(t, c.bootstrap()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopics(ctx, 6, 3, nil, "events"); err != nil {
		t.Fatal(err)
	}
	victim := int32(2) // controller 1, brokers 2..4
	survivor := c.brokerAddr(3)
	// Kill the broker abruptly: close its listeners and components without a
	// controlled shutdown by canceling the stop context at once.
	dead, stop := context.WithCancel(context.Background())
	stop()
	c.nodes[victim].Stop(dead)
	delete(c.nodes, victim)
	waitFor(t, "leaderships to leave the dead broker", 15*time.Second, func() bool {
		v, err := partitionView(t, survivor, "events")
		if err != nil || len(v) != 6 {
			return false
		}
		for _, le := range v {
			if le[0] == victim || le[0] < 0 {
				return false
			}
		}
		return true
	})
	// Every surviving broker stops listing it once it has applied the fence (the
	// leadership moves and the fence need not reach every broker at the same moment).
	waitFor(t, "every surviving broker to stop listing the fenced broker", 10*time.Second, func() bool {
		for _, nid := range []int32{3, 4} {
			if fmt.Sprint(listBrokers(c.brokerAddr(nid))) != "[3 4]" {
				return false
			}
		}
		return true
	})
	// Restart it: it registers with a new incarnation, catches up, and is unfenced.
	a := c.start(victim, nil)
	rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer rcancel()
	if err := a.Broker().WaitState(rctx, broker.StateRunning); err != nil {
		t.Fatalf("restarted broker not running: %v", err)
	}
	waitFor(t, "the restarted broker to be listed", 10*time.Second, func() bool {
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return false
		}
		for _, b := range bs {
			if b.NodeID == victim {
				return true
			}
		}
		return false
	})
}

// TestKcatListsBrokersAndTopics: librdkafka (Debian's kcat) sees the cluster.
func TestKcatListsBrokersAndTopics(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	c := newCluster(t, Controllers(1), Brokers(2))
	waitRunning(t, c)
	adm := adminFor(t, c.bootstrap()...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopics(ctx, 3, 2, nil, "kcat-topic"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	waitFor(t, "kcat -L to show the topic", 10*time.Second, func() bool {
		out, err = exec.Command(kcat, "-L", "-b", strings.Join(c.bootstrap(), ","), "-m", "5").CombinedOutput()
		return err == nil && strings.Contains(string(out), `topic "kcat-topic" with 3 partitions`)
	})
	s := string(out)
	if !strings.Contains(s, "2 brokers:") || !strings.Contains(s, "broker 2 at 127.0.0.1:") || !strings.Contains(s, "broker 3 at 127.0.0.1:") {
		t.Fatalf("kcat -L output:\n%s", s)
	}
}

// TestKRaftBrokersFromBootstrapServers: brokers configured with only
// controller.quorum.bootstrap.servers (the controllers keep their static voter set)
// discover the quorum leader through a Fetch to a bootstrap address, follow the
// endpoint its answers advertise, register with the active controller, serve topics
// created through them, and find the new leader after the active controller stops.
func TestKRaftBrokersFromBootstrapServers(t *testing.T) {
	c := newCluster(t, Controllers(3), Brokers(2), BootstrapBrokers())
	for nid := range c.brokerPorts {
		if v := c.nodes[nid].Config().QuorumVoters; len(v) != 0 {
			t.Fatalf("broker %d has voters %v: the test would not exercise bootstrap servers", nid, v)
		}
	}
	waitRunning(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func(topic string) {
		t.Helper()
		resp, err := adminFor(t, c.bootstrap()...).CreateTopics(ctx, 3, 2, nil, topic)
		if err == nil {
			err = resp[topic].Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		waitFor(t, "both brokers to show "+topic, 10*time.Second, func() bool {
			for nid := range c.brokerPorts {
				if v, err := partitionView(t, c.brokerAddr(nid), topic); err != nil || len(v) != 3 {
					return false
				}
			}
			return true
		})
	}
	create("before-failover")
	var leader int32 = -1
	for nid := range c.ctrlPorts {
		if a := c.nodes[nid]; a.Quorum().Metrics().Role == quorum.Leader {
			leader = nid
		}
	}
	if leader < 0 {
		t.Fatal("no quorum leader among the controllers")
	}
	for nid := range c.brokerPorts {
		if m := c.nodes[nid].Quorum().Metrics(); m.LeaderID != leader {
			t.Fatalf("broker %d follows %d, the leader is %d", nid, m.LeaderID, leader)
		}
	}
	c.stop(leader)
	waitFor(t, "both brokers to follow a new leader", 15*time.Second, func() bool {
		for nid := range c.brokerPorts {
			if m := c.nodes[nid].Quorum().Metrics(); m.LeaderID < 0 || m.LeaderID == leader {
				return false
			}
		}
		return true
	})
	create("after-failover")
	for nid := range c.brokerPorts {
		if s := c.nodes[nid].Broker().State(); s != broker.StateRunning {
			t.Fatalf("broker %d is %v after the failover", nid, s)
		}
	}
}
