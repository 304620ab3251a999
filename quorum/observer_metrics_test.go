package quorum

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// syncCounter counts Sync calls on a real storage.
type syncCounter struct {
	raftlog.Storage
	syncs atomic.Int32
}

func (s *syncCounter) Sync() error {
	s.syncs.Add(1)
	return s.Storage.Sync()
}

// startMetricsNode runs one node of a quorum whose only voter is node 1, with its
// storage wrapped to count fsyncs.
func startMetricsNode(t *testing.T, id int32, addrs map[int32]string, onCommit func(time.Duration)) (*Node, *syncCounter, *recorder) {
	t.Helper()
	return startMetricsNodeFlush(t, id, addrs, onCommit, false)
}

// startMetricsNodeFlush is startMetricsNode with Config.FollowersAlwaysFlush set to flush.
func startMetricsNodeFlush(t *testing.T, id int32, addrs map[int32]string, onCommit func(time.Duration), flush bool) (*Node, *syncCounter, *recorder) {
	t.Helper()
	fs, err := raftlog.OpenFileStorage(t.TempDir(), raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := &syncCounter{Storage: fs}
	node, err := NewNode(NodeConfig{
		Raft: Config{
			NodeID: id, ClusterID: "test-cluster-id-AAAAAA", Voters: []int32{1},
			ElectionTimeoutMs: 150, FetchTimeoutMs: 300, ElectionBackoffMaxMs: 100, AppendLingerMs: 2,
			RequestTimeoutMs: 300, FetchMaxWaitMs: 2000, FollowersAlwaysFlush: flush,
		},
		Storage: store, VoterAddrs: map[int32]string{1: addrs[1]}, ListenerName: "CONTROLLER",
		OnCommitLatency: onCommit,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	node.Register(rec)
	if id == 1 {
		reg := protocol.NewRegistry()
		node.RegisterHandlers(reg)
		srv, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: addrs[1], Registry: reg}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
	}
	node.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		node.Close(ctx)
	})
	return node, store, rec
}

// TestObserverMetricsAndPromptCommits: a voter and an observer. The voter's
// Metrics show it leading and its commit hook fires once per proposal; the observer
// learns every commit long before its Fetch MaxWait (2 s here) although it fetched
// the records before they were committed, and it never fsyncs what it fetches.
func TestObserverMetricsAndPromptCommits(t *testing.T) {
	addrs := map[int32]string{1: freeAddrs(t, 1)[0]}
	var commits atomic.Int32
	leader, leaderStore, _ := startMetricsNode(t, 1, addrs, func(d time.Duration) {
		if d < 0 || d > 10*time.Second {
			t.Errorf("commit latency %v", d)
		}
		commits.Add(1)
	})
	observer, observerStore, rec := startMetricsNode(t, 9, addrs, nil)
	waitFor(t, "node 1 to lead", 5*time.Second, func() bool {
		m := leader.Metrics()
		return m.Role == Leader && m.HighWatermark > 0
	})
	waitFor(t, "the observer to follow", 5*time.Second, func() bool {
		m := observer.Metrics()
		return m.Role == Follower && m.LeaderID == 1
	})
	epoch := leader.Metrics().Epoch
	for i := range 5 {
		start := time.Now()
		last, err := leader.Propose(context.Background(), epoch, []raftlog.Record{{Value: []byte(fmt.Sprint("v", i))}})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the observer to apply the proposal", 5*time.Second, func() bool {
			return observer.Metrics().AppliedOffset > last
		})
		if took := time.Since(start); took > time.Second {
			t.Errorf("proposal %d reached the observer after %v: it waited for a Fetch MaxWait", i, took)
		}
	}
	if got, _ := rec.snapshot(); len(got) != 5 {
		t.Errorf("observer applied %v", got)
	}
	lm, om := leader.Metrics(), observer.Metrics()
	if lm.Epoch != om.Epoch || om.HighWatermark != lm.HighWatermark || om.LogEndOffset != lm.LogEndOffset {
		t.Errorf("leader %+v, observer %+v", lm, om)
	}
	if n := commits.Load(); n != 5 {
		t.Errorf("commit hook fired %d times for 5 proposals", n)
	}
	if observerStore.syncs.Load() != 0 {
		t.Errorf("observer fsynced %d times", observerStore.syncs.Load())
	}
	if leaderStore.syncs.Load() == 0 {
		t.Error("the voter never fsynced")
	}
}

// TestObserverOnControllerFlushes: an observer with FollowersAlwaysFlush (a
// controller not yet added as a voter) fsyncs what it fetches before its next Fetch
// reports the offset, so that offset is durable when a VotersRecord adding it makes
// it count toward the high watermark.
func TestObserverOnControllerFlushes(t *testing.T) {
	addrs := map[int32]string{1: freeAddrs(t, 1)[0]}
	leader, _, _ := startMetricsNode(t, 1, addrs, nil)
	observer, observerStore, _ := startMetricsNodeFlush(t, 9, addrs, nil, true)
	waitFor(t, "node 1 to lead", 5*time.Second, func() bool {
		m := leader.Metrics()
		return m.Role == Leader && m.HighWatermark > 0
	})
	last, err := leader.Propose(context.Background(), leader.Metrics().Epoch, []raftlog.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the observer to apply the proposal", 5*time.Second, func() bool {
		return observer.Metrics().AppliedOffset > last
	})
	if observerStore.syncs.Load() == 0 {
		t.Error("an observer with FollowersAlwaysFlush never fsynced what it fetched")
	}
}
