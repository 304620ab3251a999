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
