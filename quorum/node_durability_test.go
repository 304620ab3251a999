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

// slowFile is a FileStorage on a CrashFS whose asynchronous fsyncs take a random
// while, as slowMem's do.
type slowFile struct {
	*raftlog.FileStorage
	mu    sync.Mutex
	rng   *rand.Rand
	maxUs int
}

func (s *slowFile) PrepareSync() (func() error, func(error) error) {
	work, finish := s.FileStorage.PrepareSync()
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(s.maxUs)) * time.Microsecond
	s.mu.Unlock()
	return func() error { time.Sleep(d); return work() }, finish
}

// crashDisks gives each node of a durability run its disk: MemStorage, or the
// production FileStorage on a raftlog.CrashFS, which a crash leaves as a power loss
// does (a seeded prefix of unsynced writes, the last torn; file names kept only if
// their directory was fsynced) and which can crash inside a persist step.
type crashDisks struct {
	file      bool
	seed      uint64
	mems      map[int32]*slowMem
	fss       map[int32]*raftlog.CrashFS
	inPersist int // crashes that landed inside a storage call
}

// open returns node id's storage for a new life.
func (d *crashDisks) open(t *testing.T, id int32, maxUs int) raftlog.Storage {
	if !d.file {
		if d.mems[id] == nil {
			d.mems[id] = &slowMem{MemStorage: raftlog.NewMemStorage(), rng: rand.New(rand.NewPCG(d.seed, uint64(id))), maxUs: maxUs}
		}
		return d.mems[id]
	}
	if d.fss[id] == nil {
		d.fss[id] = raftlog.NewCrashFS(d.seed*10 + uint64(id))
	}
	c := d.fss[id]
	c.Restart()
	fs, err := raftlog.OpenFileStorage(fmt.Sprintf("/node%d/__cluster_metadata-0", id), raftlog.FileOptions{FS: c})
	if err != nil {
		t.Fatalf("seed %d: node %d restarts after a crash: %v", d.seed, id, err)
	}
	return &slowFile{FileStorage: fs, rng: rand.New(rand.NewPCG(d.seed, uint64(id))), maxUs: maxUs}
}

// crash loses what node id's disk had not made durable (its node is closed).
func (d *crashDisks) crash(id int32) {
	if !d.file {
		d.mems[id].Crash()
		return
	}
	d.fss[id].PowerLoss()
}

// armInside makes node id's disk crash inside one of its next few file system calls
// (FileStorage only): the node stops on the error there.
func (d *crashDisks) armInside(id int32, rng *rand.Rand) bool {
	if !d.file {
		return false
	}
	d.fss[id].CrashAfter(1+rng.IntN(8), true)
	return true
}

// disarm drops node id's armed crash and reports whether it fired.
func (d *crashDisks) disarm(id int32) bool {
	if !d.file || d.fss[id] == nil {
		return false
	}
	d.fss[id].CrashAfter(0, true)
	return d.fss[id].Crashed()
}

// crashedInside reports whether node id's armed crash fired.
func (d *crashDisks) crashedInside(id int32) bool { return d.file && d.fss[id].Crashed() }

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
		runCrashDurability(t, seed, &crashDisks{seed: seed, mems: map[int32]*slowMem{}})
	}
}

// TestNodeCrashesLoseNothingCommittedFileStorage is the same run on the production
// FileStorage over a raftlog.CrashFS: crashes are power losses that keep a seeded,
// possibly torn prefix of the unsynced writes and lose unsynced directory entries,
// and some land inside a persist step (a file system call of Append, Sync, the
// flusher's fsync and durable-end write, SaveQuorumState, TruncateTo). Every restart
// must open (a crash never reads as damage), and nothing committed may be lost.
func TestNodeCrashesLoseNothingCommittedFileStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-second loopback run")
	}
	for seed := range uint64(*durabilitySeeds) {
		d := &crashDisks{file: true, seed: seed, fss: map[int32]*raftlog.CrashFS{}}
		runCrashDurability(t, seed, d)
		if d.inPersist == 0 {
			t.Errorf("seed %d: no crash landed inside a persist step", seed)
		}
		t.Logf("seed %d: %d crashes inside a persist step", seed, d.inPersist)
	}
}

func runCrashDurability(t *testing.T, seed uint64, disks *crashDisks) {
	rng := rand.New(rand.NewPCG(seed, 7))
	addrs := map[int32]string{}
	for i, a := range freeAddrs(t, 3) {
		addrs[int32(i+1)] = a
	}
	log := &commitLog{t: t, seed: seed, first: map[int64]string{}}
	type life struct {
		node *Node
		srv  *protocol.Server
		rec  *lifeRec
	}
	lives := map[int32]*life{}
	start := func(id int32) {
		// One disk per seed is ten times slower: its node lags, so commits often
		// rest on the leader and the other follower alone.
		maxUs := 1500
		if id == int32(seed%3)+1 {
			maxUs = 15000
		}
		store := disks.open(t, id, maxUs)
		n, err := NewNode(NodeConfig{
			Raft: Config{NodeID: id, ClusterID: "durability-AAAAAAAAAAA", Voters: []int32{1, 2, 3},
				ElectionTimeoutMs: 150, FetchTimeoutMs: 300, ElectionBackoffMaxMs: 100,
				AppendLingerMs: 1, RequestTimeoutMs: 300, FetchMaxWaitMs: 100},
			Storage: store, VoterAddrs: addrs, ListenerName: "CONTROLLER",
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
		disks.crash(id) // the node is gone: what was not fsynced is lost
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
		for id := range lives {
			if down < 0 && disks.crashedInside(id) {
				disks.inPersist++
				crash(id)
				down = id
			}
		}
		switch r := rng.IntN(100); {
		case down < 0 && r < 4:
			// A crash inside a persist step of a random node, mostly the leader.
			id := int32(1 + rng.IntN(3))
			for lid, l := range lives {
				if st, err := l.node.Status(context.Background()); err == nil && st.Role == Leader && r < 3 {
					id = lid
				}
			}
			disks.armInside(id, rng)
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
	// Heal: no crash stays armed, and a node whose armed crash fired restarts.
	for id := range addrs {
		if disks.disarm(id) && lives[id] != nil {
			disks.inPersist++
			crash(id)
			if down < 0 {
				down = id
			} else {
				start(id)
			}
		}
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
