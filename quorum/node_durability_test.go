package quorum

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var durabilitySeeds = flag.Int("durability.seeds", 3, "seeds of TestNodeCrashesLoseNothingCommitted")

// slowMem is a MemStorage whose asynchronous fsyncs take a random while, so that a
// leader's appends, its followers' fetches and its own flushes overlap.
type slowMem struct {
	*raftlog.MemStorage
	mu    sync.Mutex
	rng   *rand.Rand
	maxUs int
}

func (s *slowMem) PrepareSync() (func() error, func(error) error) {
	work, finish := s.MemStorage.PrepareSync()
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(s.maxUs)) * time.Microsecond
	s.mu.Unlock()
	return func() error { time.Sleep(d); return work() }, finish
}

// commitLog records, across every node and every life of it, the batch committed at
// each offset, and reports a second, different batch at one offset.
type commitLog struct {
	mu    sync.Mutex
	t     *testing.T
	seed  uint64
	first map[int64]string
}

// lifeRec is one node life's listener: it checks each commit against the log.
type lifeRec struct {
	log  *commitLog
	id   int32
	mu   sync.Mutex
	next int64
}

func (r *lifeRec) HandleCommit(batches []raftlog.Batch) {
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range batches {
		if prev, ok := r.log.first[b.BaseOffset]; ok && prev != string(b.Raw) {
			r.log.t.Errorf("seed %d: node %d committed a different batch at offset %d", r.log.seed, r.id, b.BaseOffset)
		}
		r.log.first[b.BaseOffset] = string(b.Raw)
		r.next = b.NextOffset()
	}
}

func (r *lifeRec) HandleLeaderChange(LeaderAndEpoch) {}

func (r *lifeRec) applied() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// TestNodeCrashesLoseNothingCommitted: three voters on loopback with in-memory disks
// whose fsyncs are slow and that lose everything unsynced when their node crashes.
// Proposals flow to whichever node leads while random nodes crash (one at a time)
// and restart on what their disk kept. No offset ever commits two different batches,
// and once all run again, every node delivers every batch that ever committed: the
// leader's appends fsynced on the flusher goroutine count toward the high watermark
// only once durable. Seeds: -durability.seeds (default 3).
func TestNodeCrashesLoseNothingCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-second loopback run")
	}
	for seed := range uint64(*durabilitySeeds) {
		runCrashDurability(t, seed)
	}
}

func runCrashDurability(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	addrs := map[int32]string{}
	for i, a := range freeAddrs(t, 3) {
		addrs[int32(i+1)] = a
	}
	log := &commitLog{t: t, seed: seed, first: map[int64]string{}}
	stores := map[int32]*slowMem{}
	type life struct {
		node *Node
		srv  *protocol.Server
		rec  *lifeRec
	}
	lives := map[int32]*life{}
	start := func(id int32) {
		if stores[id] == nil {
			// One disk per seed is ten times slower: its node lags, so commits often
			// rest on the leader and the other follower alone.
			maxUs := 1500
			if id == int32(seed%3)+1 {
				maxUs = 15000
			}
			stores[id] = &slowMem{MemStorage: raftlog.NewMemStorage(), rng: rand.New(rand.NewPCG(seed, uint64(id))), maxUs: maxUs}
		}
		n, err := NewNode(NodeConfig{
			Raft: Config{NodeID: id, ClusterID: "durability-AAAAAAAAAAA", Voters: []int32{1, 2, 3},
				ElectionTimeoutMs: 150, FetchTimeoutMs: 300, ElectionBackoffMaxMs: 100,
				AppendLingerMs: 1, RequestTimeoutMs: 300, FetchMaxWaitMs: 100},
			Storage: stores[id], VoterAddrs: addrs, ListenerName: "CONTROLLER",
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := &lifeRec{log: log, id: id}
		n.Register(rec)
		lives[id] = &life{node: n, srv: serveNode(t, n, addrs[id]), rec: rec}
	}
	crash := func(id int32) {
		l := lives[id]
		l.srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no graceful resignation
		l.node.Close(ctx)
		stores[id].Crash() // the node is gone: what was not fsynced is lost
		delete(lives, id)
	}
	defer func() {
		for id := range lives {
			crash(id)
		}
	}()
	for id := range addrs {
		start(id)
	}
	down := int32(-1)
	proposed := 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range lives {
			st, err := l.node.Status(context.Background())
			if err != nil || st.Role != Leader {
				continue
			}
			for range 1 + rng.IntN(20) {
				v := fmt.Sprintf("s%d-v%d", seed, proposed)
				if _, err := l.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte(v)}}); err == nil {
					proposed++
				}
			}
		}
		switch r := rng.IntN(100); {
		case down >= 0 && r < 30:
			start(down)
			down = -1
		case down < 0 && r < 8:
			down = int32(1 + rng.IntN(3))
			for id, l := range lives {
				if st, err := l.node.Status(context.Background()); err == nil && st.Role == Leader && r < 6 {
					down = id // mostly the leader, whose unsynced tail is the risk
				}
			}
			crash(down)
		}
		<-time.After(time.Duration(rng.IntN(4000)) * time.Microsecond)
	}
	if down >= 0 {
		start(down)
	}
	// Healed: every node must come to deliver every batch that ever committed.
	log.mu.Lock()
	end := int64(0)
	for off, raw := range log.first {
		b, err := raftlog.ParseBatch([]byte(raw))
		if err != nil {
			t.Fatalf("seed %d: batch at %d: %v", seed, off, err)
		}
		end = max(end, b.NextOffset())
	}
	log.mu.Unlock()
	waitFor(t, fmt.Sprintf("seed %d: every node to deliver up to offset %d", seed, end), 15*time.Second, func() bool {
		for _, l := range lives {
			if l.rec.applied() < end {
				return false
			}
		}
		return true
	})
	if proposed == 0 || end == 0 {
		t.Fatalf("seed %d: nothing proposed (%d) or committed (end %d): the run checks nothing", seed, proposed, end)
	}
	t.Logf("seed %d: %d records proposed, %d offsets committed", seed, proposed, end)
}
