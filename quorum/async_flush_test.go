package quorum

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// gatedStorage holds the leader's asynchronous fsyncs (PrepareSync's work) until the
// gate opens, as a slow disk would.
type gatedStorage struct {
	*raftlog.FileStorage
	mu   sync.Mutex
	gate chan struct{} // nil: not gated
}

func (g *gatedStorage) PrepareSync() (func() error, func(error) error) {
	work, finish := g.FileStorage.PrepareSync()
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate == nil {
		return work, finish
	}
	return func() error { <-gate; return work() }, finish
}

func (g *gatedStorage) hold() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

// waitOwnFlush waits until the leader has fsynced everything it appended (its
// LeaderChange batch) before a test gates its flusher. A leader that committed may
// still be running that fsync: the followers alone make a majority. Until it
// completes, the core keeps the epoch's quorum state in flight and sends its Fetch
// answers only after persisting, so a proposal that wakes parked Fetches comes in a
// Ready with MessagesAfterPersist, which the driver persists with a synchronous Sync
// instead of the flusher: the gate would not hold it (a loop under load saw "leader's
// flushed end 2 covers offset 1 while its fsync is held" through Node.persist's Sync).
func waitOwnFlush(t *testing.T, lead *testNode) {
	t.Helper()
	waitFor(t, "the leader's own fsync of its log", 20*time.Second, func() bool {
		s, err := lead.node.Status(context.Background())
		return err == nil && s.FlushedEndOffset == s.LogEndOffset
	})
}

// TestLeaderCountsItsAppendOnlyOnceFsynced: the leader replicates a record while its
// own fsync of it is still running (appendAsync), but the high watermark counts the
// leader only once that fsync is done. With one follower down the majority is the
// leader plus the other follower, so the record commits only after both are durable.
func TestLeaderCountsItsAppendOnlyOnceFsynced(t *testing.T) {
	defer goleak.VerifyNone(t)
	stores := map[int32]*gatedStorage{}
	var mu sync.Mutex
	c := newTestClusterWrapped(t, 3, func(id int32, s *raftlog.FileStorage) raftlog.Storage {
		g := &gatedStorage{FileStorage: s}
		mu.Lock()
		stores[id] = g
		mu.Unlock()
		return g
	})
	defer c.closeAll()
	var lead *testNode
	waitFor(t, "a leader that committed", 5*time.Second, func() bool { lead = c.leader(); return lead != nil })
	var follower int32 = -1
	for id := range c.nodes {
		if id != lead.id && follower < 0 {
			follower = id
		} else if id != lead.id {
			c.crash(id)
		}
	}
	waitOwnFlush(t, lead)
	st, _ := lead.node.Status(context.Background())
	mu.Lock()
	gate := stores[lead.id].hold()
	mu.Unlock()
	off, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte("durable?")}})
	if err != nil {
		t.Fatal(err)
	}
	// The follower gets it and acknowledges it (its next Fetch starts past it).
	waitFor(t, "the follower's ack of the record", 5*time.Second, func() bool {
		s, _ := lead.node.Status(context.Background())
		for _, v := range s.Voters {
			if v.ReplicaID == follower && v.LogEndOffset > off {
				return true
			}
		}
		return false
	})
	s, _ := lead.node.Status(context.Background())
	if s.HighWatermark > off {
		t.Fatalf("high watermark %d covers offset %d before the leader's own fsync finished", s.HighWatermark, off)
	}
	if s.FlushedEndOffset > off {
		t.Fatalf("leader's flushed end %d covers offset %d while its fsync is held", s.FlushedEndOffset, off)
	}
	close(gate)
	waitFor(t, "the commit once the leader's fsync completes", 5*time.Second, func() bool {
		s, _ := lead.node.Status(context.Background())
		return s.HighWatermark > off
	})
}

// TestNodeGroupCommit runs the production driver with a linger time far longer than
// the test (10 minutes), so nothing may wait for it: a proposal on an idle log commits
// at once; proposals made while the leader's fsync is held are not appended until it
// completes, and then go out together as one batch.
func TestNodeGroupCommit(t *testing.T) {
	defer goleak.VerifyNone(t)
	var store *gatedStorage
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		wrap: func(_ int32, s *raftlog.FileStorage) raftlog.Storage {
			store = &gatedStorage{FileStorage: s}
			return store
		},
		tune: func(cfg *Config) { cfg.AppendLingerMs = 600_000 }}
	c.addrs[1], c.dirs[1] = freeAddrs(t, 1)[0], t.TempDir()
	lead := c.start(1)
	defer c.closeAll()
	waitFor(t, "a leader that committed", 5*time.Second, func() bool { return c.leader() != nil })
	st, _ := lead.node.Status(context.Background())
	propose := func(v string) int64 {
		off, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	first := propose("idle")
	waitFor(t, "the proposal on an idle log to commit without lingering", 5*time.Second, func() bool {
		return lead.rec.committedBatch(first, first)
	})
	gate := store.hold()
	held := propose("held")
	waitFor(t, "the held append to reach the log", 5*time.Second, func() bool {
		s, _ := lead.node.Status(context.Background())
		return s.LogEndOffset == held+1
	})
	a, b := propose("during-1"), propose("during-2")
	s, _ := lead.node.Status(context.Background())
	if s.LogEndOffset != held+1 || s.HighWatermark > held {
		t.Fatalf("log end %d high watermark %d while the fsync of %d is held: want %d and <= %d (proposals wait for the fsync)",
			s.LogEndOffset, s.HighWatermark, held, held+1, held)
	}
	store.mu.Lock()
	store.gate = nil // the next fsync runs free
	store.mu.Unlock()
	close(gate)
	waitFor(t, "the proposals made during the fsync to commit as one batch", 5*time.Second, func() bool {
		return lead.rec.committedBatch(held, held) && lead.rec.committedBatch(a, b)
	})
}

// syncGatedStorage holds every log fsync, synchronous (Sync) or on the flusher
// (PrepareSync's work), while its gate is closed; quorum-state writes go through.
type syncGatedStorage struct {
	gatedStorage
}

func (g *syncGatedStorage) Sync() error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.FileStorage.Sync()
}

// TestNewLeaderAnnouncesBeforeItsLogFsync: a new leader sends BeginQuorumEpoch as
// soon as the quorum state naming it is durable, and fsyncs its LeaderChange batch
// meanwhile, so its followers start fetching during that fsync instead of after it
// (one fsync fewer between an election and the first commit, which activates the
// new controller). Every log fsync is held here: before, the new leader waited in
// the LeaderChange fsync and no follower learned of it; now a follower follows it
// while the fsync is held, and the epoch's first commit comes once it completes.
func TestNewLeaderAnnouncesBeforeItsLogFsync(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	stores := map[int32]*syncGatedStorage{}
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		wrap: func(id int32, s *raftlog.FileStorage) raftlog.Storage {
			g := &syncGatedStorage{gatedStorage{FileStorage: s}}
			mu.Lock()
			stores[id] = g
			mu.Unlock()
			return g
		},
		// No election before the crash: under load (-race, load 20) the test
		// cluster's 300 ms fetch timeout let one happen while the test waited for
		// the followers, and the new leader, elected with fsyncs free, had
		// delivered its epoch before the gates closed.
		tune: func(cfg *Config) { cfg.FetchTimeoutMs = 2_000 }}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	for id := range c.addrs {
		c.start(id)
	}
	defer c.closeAll()
	var lead *testNode
	waitFor(t, "a leader that committed", 20*time.Second, func() bool { lead = c.leader(); return lead != nil })
	st, _ := lead.node.Status(context.Background())
	// The leader has committed once one follower made its LeaderChange durable; the
	// other may still be fetching it. Held, its Sync of that batch would block its
	// driver, it could grant no vote, and no new leader could be elected after the
	// crash (a loop under load timed out here 2 times in 60).
	waitFor(t, "both followers to make the leader's log durable", 20*time.Second, func() bool {
		for _, tn := range c.nodes {
			if s, err := tn.node.Status(context.Background()); err != nil || s.FlushedEndOffset < st.LogEndOffset {
				return false
			}
		}
		return true
	})
	var gates []chan struct{}
	mu.Lock()
	for id, g := range stores {
		if id != lead.id {
			gates = append(gates, g.hold())
		}
	}
	mu.Unlock()
	release := sync.OnceFunc(func() {
		for _, g := range gates {
			close(g)
		}
	})
	defer release()
	c.crash(lead.id)
	// A follower's recorder hears of the new leader when BeginQuorumEpoch makes it
	// follow (its quorum-state write is not held); the leader's own only after its
	// epoch start commits.
	var next LeaderAndEpoch
	waitFor(t, "a follower to follow the new leader while every log fsync is held", 20*time.Second, func() bool {
		for _, tn := range c.nodes {
			if _, l := tn.rec.snapshot(); l.Epoch > st.Epoch && l.LeaderID >= 0 && l.LeaderID != tn.id {
				next = l
				return true
			}
		}
		return false
	})
	if _, l := c.nodes[next.LeaderID].rec.snapshot(); l.Epoch == next.Epoch && l.LeaderID == next.LeaderID {
		t.Fatalf("the new leader %d delivered its epoch %d before its LeaderChange fsync", next.LeaderID, next.Epoch)
	}
	release()
	waitFor(t, "the new leader's first commit", 20*time.Second, func() bool {
		_, l := c.nodes[next.LeaderID].rec.snapshot()
		return l.Epoch == next.Epoch && l.LeaderID == next.LeaderID
	})
}

// TestNodeAppendsOnceCommittedDuringItsFsync: once both followers made a batch
// durable it is committed, and the next proposal is appended and replicated at once
// even though the leader's own fsync of that batch is still running (a slow shared
// disk): it waited for that fsync before, which no longer counted toward any
// commit. The linger is ten minutes, so only group commit can append it. The leader
// still counts itself for the new batch only once its fsync is done.
func TestNodeAppendsOnceCommittedDuringItsFsync(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	stores := map[int32]*gatedStorage{}
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		wrap: func(id int32, s *raftlog.FileStorage) raftlog.Storage {
			g := &gatedStorage{FileStorage: s}
			mu.Lock()
			stores[id] = g
			mu.Unlock()
			return g
		},
		tune: func(cfg *Config) {
			cfg.AppendLingerMs = 600_000
			// No election while the leader's fsync is held: a resigning leader
			// persists its quorum state, which waits for that fsync. At load 45
			// the 300 ms fetch timeout of the test cluster let one happen.
			cfg.FetchTimeoutMs, cfg.RequestTimeoutMs = 30_000, 5_000
		}}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	for id := range c.addrs {
		c.start(id)
	}
	defer c.closeAll()
	var lead *testNode
	waitFor(t, "a leader that committed", 20*time.Second, func() bool { lead = c.leader(); return lead != nil })
	waitOwnFlush(t, lead)
	st, _ := lead.node.Status(context.Background())
	propose := func(v string) int64 {
		off, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	mu.Lock()
	gate := stores[lead.id].hold()
	mu.Unlock()
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	// describe is every node's view, for a timeout's message (a load-40 run of
	// the whole package once saw the held batch not commit within 20 s).
	describe := func() string {
		var b strings.Builder
		for id, tn := range c.nodes {
			// A driver waiting for the held fsync (joinFlush) answers nothing until
			// release (deferred) lets it go, and this goroutine with it.
			got := make(chan Status, 1)
			go func() { s, _ := tn.node.Status(context.Background()); got <- s }()
			var s Status
			select {
			case s = <-got:
			case <-time.After(time.Second):
				fmt.Fprintf(&b, "\n node %d: no status within 1 s (its driver is blocked)", id)
				continue
			}
			fmt.Fprintf(&b, "\n node %d: %s epoch %d leo %d flushed %d hw %d voters %+v",
				id, s.Role, s.Epoch, s.LogEndOffset, s.FlushedEndOffset, s.HighWatermark, s.Voters)
		}
		return b.String()
	}
	held := propose("held")
	start := time.Now()
	waitFor(t, "the followers to commit the batch whose leader fsync is held", 20*time.Second, func() bool {
		ok := lead.rec.committedBatch(held, held)
		if !ok && time.Since(start) > 19*time.Second {
			t.Logf("offset %d not committed yet:%s", held, describe())
		}
		return ok
	})
	next := propose("next")
	start = time.Now()
	waitFor(t, "the next proposal to commit while the leader's fsync is still held", 20*time.Second, func() bool {
		ok := lead.rec.committedBatch(next, next)
		if !ok && time.Since(start) > 19*time.Second {
			t.Logf("offset %d not committed yet:%s", next, describe())
		}
		return ok
	})
	if s, _ := lead.node.Status(context.Background()); s.FlushedEndOffset > held {
		t.Fatalf("leader's flushed end %d covers offset %d while its fsync is held", s.FlushedEndOffset, held)
	}
	mu.Lock()
	stores[lead.id].gate = nil // later fsyncs run free
	mu.Unlock()
	release()
	waitFor(t, "the leader's fsync to catch up with the next batch", 20*time.Second, func() bool {
		s, _ := lead.node.Status(context.Background())
		return s.FlushedEndOffset > next
	})
}

// TestNewLeaderAppendsAsyncDuringItsLeaderChangeFsync: a new leader's quorum state is
// durable before its BeginQuorumEpoch leaves (beginEpochAsync), while its
// LeaderChange batch is fsynced on the flusher. A proposal made meanwhile, once the
// followers committed the LeaderChange, is appended and replicated at once and
// commits on the followers' acks although that fsync is still held: its Fetch
// answers need only the quorum state durable, which it is. Before, the core held
// them until the whole Ready was advanced, so the append that woke the parked Fetches
// came with answers to send after persisting, and the driver made it durable
// synchronously after waiting for the held fsync: the new controller's first
// records queued behind the LeaderChange fsync.
func TestNewLeaderAppendsAsyncDuringItsLeaderChangeFsync(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	stores := map[int32]*gatedStorage{}
	var gates []chan struct{}
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		wrap: func(id int32, s *raftlog.FileStorage) raftlog.Storage {
			g := &gatedStorage{FileStorage: s}
			mu.Lock()
			stores[id] = g
			gates = append(gates, g.hold()) // every flusher fsync held from the start
			mu.Unlock()
			return g
		},
		tune: func(cfg *Config) {
			cfg.AppendLingerMs = 600_000
			// No election while the leader's fsync is held (see above).
			cfg.FetchTimeoutMs, cfg.RequestTimeoutMs = 30_000, 5_000
		}}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	for id := range c.addrs {
		c.start(id)
	}
	release := sync.OnceFunc(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range stores {
			g.gate = nil
		}
		for _, g := range gates {
			close(g)
		}
	})
	defer c.closeAll()
	defer release()
	// status fails the test instead of hanging when a driver is blocked (waiting for
	// a held fsync answers nothing); release, deferred, then lets it go.
	status := func(tn *testNode) Status {
		got := make(chan Status, 1)
		go func() { s, _ := tn.node.Status(context.Background()); got <- s }()
		select {
		case s := <-got:
			return s
		case <-time.After(5 * time.Second):
			t.Fatalf("node %d answers no status within 5 s: its driver waits for a held fsync", tn.id)
			return Status{}
		}
	}
	var lead *testNode
	waitFor(t, "a leader whose LeaderChange the followers committed", 20*time.Second, func() bool {
		for _, tn := range c.nodes {
			if s := status(tn); s.Role == Leader && s.HighWatermark > s.EpochStartOffset {
				lead = tn
				return true
			}
		}
		return false
	})
	st := status(lead)
	if st.FlushedEndOffset > st.EpochStartOffset {
		t.Fatalf("leader's flushed end %d covers its LeaderChange at %d while every flusher fsync is held",
			st.FlushedEndOffset, st.EpochStartOffset)
	}
	t.Logf("leader %d, epoch %d, LeaderChange at %d, flushed end %d, high watermark %d; proposing",
		lead.id, st.Epoch, st.EpochStartOffset, st.FlushedEndOffset, st.HighWatermark)
	off, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte("first")}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the proposal to commit while the leader's LeaderChange fsync is held", 20*time.Second, func() bool {
		return lead.rec.committedBatch(off, off) || status(lead).Role != Leader
	})
	if s := status(lead); s.Role != Leader || s.FlushedEndOffset > st.EpochStartOffset {
		t.Fatalf("%s's flushed end %d covers its LeaderChange at %d while its fsync is held",
			s.Role, s.FlushedEndOffset, st.EpochStartOffset)
	}
	release()
	waitFor(t, "the leader's fsyncs to catch up", 20*time.Second, func() bool {
		s, _ := lead.node.Status(context.Background())
		return s.FlushedEndOffset > off
	})
}
