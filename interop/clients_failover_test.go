package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// quorumLeader asks a broker (which forwards to the active controller, as
// Kafka brokers do) who leads the metadata quorum, and in which epoch.
func quorumLeader(ctx context.Context, addr string) (leaderID, epoch int32, err error) {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop"})
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(-1)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return 0, 0, err
	}
	dq := resp.(*kmsg.DescribeQuorumResponse)
	if dq.ErrorCode != 0 {
		return 0, 0, kafkaError(dq.ErrorCode, fmt.Errorf("DescribeQuorum"))
	}
	if len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("DescribeQuorum: malformed answer %+v", dq)
	}
	p := dq.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, 0, kafkaError(p.ErrorCode, fmt.Errorf("DescribeQuorum partition"))
	}
	return p.LeaderID, p.LeaderEpoch, nil
}

// TestClientsSurviveControllerFailover is issue 8's failover promise: a
// client connected during a controller failover keeps working. Every admin
// client (franz-go, sarama, kafka-go, kafka-python when installed) creates a
// topic, the active controller is stopped, and once DescribeQuorum through a
// broker names a new leader each client's very next CreateTopics, on the
// same client object, must succeed.
func TestClientsSurviveControllerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("controller failover: skipped with -short")
	}
	c := newCluster(t, Controllers(3), Brokers(3))
	waitRunning(t, c)
	clients := failoverClients(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createWithEach(ctx, t, clients, "before-failover-", 3)

	broker := c.brokerAddr(int32(len(c.controllers) + 1)) // the first broker's id
	var oldLeader, oldEpoch int32
	waitFor(t, "a quorum leader", 10*time.Second, func() bool {
		var err error
		oldLeader, oldEpoch, err = quorumLeader(ctx, broker)
		return err == nil && oldLeader > 0
	})
	t.Logf("stopping the active controller %d (epoch %d)", oldLeader, oldEpoch)
	c.stop(oldLeader)
	waitFor(t, "a new quorum leader", 20*time.Second, func() bool {
		id, epoch, err := quorumLeader(ctx, broker)
		return err == nil && id > 0 && id != oldLeader && epoch > oldEpoch
	})

	createWithEach(ctx, t, clients, "after-failover-", 3)
}

// TestLegacyClientsSurviveControllerFailover is the zk-legacy counterpart.
// The controller is a broker, elected through /controller, and clients
// send admin requests to it directly (forwarding came with KIP-590). It is
// stopped; once another broker has won the election, every surviving
// broker's Metadata must name the new controller, and franz-go, which
// re-resolves the controller after a failed connection, must create a
// topic with its very next call on the same client object. sarama,
// kafka-go and kafka-python keep using the dead controller (a cached
// controller or pooled connection, no retry on a refused or reset
// connection) just as they would against a ZooKeeper-era Kafka: their
// first call is made and logged, not required. In KRaft mode every client
// must succeed at once (TestClientsSurviveControllerFailover), because the
// "controller" clients see is a live broker that forwards.
func TestLegacyClientsSurviveControllerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("controller failover: skipped with -short")
	}
	c, _ := newLegacyCluster(t, 3)
	legacyBrokerIDs(t, c)
	clients := failoverClients(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createWithEach(ctx, t, clients, "before-failover-", 3)
	old := legacyController(t, c)
	t.Logf("stopping the controller broker %d", old)
	c.stop(old)
	var next int32 = -1
	waitFor(t, "another broker to win /controller", 20*time.Second, func() bool {
		for nid, a := range c.nodes {
			if lb := a.LegacyBroker(); lb != nil && lb.IsController() && nid != old {
				next = nid
				return true
			}
		}
		return false
	})
	waitFor(t, "every broker's Metadata to name the new controller", 10*time.Second, func() bool {
		for nid := range c.nodes {
			if metadataController(ctx, c.brokerAddr(nid)) != next {
				return false
			}
		}
		return true
	})
	recoversAtOnce := map[string]bool{"franz-go": true}
	for name, cl := range clients {
		callCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.createTopic(callCtx, "after-failover-"+name, 3, 2)
		cancel()
		switch {
		case err == nil:
			t.Logf("%s: first CreateTopics after the failover succeeded", name)
		case recoversAtOnce[name]:
			t.Errorf("%s: first CreateTopics after the failover: %v", name, err)
		default:
			t.Logf("%s: first CreateTopics after the failover failed, as against ZooKeeper-era Kafka: %v", name, err)
		}
	}
}

// metadataController is the controller id a broker's Metadata names, or -2
// when it does not answer.
func metadataController(ctx context.Context, addr string) int32 {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop"})
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(-1)
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		return -2
	}
	return resp.(*kmsg.MetadataResponse).ControllerID
}

// failoverClients builds every admin client that can create topics, all
// bootstrapped with every broker of c.
func failoverClients(t *testing.T, c *cluster) map[string]admin {
	clients := map[string]admin{
		"franz-go": newFranzAdmin(t, c),
		"sarama":   newSaramaAdmin(t, c),
		"kafka-go": newKafkaGoAdmin(t, c),
	}
	if pythonUsable() {
		clients["kafka-python"] = newPythonAdmin(t, c)
	} else {
		t.Log("kafka-python not installed; failover checked without it")
	}
	return clients
}

// createWithEach has every client create prefix+name (3 partitions, rf
// replicas) with one call each, and see it led.
func createWithEach(ctx context.Context, t *testing.T, clients map[string]admin, prefix string, rf int16) {
	t.Helper()
	for name, cl := range clients {
		topic := prefix + name
		if err := cl.createTopic(ctx, topic, 3, rf); err != nil {
			t.Errorf("%s: CreateTopics %s: %v", name, topic, err)
			continue
		}
		waitFor(t, name+" to see "+topic, 10*time.Second, func() bool {
			l, err := cl.leaders(ctx, topic)
			return err == nil && len(l) == 3 && allLed(l)
		})
	}
}
