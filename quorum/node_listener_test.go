package quorum

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// orderListener records the sequence of callbacks: "commit:<next offset>" and
// "leader:<id>@<epoch>".
type orderListener struct {
	mu     sync.Mutex
	events []string
	next   int64
}

func (l *orderListener) HandleCommit(batches []raftlog.Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = batches[len(batches)-1].NextOffset()
	l.events = append(l.events, "commit")
}

func (l *orderListener) HandleLeaderChange(le LeaderAndEpoch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if le.EpochStartOffset >= 0 && l.next <= le.EpochStartOffset {
		l.events = append(l.events, "EARLY-LEADER")
		return
	}
	l.events = append(l.events, "leader")
}

func (l *orderListener) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// TestNodeReportsLeadershipAfterEpochStart ports Kafka's
// testHandleLeaderChangeFiresAfterListenerReachesEpochStartOffset (KAFKA-15345): a
// node restarting with committed data from earlier epochs becomes leader again, and its
// listener hears "you lead" only after it received every batch below the new epoch's
// start offset, so a state machine never writes on top of state it has not replayed.
func TestNodeReportsLeadershipAfterEpochStart(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddrs(t, 1)[0]
	run := func(records int) *orderListener {
		store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(NodeConfig{
			Raft:    Config{NodeID: 1, Voters: []int32{1}, ElectionTimeoutMs: 50, AppendLingerMs: AppendLingerMsNone},
			Storage: store, VoterAddrs: map[int32]string{1: addr}, ListenerName: "CONTROLLER",
		})
		if err != nil {
			t.Fatal(err)
		}
		l := &orderListener{}
		n.Register(l)
		reg := protocol.NewRegistry()
		n.RegisterHandlers(reg)
		n.Start()
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n.Close(ctx)
		}()
		waitFor(t, "leadership", 5*time.Second, func() bool {
			st, _ := n.Status(context.Background())
			return st.Role == Leader && st.HighWatermark > st.EpochStartOffset
		})
		st, _ := n.Status(context.Background())
		for i := 0; i < records; i++ {
			if _, err := n.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "the listener to hear the leader", 5*time.Second, func() bool {
			for _, e := range l.snapshot() {
				if e == "leader" {
					return true
				}
			}
			return false
		})
		if records > 0 {
			waitFor(t, "the proposals to commit", 5*time.Second, func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.next >= int64(records)+1
			})
		}
		return l
	}
	run(5) // epoch 1: LeaderChange + 5 records
	l := run(0)
	ev := l.snapshot()
	first := -1
	for i, e := range ev {
		if e == "EARLY-LEADER" {
			t.Fatalf("leadership reported before the epoch start was delivered: %v", ev)
		}
		if e == "leader" && first < 0 {
			first = i
		}
	}
	if first < 1 || ev[0] != "commit" {
		t.Fatalf("restarted leader: want commits before the leader callback, got %v", ev)
	}
}

// hwListener records, in delivery order, the high watermarks reported to a
// HighWatermarkListener ("hw") and the next offset after each commit.
type hwListener struct {
	mu     sync.Mutex
	hws    []int64
	firsts []int64 // the first reported high watermark when each commit arrived
	next   int64
}

func (l *hwListener) HandleHighWatermark(hw int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hws = append(l.hws, hw)
}

func (l *hwListener) HandleCommit(batches []raftlog.Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := int64(-1)
	if len(l.hws) > 0 {
		first = l.hws[0]
	}
	l.firsts = append(l.firsts, first)
	l.next = batches[len(batches)-1].NextOffset()
}

func (l *hwListener) HandleLeaderChange(LeaderAndEpoch) {}

// TestObserverReportsLeaderHighWatermarkBeforeCatchUp: an observer starting 20
// batches behind, fetching one batch per Fetch (the leader's FetchMaxBytes of
// 1), tells a HighWatermarkListener the leader's high watermark before its
// first commit, although its own high watermark (what it delivers) is capped by
// its log end; the values only grow.
func TestObserverReportsLeaderHighWatermarkBeforeCatchUp(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	start := func(id int32, l Listener) *Node {
		store, err := raftlog.OpenFileStorage(t.TempDir(), raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(NodeConfig{
			Raft: Config{NodeID: id, ClusterID: "test-cluster-id-AAAAAA", Voters: []int32{1}, ElectionTimeoutMs: 150,
				FetchTimeoutMs: 1000, AppendLingerMs: AppendLingerMsNone, RequestTimeoutMs: 1000, FetchMaxBytes: 1},
			Storage: store, VoterAddrs: map[int32]string{1: addr}, ListenerName: "CONTROLLER",
		})
		if err != nil {
			t.Fatal(err)
		}
		if l != nil {
			n.Register(l)
		}
		if id == 1 {
			reg := protocol.NewRegistry()
			n.RegisterHandlers(reg)
			srv, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: addr, Registry: reg}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
		}
		n.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n.Close(ctx)
		})
		return n
	}
	leader := start(1, nil)
	waitFor(t, "node 1 to lead", 5*time.Second, func() bool {
		m := leader.Metrics()
		return m.Role == Leader && m.HighWatermark > 0
	})
	var last int64
	for range 20 {
		var err error
		if last, err = leader.Propose(context.Background(), leader.Metrics().Epoch, []raftlog.Record{{Value: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the proposals to commit", 5*time.Second, func() bool { return leader.Metrics().HighWatermark > last })
	hw := leader.Metrics().HighWatermark
	l := &hwListener{}
	start(9, l)
	waitFor(t, "the observer to catch up", 10*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.next >= hw
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.firsts) < 2 {
		t.Fatalf("%d commits: the catch-up was not split over several Fetches", len(l.firsts))
	}
	if l.firsts[0] < hw {
		t.Fatalf("first commit delivered with high watermark %d known (want the leader's %d before it); reported %v", l.firsts[0], hw, l.hws)
	}
	for i := 1; i < len(l.hws); i++ {
		if l.hws[i] <= l.hws[i-1] {
			t.Fatalf("reported high watermarks do not grow: %v", l.hws)
		}
	}
}
