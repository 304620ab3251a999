package legacyzk

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kraftd/kraftd/replica"
)

// readCountingStore counts getData calls by path on top of a Store.
type readCountingStore struct {
	Store
	mu   sync.Mutex
	gets map[string]int
}

func (s *readCountingStore) Get(ctx context.Context, p string, watch bool) ([]byte, Stat, error) {
	s.mu.Lock()
	s.gets[p]++
	s.mu.Unlock()
	return s.Store.Get(ctx, p, watch)
}

// getsUnder counts getData calls of znodes under prefix and forgets all.
func (s *readCountingStore) getsUnder(prefix string) (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, k := range s.gets {
		if strings.HasPrefix(p, prefix) {
			n += k
		}
	}
	return n
}

func (s *readCountingStore) reset() {
	s.mu.Lock()
	s.gets = map[string]int{}
	s.mu.Unlock()
}

// TestTopicCreationTouchesOnlyNewPartitions: as Kafka's
// processTopicChange (onNewPartitionCreation with the new topics'
// partitions only), creating a topic makes the controller read and write
// the new partitions' znodes and no other's. Here an existing topic stays
// offline (its only replica, broker 4, never registers), so a controller
// that re-ran the offline election over every partition at each topic
// change re-read its state znodes at every create: a cost that grew with
// the partitions that exist, not with those created. Fails without
// onNewPartitionCreation (the existing topic's 20 state znodes are read).
// The new topic's own znodes are not read either: Kafka's
// initializeLeaderAndIsrForPartitions creates the state znodes of
// NewPartitions without reading them (kraftd read each one, 5 here).
func TestTopicCreationTouchesOnlyNewPartitions(t *testing.T) {
	srv := NewMemServer()
	var stores []*readCountingStore
	var mu sync.Mutex
	dial := func(context.Context) (Store, error) {
		s := &readCountingStore{Store: srv.Connect(), gets: map[string]int{}}
		mu.Lock()
		stores = append(stores, s)
		mu.Unlock()
		return s, nil
	}
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: dial, mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	seedTopics(t, c.admin, 1, 20, []int32{4}) // t0000: 20 partitions on broker 4 only
	for _, id := range []int32{1, 2, 3} {
		c.start(id)
	}
	ctrl := c.controller()
	waitFor(t, 10*time.Second, "the offline partitions in the caches", func() (bool, string) {
		for _, b := range c.liveBrokers() {
			tp, ok := b.Image().TopicByName("t0000")
			if !ok || tp.NumPartitions() != 20 {
				return false, "not yet"
			}
		}
		return true, ""
	})
	// The controller's own passes over every partition (failover, then
	// each broker's startup) re-read the offline topic; the counting
	// starts once it handled all three brokers (a call runs on its loop
	// between two events, so after the last broker change finished).
	waitFor(t, 10*time.Second, "the controller to know every broker", func() (bool, string) {
		live := 0
		if err := ctrl.ctrl.call(context.Background(), func() { live = len(ctrl.ctrl.view.Live) }); err != nil {
			return false, err.Error()
		}
		return live == 3, "not yet"
	})
	mu.Lock()
	for _, s := range stores {
		s.reset()
	}
	mu.Unlock()

	resp, err := ctrl.CreateTopics(context.Background(), createReq(false, newTopic("fresh", 5, 3)))
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	waitFor(t, 10*time.Second, "the new topic in every cache", func() (bool, string) {
		for _, b := range c.liveBrokers() {
			if !hasLeaders(b.Image(), "fresh", 5) {
				return false, "not yet"
			}
		}
		return true, ""
	})
	mu.Lock()
	defer mu.Unlock()
	var old, fresh int
	for _, s := range stores {
		old += s.getsUnder(TopicPath("t0000"))
		fresh += s.getsUnder(PartitionsPath("fresh") + "/")
	}
	if old != 0 {
		t.Errorf("creating a topic read %d znodes of an existing topic; want 0", old)
	}
	if fresh != 0 {
		t.Errorf("creating a topic of 5 partitions read %d of its partition znodes; want 0 (Kafka creates a new partition's state znode without reading it)", fresh)
	}
}

// TestLeaderAndIsrHostsItsPartitionsTogether: a broker hosts the new
// partitions of one LeaderAndIsr in one replica-manager batch (Kafka's
// becomeLeaderOrFollower: makeLeaders/makeFollowers over the request, then
// one addFetcherForPartitions), so their logs open together and the
// follower's fetch to their leader is interrupted once, not once per
// partition (each interrupted fetch being followed by one that names
// every partition it follows there). Fails with one Apply per partition:
// the manager then logs one "opened partition logs" per partition.
func TestLeaderAndIsrHostsItsPartitionsTogether(t *testing.T) {
	srv := NewMemServer()
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	core, logs := observer.New(zap.InfoLevel)
	managers := map[int32]*replica.Manager{}
	for _, id := range []int32{1, 2} {
		lg := testLogger(t)
		if id == 2 {
			lg = zap.New(core)
		}
		m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: id, Logger: lg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		managers[id] = m
		b := c.startWith(id, func(cfg *Config) { cfg.DataPlane = true })
		b.OpenDataPlane(m)
	}
	ctrl := c.controller()
	const n = 12
	assignment := map[int32][]int32{}
	for p := range int32(n) {
		assignment[p] = []int32{1, 2}
	}
	createManual(t, ctrl, "batch", assignment, nil)
	waitFor(t, 10*time.Second, "broker 2 to host every partition", func() (bool, string) {
		for p := range int32(n) {
			if _, ok := managers[2].Partition(replica.TopicPartition{Topic: "batch", Partition: p}); !ok {
				return false, "not yet"
			}
		}
		return true, ""
	})
	opened := logs.FilterMessage("opened partition logs").All()
	if len(opened) != 1 {
		t.Fatalf("broker 2 opened the topic's logs in %d batches; want 1", len(opened))
	}
	if got := opened[0].ContextMap()["logs"]; got != int64(n) {
		t.Errorf("the batch opened %v logs; want %d", got, n)
	}
	for p := range int32(n) {
		r, ok := c.brokers[2].Replica("batch", p)
		if !ok || r.Leader != 1 {
			t.Errorf("partition %d: replica state %+v, %v; want leader 1", p, r, ok)
		}
	}
}
