package legacyzk

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopic creates a topic through the broker's CreateTopics, as a
// client would, and waits for the answer.
func (c *cluster) createTopic(via *Broker, name string, partitions int32, rf int16) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	resp, err := via.CreateTopics(context.Background(), req)
	if err != nil {
		c.t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("CreateTopics %s: error %d", name, code)
	}
}

func (c *cluster) state(topic string, p int32) LeaderIsr {
	c.t.Helper()
	data, st, err := c.admin.Get(context.Background(), PartitionStatePath(topic, p), false)
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := DecodeState(data, st.Version)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func TestZkElectionZnodes(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	ctrl := c.controller()
	ctx := context.Background()
	data, _, err := c.admin.Get(ctx, ControllerPath, false)
	if err != nil {
		t.Fatal(err)
	}
	var z map[string]any
	if err := json.Unmarshal(data, &z); err != nil {
		t.Fatal(err)
	}
	if z["version"] != 1.0 || z["brokerid"] != float64(ctrl.ID()) {
		t.Fatalf("/controller = %s", data)
	}
	if _, isString := z["timestamp"].(string); !isString {
		t.Fatalf("/controller timestamp must be a string: %s", data)
	}
	epoch, _, _ := c.admin.Get(ctx, ControllerEpochPath, false)
	if string(epoch) != "1" {
		t.Fatalf("/controller_epoch = %q, want 1", epoch)
	}
	reg, st, err := c.admin.Get(ctx, BrokerPath(2), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner == 0 || st.Czxid != c.brokers[2].BrokerEpoch() {
		t.Fatalf("/brokers/ids/2 stat %+v, broker epoch %d", st, c.brokers[2].BrokerEpoch())
	}
	var br map[string]any
	json.Unmarshal(reg, &br)
	if br["version"] != 5.0 || br["port"] != float64(mustPort(t, c.brokers[2].Addr())) {
		t.Fatalf("/brokers/ids/2 = %s", reg)
	}
	cid, _, _ := c.admin.Get(ctx, ClusterIDPath, false)
	if id, err := DecodeClusterID(cid); err != nil || id != ctrl.ClusterID() {
		t.Fatalf("/cluster/id %s vs %s", cid, ctrl.ClusterID())
	}
}

func TestZkFailoverReadsBackThenPushes(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	old := c.controller()
	c.createTopic(old, "foo", 6, 3)
	c.createTopic(old, "bar", 2, 2)
	c.converged()
	old.Close()
	next := c.controller()
	if next.ActiveControllerEpoch() != 2 {
		t.Fatalf("epoch after failover = %d, want 2", next.ActiveControllerEpoch())
	}
	c.converged()
	f := next.Stats().Failovers()
	if len(f) != 1 {
		t.Fatalf("failovers = %+v", f)
	}
	// P + T + 2B + the fixed getChildren reads: 8 + 2 + 2*2 + 2.
	if f[0].Partitions != 8 || f[0].Brokers != 2 || f[0].ZkReads < 8+2+2*2 {
		t.Fatalf("failover timing %+v", f[0])
	}
	waitFor(t, 5*time.Second, "failover pushes answered", func() (bool, string) {
		return next.Stats().Failovers()[0].PushTime > 0, "push time not recorded"
	})
	for _, b := range c.liveBrokers() {
		if b.SeenControllerEpoch() != 2 {
			t.Fatalf("broker %d saw epoch %d", b.ID(), b.SeenControllerEpoch())
		}
	}
}

func TestZkBrokerLossElectsNewLeaders(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.createTopic(ctrl, "foo", 6, 3)
	c.converged()
	victim := int32(1)
	if ctrl.ID() == victim {
		victim = 2
	}
	led := map[int32]LeaderIsr{}
	for p := int32(0); p < 6; p++ {
		if s := c.state("foo", p); s.Leader == victim {
			led[p] = s
		}
	}
	if len(led) == 0 {
		t.Fatal("victim leads nothing; placement should spread leaders")
	}
	c.brokers[victim].Close()
	waitFor(t, 10*time.Second, "new leaders", func() (bool, string) {
		for p := range led {
			if s := c.state("foo", p); s.Leader == victim || s.Leader < 0 {
				return false, "still led by the dead broker"
			}
		}
		return true, ""
	})
	for p, before := range led {
		s := c.state("foo", p)
		if s.LeaderEpoch != before.LeaderEpoch+1 || slices.Contains(s.ISR, victim) || s.ControllerEpoch != 1 {
			t.Fatalf("foo-%d after loss: %+v (before %+v)", p, s, before)
		}
	}
	c.converged()
}

func TestZkControlledShutdown(t *testing.T) {
	c := newZkCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.createTopic(ctrl, "foo", 6, 3)
	c.converged()
	leaving := int32(1)
	if ctrl.ID() == leaving {
		leaving = 3
	}
	if err := c.brokers[leaving].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		s := c.state("foo", p)
		if s.Leader == leaving || slices.Contains(s.ISR, leaving) {
			t.Fatalf("foo-%d still has broker %d: %+v", p, leaving, s)
		}
	}
	c.converged()
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	var port int
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			for _, ch := range addr[i+1:] {
				port = port*10 + int(ch-'0')
			}
			return port
		}
	}
	t.Fatalf("no port in %s", addr)
	return 0
}
