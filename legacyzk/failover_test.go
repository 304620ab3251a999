package legacyzk

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
)

// recorder is a fake broker: a protocol server that answers pushes with
// no error and records them in arrival order.
type recorder struct {
	mu   sync.Mutex
	reqs []kmsg.Request
	srv  *protocol.Server
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	reg := protocol.NewRegistry()
	h := func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Body)
		r.mu.Unlock()
		return req.Body.ResponseKind(), nil
	}
	reg.Register(4, 0, LeaderAndIsrVersion, h)
	reg.Register(5, 0, StopReplicaVersion, h)
	reg.Register(6, 0, UpdateMetadataVersion, h)
	srv, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Registry: reg}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r.srv = srv
	return r
}

func (r *recorder) info(id int32) BrokerInfo {
	_, port, _ := net.SplitHostPort(r.srv.Addr("PLAINTEXT").String())
	n, _ := strconv.Atoi(port)
	return BrokerInfo{ID: id, Endpoints: []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(n)}}}
}

func (r *recorder) got() []kmsg.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kmsg.Request(nil), r.reqs...)
}

// The failover push sequence to one broker: UpdateMetadata with the
// broker list only, then one LeaderAndIsr with every partition it hosts,
// then UpdateMetadata with every partition, and nothing before them.
func TestMemFailoverPushOrder(t *testing.T) {
	srv := NewMemServer()
	ctx := context.Background()
	fake := newRecorder(t)
	sess := srv.Connect()
	defer sess.Close()
	for _, p := range persistentPaths {
		ensurePath(ctx, sess, p)
	}
	if _, err := sess.Create(ctx, BrokerPath(7), EncodeBroker(fake.info(7), 1), Ephemeral); err != nil {
		t.Fatal(err)
	}
	// Existing cluster state: two topics, the fake hosts 3 of 4 partitions.
	sess.Create(ctx, TopicPath("x"), EncodeTopic(TopicAssignment{ID: records.UUID{1}, Partitions: map[int32][]int32{0: {7, 1}, 1: {1, 7}, 2: {1}}}), Persistent)
	sess.Create(ctx, TopicPath("y"), EncodeTopic(TopicAssignment{ID: records.UUID{2}, Partitions: map[int32][]int32{0: {7}}}), Persistent)
	for tp, s := range map[TopicPartition]LeaderIsr{
		{"x", 0}: {Leader: 7, LeaderEpoch: 3, ISR: []int32{7, 1}, ControllerEpoch: 4},
		{"x", 1}: {Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 7}, ControllerEpoch: 4},
		{"x", 2}: {Leader: 1, ISR: []int32{1}, ControllerEpoch: 4},
		{"y", 0}: {Leader: 7, ISR: []int32{7}, ControllerEpoch: 4},
	} {
		ensurePath(ctx, sess, PartitionPath(tp.Topic, tp.Partition))
		sess.Create(ctx, PartitionStatePath(tp.Topic, tp.Partition), EncodeState(s), Persistent)
	}
	sess.Create(ctx, ControllerEpochPath, EncodeControllerEpoch(4), Persistent)

	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: sess}
	b := c.start(1)
	waitFor(t, 5*time.Second, "three failover pushes", func() (bool, string) { return len(fake.got()) >= 3, "fewer" })
	reqs := fake.got()
	um1, ok1 := reqs[0].(*kmsg.UpdateMetadataRequest)
	lai, ok2 := reqs[1].(*kmsg.LeaderAndISRRequest)
	um2, ok3 := reqs[2].(*kmsg.UpdateMetadataRequest)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("order %T %T %T", reqs[0], reqs[1], reqs[2])
	}
	if len(um1.TopicStates) != 0 || len(um1.LiveBrokers) != 2 || um1.ControllerEpoch != 5 {
		t.Fatalf("first UpdateMetadata %+v", um1)
	}
	n := 0
	for _, ts := range lai.TopicStates {
		n += len(ts.PartitionStates)
	}
	if n != 3 {
		t.Fatalf("LeaderAndIsr carries %d partitions, want the 3 the fake hosts", n)
	}
	n = 0
	for _, ts := range um2.TopicStates {
		n += len(ts.PartitionStates)
	}
	if n != 4 {
		t.Fatalf("second UpdateMetadata carries %d partitions, want all 4", n)
	}
	if f := b.Stats().Failovers(); len(f) != 1 || f[0].Partitions != 4 || f[0].ZkReads < 4+2+2*2 {
		t.Fatalf("failover %+v", f)
	}
}

// countingStore wraps a Store and records the peak number of concurrent
// Gets, to check that failover reads are pipelined but bounded.
type countingStore struct {
	Store
	cur, peak atomic.Int32
}

func (s *countingStore) Get(ctx context.Context, p string, watch bool) ([]byte, Stat, error) {
	n := s.cur.Add(1)
	for {
		old := s.peak.Load()
		if n <= old || s.peak.CompareAndSwap(old, n) {
			break
		}
	}
	time.Sleep(time.Millisecond) // hold the slot, as a network round trip would
	defer s.cur.Add(-1)
	return s.Store.Get(ctx, p, watch)
}

func TestGetAllBoundsInFlight(t *testing.T) {
	srv := NewMemServer()
	ctx := context.Background()
	st := &countingStore{Store: srv.Connect()}
	defer st.Close()
	var paths []string
	for i := range 50 {
		p := "/n" + strconv.Itoa(i)
		st.Create(ctx, p, []byte(p), Persistent)
		paths = append(paths, p)
	}
	res := getAll(ctx, st, paths, false, 10)
	for i, r := range res {
		if r.err != nil || string(r.data) != paths[i] {
			t.Fatalf("result %d: %q %v", i, r.data, r.err)
		}
	}
	if p := st.peak.Load(); p < 2 || p > 10 {
		t.Fatalf("peak in flight %d, want pipelined (>1) and at most 10", p)
	}
}

// A topic written by a pre-2.8 tool (version 1 JSON, no topic_id) gets an
// id from the controller, in ZooKeeper and in every cache.
func TestMemTopicWithoutIDGetsOne(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	c.controller()
	ctx := context.Background()
	if _, err := c.admin.Create(ctx, TopicPath("old"), []byte(`{"version":1,"partitions":{"0":[1,2]}}`), Persistent); err != nil {
		t.Fatal(err)
	}
	c.converged() // Diverge also compares topic ids
	data, _, _ := c.admin.Get(ctx, TopicPath("old"), false)
	a, err := DecodeTopic("old", data)
	if err != nil || a.ID.IsZero() {
		t.Fatalf("%s: %v", data, err)
	}
	if tp, ok := c.brokers[2].Image().TopicByName("old"); !ok || tp.ID() != a.ID {
		t.Fatal("cache has a different id")
	}
}
