package quorum_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var (
	simSeeds = flag.Int("sim.seeds", 300, "number of simulation seeds")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this simulation seed")
)

// TestSimulation drives 1, 3 or 5 voters plus observers through random message
// delivery, drops, reordering, crashes (losing nothing that was persisted) and
// restarts, and checks Raft-layer invariants after every event. A failure prints the
// seed; -sim.seed=N replays it.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		if err := runSim(*simSeed, 3000); err != nil {
			t.Fatalf("seed %d: %v", *simSeed, err)
		}
		return
	}
	live := 0
	for s := 1; s <= *simSeeds; s++ {
		ok, err := runSimCommitted(uint64(s), 1500)
		if err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		if ok {
			live++
		}
	}
	if live < *simSeeds/2 {
		t.Fatalf("only %d of %d seeds committed anything", live, *simSeeds)
	}
	t.Logf("%d of %d seeds committed data", live, *simSeeds)
}

func runSim(seed uint64, steps int) error {
	_, err := runSimCommitted(seed, steps)
	return err
}

// runSimCommitted also reports whether anything was committed: the fault schedule may
// crash a majority, so liveness is judged over many seeds, not per seed.
func runSimCommitted(seed uint64, steps int) (bool, error) {
	rng := rand.New(rand.NewPCG(seed, 99))
	env := quorumtest.NewEnv(seed)
	nv := []int{1, 3, 5}[rng.IntN(3)]
	var voters []int32
	for i := 1; i <= nv; i++ {
		voters = append(voters, int32(i))
	}
	for i := 1; i <= nv+rng.IntN(2); i++ {
		cfg := quorum.Config{NodeID: int32(i), Voters: voters, ClusterID: "c", AppendLingerMs: quorum.AppendLingerMsNone}
		if err := env.AddNode(cfg); err != nil {
			return false, err
		}
	}
	chk := newChecker()
	for step := 0; step < steps; step++ {
		simEvent(env, rng)
		if env.Fatal != nil {
			out := env.Out.String()
			return false, fmt.Errorf("step %d: %w\n%s", step, env.Fatal, out[max(0, len(out)-3000):])
		}
		if err := chk.check(env); err != nil {
			return false, fmt.Errorf("step %d: %w", step, err)
		}
	}
	return len(chk.committed) > 0, nil
}

func simEvent(env *quorumtest.Env, rng *rand.Rand) {
	ids := env.IDs()
	n := env.Nodes[ids[rng.IntN(len(ids))]]
	switch p := rng.IntN(100); {
	case p < 40 && len(env.Net) > 0:
		i := rng.IntN(min(len(env.Net), 3)) // mild reordering
		m := env.Net[i]
		env.Net = append(env.Net[:i], env.Net[i+1:]...)
		if rng.IntN(20) == 0 {
			return // dropped
		}
		env.Deliver(m)
	case p < 70:
		env.ProcessReady(n)
	case p < 85:
		env.Tick(int64(rng.IntN(300)), nil)
	case p < 95:
		if !n.Down && n.Raft.Status().Role == quorum.Leader {
			_, _, _ = n.Raft.Propose(env.NowMs, []raftlog.Record{{Value: []byte(fmt.Sprint(env.NowMs))}})
		}
	case p < 98:
		if !n.Down {
			env.Crash(n)
		}
	default:
		if n.Down {
			_ = env.Start(n)
		}
	}
}

type checker struct {
	leaders   map[int32]int32 // epoch -> leader
	committed map[int64][]byte
	leaderHW  map[int32]int64 // epoch -> last HW a leader exposed
}

func newChecker() *checker {
	return &checker{leaders: map[int32]int32{}, committed: map[int64][]byte{}, leaderHW: map[int32]int64{}}
}

func (c *checker) check(env *quorumtest.Env) error {
	for _, id := range env.IDs() {
		n := env.Nodes[id]
		if n.State.LeaderID >= 0 {
			if l, ok := c.leaders[n.State.LeaderEpoch]; ok && l != n.State.LeaderID {
				return fmt.Errorf("SingleLeaderPerEpoch: epoch %d has leaders %d and %d", n.State.LeaderEpoch, l, n.State.LeaderID)
			}
			c.leaders[n.State.LeaderEpoch] = n.State.LeaderID
		}
		for _, b := range n.Applied {
			if prev, ok := c.committed[b.BaseOffset]; ok && !bytes.Equal(prev, b.Raw) {
				return fmt.Errorf("ConsistentCommittedData: node %d offset %d differs", id, b.BaseOffset)
			}
			c.committed[b.BaseOffset] = b.Raw
		}
		if n.Down {
			continue
		}
		s := n.Raft.Status()
		if s.Role == quorum.Leader && s.HighWatermark >= 0 {
			if s.HighWatermark <= s.EpochStartOffset {
				return fmt.Errorf("HWOnlyAfterOwnEpochCommit: node %d hw %d epoch start %d", id, s.HighWatermark, s.EpochStartOffset)
			}
			if s.HighWatermark < c.leaderHW[s.Epoch] {
				return fmt.Errorf("MonotonicLeaderHW: node %d hw %d < %d", id, s.HighWatermark, c.leaderHW[s.Epoch])
			}
			c.leaderHW[s.Epoch] = s.HighWatermark
		}
		if !s.IsVoter && (s.Role != quorum.Unattached && s.Role != quorum.Follower) {
			return fmt.Errorf("ObserversNeverCount: observer %d is %s", id, s.Role)
		}
	}
	return nil
}
