package quorum_test

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// The simulation harness: one event queue over a simulated clock drives every node,
// link and disk, so a seed replays exactly. Each node is driven the way node.go drives
// a Raft (Ready, persist, MessagesAfterPersist, Committed, Advance; nothing stepped
// in between), except that the fsync takes simulated time and a crash during it loses
// whatever it had not made durable.

// errSimTimeout is what the simulated driver steps back for a request that got no
// answer in time, as node.go's roundTrip does after its context deadline.
var errSimTimeout = errors.New("sim: request timed out")

// errSimRefused is the answer to a request sent to a node that is down.
var errSimRefused = errors.New("sim: connection refused")

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

// outReq is a request the simulated driver waits on: exactly one answer (the real one
// or a synthesized failure) is stepped back into the core.
type outReq struct {
	req quorum.Message
}

// simNode is one simulated process with its disk.
type simNode struct {
	id    int32
	voter bool
	cfg   quorum.Config
	raft  *quorum.Raft
	store *raftlog.MemStorage
	// store is a raftlog.MemStorage in a quarter of the seeds (cross-checking the
	// harness's crash model at every restart), nil in the rest.
	// cur mirrors the storage's (page-cache) log, durable what survives a crash.
	cur, durable []raftlog.Batch
	// state is the durable quorum-state file.
	state raftlog.QuorumState

	down bool
	// life counts restarts; events of an earlier life are ignored.
	life        int
	pausedUntil int64
	// persisting is the Ready whose fsync is in flight; nothing is stepped meanwhile.
	persisting *quorum.Ready
	inbox      []quorum.Message
	out        map[uint64]outReq
	tickGen    uint64

	// Per-life observations for the invariants.
	appliedNext int64
	lastHW      int64
	checkedTo   int64 // entries below it were compared with the committed log
	leadEpoch   int32 // epoch this life leads, -1
	leadEnd     int64 // log end last seen while leading leadEpoch
	// crashInFsync: crash while the next fsync is in flight.
	crashInFsync bool
	// dirty: the node ran since the last invariant check (only its state can change).
	dirty bool
}

// load is what a restart reads: the MemStorage's answer when the node has one, else
// the harness's own durable model (the same semantics without the copy per fsync
// that MemStorage.Sync makes).
func (n *simNode) load() (raftlog.Loaded, error) {
	if n.store != nil {
		return n.store.Load()
	}
	st := n.state
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	return raftlog.Loaded{State: st, Batches: slices.Clone(n.durable)}, nil
}

// storeDo applies a write to the MemStorage, if the node has one.
func (n *simNode) storeDo(fn func(*raftlog.MemStorage) error) error {
	if n.store == nil {
		return nil
	}
	return fn(n.store)
}

func (n *simNode) busy(nowMs int64) bool {
	return n.down || n.persisting != nil || nowMs < n.pausedUntil
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

	links map[[2]int32]*linkFaults
	// fsyncMs/stallPct/stallMs shape disk latency: most fsyncs take up to fsyncMs, a few
	// stall for up to stallMs (disk lag).
	fsyncMs  int64
	stallPct int
	stallMs  int64
	// dupRespPct lets a duplicated response reach the core a second time, past the
	// driver's one-answer-per-request pairing (a stricter world than TCP).
	dupRespPct int
	// baseDrop and baseDup (per mille) are the seed's background loss and duplication.
	baseDrop, baseDup int
	proposeEveryMs    int64
	// timeScale divides the Raft timeouts (1: Kafka's defaults).
	timeScale    int64
	crashes      int
	lossyCrashes int
	truncations  int
	// healed: the liveness phase began; no fault fires any more.
	healed bool

	chk   *checker
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

// describe renders the node's driver and core state for the failure report.
func (n *simNode) describe(nowMs int64) string {
	if n.down {
		return fmt.Sprintf("down; durable log end %d, state %+v", end(n.durable), n.state)
	}
	st := n.raft.Status()
	return fmt.Sprintf("%s epoch=%d leader=%d voted=%d leo=%d flushed=%d hw=%d applied=%d durable=%d paused=%t fsyncing=%t inbox=%d waiting=%d next-deadline=%d",
		st.Role, st.Epoch, st.LeaderID, st.VotedID, st.LogEndOffset, st.FlushedEndOffset, st.HighWatermark,
		n.appliedNext, end(n.durable), nowMs < n.pausedUntil, n.persisting != nil, len(n.inbox), len(n.out), n.raft.NextDeadlineMs())
}

// runUntil executes events up to endMs (or until stop returns true or a violation),
// checking every invariant after every event.
func (s *sim) runUntil(endMs int64, stop func() bool) {
	for s.err == nil && len(s.q) > 0 && s.q[0].atMs <= endMs {
		e := heap.Pop(&s.q).(*event)
		s.nowMs = e.atMs
		e.fn()
		if s.err == nil {
			s.chk.check(s)
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
		// A small FetchMaxBytes (one batch per answer) makes followers lag the leader's
		// HW, which exercises hw = min(leader hw, LEO).
		FetchMaxBytes: []int32{1, 300, 0}[s.rng.IntN(3)],
	}
	n := &simNode{
		id: id, voter: slices.Contains(s.voters, id), cfg: cfg,
		state: raftlog.EmptyQuorumState(),
		down:  true,
	}
	if s.seed%4 == 0 {
		n.store = raftlog.NewMemStorage()
	}
	s.nodes[id] = n
	s.ids = append(s.ids, id)
	return s.start(n)
}

// start boots n from what its storage loads.
func (s *sim) start(n *simNode) error {
	loaded, err := n.load()
	if err != nil {
		return err
	}
	s.chk.checkLoaded(s, n, loaded)
	cfg := n.cfg
	cfg.Rand = rand.New(rand.NewPCG(s.seed, uint64(n.id)<<32|uint64(n.life)))
	cfg.Logger = zap.New(traceCore{s: s, id: n.id})
	r, err := quorum.NewRaft(cfg, loaded, s.nowMs)
	if err != nil {
		return err
	}
	n.raft, n.down = r, false
	n.life++
	n.cur = slices.Clone(loaded.Batches)
	n.persisting, n.inbox, n.out = nil, nil, map[uint64]outReq{}
	n.appliedNext, n.lastHW, n.checkedTo = loaded.StartOffset, loaded.StartOffset, loaded.StartOffset
	n.leadEpoch, n.leadEnd = -1, -1
	s.faultf(n.id, "start life %d: state %+v log end %d", n.life, loaded.State, end(loaded.Batches))
	s.pump(n)
	return nil
}

// crash kills n. If an fsync was in flight, the crash lands at a random point of the
// persist sequence: before the quorum-state rename, after it but before the log fsync,
// or after the fsync but before the acknowledgements went out.
func (s *sim) crash(n *simNode) {
	if n.down {
		return
	}
	point := "idle"
	if rd := n.persisting; rd != nil {
		s.lossyCrashes++
		switch s.rng.IntN(3) {
		case 0:
			point = "before quorum-state write"
		case 1:
			point = "after quorum-state write, before log fsync"
			s.saveState(n, rd)
		case 2:
			point = "after fsync, before acks"
			s.saveState(n, rd)
			s.syncLog(n)
		}
	}
	if n.store != nil {
		n.store.Crash()
	}
	n.down, n.raft, n.persisting, n.inbox, n.out = true, nil, nil, nil, nil
	n.pausedUntil = 0
	n.cur = n.durable
	s.faultf(n.id, "CRASH (%s): durable log end %d", point, end(n.durable))
}

func (s *sim) restart(n *simNode) {
	if !n.down {
		return
	}
	if err := s.start(n); err != nil {
		s.fail("restart node %d: %v", n.id, err)
	}
}

func (s *sim) pause(n *simNode, ms int64) {
	if n.down {
		return
	}
	n.pausedUntil = max(n.pausedUntil, s.nowMs+ms)
	s.faultf(n.id, "PAUSE for %d ms", ms)
	life := n.life
	s.at(n.pausedUntil, func() {
		if n.life == life && !n.down && s.nowMs >= n.pausedUntil {
			s.tracef(n.id, "RESUME")
			s.pump(n)
		}
	})
}

// pump runs n's driver loop until it blocks: Ready first, then queued inbound
// messages, then due timers; then it arms the timer for the next deadline.
func (s *sim) pump(n *simNode) {
	n.dirty = true
	for guard := 0; s.err == nil && !n.busy(s.nowMs); guard++ {
		if guard > 100000 {
			s.fail("Livelock: node %d never stops having work at %d ms", n.id, s.nowMs)
			return
		}
		switch {
		case n.raft.HasReady():
			s.handleReady(n)
		case len(n.inbox) > 0:
			m := n.inbox[0]
			n.inbox = n.inbox[1:]
			s.step(n, m)
		case n.raft.NextDeadlineMs() <= s.nowMs:
			n.raft.Tick(s.nowMs)
			if n.raft.NextDeadlineMs() <= s.nowMs && !n.raft.HasReady() {
				s.fail("TimerProgress: node %d deadline %d not past now %d after Tick", n.id, n.raft.NextDeadlineMs(), s.nowMs)
			}
		default:
			s.armTimer(n)
			return
		}
	}
}

func (s *sim) armTimer(n *simNode) {
	d := n.raft.NextDeadlineMs()
	n.tickGen++
	if d == 1<<63-1 {
		return
	}
	gen, life := n.tickGen, n.life
	s.at(d, func() {
		if n.life == life && n.tickGen == gen && !n.down {
			s.pump(n)
		}
	})
}

// step hands m to n's core (n is idle).
func (s *sim) step(n *simNode, m quorum.Message) {
	s.traceMsg(n.id, "step", m)
	if err := n.raft.Step(s.nowMs, m); err != nil {
		s.fail("node %d Step returned fatal error: %v (message %s)", n.id, err, m)
	}
}

// handleReady takes one Ready and runs the first half of the contract: messages that
// need nothing durable, then the log writes into the page cache; the fsync completes
// later in simulated time.
func (s *sim) handleReady(n *simNode) {
	st := n.raft.Status()
	rd := n.raft.Ready()
	s.chk.checkReady(s, n, st, &rd)
	for _, m := range rd.Messages {
		s.send(n, m)
	}
	if rd.TruncateTo >= 0 {
		s.tracef(n.id, "truncate to %d", rd.TruncateTo)
		s.truncations++
		if err := n.storeDo(func(st *raftlog.MemStorage) error { return st.TruncateTo(rd.TruncateTo) }); err != nil {
			s.fail("node %d TruncateTo: %v", n.id, err)
		}
		i := slices.IndexFunc(n.cur, func(b raftlog.Batch) bool { return b.LastOffset >= rd.TruncateTo })
		if i >= 0 {
			n.cur = n.cur[:i:i]
		}
		n.checkedTo = min(n.checkedTo, end(n.cur))
	}
	if len(rd.Append) > 0 {
		if err := n.storeDo(func(st *raftlog.MemStorage) error { return st.Append(rd.Append) }); err != nil {
			s.fail("EpochCacheMonotone/contiguity: node %d Append: %v", n.id, err)
		}
		for _, b := range rd.Append {
			if b.BaseOffset != end(n.cur) || b.Epoch < lastEpoch(n.cur) {
				s.fail("EpochCacheMonotone: node %d appends batch %d..%d epoch %d after log end %d epoch %d",
					n.id, b.BaseOffset, b.LastOffset, b.Epoch, end(n.cur), lastEpoch(n.cur))
			}
			n.cur = append(n.cur, b)
		}
	}
	if rd.QuorumState == nil && rd.TruncateTo < 0 && len(rd.Append) == 0 {
		s.finishReady(n, &rd)
		return
	}
	n.persisting = &rd
	lat := s.rng.Int64N(s.fsyncMs + 1)
	if s.rng.IntN(1000) < s.stallPct {
		lat += s.rng.Int64N(s.stallMs + 1)
	}
	life := n.life
	if n.crashInFsync {
		// Scheduled before the completion, so at an equal time the crash wins.
		n.crashInFsync = false
		s.at(s.nowMs+s.rng.Int64N(lat+1), func() {
			if n.life == life && n.persisting == &rd && !s.healed {
				s.crashes++
				s.crash(n)
			}
		})
	}
	var done func()
	done = func() {
		if n.life != life || n.down || n.persisting != &rd {
			return
		}
		if s.nowMs < n.pausedUntil {
			s.at(n.pausedUntil, done) // a paused process completes nothing
			return
		}
		s.saveState(n, &rd)
		s.syncLog(n)
		s.finishReady(n, &rd)
		s.pump(n)
	}
	s.at(s.nowMs+lat, done)
}

func (s *sim) saveState(n *simNode, rd *quorum.Ready) {
	if rd.QuorumState == nil {
		return
	}
	st := *rd.QuorumState
	s.chk.checkSavedState(s, n, st)
	if err := n.storeDo(func(ms *raftlog.MemStorage) error { return ms.SaveQuorumState(st) }); err != nil {
		s.fail("node %d SaveQuorumState: %v", n.id, err)
	}
	n.state = st
	rd.QuorumState = nil // written; a crash after this point keeps it
}

func (s *sim) syncLog(n *simNode) {
	if err := n.storeDo((*raftlog.MemStorage).Sync); err != nil {
		s.fail("node %d Sync: %v", n.id, err)
	}
	// Sharing is safe: cur is only truncated with a capped reslice and appended to,
	// so nothing ever writes into the prefix durable shows.
	n.durable = n.cur[:len(n.cur):len(n.cur)]
}

// finishReady is the second half: acknowledgements, committed batches, Advance.
func (s *sim) finishReady(n *simNode, rd *quorum.Ready) {
	n.persisting = nil
	for _, m := range rd.MessagesAfterPersist {
		s.send(n, m)
	}
	s.chk.checkCommitted(s, n, rd)
	n.raft.Advance(*rd)
}

// send puts m on the link from n, with that link's faults. A request is registered
// with n's driver, which steps back a timeout failure if no answer comes in time.
func (s *sim) send(n *simNode, m quorum.Message) {
	s.chk.checkSend(s, n, m)
	if m.IsRequest() {
		n.out[m.RequestID] = outReq{req: m}
		timeout := n.cfg.RequestTimeoutMs
		if m.Fetch != nil {
			timeout += int64(m.Fetch.MaxWaitMs)
		}
		life := n.life
		s.at(s.nowMs+timeout, func() { s.failRequest(n, life, m.RequestID, errSimTimeout) })
	}
	l := s.link(m.From, m.To)
	switch {
	case l.cut:
		s.traceMsg(n.id, "lost (cut)", m)
		return
	case s.rng.IntN(1000) < l.dropPct:
		s.traceMsg(n.id, "lost (drop)", m)
		return
	}
	s.transmit(l, m, false)
	if s.rng.IntN(1000) < l.dupPct {
		s.transmit(l, m, true)
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

func (s *sim) transmit(l *linkFaults, m quorum.Message, dup bool) {
	d := l.delayMs + s.rng.Int64N(l.jitterMs+1)
	if s.rng.IntN(1000) < l.slowPct {
		d += s.rng.Int64N(l.slowMs + 1)
	}
	s.at(s.nowMs+d, func() { s.arrive(m, dup) })
}

// arrive delivers m at its target's driver.
func (s *sim) arrive(m quorum.Message, dup bool) {
	n := s.nodes[m.To]
	if s.link(m.From, m.To).cut {
		s.traceMsg(m.To, "lost in flight (cut)", m)
		return
	}
	if n.down {
		if m.IsRequest() && !dup {
			from := s.nodes[m.From]
			life := from.life
			s.at(s.nowMs+1, func() { s.failRequest(from, life, m.RequestID, errSimRefused) })
		}
		return
	}
	if !m.IsRequest() {
		_, waiting := n.out[m.RequestID]
		delete(n.out, m.RequestID)
		if !waiting && !(dup && s.rng.IntN(1000) < s.dupRespPct) {
			return // the driver already answered this request (timeout) or it is a copy
		}
	}
	n.inbox = append(n.inbox, m)
	s.pump(n)
}

// failRequest steps back a failure for a request still waiting on an answer.
func (s *sim) failRequest(n *simNode, life int, id uint64, cause error) {
	o, ok := n.out[id]
	if n.life != life || n.down || !ok {
		return
	}
	delete(n.out, id)
	resp := quorum.Message{From: o.req.To, To: n.id, RequestID: id, Err: cause}
	switch {
	case o.req.Vote != nil:
		resp.VoteResp = &quorum.VoteResponse{PreVote: o.req.Vote.PreVote, LeaderID: -1, LeaderEpoch: -1}
	case o.req.BeginEpoch != nil:
		resp.BeginEpochResp = &quorum.BeginQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case o.req.EndEpoch != nil:
		resp.EndEpochResp = &quorum.EndQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case o.req.Fetch != nil:
		resp.FetchResp = &quorum.FetchResponse{LeaderID: -1, LeaderEpoch: -1, HighWatermark: -1}
	}
	n.inbox = append(n.inbox, resp)
	s.pump(n)
}

// propose appends a uniquely valued record on n if it leads and is idle.
func (s *sim) propose(n *simNode) (base int64, epoch int32, ok bool) {
	if n.busy(s.nowMs) || n.raft.Status().Role != quorum.Leader {
		return 0, 0, false
	}
	s.proposals++
	val := fmt.Sprintf("seed%d-p%d", s.seed, s.proposals)
	base, epoch, err := n.raft.Propose(s.nowMs, []raftlog.Record{{Value: []byte(val)}})
	if err != nil {
		s.fail("node %d Propose as leader: %v", n.id, err)
		return 0, 0, false
	}
	s.tracef(n.id, "propose %s at %d epoch %d", val, base, epoch)
	s.pump(n)
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
		if st := n.raft.Status(); st.Role == quorum.Leader && st.Epoch > bestEpoch {
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

// traceCore sends the core's state-transition log lines (info) into the trace.
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
	c.s.trace.add(traceEnt{atMs: c.s.nowMs, node: c.id, what: "core: " + e.Message})
	return nil
}
