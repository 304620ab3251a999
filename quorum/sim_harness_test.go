package quorum_test

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// The simulation harness: one event queue over a simulated clock drives every node,
// link and disk, so a seed replays exactly. Each node is the production quorum.Node
// (its step machine, through quorum.SimNode) on a simulated host (simHost: clock,
// network, flusher, snapshot writer) and its disk (simDisk): the production
// raftlog.FileStorage on a raftlog.CrashFS, which can crash inside any persist step. The harness delivers the events the production shell
// (node_shell.go) would: requests, answers, timeouts, timers, flush completions;
// after each it calls Settle, as the shell's loop does.

// errSimTimeout is what the host steps back for a request that got no answer in
// time, as the production host's roundTrip does after its context deadline.
var errSimTimeout = errors.New("sim: request timed out")

// errSimRefused is the answer to a request sent to a node that is down.
var errSimRefused = errors.New("sim: connection refused")

// errSimNoAddr fails a request to a node whose address the sender does not know.
var errSimNoAddr = errors.New("sim: no address")

// errSimNoPreVote fails a pre-vote to a peer without Vote v2.
var errSimNoPreVote = errors.New("sim: peer does not support pre-vote")

// serves is the highest version of API key this node serves (math.MaxInt16: ours).
func (n *simNode) serves(key int16) int16 {
	if v, ok := n.maxVersion[key]; ok {
		return v
	}
	return math.MaxInt16
}

type event struct {
	atMs int64
	seq  uint64
	fn   func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].atMs != q[j].atMs {
		return q[i].atMs < q[j].atMs
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// linkFaults are the faults of one directed link.
type linkFaults struct {
	cut       bool
	dropPct   int // per mille
	dupPct    int // per mille
	delayMs   int64
	jitterMs  int64
	slowPct   int   // per mille of messages that take slowMs extra (reordering)
	slowMs    int64 // extra delay of a slow message
	dropCount int
}

// inReq is an inbound request the node will answer: who asked, under which id, in
// which of its lives, and the handler's encode half for the answer.
type inReq struct {
	from     int32
	reqID    uint64
	fromLife int
	encode   func(quorum.Message) []byte
}

// outReq is a request the host waits on: exactly one answer (the real one or a
// synthesized failure) is stepped back into the node. key and version are what it
// went on the wire as.
type outReq struct {
	req          quorum.Message
	key, version int16
}

// simFlush is the flusher's fsync in flight.
type simFlush struct {
	work func() error
	atMs int64
}

// simNode is one simulated process with its disk.
type simNode struct {
	s     *sim
	id    int32
	voter bool
	cfg   quorum.Config
	node  *quorum.SimNode
	disk  *simDisk

	down bool
	// life counts restarts; events of an earlier life are ignored.
	life int
	// pausedUntil: the process is stopped (GC pause, SIGSTOP) until then.
	pausedUntil int64
	// lag is the disk time the current event spent so far; busyUntil is when the
	// last event's disk work ended. Events wait in queue meanwhile.
	lag, busyUntil int64
	queue          []func()
	inbound        map[uint64]inReq
	out            map[uint64]outReq
	answered       map[uint64]outReq // requests answered in this life, for copies of answers
	flush          *simFlush
	tickGen        uint64
	// The node's clock: clockBase + simulated time * clockRate / 1000 (skew and drift).
	clockBase, clockRate int64
	// crashAfterGrant: crash right after the next vote this node grants.
	crashAfterGrant bool
	// maxVersion caps the versions this node serves per API key (an older peer on
	// the wire; nil: the newest).
	maxVersion map[int16]int16
	// Dynamic seeds (sim_dynamic_test.go): gen counts the disks replaced, dirID is the
	// directory id of the current one, bootstrap its controller.quorum.bootstrap.servers.
	gen       int
	dirID     [16]byte
	bootstrap []string
	// disks are the node's disks by generation; all but the last were replaced and
	// keep what they held durably when lost.
	disks []*simDisk
	// downSince is when the node last went down.
	downSince int64

	// Per-life observations for the invariants.
	appliedNext int64
	lastHW      int64
	checkedTo   int64 // entries below it were compared with the committed log
	leadEpoch   int32 // epoch this life leads, -1
	leadEnd     int64 // log end last seen while leading leadEpoch
	// dirty: the node ran since the last invariant check (only its state can change).
	dirty bool
}

func (n *simNode) busy(nowMs int64) bool {
	return n.down || nowMs < n.pausedUntil || nowMs < n.busyUntil
}

// clock is the node's clock at simulated time t.
func (n *simNode) clock(t int64) int64 { return n.clockBase + t*n.clockRate/1000 }

// simTime is the first simulated time at which the node's clock reads at least c.
func (n *simNode) simTime(c int64) int64 {
	return (max(c-n.clockBase, 0)*1000 + n.clockRate - 1) / n.clockRate
}

// simHost is the NodeHost of one life of a node.
type simHost struct {
	s    *sim
	n    *simNode
	life int
}

func (h *simHost) alive() bool { return h.n.life == h.life && !h.n.down && !h.n.disk.crashed }

func (h *simHost) NowMs() int64 { return h.n.clock(h.s.nowMs + h.n.lag) }

func (h *simHost) Now() time.Time { return time.UnixMilli(h.NowMs()) }

func (h *simHost) SendRequest(m quorum.Message, to int32, addr string, timeoutMs int64) {
	s, n := h.s, h.n
	if !h.alive() {
		return // the process died inside this event: nothing more leaves it
	}
	m.To = to
	s.chk.checkSend(s, n, m)
	life, id := h.life, m.RequestID
	// The request goes where addr points, as the production host's client dials it
	// (to is AnyVoter for a bootstrap server); no address fails it.
	dst, ok := simAddrID(addr)
	if !ok || s.nodes[dst] == nil {
		s.at(s.nowMs+n.lag+1, func() {
			s.nodeEvent(n, life, func() {
				s.tracef(n.id, "no address for node %d (%q)", to, addr)
				n.node.Response(failedResponse(m, errSimNoAddr))
			})
		})
		return
	}
	peer := s.nodes[dst]
	if m.Vote != nil && m.Vote.PreVote && peer.serves(52) < 2 {
		// As the production host does after ApiVersions: a peer without Vote v2
		// cannot answer a pre-vote; the core campaigns for real instead.
		s.at(s.nowMs+n.lag+1, func() {
			s.nodeEvent(n, life, func() {
				s.tracef(n.id, "peer %d has no Vote v2: no pre-vote", to)
				n.node.SetPeerSupportsPreVote(to, false)
				n.node.Response(failedResponse(m, errSimNoPreVote))
			})
		})
		return
	}
	key, version, body := n.node.WireRequest(m, peer.serves)
	n.out[m.RequestID] = outReq{req: m, key: key, version: version}
	s.at(s.nowMs+n.lag+timeoutMs, func() {
		s.nodeEvent(n, life, func() {
			if o, ok := n.out[id]; ok {
				delete(n.out, id)
				n.node.Response(failedResponse(o.req, errSimTimeout))
			}
		})
	})
	s.transmit(n, dst, m, func(m quorum.Message, dup bool) { s.arriveRequest(dst, m, key, version, body, life, dup) })
}

func (h *simHost) Reply(m quorum.Message) {
	s, n := h.s, h.n
	if !h.alive() {
		return
	}
	in, ok := n.inbound[m.RequestID]
	if !ok {
		s.fail("node %d answers unknown inbound request %d: %s", n.id, m.RequestID, m)
		return
	}
	delete(n.inbound, m.RequestID)
	m.From, m.To, m.RequestID = n.id, in.from, in.reqID
	s.chk.checkSend(s, n, m)
	if r := m.VoteResp; r != nil && r.VoteGranted && !r.PreVote && n.crashAfterGrant {
		n.crashAfterGrant = false
		life := n.life
		s.at(s.nowMs+n.lag+1, func() {
			if n.life == life && !n.down && !s.healed {
				s.faultf(n.id, "CRASH right after granting a vote")
				s.crash(n)
			}
		})
	}
	body := in.encode(m)
	s.transmit(n, m.To, m, func(m quorum.Message, dup bool) { s.arriveResponse(m, body, in.fromLife, dup) })
}

func (h *simHost) StartFlush(work func() error) {
	s, n := h.s, h.n
	f := &simFlush{work: work, atMs: s.nowMs + n.lag + n.disk.fsyncLatency()}
	n.flush = f
	life := h.life
	s.at(f.atMs, func() {
		s.nodeEvent(n, life, func() {
			if n.flush != f {
				return // WaitFlush took it
			}
			n.flush = nil
			n.node.FlushDone(f.work())
		})
	})
}

func (h *simHost) WaitFlush() error {
	n := h.n
	f := n.flush
	if f == nil {
		h.s.fail("node %d waits for a flush that is not in flight", n.id)
		return errSimCrashed
	}
	n.flush = nil
	n.lag = max(n.lag, f.atMs-h.s.nowMs)
	return f.work()
}

// StartRecord runs the durable-end record write one fsync later, as an event of
// this life (a crash before drops it: the record trails, as after a real crash).
func (h *simHost) StartRecord(work func() error, done func(error)) {
	s, n := h.s, h.n
	life := h.life
	s.at(s.nowMs+n.lag+n.disk.fsyncLatency(), func() {
		s.nodeEvent(n, life, func() { done(work()) })
	})
}

func (h *simHost) StartSnapshotWrite(work func(pace func(int) error) error, done func(error), abandoned func()) {
	s, n := h.s, h.n
	life := h.life
	s.at(s.nowMs+n.lag+n.disk.fsyncLatency(), func() {
		if n.life != life || n.down {
			abandoned()
			return
		}
		s.nodeEvent(n, life, func() { done(work(func(int) error { return nil })) })
	})
}

// failedResponse is the failure the host steps back for req, as the production
// host's roundTrip does.
func failedResponse(req quorum.Message, cause error) quorum.Message {
	resp := quorum.Message{From: req.To, To: req.From, RequestID: req.RequestID, Err: cause}
	switch {
	case req.Vote != nil:
		resp.VoteResp = &quorum.VoteResponse{PreVote: req.Vote.PreVote, LeaderID: -1, LeaderEpoch: -1}
	case req.BeginEpoch != nil:
		resp.BeginEpochResp = &quorum.BeginQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case req.EndEpoch != nil:
		resp.EndEpochResp = &quorum.EndQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case req.Fetch != nil:
		resp.FetchResp = &quorum.FetchResponse{LeaderID: -1, LeaderEpoch: -1, HighWatermark: -1}
	case req.FetchSnapshot != nil:
		resp.FetchSnapshotResp = &quorum.FetchSnapshotResponse{LeaderID: -1, LeaderEpoch: -1}
	}
	return resp
}

// simListener is the state machine on a simulated node: it checks the commit stream.
type simListener struct {
	s *sim
	n *simNode
}

func (l simListener) HandleCommit(bs []raftlog.Batch)          { l.s.chk.checkCommitted(l.s, l.n, bs) }
func (l simListener) HandleLeaderChange(quorum.LeaderAndEpoch) {}

// HandleLoadSnapshot replaces the state with a snapshot (at start, or downloaded).
func (l simListener) HandleLoadSnapshot(snap quorum.Snapshot) {
	l.s.stats.snapshotLoads++
	l.s.tracef(l.n.id, "load snapshot %+v", snap.ID)
	l.s.chk.checkLoadedSnapshot(l.s, l.n, snap)
	l.n.appliedNext = max(l.n.appliedNext, snap.ID.EndOffset)
	l.n.checkedTo = max(l.n.checkedTo, snap.ID.EndOffset)
}

// simStats are one run's counts.
type simStats struct {
	seeds, events, crashes, elections, committed    int
	truncations, truncatedBatches                   int
	persistCrashes                                  [numDiskOps]int
	afterCall, fsyncErrors, pauses                  int
	snapshotLoads, snapshotDownloads, snapshotFiles int
	maxLivenessMs, sumLivenessMs                    int64
	damage                                          simDamageStats
	// Dynamic seeds: how many, the voter changes committed, the distinct voter sets
	// (summed over seeds, and the most in one), the changes asked for, accepted and
	// answered as committed by the leader's Node, and the disks replaced.
	dynamic, voterChanges, voterSets, maxVoterSets int
	changeAttempts, changesAccepted, changesAcked  int
	diskReplaced                                   int
	// stableWindows counts the NoDisruption windows, outsideAtHeal the nodes outside
	// the leader's voter set that ran through them.
	stableWindows, outsideAtHeal int
}

func (a *simStats) add(b simStats) {
	a.seeds++
	a.events += b.events
	a.crashes += b.crashes
	a.elections += b.elections
	a.committed += b.committed
	a.truncations += b.truncations
	a.truncatedBatches += b.truncatedBatches
	for i := range a.persistCrashes {
		a.persistCrashes[i] += b.persistCrashes[i]
	}
	a.afterCall += b.afterCall
	a.fsyncErrors += b.fsyncErrors
	a.pauses += b.pauses
	a.snapshotLoads += b.snapshotLoads
	a.snapshotDownloads += b.snapshotDownloads
	a.snapshotFiles += b.snapshotFiles
	a.maxLivenessMs = max(a.maxLivenessMs, b.maxLivenessMs)
	a.sumLivenessMs += b.sumLivenessMs
	a.damage.add(b.damage)
	a.dynamic += b.dynamic
	a.voterChanges += b.voterChanges
	a.voterSets += b.voterSets
	a.maxVoterSets = max(a.maxVoterSets, b.maxVoterSets)
	a.changeAttempts += b.changeAttempts
	a.changesAccepted += b.changesAccepted
	a.changesAcked += b.changesAcked
	a.diskReplaced += b.diskReplaced
	a.stableWindows += b.stableWindows
	a.outsideAtHeal += b.outsideAtHeal
}

func (a simStats) inPersist() int {
	t := 0
	for _, c := range a.persistCrashes {
		t += c
	}
	return t
}

func (a simStats) String() string {
	var by []string
	for op, c := range a.persistCrashes {
		by = append(by, fmt.Sprintf("%s %d", diskOpNames[op], c))
	}
	return fmt.Sprintf("%d events, %d elections (leader epochs), %d truncations (%d batches cut), "+
		"%d snapshots written, %d fetched, %d loads, "+
		"%d crashes (%d inside a persist: %s; %d of these right after the call, the rest inside one of its file system calls), %d fsync errors, %d pauses, %d committed batches; "+
		"recovery after heal max %d ms, mean %d ms; %s; "+
		"%d dynamic quorums: %d voter changes committed (%d asked, %d accepted, %d acknowledged committed), "+
		"%d voter sets (at most %d in one run), %d disks replaced; %d NoDisruption windows with %d nodes outside the voter set running",
		a.events, a.elections, a.truncations, a.truncatedBatches, a.snapshotFiles, a.snapshotDownloads, a.snapshotLoads,
		a.crashes+a.inPersist(), a.inPersist(), strings.Join(by, ", "), a.afterCall, a.fsyncErrors, a.pauses, a.committed,
		a.maxLivenessMs, a.sumLivenessMs/int64(max(a.seeds, 1)), a.damage,
		a.dynamic, a.voterChanges, a.changeAttempts, a.changesAccepted, a.changesAcked, a.voterSets, a.maxVoterSets, a.diskReplaced,
		a.stableWindows, a.outsideAtHeal)
}

// sim is one seeded run.
type sim struct {
	seed  uint64
	rng   *rand.Rand
	nowMs int64
	seq   uint64
	q     eventQueue
	nodes map[int32]*simNode
	ids   []int32
	// voters is the static voter set, f the number of voters that may fail.
	voters []int32
	f      int
	// whitebox enables the checks that look inside the driver (persist before send,
	// flushed is durable, the log mirrors the core's); the end-to-end invariants
	// always run.
	whitebox bool

	links map[[2]int32]*linkFaults
	// fsyncMs/stallPct/stallMs shape disk latency: most fsyncs take up to fsyncMs, a few
	// stall for up to stallMs (disk lag).
	fsyncMs  int64
	stallPct int
	stallMs  int64
	// dupRespPct lets a duplicated response reach the node a second time, past the
	// host's one-answer-per-request pairing (a stricter world than TCP).
	dupRespPct int
	// baseDrop and baseDup (per mille) are the seed's background loss and duplication.
	baseDrop, baseDup int
	proposeEveryMs    int64
	// timeScale divides the Raft timeouts (1: Kafka's defaults).
	timeScale int64
	// retentionBytes is metadata.max.retention.bytes: small, so that a snapshot moves
	// the log start and lagging followers must fetch it.
	retentionBytes int64
	// healed: the liveness phase began; no fault fires any more.
	healed bool
	// calm: a setup phase (the upgrade of a static quorum) in which no open
	// crashes: every node must come up for it to end.
	calm bool
	// noDamage: the chaos schedule damages no disk (a test injects its own).
	noDamage bool
	stats    simStats

	chk *checker
	// dyn is the voter-change state of a dynamic seed (nil: a static voter set).
	dyn   *dynState
	trace traceRing
	// faults is the fault schedule (crashes, restarts, pauses, link changes) for the
	// report: the event trace alone often starts after the fault that matters.
	faults traceRing
	err    error
	// proposals counts proposed records (their values are unique).
	proposals int
}

func (s *sim) at(atMs int64, fn func()) {
	s.seq++
	heap.Push(&s.q, &event{atMs: max(atMs, s.nowMs), seq: s.seq, fn: fn})
}

// fail records the first violation; the run stops at the next event boundary.
func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
		s.tracef(-1, "VIOLATION: %v", s.err)
		for _, id := range s.ids {
			s.tracef(id, "%s", s.nodes[id].describe(s.nowMs))
		}
	}
}

// failWB records a violation of a white-box check, when those are enabled.
func (s *sim) failWB(format string, args ...any) {
	if s.whitebox {
		s.fail(format, args...)
	}
}

// describe renders the node's state for the failure report.
func (n *simNode) describe(nowMs int64) string {
	d := n.disk
	if n.down || n.node == nil {
		return fmt.Sprintf("down or starting; durable log [%d, %d), state %+v", d.start, d.durEnd(), d.state)
	}
	st := n.node.Status()
	return fmt.Sprintf("%s epoch=%d leader=%d voted=%d voter=%t voters=%v leo=%d flushed=%d hw=%d applied=%d durable=%d state=%+v paused=%t flushing=%t queued=%d waiting=%d next-deadline=%d",
		st.Role, st.Epoch, st.LeaderID, st.VotedID, st.IsVoter, st.VoterIDs, st.LogEndOffset, st.FlushedEndOffset, st.HighWatermark,
		n.appliedNext, d.durEnd(), d.state, nowMs < n.pausedUntil, n.flush != nil, len(n.queue), len(n.out), n.node.NextDeadlineMs())
}

// simMaxEvents bounds one run's events: a run takes well under a million.
const simMaxEvents = 3_000_000

// runUntil executes events up to endMs (or until stop returns true or a violation),
// checking every invariant after every event.
func (s *sim) runUntil(endMs int64, stop func() bool) {
	for s.err == nil && len(s.q) > 0 && s.q[0].atMs <= endMs {
		if s.seq > simMaxEvents {
			s.fail("Runaway: more than %d events by %d ms (a loop that does not let simulated time pass)", simMaxEvents, s.nowMs)
			return
		}
		e := heap.Pop(&s.q).(*event)
		s.nowMs = e.atMs
		e.fn()
		if s.err == nil {
			s.chk.check(s)
		}
		if s.err == nil && s.dyn != nil && len(s.dyn.waiting)+len(s.dyn.ackedWait) > 0 {
			s.pollVoterChanges()
		}
		if stop != nil && s.err == nil && stop() {
			return
		}
	}
	s.nowMs = max(s.nowMs, endMs)
}

func (s *sim) addNode(id int32) error {
	t := s.timeScale // Kafka's defaults, or all timers scaled down for more elections
	cfg := quorum.Config{
		NodeID: id, Voters: s.voters, ClusterID: "sim",
		ElectionTimeoutMs: 1000 / t, FetchTimeoutMs: 2000 / t, ElectionBackoffMaxMs: 1000 / t,
		RequestTimeoutMs: 2000 / t, RetryBackoffMs: 20, FetchMaxWaitMs: int32(500 / t),
		AppendLingerMs: []int64{quorum.AppendLingerMsNone, 5, 25}[s.rng.IntN(3)],
		// A small FetchMaxBytes (about one batch per answer; FetchSnapshot chunks are
		// that small too) makes followers lag the leader's
		// HW, which exercises hw = min(leader hw, LEO).
		FetchMaxBytes: []int32{100, 300, 0}[s.rng.IntN(3)],
	}
	n := &simNode{
		s: s, id: id, voter: slices.Contains(s.voters, id), cfg: cfg,
		down:      true,
		clockBase: 1_760_000_000_000, clockRate: 1000,
	}
	if s.rng.IntN(3) == 0 {
		// Clock skew: an offset of up to a minute and a drift of up to 5%.
		n.clockBase += s.rng.Int64N(120_000) - 60_000
		n.clockRate = 950 + s.rng.Int64N(101)
	}
	if s.dyn == nil && s.rng.IntN(4) == 0 {
		// An older peer on the wire (not in a dynamic quorum: KIP-853 needs Fetch v17,
		// Vote v1 and friends to carry directory ids): lower versions of the raft RPCs (Fetch v12+,
		// which carries LastFetchedEpoch). Vote stays at v2 unless -sim.oldvote: without
		// pre-vote (v0-v1) a voter with a stale log can keep every election from
		// succeeding (see simOldVote).
		vote := 2
		if *simOldVote {
			vote = s.rng.IntN(3)
		}
		n.maxVersion = map[int16]int16{
			1: int16(12 + s.rng.IntN(6)), 52: int16(vote), 53: int16(s.rng.IntN(2)),
			54: int16(s.rng.IntN(2)), 59: int16(s.rng.IntN(2)),
		}
		s.faultf(id, "OLDER PEER: serves versions %v", n.maxVersion)
	}
	n.disk = newSimDisk(s, n)
	n.disks = []*simDisk{n.disk}
	s.nodes[id] = n
	s.ids = append(s.ids, id)
	if s.dyn != nil {
		s.dynConfig(n)
		if s.dyn.formatted && slices.Contains(s.voters, id) {
			if err := s.formatDisk(n); err != nil {
				return fmt.Errorf("format node %d: %w", id, err)
			}
		}
	}
	return s.start(n)
}

// start boots a new life of n: the production Node on what its disk holds.
func (s *sim) start(n *simNode) error {
	n.life++
	n.down = false
	n.disk.crashed, n.disk.failed, n.disk.failSync = false, nil, false
	n.queue, n.inbound, n.out, n.flush = nil, map[uint64]inReq{}, map[uint64]outReq{}, nil
	n.answered = map[uint64]outReq{}
	n.lag, n.busyUntil, n.pausedUntil = 0, 0, 0
	raftCfg := n.cfg
	raftCfg.Rand = rand.New(rand.NewPCG(s.seed, uint64(n.id)<<32|uint64(n.life)))
	logger := zap.New(traceCore{s: s, id: n.id})
	addrs := map[int32]string{}
	for _, v := range n.cfg.Voters {
		addrs[v] = simAddr(v)
	}
	node, err := quorum.NewSimNode(quorum.NodeConfig{
		Raft: raftCfg, Storage: n.disk, VoterAddrs: addrs, BootstrapAddrs: n.bootstrap, ListenerName: "CONTROLLER", Logger: logger,
		RetentionBytes: s.retentionBytes,
	}, &simHost{s: s, n: n, life: n.life})
	if err != nil {
		n.down = true
		if n.disk.crashed {
			return nil // it died inside a persist while starting: stays down
		}
		if !n.disk.damaged || !refusedOnDamage(err) {
			return err
		}
		// The node refused to start on its damaged disk: the operator runs
		// `kraftd storage recover` and starts it again.
		s.stats.damage.detected++
		s.faultf(n.id, "start refused: %v", err)
		n.disk.damaged = false
		n.disk.repair()
		return s.start(n)
	}
	n.disk.damaged = false
	n.disk.lostVoters = nil
	n.node = node
	node.Register(simListener{s: s, n: n})
	st := node.Status()
	n.appliedNext, n.lastHW, n.checkedTo = node.Applied(), st.HighWatermark, node.Applied()
	n.leadEpoch, n.leadEnd = -1, -1
	s.faultf(n.id, "start life %d: state %+v log [%d, %d)", n.life, n.disk.state, n.disk.start, n.disk.curEnd())
	s.runEvent(n, node.Begin)
	return nil
}

// nodeEvent runs fn as an event of n's life: now, or once n is neither paused nor
// busy with its disk (the process handles one event at a time).
func (s *sim) nodeEvent(n *simNode, life int, fn func()) {
	if n.down || n.life != life || s.err != nil {
		return
	}
	if n.busy(s.nowMs) || len(n.queue) > 0 {
		n.queue = append(n.queue, fn)
		s.wake(n)
		return
	}
	s.runEvent(n, fn)
}

// wake drains n's queue once it is free.
func (s *sim) wake(n *simNode) {
	life := n.life
	s.at(max(n.pausedUntil, n.busyUntil, s.nowMs), func() {
		if n.life != life || n.down {
			return
		}
		for s.err == nil && !n.down && len(n.queue) > 0 && !n.busy(s.nowMs) {
			fn := n.queue[0]
			n.queue = n.queue[1:]
			s.runEvent(n, fn)
		}
		if !n.down && len(n.queue) > 0 && n.busy(s.nowMs) {
			s.wake(n)
		}
	})
}

// runEvent is one turn of the production shell's loop: the event, then Settle.
func (s *sim) runEvent(n *simNode, fn func()) {
	n.dirty = true
	n.lag = 0
	fn()
	if !n.disk.crashed && n.node.Fatal() == nil {
		n.node.Settle()
	}
	switch err := n.node.Fatal(); {
	case n.disk.crashed:
		s.kill(n)
		return
	case n.disk.failed != nil && err == nil:
		s.fail("FsyncErrorStops: node %d goes on after fsync failed (%v)", n.id, n.disk.failed)
		return
	case err != nil && n.disk.failed == nil:
		s.fail("node %d stopped: %v", n.id, err)
		return
	case err != nil:
		// The node stopped after a failed fsync, as it must: the process exits, and
		// what the page cache held may or may not have reached the disk.
		s.faultf(n.id, "stopped after the failed fsync: %v", err)
		n.disk.powerLoss()
		s.kill(n)
		return
	}
	n.busyUntil = s.nowMs + n.lag
	s.armTimer(n)
}

// kill ends n's current life; its disk keeps what survived.
func (s *sim) kill(n *simNode) {
	if n.node != nil {
		n.node.Stopped()
	}
	n.down, n.node, n.queue, n.inbound, n.out, n.flush = true, nil, nil, nil, nil, nil
	n.pausedUntil = 0
	n.downSince = s.nowMs
}

// crash kills n between events: a power loss.
func (s *sim) crash(n *simNode) {
	if n.down {
		return
	}
	s.stats.crashes++
	n.disk.powerLoss()
	s.faultf(n.id, "CRASH: durable log [%d, %d)", n.disk.start, n.disk.durEnd())
	s.kill(n)
}

func (s *sim) restart(n *simNode) {
	if !n.down {
		return
	}
	if err := s.start(n); err != nil {
		if refusedOnDamage(err) {
			// start repairs a disk the schedule damaged; this one was not.
			s.fail("CrashIsNotDamage: node %d refuses to restart with no damage since its last start (or again after the repair): %v", n.id, err)
			return
		}
		s.fail("restart node %d: %v", n.id, err)
	}
}

func (s *sim) pause(n *simNode, ms int64) {
	if n.down {
		return
	}
	s.stats.pauses++
	n.pausedUntil = max(n.pausedUntil, s.nowMs+ms)
	s.faultf(n.id, "PAUSE for %d ms", ms)
}

func (s *sim) armTimer(n *simNode) {
	d := n.node.NextDeadlineMs()
	n.tickGen++
	if d == 1<<63-1 {
		return
	}
	gen, life := n.tickGen, n.life
	s.at(n.simTime(d), func() {
		if n.life == life && n.tickGen == gen && !n.down {
			s.nodeEvent(n, life, func() { n.node.Tick() })
		}
	})
}

// transmit puts m on the link from n, with that link's faults; arrive runs when it
// gets there (twice for a duplicate).
func (s *sim) transmit(n *simNode, dst int32, m quorum.Message, arrive func(m quorum.Message, dup bool)) {
	l := s.link(m.From, dst)
	switch {
	case l.cut:
		s.traceMsg(n.id, "lost (cut)", m)
		return
	case s.rng.IntN(1000) < l.dropPct:
		s.traceMsg(n.id, "lost (drop)", m)
		return
	}
	s.traceMsg(n.id, "send", m)
	copies := 1
	if s.rng.IntN(1000) < l.dupPct {
		copies = 2
	}
	for i := range copies {
		d := l.delayMs + s.rng.Int64N(l.jitterMs+1)
		if s.rng.IntN(1000) < l.slowPct {
			d += s.rng.Int64N(l.slowMs + 1)
		}
		s.at(s.nowMs+n.lag+d, func() {
			if s.link(m.From, dst).cut {
				s.traceMsg(dst, "lost in flight (cut)", m)
				return
			}
			arrive(m, i > 0)
		})
	}
}

func (s *sim) link(from, to int32) *linkFaults {
	l := s.links[[2]int32{from, to}]
	if l == nil {
		l = &linkFaults{delayMs: 1, jitterMs: 2}
		s.links[[2]int32{from, to}] = l
	}
	return l
}

// arriveRequest delivers a request's bytes at its target, where its listener's
// handler decodes them, or refuses it if the target is down.
func (s *sim) arriveRequest(dst int32, m quorum.Message, key, version int16, body []byte, fromLife int, dup bool) {
	n := s.nodes[dst]
	if n.down {
		if !dup {
			from := s.nodes[m.From]
			s.at(s.nowMs+1, func() {
				s.nodeEvent(from, fromLife, func() {
					if o, ok := from.out[m.RequestID]; ok {
						delete(from.out, m.RequestID)
						from.node.Response(failedResponse(o.req, errSimRefused))
					}
				})
			})
		}
		return
	}
	s.nodeEvent(n, n.life, func() {
		in, encode, err := n.node.ServeWire(key, version, body)
		if err != nil {
			s.fail("Wire: node %d cannot serve %s from %d: %v", n.id, m, m.From, err)
			return
		}
		if in.From != m.From {
			s.fail("Wire: node %d decodes %s as from %d", n.id, m, in.From)
		}
		s.traceMsg(n.id, "step", in)
		id := n.node.Request(in)
		n.inbound[id] = inReq{from: m.From, reqID: m.RequestID, fromLife: fromLife, encode: encode}
	})
}

// arriveResponse delivers an answer's bytes to the life of the node that asked, which
// reads them as its client does.
func (s *sim) arriveResponse(m quorum.Message, body []byte, life int, dup bool) {
	n := s.nodes[m.To]
	s.nodeEvent(n, life, func() {
		o, waiting := n.out[m.RequestID]
		delete(n.out, m.RequestID)
		if !waiting && !(dup && s.rng.IntN(1000) < s.dupRespPct) {
			return // the host already answered this request (timeout) or it is a copy
		}
		if waiting {
			n.answered[m.RequestID] = o
		} else if o, waiting = n.answered[m.RequestID]; !waiting {
			return // a copy of the answer to a request that timed out
		}
		resp, err := quorum.ReadWireResponse(o.req, o.key, o.version, body)
		if err != nil {
			s.fail("Wire: node %d cannot read the answer to %s: %v", n.id, o.req, err)
			return
		}
		s.traceMsg(n.id, "step", resp)
		n.node.Response(resp)
	})
}

// propose appends a uniquely valued record on n if it leads and is idle.
func (s *sim) propose(n *simNode) (base int64, epoch int32, ok bool) {
	if n.busy(s.nowMs) || len(n.queue) > 0 || n.node.Status().Role != quorum.Leader {
		return 0, 0, false
	}
	s.proposals++
	val := fmt.Sprintf("seed%d-p%d", s.seed, s.proposals)
	var err error
	s.runEvent(n, func() {
		base, epoch, err = n.node.Propose([]raftlog.Record{{Value: []byte(val)}})
	})
	if err != nil {
		s.fail("node %d Propose as leader: %v", n.id, err)
		return 0, 0, false
	}
	s.tracef(n.id, "propose %s at %d epoch %d", val, base, epoch)
	return base, epoch, true
}

// leader is the live node leading the highest epoch, or nil.
func (s *sim) leader() *simNode {
	var best *simNode
	var bestEpoch int32 = -1
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.down {
			continue
		}
		if st := n.node.Status(); st.Role == quorum.Leader && st.Epoch > bestEpoch {
			best, bestEpoch = n, st.Epoch
		}
	}
	return best
}

func end(bs []raftlog.Batch) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].NextOffset()
}

// batchAt is the index of the batch holding offset in bs (contiguous from 0), or -1.
func batchAt(bs []raftlog.Batch, offset int64) int {
	if n := len(bs); n > 0 && bs[n-1].BaseOffset <= offset {
		if offset <= bs[n-1].LastOffset {
			return n - 1
		}
		return -1
	}
	i, _ := slices.BinarySearchFunc(bs, offset, func(b raftlog.Batch, off int64) int {
		switch {
		case b.LastOffset < off:
			return -1
		case b.BaseOffset > off:
			return 1
		}
		return 0
	})
	if i < len(bs) && bs[i].BaseOffset <= offset && offset <= bs[i].LastOffset {
		return i
	}
	return -1
}

// traceRing keeps the last events for the failure report; formatting is deferred.
type traceRing struct {
	ents [256]traceEnt
	n    int
}

type traceEnt struct {
	atMs  int64
	node  int32
	what  string
	msg   quorum.Message // To/From zero and no payload when not a message
	isMsg bool
}

func (t *traceRing) add(e traceEnt) {
	t.ents[t.n%len(t.ents)] = e
	t.n++
}

func (t *traceRing) String() string {
	var b strings.Builder
	for i := max(0, t.n-len(t.ents)); i < t.n; i++ {
		e := t.ents[i%len(t.ents)]
		fmt.Fprintf(&b, "%8d ms  [%2d] %s", e.atMs, e.node, e.what)
		if e.isMsg {
			b.WriteString(" " + e.msg.String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *sim) tracef(node int32, format string, args ...any) {
	s.trace.add(traceEnt{atMs: s.nowMs, node: node, what: fmt.Sprintf(format, args...)})
}

// faultf records an injected fault in both the trace and the fault schedule.
func (s *sim) faultf(node int32, format string, args ...any) {
	e := traceEnt{atMs: s.nowMs, node: node, what: fmt.Sprintf(format, args...)}
	s.trace.add(e)
	s.faults.add(e)
}

func (s *sim) traceMsg(node int32, what string, m quorum.Message) {
	s.trace.add(traceEnt{atMs: s.nowMs, node: node, what: what, msg: m, isMsg: true})
}

// traceCore sends the node's log lines (info and above) into the trace.
type traceCore struct {
	s  *sim
	id int32
}

func (c traceCore) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (c traceCore) With([]zapcore.Field) zapcore.Core { return c }
func (c traceCore) Sync() error                       { return nil }
func (c traceCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}
func (c traceCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	c.s.trace.add(traceEnt{atMs: c.s.nowMs, node: c.id, what: "node: " + e.Message})
	return nil
}

// snapshot makes n write a snapshot of the committed state it applied, as the
// controller does every so many records.
func (s *sim) snapshot(n *simNode) {
	if n.down || n.busy(s.nowMs) || len(n.queue) > 0 || n.appliedNext == 0 {
		return
	}
	vals, epoch, ok := s.chk.committedValues(n.appliedNext)
	if !ok {
		return
	}
	if latest, ok := n.node.LatestSnapshot(); ok && latest.EndOffset >= n.appliedNext {
		return
	}
	id := raftlog.SnapshotID{EndOffset: n.appliedNext, Epoch: epoch}
	recs := make([]raftlog.Record, len(vals))
	for i, v := range vals {
		recs[i] = raftlog.Record{Value: v}
	}
	s.faultf(n.id, "SNAPSHOT %+v (%d records)", id, len(recs))
	s.runEvent(n, func() {
		if _, err := n.node.WriteSnapshot(id, n.clock(s.nowMs), quorum.SnapshotRecords(recs)); err != nil {
			s.tracef(n.id, "snapshot %+v refused: %v", id, err)
		}
	})
}
