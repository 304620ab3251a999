package quorum

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// replicaState is the leader's view of one fetcher (voter or observer).
type replicaState struct {
	id    int32
	voter bool
	// dirID is the directory id its latest Fetch carried (KIP-853); zero if none.
	dirID [16]byte
	// endOffset is the replica's last FetchOffset (its durable LEO for a voter); -1 unknown.
	endOffset int64
	// lastFetchMs is when it last fetched; -1 never in this epoch.
	lastFetchMs int64
	// lastCaughtUpMs is the last time its fetch offset reached the leader's LEO.
	lastCaughtUpMs int64
	// prevFetchMs and prevLeaderEnd remember the previous fetch: a replica that now reaches
	// the LEO the leader had then was caught up at that time (Kafka's ReplicaState).
	prevFetchMs   int64
	prevLeaderEnd int64
	// sentHW is the highest high watermark sent to it in a Fetch answer this epoch. A
	// fetch at the log end is parked only when the fetcher already knows the current
	// high watermark; otherwise it would learn of a commit a whole MaxWait late.
	sentHW int64
}

// parkedFetch is a Fetch held in purgatory until the log grows or MaxWait expires.
type parkedFetch struct {
	from       int32
	requestID  uint64
	req        *FetchRequest
	deadlineMs int64
}

// observerSessionTimeoutMs is how long the leader keeps the replica state of an
// observer that stopped fetching (Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS).
// Brokers come and go; without it DescribeQuorum would list every broker that ever
// fetched in the epoch.
const observerSessionTimeoutMs int64 = 300_000

// leaderState is the per-epoch state of a leader.
//
// INVARIANTS:
//   - epochStartOffset is the offset of this epoch's LeaderChange batch.
//   - hwEstablished only once the majority offset passed epochStartOffset.
//   - observers (voter false) never contribute to the high watermark.
//   - every voter has an entry in replicas; an observer's entry is dropped once it has
//     not fetched for observerSessionTimeoutMs; at most Config.MaxTrackedObservers
//     observers have one (noteFetcher).
//   - observerExpiryMs <= lastFetchMs+observerSessionTimeoutMs of every observer entry.
type leaderState struct {
	epochStartOffset int64
	hwEstablished    bool
	grantingVoters   []int32
	replicas         map[int32]*replicaState
	parked           []parkedFetch

	// beginEpochMs is when BeginQuorumEpoch is next sent to voters that have not fetched.
	beginEpochMs int64
	// checkQuorumMs is when a majority must have fetched within the window.
	checkQuorumMs int64
	// observerExpiryMs is when the first observer entry may expire. Only a lower bound:
	// fetches move an entry's expiry later without touching it, so expireObservers
	// recomputes it, keeping every entry that fetched meanwhile.
	observerExpiryMs int64

	// acc holds proposals not yet drained into a batch.
	acc      []raftlog.Record
	accBytes int
	accUntil int64
}

func (l *leaderState) nextDeadlineMs() int64 {
	d := min(l.beginEpochMs, l.checkQuorumMs, l.accUntil, l.observerExpiryMs)
	for _, p := range l.parked {
		d = min(d, p.deadlineMs)
	}
	return d
}

// becomeLeader takes over the epoch it won: it appends the LeaderChange control batch
// at once (so the high watermark becomes reachable in this epoch, KAFKA-12619) and
// announces itself with BeginQuorumEpoch.
func (r *Raft) becomeLeader(nowMs int64) {
	assertf(r.role == Candidate && r.votedID == r.cfg.NodeID, "only a self-voted candidate wins (role %s)", r.role)
	granting := slices.Sorted(func(yield func(int32) bool) {
		for id := range r.ballot.granted {
			if !yield(id) {
				return
			}
		}
	})
	r.leave()
	r.role = Leader
	r.leaderID = r.cfg.NodeID
	r.retries = 0
	l := &leaderState{
		epochStartOffset: r.log.endOffset(),
		grantingVoters:   granting,
		replicas:         map[int32]*replicaState{},
		beginEpochMs:     nowMs,
		checkQuorumMs:    noDeadline,
		observerExpiryMs: noDeadline,
		accUntil:         noDeadline,
	}
	for _, v := range r.voterIDs() {
		l.replicas[v] = &replicaState{id: v, voter: true, endOffset: -1, lastFetchMs: -1, lastCaughtUpMs: -1}
	}
	if len(r.voterIDs()) > 1 {
		l.checkQuorumMs = nowMs + r.checkQuorumWindowMs()
	}
	r.lead = l
	r.persist()
	r.logf("%d became leader at epoch %d", r.cfg.NodeID, r.epoch)
	r.log.append(r.leaderChangeBatch(nowMs))
	r.tickLeader(nowMs)
	r.maybeAdvanceHW()
}

func (r *Raft) checkQuorumWindowMs() int64 { return r.cfg.FetchTimeoutMs * 3 / 2 }

// leaderChangeBatch encodes LeaderChangeMessage v0 in a control batch of type 2
// (kmsg's ControlRecordKeyTypeLeaderChange constant is 3, which is wrong). At
// kraft.version >= 1 the same batch also carries a KRaftVersionRecord and a
// VotersRecord, after the LeaderChange record, as Kafka's
// LeaderState.appendStartOfEpochControlRecords writes them, when epochStartVoters
// says so.
func (r *Raft) leaderChangeBatch(nowMs int64) raftlog.Batch {
	msg := kmsg.LeaderChangeMessage{Version: 0, LeaderID: r.cfg.NodeID}
	for _, v := range r.voterIDs() {
		msg.Voters = append(msg.Voters, kmsg.LeaderChangeMessageVoter{VoterID: v})
	}
	for _, v := range r.lead.grantingVoters {
		msg.GrantingVoters = append(msg.GrantingVoters, kmsg.LeaderChangeMessageVoter{VoterID: v})
	}
	recs := []raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlLeaderChange), Value: msg.AppendTo(nil)}}
	if next, ok := r.epochStartVoters(); ok {
		recs = append(recs, KRaftControlRecords(r.kraftVersion(), next)...)
	}
	return raftlog.EncodeBatch(r.log.endOffset(), r.epoch, nowMs, true, recs)
}

// epochStartVoters is the voter set a new leader writes at the start of its epoch
// (KIP-853), ok false when it writes none. As Kafka's
// LeaderState.appendStartOfEpochControlRecords, a leader at kraft.version >= 1 writes
// the voter set in force with its own entry replaced by what it is now (its
// advertised controller listeners and the kraft.version range it supports,
// localVoterNode) when:
//   - the voter set so far is only the bootstrap snapshot's (offset < 0), which is
//     never served, so observers and controllers formatted --no-initial-controllers
//     would not have it otherwise; or
//   - its entry differs from what it is now (Kafka's VoterSet.voterNodeNeedsUpdate):
//     a controller restarted on a new port, or upgraded to support another range,
//     takes office under its new address, and peers find it there.
//
// Only the leader's own entry changes, so the set keeps its voters and the
// one-change-at-a-time rule of voter changes is not touched. A leader without
// configured endpoints (Config.Endpoints empty, tests) writes the set as it is, and
// only in the bootstrap case.
func (r *Raft) epochStartVoters() (VoterSet, bool) {
	if !r.dynamic() || r.kraftVersion() < KRaftVersionDynamic {
		return VoterSet{}, false
	}
	cur, ok := r.log.kraft.latestVoters()
	if !ok {
		return VoterSet{}, false
	}
	local, hasLocal := r.localVoterNode()
	switch {
	case hasLocal && cur.set.voterNodeNeedsUpdate(local):
		return cur.set.withVoter(local), true
	case cur.offset < 0:
		return cur.set, true
	}
	return VoterSet{}, false
}

func (r *Raft) tickLeader(nowMs int64) {
	l := r.lead
	if nowMs >= l.checkQuorumMs && !r.checkQuorum(nowMs) {
		r.logf("%d lost check-quorum at epoch %d", r.cfg.NodeID, r.epoch)
		r.becomeResigned(nowMs, r.preferredSuccessors())
		return
	}
	if nowMs >= l.accUntil {
		r.drainAccumulator(nowMs)
	}
	if nowMs >= l.beginEpochMs {
		r.sendBeginEpoch()
		l.beginEpochMs = nowMs + r.cfg.FetchTimeoutMs/2
	}
	if nowMs >= l.observerExpiryMs {
		r.expireObservers(nowMs)
	}
	r.expireParkedFetches(nowMs)
}

// expireObservers drops the replica state of every observer that has not fetched for
// observerSessionTimeoutMs (spec section 2.3), so DescribeQuorum stops listing it; it
// comes back with its next fetch. Voters are never dropped.
func (r *Raft) expireObservers(nowMs int64) {
	l := r.lead
	l.observerExpiryMs = noDeadline
	var expired []int32
	for id, rs := range l.replicas {
		switch {
		case rs.voter:
		case nowMs-rs.lastFetchMs >= observerSessionTimeoutMs:
			expired = append(expired, id)
		default:
			l.observerExpiryMs = min(l.observerExpiryMs, rs.lastFetchMs+observerSessionTimeoutMs)
		}
	}
	slices.Sort(expired) // map order is random; keep the log deterministic
	for _, id := range expired {
		r.debugf("%d drops observer %d: no fetch since %d ms", r.cfg.NodeID, id, l.replicas[id].lastFetchMs)
		delete(l.replicas, id)
	}
}

// sendBeginEpoch announces the leader to every other voter, as Kafka 4.x does each
// fetch.timeout/2, fetching or not. Sending only to voters that never fetched (the
// pre-4.x rule) strands a voter that fetched once and then moved to a higher epoch
// that failed to elect (its Vote requests lost): it no longer fetches, its pre-votes
// at that epoch are answered from a lower epoch it ignores, and nobody tells the
// leader. Its FENCED_LEADER_EPOCH answer to this request makes the leader adopt the
// higher epoch, so a new election includes it. Found by the seeded simulation.
func (r *Raft) sendBeginEpoch() {
	for _, v := range r.otherVoters() {
		r.send(Message{To: v, RequestID: r.newRequestID(), BeginEpoch: &BeginQuorumEpochRequest{
			ClusterID: r.cfg.ClusterID, VoterID: v, VoterDirectoryID: r.voterDirectoryID(v),
			LeaderID: r.cfg.NodeID, LeaderEpoch: r.epoch,
		}})
	}
}

// checkQuorum reports whether a majority (the leader included) fetched within the
// window, and re-arms the timer for when the oldest of that majority goes stale.
func (r *Raft) checkQuorum(nowMs int64) bool {
	window := r.checkQuorumWindowMs()
	var times []int64
	for _, v := range r.otherVoters() {
		times = append(times, r.lead.replicas[v].lastFetchMs)
	}
	slices.Sort(times)
	slices.Reverse(times)
	need := r.majority()
	if r.leaderInVoterSet() {
		need-- // the leader counts itself
	}
	if need <= 0 {
		// A leader alone in its voter set answers only to itself: no deadline,
		// or the timer would fire at once for ever (appendControl arms it again
		// if the set grows).
		r.lead.checkQuorumMs = noDeadline
		return true
	}
	if need > len(times) {
		return false
	}
	t := times[need-1]
	if t < 0 || nowMs-t >= window {
		return false
	}
	r.lead.checkQuorumMs = t + window
	return true
}

// preferredSuccessors orders the other voters by fetch offset, most caught up first.
func (r *Raft) preferredSuccessors() []int32 {
	others := r.otherVoters()
	if r.lead == nil {
		return others
	}
	slices.SortStableFunc(others, func(a, b int32) int {
		ea, eb := r.lead.replicas[a].endOffset, r.lead.replicas[b].endOffset
		switch {
		case ea > eb:
			return -1
		case ea < eb:
			return 1
		}
		return 0
	})
	return others
}

// Propose queues records for one batch in the current epoch. They get consecutive
// offsets from baseOffset; they are committed once the high watermark passes them.
//
// Group commit: when the leader has no append in flight (everything appended is
// durable and committed, see appendIdle) the records are appended at once. While an
// append is in flight they wait in the accumulator with every other proposal arriving
// meanwhile, and the Advance or high watermark move that completes it appends them
// all as the next batch.
// The linger time (controller.quorum.append.linger.ms) only bounds that wait: Tick
// appends what lingered that long even with an fsync still in flight. A full batch
// is appended at once.
func (r *Raft) Propose(nowMs int64, records []raftlog.Record) (baseOffset int64, epoch int32, err error) {
	r.nowMs = max(r.nowMs, nowMs)
	if r.role != Leader {
		return 0, 0, ErrNotLeader
	}
	if len(records) == 0 {
		return r.log.endOffset() + int64(len(r.lead.acc)), r.epoch, nil
	}
	size := raftlog.BatchHeaderSize
	for _, rec := range records {
		size += len(rec.Key) + len(rec.Value) + 16
	}
	if size > r.cfg.MaxBatchBytes {
		return 0, 0, ErrBatchTooLarge
	}
	l := r.lead
	if l.accBytes+size > r.cfg.MaxBatchBytes {
		r.drainAccumulator(r.nowMs)
	}
	baseOffset = r.log.endOffset() + int64(len(l.acc))
	if len(l.acc) == 0 {
		l.accBytes = raftlog.BatchHeaderSize
		l.accUntil = r.nowMs + max(r.cfg.AppendLingerMs, 0)
	}
	l.acc = append(l.acc, records...)
	l.accBytes += size - raftlog.BatchHeaderSize
	if r.cfg.AppendLingerMs <= 0 || r.appendIdle() {
		r.drainAccumulator(r.nowMs)
	}
	return baseOffset, r.epoch, nil
}

// appendIdle reports whether the leader has no append in flight: everything it
// appended is committed (a majority has it durable). A proposal arriving then is
// appended at once; otherwise it joins the next batch (Propose).
//
// Waiting for the commit and not only for the leader's own fsync matters: that fsync
// (about 0.3 ms here) is shorter than the followers' fetch, fsync and next fetch, so
// with the local signal alone nearly every proposal found the log idle and went out
// as its own batch, one fsync, fetch answer and follower fsync each; on two cores 64
// concurrent proposers then committed fewer proposals per second than with the
// 25 ms linger (BenchmarkCommitConcurrent, group-commit-local).
//
// The commit alone is enough: once a majority of followers made the log durable
// (the leader's fsync still running on a slow disk), the next proposal no longer
// waits for that fsync, which does not count toward this commit any more. It is
// appended and replicated at once; the flusher makes it durable here after the
// fsync in flight (Node.startFlush), and the high watermark counts the leader for
// it only then. Before, it waited for the leader's fsync (p50 13 ms, p90 53 ms on
// the shared disk of kraftd bench's cluster) although the followers had acked.
func (r *Raft) appendIdle() bool {
	if r.cfg.lingerAlways {
		return false
	}
	end := r.log.endOffset()
	if r.cfg.groupLocal {
		return r.log.flushedEnd == end
	}
	return r.hw >= end
}

// drainIfIdle appends the accumulated proposals once the append they waited for has
// completed (group commit): Advance calls it after counting the leader's flushed
// offset, maybeAdvanceHW once the high watermark moved.
func (r *Raft) drainIfIdle() {
	if r.lead != nil && len(r.lead.acc) > 0 && r.appendIdle() {
		r.drainAccumulator(r.nowMs)
	}
}

// drainAccumulator appends the queued proposals as one batch and wakes parked fetches.
func (r *Raft) drainAccumulator(nowMs int64) {
	l := r.lead
	l.accUntil = noDeadline
	if len(l.acc) == 0 {
		return
	}
	b := raftlog.EncodeBatch(r.log.endOffset(), r.epoch, nowMs, false, l.acc)
	l.acc, l.accBytes = nil, 0
	r.log.append(b)
	r.maybeAdvanceHW()
	r.completeParkedFetches(nowMs, false, false)
}

// maybeAdvanceHW recomputes the leader's high watermark (spec section 2.6).
func (r *Raft) maybeAdvanceHW() {
	l := r.lead
	offsets := make([]int64, 0, len(r.voterIDs()))
	for _, v := range r.voterIDs() {
		if v == r.cfg.NodeID {
			offsets = append(offsets, r.log.flushedEnd)
		} else {
			offsets = append(offsets, l.replicas[v].endOffset)
		}
	}
	hw := majorityOffset(offsets)
	if hw <= l.epochStartOffset && !mutFigure8 {
		return // nothing is exposed before an entry of this epoch commits
	}
	if hw < r.hw {
		r.debugf("%d ignores lower majority offset %d < hw %d", r.cfg.NodeID, hw, r.hw)
		return
	}
	if !l.hwEstablished {
		r.logf("%d established high watermark %d at epoch %d", r.cfg.NodeID, hw, r.epoch)
	}
	l.hwEstablished = true
	advanced := hw > r.hw
	r.hw = hw
	if advanced {
		// Fetchers parked at the log end wait for nothing new in the log, only for
		// the commit: answer them now with the new high watermark, or brokers
		// (observers) would see each commit a whole MaxWait late (Kafka completes
		// its fetch purgatory on a high-watermark change likewise).
		r.completeParkedFetches(r.nowMs, false, true)
		r.drainIfIdle()
	}
}

// majorityOffset is the largest offset that a majority of the given voter offsets has
// reached: sorted descending, the entry at index n/2.
func majorityOffset(offsets []int64) int64 {
	s := slices.Clone(offsets)
	slices.Sort(s)
	slices.Reverse(s)
	return s[len(s)/2]
}

// leaderHW is the high watermark a leader reports: -1 until established in its epoch.
func (r *Raft) leaderHW() int64 {
	if r.lead == nil || !r.lead.hwEstablished {
		return -1
	}
	return r.hw
}

// Resign makes a leader step down gracefully: it becomes Resigned in the same epoch and
// sends EndQuorumEpoch naming the most caught-up voters first, so a successor is
// elected quickly. Used on shutdown. It returns ErrNotLeader on a non-leader.
func (r *Raft) Resign(nowMs int64) error {
	r.nowMs = max(r.nowMs, nowMs)
	if r.role != Leader {
		return ErrNotLeader
	}
	r.becomeResigned(r.nowMs, r.preferredSuccessors())
	return nil
}

// Shutdown begins a graceful shutdown. A leader resigns as with Resign; a node that is
// already Resigned keeps handing over. From then until the node leaves the epoch it
// answers Fetch and FetchSnapshot with BROKER_NOT_AVAILABLE (see validateLeaderRequest),
// so fetchers back off it and observers ask another voter who leads. Any other role
// has nothing to hand over: Shutdown returns ErrNotLeader and the node may stop at once.
func (r *Raft) Shutdown(nowMs int64) error {
	r.nowMs = max(r.nowMs, nowMs)
	switch r.role {
	case Leader:
		r.becomeResigned(r.nowMs, r.preferredSuccessors())
	case Resigned:
	default:
		return ErrNotLeader
	}
	if !r.resigned.shutdown {
		r.resigned.shutdown, r.resigned.shutdownMs = true, r.nowMs
	}
	r.logf("%d shutting down at epoch %d", r.cfg.NodeID, r.epoch)
	return nil
}
