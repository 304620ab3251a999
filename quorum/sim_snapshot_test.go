package quorum_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// A seeded random run of the quorum with snapshots, on the quorumtest environment of
// the transcript tests (the event-driven simulation in sim_*_test.go runs the Node's
// snapshots too). The §8 invariants about snapshots are checked after every step.

// TestSnapshotRandomized drives a cluster with random proposals, snapshots,
// compactions, drops and crashes and checks after every step:
//   - SnapshotAtLogStart: a node whose log starts above 0 holds a snapshot ending there;
//   - LeaderNeverLoadsSnapshot: no node loads a snapshot in an epoch it led;
//   - SnapshotEqualsReplay: every node's state (snapshot + applied) and every snapshot
//     file equal the committed log, batch for batch.
func TestSnapshotRandomized(t *testing.T) {
	total := 0
	for seed := range uint64(10) {
		total += runSnapshotSim(t, seed, 600)
	}
	if total < 10 {
		t.Fatalf("only %d snapshot downloads over all seeds: the run does not exercise catch-up", total)
	}
}

// runSnapshotSim returns how many snapshot downloads completed.
func runSnapshotSim(t *testing.T, seed uint64, steps int) (totalDownloads int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	e := quorumtest.NewEnv(seed)
	for _, id := range []int32{1, 2, 3, 4} {
		cfg := quorum.Config{NodeID: id, Voters: []int32{1, 2, 3}, FetchMaxBytes: 200, AppendLingerMs: quorum.AppendLingerMsNone}
		if err := e.AddNode(cfg); err != nil {
			t.Fatal(err)
		}
	}
	committed := map[int64]raftlog.Batch{} // base offset -> first committed version
	led := map[int32]map[int32]bool{}
	loads := map[int32]int{} // downloads loaded in the node's current life
	downloads := 0
	check := func(step int) {
		for _, id := range e.IDs() {
			n := e.Nodes[id]
			if n.Down {
				continue
			}
			st := n.Raft.Status()
			if st.Role == quorum.Leader {
				if led[id] == nil {
					led[id] = map[int32]bool{}
				}
				led[id][st.Epoch] = true
			}
			if len(n.Loads) > loads[id] {
				if led[id][st.Epoch] {
					t.Fatalf("seed %d step %d: LeaderNeverLoadsSnapshot: node %d loaded %v in epoch %d it led", seed, step, id, n.Loads, st.Epoch)
				}
				downloads += len(n.Loads) - loads[id]
			}
			loads[id] = len(n.Loads)
			for _, b := range n.StateMachine() {
				if prev, ok := committed[b.BaseOffset]; ok && !bytes.Equal(prev.Raw, b.Raw) {
					t.Fatalf("seed %d step %d: SnapshotEqualsReplay: node %d holds another batch at %d", seed, step, id, b.BaseOffset)
				}
				committed[b.BaseOffset] = b
			}
			snaps := n.Snapshots()
			if n.StartOffset > 0 && !hasSnapshotAt(snaps, n.StartOffset) {
				t.Fatalf("seed %d step %d: SnapshotAtLogStart: node %d log starts at %d, snapshots %v", seed, step, id, n.StartOffset, snaps)
			}
			for sid, batches := range snaps {
				// Each snapshot is exactly the committed log below its end, and its id
				// names the epoch of its last batch.
				var next int64
				for _, b := range batches {
					if prev, ok := committed[b.BaseOffset]; !ok || !bytes.Equal(prev.Raw, b.Raw) || b.BaseOffset != next {
						t.Fatalf("seed %d step %d: SnapshotEqualsReplay: node %d snapshot %+v differs from the log at %d", seed, step, id, sid, b.BaseOffset)
					}
					next = b.NextOffset()
				}
				if last := batches[len(batches)-1]; last.NextOffset() != sid.EndOffset || last.Epoch != sid.Epoch {
					t.Fatalf("seed %d step %d: SnapshotAtLogStart: node %d snapshot %+v ends with batch [%d..%d]@%d", seed, step, id, sid, last.BaseOffset, last.LastOffset, last.Epoch)
				}
			}
		}
	}
	for step := range steps {
		e.Out.Reset()
		ids := e.IDs()
		n := e.Nodes[ids[rng.IntN(len(ids))]]
		switch k := rng.IntN(20); {
		case k < 6:
			e.Tick(int64(rng.IntN(600)), nil)
		case k < 12:
			if !n.Down && n.Raft.Status().Role == quorum.Leader {
				_, _, _ = n.Raft.Propose(e.NowMs, []raftlog.Record{{Value: []byte{byte(step), byte(step >> 8)}}})
			}
		case k < 14:
			if !n.Down && len(n.StateMachine()) > 0 {
				_, _ = e.TakeSnapshot(n) // refused ids are fine: nothing new to cover
			}
		case k < 16:
			if !n.Down {
				e.Compact(n)
			}
		case k == 16 && !n.Down:
			e.Crash(n)
		case k == 17 && n.Down:
			if err := e.Start(n); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			for _, id := range e.IDs() {
				e.ProcessReady(e.Nodes[id])
			}
			net := e.Net
			e.Net = nil
			for _, m := range net {
				deliverOrFail(e, m, rng.IntN(10) == 0)
			}
		}
		if e.Fatal != nil {
			t.Fatalf("seed %d step %d: %v\n%s", seed, step, e.Fatal, e.Out)
		}
		check(step)
	}
	// Liveness: heal everything and check every node converges on the leader's state.
	for _, id := range e.IDs() {
		if e.Nodes[id].Down {
			if err := e.Start(e.Nodes[id]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 200 {
		e.Tick(100, nil)
		stabilize(e)
	}
	check(steps)
	files := 0
	for _, id := range e.IDs() {
		files += len(e.Nodes[id].Snapshots())
	}
	t.Logf("seed %d: %d snapshot files, %d snapshot downloads", seed, files, downloads)
	totalDownloads += downloads
	var want int64 = -1
	for _, id := range e.IDs() {
		st := e.Nodes[id].Raft.Status()
		if st.Role == quorum.Leader {
			want = st.AppliedOffset
		}
	}
	for _, id := range e.IDs() {
		if got := e.Nodes[id].Raft.Status().AppliedOffset; want >= 0 && got != want {
			t.Errorf("seed %d: node %d applied %d, leader %d: %s %+v", seed, id, got, want, quorumtest.StateLine(e.Nodes[id]), e.Nodes[id].Raft.Status())
		}
	}
	return totalDownloads
}

func hasSnapshotAt(snaps map[raftlog.SnapshotID][]raftlog.Batch, end int64) bool {
	for id := range snaps {
		if id.EndOffset == end {
			return true
		}
	}
	return false
}
