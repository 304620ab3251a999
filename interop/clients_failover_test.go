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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, cl := range clients {
		if err := cl.createTopic(ctx, "before-failover-"+name, 3, 3); err != nil {
			t.Fatalf("%s before failover: %v", name, err)
		}
	}

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

	for name, cl := range clients {
		if err := cl.createTopic(ctx, "after-failover-"+name, 3, 3); err != nil {
			t.Errorf("%s: first CreateTopics after the failover: %v", name, err)
			continue
		}
		waitFor(t, name+" to see its new topic", 10*time.Second, func() bool {
			l, err := cl.leaders(ctx, "after-failover-"+name)
			return err == nil && len(l) == 3 && allLed(l)
		})
	}
}
