package quorum

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// commitWaiter is a Listener that wakes callers waiting for an offset to commit.
type commitWaiter struct {
	mu      sync.Mutex
	next    int64
	waiters map[int64][]chan struct{}
}

func newCommitWaiter() *commitWaiter { return &commitWaiter{waiters: map[int64][]chan struct{}{}} }

func (w *commitWaiter) HandleCommit(batches []raftlog.Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = batches[len(batches)-1].NextOffset()
	for off, chs := range w.waiters {
		if off < w.next {
			for _, ch := range chs {
				close(ch)
			}
			delete(w.waiters, off)
		}
	}
}

func (w *commitWaiter) HandleLeaderChange(LeaderAndEpoch) {}

// wait returns a channel closed once offset is committed.
func (w *commitWaiter) wait(offset int64) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if offset < w.next {
		close(ch)
		return ch
	}
	w.waiters[offset] = append(w.waiters[offset], ch)
	return ch
}

// batching is how a benchmark's leader batches proposals.
type batching struct {
	name     string
	lingerMs int64 // Config.AppendLingerMs
	always   bool  // Config.lingerAlways: every proposal lingers (before group commit)
	local    bool  // Config.groupLocal: group commit waits for the leader's fsync only
}

// batchings are the ways of batching the commit benchmarks compare in one run: the
// default (group commit, 25 ms bound), the 25 ms and 1 ms lingers as they were
// before group commit (the 1 ms one is what benchmarks used to override), and none.
var batchings = []batching{
	{"group-commit", 0, false, false},
	{"group-commit-local", 0, false, true},
	{"linger-25ms", 25, true, false},
	{"linger-1ms", 1, true, false},
	{"none", AppendLingerMsNone, false, false},
}

// benchCluster starts three voters on loopback with file storage (fsync on) and
// returns the leader and its commit waiter.
func benchCluster(b *testing.B, bt batching) (*Node, *commitWaiter, func()) {
	b.Helper()
	return benchClusterFS(b, bt, nil)
}

// benchClusterFS is benchCluster with every voter's FileStorage on fsys (nil: the
// operating system's).
func benchClusterFS(b *testing.B, bt batching, fsys raftlog.FS) (*Node, *commitWaiter, func()) {
	b.Helper()
	addrs := map[int32]string{}
	for i, a := range freeAddrs(b, 3) {
		addrs[int32(i+1)] = a
	}
	var nodes []*Node
	var servers []*protocol.Server
	waiters := map[int32]*commitWaiter{}
	for id := range addrs {
		store, err := raftlog.OpenFileStorage(b.TempDir(), raftlog.FileOptions{FS: fsys})
		if err != nil {
			b.Fatal(err)
		}
		n, err := NewNode(NodeConfig{
			Raft: Config{NodeID: id, Voters: []int32{1, 2, 3}, ElectionTimeoutMs: 200, FetchTimeoutMs: 1000,
				AppendLingerMs: bt.lingerMs, lingerAlways: bt.always, groupLocal: bt.local},
			Storage: store, VoterAddrs: addrs, ListenerName: "CONTROLLER", Logger: benchLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		w := newCommitWaiter()
		n.Register(w)
		waiters[id] = w
		srv := serveNode(b, n, addrs[id])
		nodes, servers = append(nodes, n), append(servers, srv)
	}
	stop := func() {
		for i, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n.Close(ctx)
			cancel()
			servers[i].Close()
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			st, _ := n.Status(context.Background())
			if st.Role == Leader && st.HighWatermark > st.EpochStartOffset {
				return n, waiters[n.NodeID()], stop
			}
		}
		<-time.After(10 * time.Millisecond)
	}
	stop()
	b.Fatal("no leader")
	return nil, nil, nil
}

// BenchmarkCommitLatency proposes one metadata-sized record at a time on a 3-voter
// loopback quorum with fsync on, and reports p50/p99 commit latency next to the floor
// measured in the same run: one fsync of a batch-sized write plus one loopback request
// round trip; once per way of batching (batchings).
// Reproduce: go test -run '^$' -bench 'CommitLatency$' -benchtime 2000x ./quorum
func BenchmarkCommitLatency(b *testing.B) {
	for _, bt := range batchings {
		b.Run(bt.name, func(b *testing.B) { benchCommitLatency(b, bt) })
	}
}

// BenchmarkCommitLatencyRecord measures what the durable-end record's fdatasync (a
// second flush per Sync, written after the acknowledgement and overlapping the next
// flush; it still shares the device) costs a commit end to end: two 3-voter loopback
// quorums with BenchmarkCommitLatency's default batching run side by side, one with
// the voters' FileStorage as it is and one with that fdatasync skipped (an FS
// wrapper; the record is still written, to the page cache only); proposals
// alternate between them, one metadata-sized record at a time, each waiting for its
// commit. Reported: p50/p99 of each and the ratios.
// Reproduce: go test -run '^$' -bench 'CommitLatencyRecord$' -benchtime 1000x ./quorum
func BenchmarkCommitLatencyRecord(b *testing.B) {
	type quorum struct {
		leader *Node
		w      *commitWaiter
		epoch  int32
		lat    []time.Duration
	}
	var qs [2]*quorum
	for i, fsys := range []raftlog.FS{nil, noRecordFlushFS{raftlog.OSFS()}} {
		leader, w, stop := benchClusterFS(b, batchings[0], fsys)
		defer stop()
		st, _ := leader.Status(context.Background())
		qs[i] = &quorum{leader: leader, w: w, epoch: st.Epoch}
	}
	rec := []raftlog.Record{{Value: make([]byte, 100)}}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := qs[i%2]
		start := time.Now()
		off, err := q.leader.Propose(context.Background(), q.epoch, rec)
		if err != nil {
			b.Fatal(err)
		}
		<-q.w.wait(off)
		q.lat = append(q.lat, time.Since(start))
	}
	b.StopTimer()
	with, without := qs[0].lat, qs[1].lat
	if len(with) == 0 || len(without) == 0 {
		return
	}
	for _, m := range []struct {
		name string
		lat  []time.Duration
	}{{"with", with}, {"without", without}} {
		b.ReportMetric(float64(percentile(m.lat, 50).Microseconds()), m.name+"-p50-us")
		b.ReportMetric(float64(percentile(m.lat, 99).Microseconds()), m.name+"-p99-us")
	}
	b.ReportMetric(float64(percentile(without, 50))/float64(percentile(with, 50)), "p50-without/with")
	b.ReportMetric(float64(percentile(without, 99))/float64(percentile(with, 99)), "p99-without/with")
}

// noRecordFlushFS is an FS whose raftlog.SyncedEndFile Datasync does nothing.
type noRecordFlushFS struct{ raftlog.FS }

func (f noRecordFlushFS) OpenFile(name string, flag int, perm fs.FileMode) (raftlog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != raftlog.SyncedEndFile {
		return file, err
	}
	return noDatasyncFile{file}, nil
}

type noDatasyncFile struct{ raftlog.File }

func (noDatasyncFile) Datasync() error { return nil }

func benchCommitLatency(b *testing.B, bt batching) {
	leader, w, stop := benchCluster(b, bt)
	defer stop()
	st, _ := leader.Status(context.Background())
	rec := []raftlog.Record{{Value: make([]byte, 100)}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		off, err := leader.Propose(context.Background(), st.Epoch, rec)
		if err != nil {
			b.Fatal(err)
		}
		<-w.wait(off)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	floor := measureFloor(b, 200)
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	b.ReportMetric(float64(floor.Microseconds()), "floor-p50-us")
	b.ReportMetric(float64(p50)/float64(floor), "p50/floor")
}

// BenchmarkCommitThroughput keeps many proposals in flight (one proposer that
// never waits for a commit; the leader batches them) and reports committed records
// per second, once per way of batching (batchings).
// Reproduce: go test -run '^$' -bench CommitThroughput -benchtime 200000x ./quorum
func BenchmarkCommitThroughput(b *testing.B) {
	for _, bt := range batchings {
		b.Run(bt.name, func(b *testing.B) { benchCommitThroughput(b, bt) })
	}
}

// BenchmarkCommitConcurrent: 64 proposers, each proposing one metadata-sized record
// and waiting for its commit before the next (as concurrent CreateTopics wait for
// their answers); reports committed proposals per second and the p50/p99 commit
// latency, once per way of batching (batchings).
// Reproduce: go test -run '^$' -bench CommitConcurrent -benchtime 20000x ./quorum
func BenchmarkCommitConcurrent(b *testing.B) {
	for _, bt := range batchings {
		b.Run(bt.name, func(b *testing.B) { benchCommitConcurrent(b, bt) })
	}
}

func benchCommitConcurrent(b *testing.B, bt batching) {
	const proposers = 64
	leader, w, stop := benchCluster(b, bt)
	defer stop()
	st, _ := leader.Status(context.Background())
	rec := []raftlog.Record{{Value: make([]byte, 100)}}
	lats := make([][]time.Duration, proposers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for p := range proposers {
		n := b.N / proposers
		if p < b.N%proposers {
			n++
		}
		wg.Go(func() {
			for range n {
				t0 := time.Now()
				off, err := leader.Propose(context.Background(), st.Epoch, rec)
				if err != nil {
					b.Error(err)
					return
				}
				<-w.wait(off)
				lats[p] = append(lats[p], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lats...)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(percentile(all, 50).Microseconds()), "p50-us")
	b.ReportMetric(float64(percentile(all, 99).Microseconds()), "p99-us")
}

func benchCommitThroughput(b *testing.B, bt batching) {
	leader, w, stop := benchCluster(b, bt)
	defer stop()
	st, _ := leader.Status(context.Background())
	const perProposal = 100
	recs := make([]raftlog.Record, perProposal)
	for i := range recs {
		recs[i] = raftlog.Record{Value: make([]byte, 100)}
	}
	b.ResetTimer()
	start := time.Now()
	var last int64
	for done := 0; done < b.N; done += perProposal {
		off, err := leader.Propose(context.Background(), st.Epoch, recs)
		if err != nil {
			b.Fatal(err)
		}
		last = off
	}
	<-w.wait(last)
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
}

// measureFloor is the p50 of n times (write 200 bytes + fsync) + (one loopback round trip).
func measureFloor(b *testing.B, n int) time.Duration {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	srv, _ := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "X", Addr: "127.0.0.1:0", Registry: protocol.NewRegistry()}}})
	srv.Start()
	defer srv.Close()
	cl := protocol.NewClient(protocol.ClientConfig{})
	defer cl.Close()
	addr := srv.Addr("X").String()
	buf := make([]byte, 200)
	var out []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		f.Write(buf)
		f.Sync()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(-1)
		if _, err := cl.Request(context.Background(), addr, req); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return percentile(out, 50)
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func benchLogger() *zap.Logger {
	if os.Getenv("QUORUM_BENCH_LOG") == "" {
		return zap.NewNop()
	}
	l, _ := zap.NewDevelopment()
	return l
}

// BenchmarkFailover measures, per iteration on a fresh 3-voter loopback quorum: the
// time from a crash of the leader (server and driver stopped, no resignation) to a new
// leader that has committed in its epoch, and the same after a graceful resignation
// (EndQuorumEpoch). A crash is detected by the followers' fetch timeout (1000 ms here),
// so "crash-elect-ms" subtracts that timeout: it is election plus first commit.
// Reproduce: go test -run '^$' -bench Failover -benchtime 5x ./quorum
func BenchmarkFailover(b *testing.B) {
	const fetchTimeoutMs = 1000
	var crash, graceful []time.Duration
	for i := 0; i < b.N; i++ {
		for _, mode := range []string{"crash", "graceful"} {
			c := newBenchQuorum(b, fetchTimeoutMs)
			old := c.waitLeader(b, -1)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if mode == "crash" {
				cancel() // no time to resign
			}
			c.servers[old].Close()
			c.nodes[old].Close(ctx)
			cancel()
			delete(c.nodes, old)
			c.waitLeader(b, old)
			d := time.Since(start)
			if mode == "crash" {
				crash = append(crash, d-fetchTimeoutMs*time.Millisecond)
			} else {
				graceful = append(graceful, d)
			}
			c.stop()
		}
	}
	b.ReportMetric(float64(percentile(crash, 50).Milliseconds()), "crash-elect-ms")
	b.ReportMetric(float64(percentile(graceful, 50).Milliseconds()), "graceful-ms")
}

type benchQuorum struct {
	nodes   map[int32]*Node
	servers map[int32]*protocol.Server
}

func newBenchQuorum(b *testing.B, fetchTimeoutMs int64) *benchQuorum {
	c := &benchQuorum{nodes: map[int32]*Node{}, servers: map[int32]*protocol.Server{}}
	addrs := map[int32]string{}
	for i, a := range freeAddrs(b, 3) {
		addrs[int32(i+1)] = a
	}
	for id := range addrs {
		store, err := raftlog.OpenFileStorage(b.TempDir(), raftlog.FileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := NewNode(NodeConfig{
			Raft: Config{NodeID: id, Voters: []int32{1, 2, 3}, ElectionTimeoutMs: 100, FetchTimeoutMs: fetchTimeoutMs,
				ElectionBackoffMaxMs: 50, RequestTimeoutMs: 500, FetchMaxWaitMs: 200},
			Storage: store, VoterAddrs: addrs, ListenerName: "CONTROLLER",
		})
		if err != nil {
			b.Fatal(err)
		}
		srv := serveNode(b, n, addrs[id])
		c.nodes[id], c.servers[id] = n, srv
	}
	return c
}

// waitLeader polls (1 ms) for a leader other than exclude that committed in its epoch.
func (c *benchQuorum) waitLeader(b *testing.B, exclude int32) int32 {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for id, n := range c.nodes {
			if id == exclude {
				continue
			}
			st, _ := n.Status(context.Background())
			if st.Role == Leader && st.HighWatermark > st.EpochStartOffset {
				return id
			}
		}
		<-time.After(time.Millisecond)
	}
	b.Fatal("no leader")
	return -1
}

func (c *benchQuorum) stop() {
	for id, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n.Close(ctx)
		cancel()
		c.servers[id].Close()
	}
}
