package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// dataCluster is a mem cluster whose brokers host partition logs.
type dataCluster struct {
	*cluster
	managers map[int32]*replica.Manager
	dirs     map[int32]string
}

func newDataCluster(t *testing.T, ids ...int32) *dataCluster {
	srv := NewMemServer()
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	dc := &dataCluster{cluster: c, managers: map[int32]*replica.Manager{}, dirs: map[int32]string{}}
	for _, id := range ids {
		dir := t.TempDir()
		m, err := replica.New(replica.Config{Dir: dir, BrokerID: id, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() }) // after the broker's Close (cleanups run last first)
		dc.managers[id], dc.dirs[id] = m, dir
		b := c.startWith(id, func(cfg *Config) { cfg.DataPlane = true })
		b.OpenDataPlane(m)
	}
	return dc
}

func createManual(t *testing.T, b *Broker, name string, assignment map[int32][]int32, configs map[string]string) {
	t.Helper()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p, r := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = p, r
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	resp, err := b.CreateTopics(context.Background(), createReq(false, rt))
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
}

func readState(t *testing.T, st Store, topic string, p int32) LeaderIsr {
	t.Helper()
	data, stat, err := st.Get(context.Background(), PartitionStatePath(topic, p), false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeState(data, stat.Version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// alterReq is an AlterPartition v2 for partition 0 of topic.
func alterReq(b *Broker, topic string, from int32, brokerEpoch int64, leaderEpoch, partitionEpoch int32, isr ...int32) *kmsg.AlterPartitionRequest {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = from, brokerEpoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	tp, _ := b.Image().TopicByName(topic)
	if tp != nil {
		rt.TopicID = tp.ID()
	}
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = leaderEpoch, partitionEpoch, isr
	rt.Partitions = []kmsg.AlterPartitionRequestTopicPartition{rp}
	req.Topics = []kmsg.AlterPartitionRequestTopic{rt}
	return req
}

func sendAlter(t *testing.T, cl *protocol.Client, to *Broker, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, to.Addr(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.AlterPartitionResponse)
}

func partitionCode(r *kmsg.AlterPartitionResponse) int16 {
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1000 + r.ErrorCode
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// cachedISR is partition 0's ISR in b's metadata cache.
func cachedISR(b *Broker, topic string) []int32 {
	tp, ok := b.Image().TopicByName(topic)
	if !ok {
		return nil
	}
	p, _ := tp.Partition(0)
	return p.ISR()
}

// AlterPartition on the ZooKeeper-era controller (Kafka 3.3): a change is
// one conditional write of the state znode at the partition epoch the
// leader carries, answered with the new ISR and the new zkVersion and
// pushed to every broker with UpdateMetadata; a concurrent write to the
// znode makes the next one lose (INVALID_UPDATE_VERSION), after which the
// controller pushes what ZooKeeper holds; forged or stale requests change
// nothing.
func TestAlterPartitionConditionalWrite(t *testing.T) {
	alterPartitionConditionalWrite(t, newMemCluster(t, 1, 2, 3))
}

// TestAlterPartitionConditionalWriteZk runs it on a real ZooKeeper.
func TestAlterPartitionConditionalWriteZk(t *testing.T) {
	alterPartitionConditionalWrite(t, newZkCluster(t, 1, 2, 3))
}

func alterPartitionConditionalWrite(t *testing.T, c *cluster) {
	ctrl := c.controller()
	c.converged() // every broker registered with the controller
	createManual(t, ctrl, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	c.converged()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "test"})
	defer cl.Close()
	cur := readState(t, c.admin, "t", 0)
	leader := c.brokers[cur.Leader]
	if cur.Leader != 1 || !slices.Equal(cur.ISR, []int32{1, 2, 3}) {
		t.Fatalf("initial state %+v", cur)
	}

	// Shrink to {1, 2}.
	r := sendAlter(t, cl, ctrl, alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, cur.ZkVersion, 1, 2))
	p := r.Topics[0].Partitions[0]
	if r.ErrorCode != 0 || p.ErrorCode != 0 || !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != cur.ZkVersion+1 ||
		p.LeaderID != 1 || p.LeaderEpoch != cur.LeaderEpoch {
		t.Fatalf("shrink answered %+v", r)
	}
	shrunk := readState(t, c.admin, "t", 0)
	if !slices.Equal(shrunk.ISR, []int32{1, 2}) || shrunk.ZkVersion != p.PartitionEpoch || shrunk.LeaderEpoch != cur.LeaderEpoch {
		t.Fatalf("znode after the shrink %+v", shrunk)
	}
	waitFor(t, 5*time.Second, "the shrink pushed to every broker", func() (bool, string) {
		for _, b := range c.liveBrokers() {
			if !slices.Equal(cachedISR(b, "t"), []int32{1, 2}) {
				return false, fmt.Sprintf("broker %d caches %v", b.ID(), cachedISR(b, "t"))
			}
		}
		return true, ""
	})
	// The same change again is answered from the view, without a write.
	again := sendAlter(t, cl, ctrl, alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, p.PartitionEpoch, 1, 2))
	if partitionCode(again) != 0 || readState(t, c.admin, "t", 0).ZkVersion != shrunk.ZkVersion {
		t.Fatalf("repeated change %+v", again)
	}

	// Someone else writes the znode (a reassignment tool, another
	// controller): the leader's next change carries a stale zkVersion.
	theirs := LeaderIsr{Leader: 1, LeaderEpoch: cur.LeaderEpoch, ISR: []int32{1, 2, 3}, ControllerEpoch: shrunk.ControllerEpoch}
	if _, err := c.admin.Set(context.Background(), PartitionStatePath("t", 0), EncodeState(theirs), shrunk.ZkVersion); err != nil {
		t.Fatal(err)
	}
	conflict := sendAlter(t, cl, ctrl, alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, p.PartitionEpoch, 1))
	if partitionCode(conflict) != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("conflicting change answered %+v", conflict)
	}
	after := readState(t, c.admin, "t", 0)
	if !slices.Equal(after.ISR, []int32{1, 2, 3}) || after.ZkVersion != shrunk.ZkVersion+1 {
		t.Fatalf("the losing write changed the znode: %+v", after)
	}
	waitFor(t, 5*time.Second, "ZooKeeper's state pushed after the conflict", func() (bool, string) {
		for _, b := range c.liveBrokers() {
			if !slices.Equal(cachedISR(b, "t"), []int32{1, 2, 3}) {
				return false, fmt.Sprintf("broker %d caches %v", b.ID(), cachedISR(b, "t"))
			}
		}
		return true, ""
	})

	// Forged and stale requests: nothing is written.
	other := c.brokers[2]
	cases := []struct {
		name string
		req  *kmsg.AlterPartitionRequest
		want int16
	}{
		{"not the leader", alterReq(leader, "t", 2, other.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 2), kerr.InvalidRequest.Code},
		{"future leader epoch", alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch+1, after.ZkVersion, 1), kerr.FencedLeaderEpoch.Code},
		{"stale leader epoch", alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch-1, after.ZkVersion, 1), kerr.FencedLeaderEpoch.Code},
		{"not a replica", alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 1, 9), kerr.InvalidRequest.Code},
		{"duplicate member", alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 1, 2, 2), kerr.InvalidRequest.Code},
		{"leader missing", alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 2, 3), kerr.InvalidRequest.Code},
		{"older broker epoch", alterReq(leader, "t", 1, leader.BrokerEpoch()-1, cur.LeaderEpoch, after.ZkVersion, 1), -1000 + kerr.StaleBrokerEpoch.Code},
		{"no broker epoch", alterReq(leader, "t", 1, -1, cur.LeaderEpoch, after.ZkVersion, 1), -1000 + kerr.StaleBrokerEpoch.Code},
		{"unknown topic id", alterReq(leader, "nope", 1, leader.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 1), kerr.UnknownTopicID.Code},
	}
	for _, tc := range cases {
		if got := partitionCode(sendAlter(t, cl, ctrl, tc.req)); got != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.want)
		}
	}
	var notCtrl *Broker
	for _, b := range c.liveBrokers() {
		if b != ctrl {
			notCtrl = b
			break
		}
	}
	if r := sendAlter(t, cl, notCtrl, alterReq(leader, "t", 1, leader.BrokerEpoch(), cur.LeaderEpoch, after.ZkVersion, 1)); r.ErrorCode != kerr.NotController.Code {
		t.Errorf("a broker that is not the controller answered %+v", r)
	}
	if s := readState(t, c.admin, "t", 0); s.ZkVersion != after.ZkVersion {
		t.Fatalf("a refused request wrote the znode: %+v", s)
	}

	// A dead broker may not join an ISR.
	dead := int32(3) // neither the leader (1) nor the controller
	if ctrl.ID() == dead {
		dead = 2
	}
	c.brokers[dead].Close()
	waitFor(t, 5*time.Second, fmt.Sprintf("broker %d dropped from the ISR", dead), func() (bool, string) {
		s := readState(t, c.admin, "t", 0)
		return !slices.Contains(s.ISR, dead), fmt.Sprint(s)
	})
	now := readState(t, c.admin, "t", 0)
	if got := partitionCode(sendAlter(t, cl, ctrl, alterReq(leader, "t", 1, leader.BrokerEpoch(), now.LeaderEpoch, now.ZkVersion, 1, 2, 3))); got != kerr.IneligibleReplica.Code {
		t.Fatalf("dead ISR member: code %d", got)
	}
}

// Producer ids come in blocks of 1000 claimed with conditional writes of
// /latest_producer_id_block, in Kafka 3.3's JSON; brokers racing for blocks
// never hand out one id twice; a corrupt or exhausted znode yields no id.
func TestProducerIDBlocks(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	ctx := context.Background()
	b1, b2 := c.brokers[1], c.brokers[2]
	if id, err := b1.NextProducerID(ctx); err != nil || id != 0 {
		t.Fatalf("first id %d, %v", id, err)
	}
	data, _, err := c.admin.Get(ctx, ProducerIDBlockPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":1,"broker":1,"block_start":"0","block_end":"999"}`; string(data) != want {
		t.Fatalf("znode %s, want %s", data, want)
	}
	if id, err := b2.NextProducerID(ctx); err != nil || id != 1000 {
		t.Fatalf("broker 2's first id %d, %v", id, err)
	}
	if id, _ := b1.NextProducerID(ctx); id != 1 {
		t.Fatalf("broker 1's second id %d", id)
	}

	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for _, b := range []*Broker{b1, b2} {
		for range 4 {
			wg.Go(func() {
				for range 600 {
					id, err := b.NextProducerID(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[id] {
						t.Errorf("id %d handed out twice", id)
					}
					seen[id] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(seen) != 4800 {
		t.Fatalf("%d distinct ids", len(seen))
	}

	b3 := c.start(3)
	if _, err := c.admin.Set(ctx, ProducerIDBlockPath, []byte(`{"version":1,"broker":2,"block_start":"5","block_end":"x"}`), -1); err != nil {
		t.Fatal(err)
	}
	if id, err := b3.NextProducerID(ctx); err == nil {
		t.Fatalf("a corrupt block znode gave id %d", id)
	}
	if _, err := c.admin.Set(ctx, ProducerIDBlockPath, EncodeProducerIDBlock(2, math.MaxInt64-1500), -1); err != nil {
		t.Fatal(err)
	}
	if id, err := b3.NextProducerID(ctx); err == nil {
		t.Fatalf("an exhausted id space gave id %d", id)
	}
}

func imageTopicRes(topic string) image.ConfigResource {
	return image.ConfigResource{Type: image.ConfigTopic, Name: topic}
}

// LeaderAndIsr makes each replica's broker host the partition (leader or
// follower, at the controller's leader epoch and zkVersion) with the
// topic's configs from /config/topics; a config change notification
// updates them on every broker; deleting the topic (StopReplica with
// delete) removes the logs, and a new topic of the same name gets its own
// configs.
func TestLeaderAndIsrDrivesReplicaManager(t *testing.T) {
	c := newDataCluster(t, 1, 2, 3)
	ctrl := c.controller()
	c.converged() // every broker registered with the controller
	ctx := context.Background()
	createManual(t, ctrl, "t", map[int32][]int32{0: {2, 1}, 1: {3, 1}}, map[string]string{"segment.bytes": "1048576"})
	c.converged()
	hosts := func(id int32, p int32) (*replica.Partition, bool) {
		return c.managers[id].Partition(replica.TopicPartition{Topic: "t", Partition: p})
	}
	waitFor(t, 5*time.Second, "replicas hosted", func() (bool, string) {
		for _, want := range []struct{ broker, p int32 }{{2, 0}, {1, 0}, {3, 1}, {1, 1}} {
			if _, ok := hosts(want.broker, want.p); !ok {
				return false, fmt.Sprintf("broker %d does not host t-%d", want.broker, want.p)
			}
		}
		return true, ""
	})
	if _, ok := hosts(3, 0); ok {
		t.Fatal("broker 3 hosts t-0, which is not assigned to it")
	}
	s0 := readState(t, c.admin, "t", 0)
	p, _ := hosts(1, 0)
	if st := p.State(); st.Leader != 2 || st.LeaderEpoch != s0.LeaderEpoch || st.PartitionEpoch != s0.ZkVersion ||
		!slices.Equal(st.Replicas, []int32{2, 1}) {
		t.Fatalf("broker 1's t-0 state %+v, znode %+v", st, s0)
	}
	for _, id := range []int32{1, 2, 3} {
		if got := c.managers[id].TopicConfig("t").SegmentBytes; got != 1048576 {
			t.Fatalf("broker %d: segment.bytes %d", id, got)
		}
	}

	// kafka-configs --alter: the znode, then a sequential notification.
	if _, err := c.admin.Set(ctx, ConfigTopicsPath+"/t", []byte(`{"version":1,"config":{"retention.ms":"1234"}}`), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.Create(ctx, ConfigChangesPath+"/"+configChangePrefix, []byte(`{"version":2,"entity_path":"topics/t"}`), PersistentSequential); err != nil {
		t.Fatal(err)
	}
	def := replica.DefaultTopicConfig()
	waitFor(t, 5*time.Second, "the config change applied", func() (bool, string) {
		for _, id := range []int32{1, 2, 3} {
			tc := c.managers[id].TopicConfig("t")
			if tc.RetentionMs != 1234 || tc.SegmentBytes != def.SegmentBytes {
				return false, fmt.Sprintf("broker %d: %+v", id, tc)
			}
			if v, ok := c.brokers[id].Image().ConfigValue(imageTopicRes("t"), "retention.ms"); !ok || v != "1234" {
				return false, fmt.Sprintf("broker %d caches retention.ms %q", id, v)
			}
			if _, ok := c.brokers[id].Image().ConfigValue(imageTopicRes("t"), "segment.bytes"); ok {
				return false, fmt.Sprintf("broker %d still caches segment.bytes", id)
			}
		}
		return true, ""
	})

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis, del.TopicNames = 5, 5000, []string{"t"}
	if dr, err := ctrl.DeleteTopics(ctx, del); err != nil || dr.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	waitFor(t, 5*time.Second, "the logs deleted", func() (bool, string) {
		for _, id := range []int32{1, 2, 3} {
			if h := c.managers[id].Hosted(); len(h) != 0 {
				return false, fmt.Sprintf("broker %d hosts %v", id, h)
			}
			for _, p := range []string{"t-0", "t-1"} {
				if _, err := os.Stat(filepath.Join(c.dirs[id], p)); err == nil {
					return false, fmt.Sprintf("broker %d still has %s", id, p)
				}
			}
		}
		return true, ""
	})

	// A new topic of the same name opens with its own configs.
	createManual(t, ctrl, "t", map[int32][]int32{0: {1, 2}}, map[string]string{"segment.bytes": "2097152"})
	waitFor(t, 5*time.Second, "the new t-0 hosted with its configs", func() (bool, string) {
		for _, id := range []int32{1, 2} {
			if _, ok := hosts(id, 0); !ok {
				return false, fmt.Sprintf("broker %d does not host t-0", id)
			}
			if tc := c.managers[id].TopicConfig("t"); tc.SegmentBytes != 2097152 || tc.RetentionMs != def.RetentionMs {
				return false, fmt.Sprintf("broker %d: %+v", id, tc)
			}
		}
		return true, ""
	})
}

// Until the app opens the data plane (it first checks the log directories
// against /cluster/id), LeaderAndIsr waits instead of touching the logs.
func TestLeaderAndIsrWaitsForDataPlane(t *testing.T) {
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 2, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	b := bareBroker(t, 2, 102)
	b.cfg.DataPlane, b.dataReady, b.topicConfigs = true, make(chan struct{}), map[string]bool{}
	lai, _ := viewPushes(t, 5, nil)
	req := &protocol.Request{Key: 4, Version: lai.Version, Body: lai}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.handleLeaderAndIsr(ctx, req); err == nil {
		t.Fatal("LeaderAndIsr answered before the data plane opened")
	}
	if h := m.Hosted(); len(h) != 0 {
		t.Fatalf("hosted %v before the data plane opened", h)
	}
	b.OpenDataPlane(m)
	resp, err := b.handleLeaderAndIsr(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.(*kmsg.LeaderAndISRResponse).Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("%+v", resp)
			}
		}
	}
	if len(m.Hosted()) == 0 {
		t.Fatal("nothing hosted after the data plane opened")
	}
}

// Kill is kill -9: the controller's /controller and registration stay in
// ZooKeeper while its session lingers (CrashSessionLingerMs), and only
// then does another broker take over.
func TestKillLeavesSessionToExpire(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	ctrl := c.controller()
	ctx := context.Background()
	ctrl.Kill()
	if _, ok, err := c.admin.Exists(ctx, BrokerPath(ctrl.ID()), false); err != nil || !ok {
		t.Fatalf("registration gone at once after a kill: %v", err)
	}
	data, _, err := c.admin.Get(ctx, ControllerPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := DecodeController(data); id != ctrl.ID() {
		t.Fatalf("/controller names %d right after the kill of %d", id, ctrl.ID())
	}
	start := time.Now()
	next := c.controller()
	if next == ctrl || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("broker %d took over after %v; the killed session lingers 800 ms", next.ID(), time.Since(start))
	}
}

// Config change notifications older than 15 minutes are deleted by the
// brokers that process /config/changes; newer ones stay.
func TestOldConfigChangesPurged(t *testing.T) {
	srv := NewMemServer()
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	srv.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	note := []byte(`{"version":2,"entity_path":"topics/x"}`)
	old, err := c.admin.Create(ctx, ConfigChangesPath+"/"+configChangePrefix, note, PersistentSequential)
	if errors.Is(err, ErrNoNode) {
		if err := ensurePath(ctx, c.admin, ConfigChangesPath); err != nil {
			t.Fatal(err)
		}
		old, err = c.admin.Create(ctx, ConfigChangesPath+"/"+configChangePrefix, note, PersistentSequential)
	}
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(16 * time.Minute)
	mu.Unlock()
	b := c.startWith(1, func(cfg *Config) { cfg.DataPlane = true; cfg.Now = srv.Now })
	b.OpenDataPlane(m)
	fresh, err := c.admin.Create(ctx, ConfigChangesPath+"/"+configChangePrefix, note, PersistentSequential)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the old notification deleted", func() (bool, string) {
		_, ok, err := c.admin.Exists(ctx, old, false)
		return err == nil && !ok, fmt.Sprint(ok, err)
	})
	if _, ok, err := c.admin.Exists(ctx, fresh, false); err != nil || !ok {
		t.Fatalf("the fresh notification was deleted: %v", err)
	}
}
