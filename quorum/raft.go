package quorum

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Role is a node's KRaft state (KIP-595 plus KIP-996's Prospective).
type Role uint8

const (
	// Unattached: no leader known in the epoch; may hold a vote ("Voted").
	Unattached Role = iota
	// Prospective: asking for pre-votes at the current epoch before bumping it.
	Prospective
	// Candidate: voted for itself in a bumped epoch, asking for votes.
	Candidate
	// Leader: appends, serves Fetch, advances the high watermark.
	Leader
	// Follower: fetches from the known leader of the epoch.
	Follower
	// Resigned: a former leader handing over; it never leads this epoch again.
	Resigned
)

func (r Role) String() string {
	switch r {
	case Unattached:
		return "Unattached"
	case Prospective:
		return "Prospective"
	case Candidate:
		return "Candidate"
	case Leader:
		return "Leader"
	case Follower:
		return "Follower"
	case Resigned:
		return "Resigned"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// noDeadline is a timer that is not armed.
const noDeadline int64 = 1<<63 - 1

// Raft is the deterministic KRaft core. It does no I/O, reads no clock and starts no
// goroutine: the driver steps messages in, ticks timers, and persists and sends what
// Ready returns. It is not safe for concurrent use; one driver goroutine owns it.
//
// INVARIANTS:
//   - epoch never decreases and stays below epochCeiling; at most one leader is
//     recorded per epoch (leaderID), and only a voter (kraft.version 0).
//   - votedID, once set in an epoch, does not change within it.
//   - hw <= log.endOffset() except transiently on a leader (majority may be ahead of
//     its own flush); hw never decreases within the process lifetime.
//   - applied <= hw: Committed hands out batches strictly in order, gap-free.
//   - observers (isVoter false) are only ever Unattached or Follower.
type Raft struct {
	cfg     Config
	logger  *zap.Logger
	isVoter bool
	log     *raftLog

	role     Role
	epoch    int32
	leaderID int32
	votedID  int32
	// votedDir is the directory id of the replica votedID names (KIP-853: a vote
	// is for a replica key); zero when unknown or votedID < 0.
	votedDir [16]byte

	hw      int64
	applied int64
	// knownHW is the quorum's high watermark as this node last learned it
	// (a leader's established one, or the one a leader's Fetch answer
	// named, which may be ahead of the local log); -1 before either.
	// reportedHW is the value the last Ready carried.
	knownHW, reportedHW int64

	// snapshot is the newest complete local snapshot (nil: none).
	snapshot *raftlog.SnapshotID
	// snapChunks are downloaded chunks not yet handed out in a Ready.
	snapChunks []SnapshotChunk
	// loadSnapshot: a download completed; the next Ready tells the driver to load it.
	loadSnapshot *raftlog.SnapshotID

	// electionDeadlineMs: Unattached/Prospective/Candidate/Resigned election timer.
	electionDeadlineMs int64
	// backoffDeadlineMs: a Candidate waiting out its election backoff.
	backoffDeadlineMs int64
	retries           int

	ballot   *ballot
	lead     *leaderState
	follow   *followerState
	resigned *resignedState
	// discover: an Unattached observer's discovery Fetch state.
	discover *followerState

	noPreVote map[int32]bool
	// leftEpoch is the epoch whose leader announced its resignation to this
	// voter (EndQuorumEpoch; -1: none). A Fetch answer it sent before resigning
	// can arrive after the EndQuorumEpoch, on another connection; it still
	// carries good data, but it may neither restart the fetch timer nor count as
	// hearing from the leader (fetchedOK), or the voter would wait a whole fetch
	// timeout for a leader that is gone and refuse the pre-votes that would
	// replace it (a successor was elected only after the 2 s fetch timeout).
	leftEpoch int32
	// reported is what the voters told this leader through UpdateRaftVoter in
	// reportedEpoch at kraft.version 0 (KAFKA-16538: kept in memory only).
	reported      map[int32]VoterNode
	reportedEpoch int32
	counters      counters

	// recovery: the node runs with a recovery marker (recovery.go); nil otherwise.
	recovery *recoveryState
	// voteFloor: votes are granted only in epochs above it (the E of a finished
	// recovery; -1 otherwise).
	voteFloor int32
	// recoveryDone: the next Ready tells the driver to remove the recovery marker.
	recoveryDone bool

	nextRequestID uint64
	nowMs         int64

	pendingState *raftlog.QuorumState
	// stateInFlight: a Ready carried a QuorumState that neither Advance nor
	// statePersisted has confirmed yet.
	stateInFlight bool
	msgs          []Message
	msgsAfter     []Message
	lastSoft      SoftState
}

// ballot counts votes or pre-votes of one election round.
type ballot struct {
	preVote  bool
	granted  map[int32]bool
	rejected map[int32]bool
	// deferTo is a voter with a lower id whose pre-vote at this epoch this node
	// granted while prospective itself (-1: none): winning its own pre-vote, it
	// does not become candidate but leaves the election to that voter (see
	// handleVote). deferLogged: that was logged.
	deferTo     int32
	deferLogged bool
}

// NewRaft builds the core from what the driver loaded from storage, applying Kafka's
// start-up rules (QuorumState.initialize): a persisted epoch behind the log's last
// epoch starts Unattached at the log epoch; a persisted leader that is this node comes
// back Resigned (it must never lead the same epoch twice); a vote for itself restarts
// as Candidate in the same epoch; a vote for another restarts Unattached+voted.
//
// NewRaft reads no snapshot: a node of a dynamic quorum (KIP-853) whose voter set
// is in its latest snapshot starts through NewRaftFromSnapshot.
func NewRaft(cfg Config, loaded raftlog.Loaded, nowMs int64) (*Raft, error) {
	return NewRaftFromSnapshot(cfg, loaded, SnapshotKRaft{}, nowMs)
}

// NewRaftFromSnapshot is NewRaft for a node whose latest snapshot (loaded.Snapshot)
// says snapKRaft of kraft.version and the voters.
func NewRaftFromSnapshot(cfg Config, loaded raftlog.Loaded, snapKRaft SnapshotKRaft, nowMs int64) (*Raft, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !loaded.LogContinuesSnapshot() {
		// Storage.Load restarts such a log at the snapshot (FileStorage does at open).
		return nil, fmt.Errorf("quorum: loaded log from %d to %d does not continue snapshot (%d,%d)",
			loaded.StartOffset, endOfLoaded(loaded), loaded.Snapshot.EndOffset, loaded.Snapshot.Epoch)
	}
	rl, err := newRaftLog(loaded, snapKRaft)
	if err != nil {
		return nil, err
	}
	if err := validateQuorumState(&cfg, loaded.State, rl.lastEpoch(), rl.kraft.latestKRaftVersion()); err != nil {
		return nil, err
	}
	r := &Raft{
		cfg:       cfg,
		logger:    cfg.Logger,
		log:       rl,
		leaderID:  -1,
		votedID:   -1,
		hw:        rl.startOffset,
		applied:   rl.startOffset,
		noPreVote: map[int32]bool{},
		nowMs:     nowMs,
		voteFloor: -1,
		leftEpoch: -1,
	}
	r.isVoter = r.selfIsVoter()
	if err := checkStateNotLost(loaded, rl.lastEpoch(), r.isVoter); err != nil {
		return nil, err
	}
	if rec := loaded.Recovery; rec != nil {
		if r.isVoter {
			r.recovery = newRecoveryState(*rec, nowMs)
		} else {
			r.recoveryDone = true // an observer never votes: nothing to wait for
		}
	}
	if s := loaded.Snapshot; s != nil {
		// A restarted node reloads its listeners from the latest snapshot and replays
		// only the log after it. Everything below the snapshot's end is committed
		// (it was at or below a high watermark), and nothing above it is known to be:
		// the log below it may not be this node's own committed log, so the high
		// watermark starts at the snapshot's end, never at min(snapshot end, log
		// end), which claimed another leader's uncommitted entries as committed.
		id := *s
		r.snapshot = &id
		r.hw = max(r.hw, id.EndOffset)
		r.applied = r.hw
	}
	r.resetTimers()
	if r.recovery != nil {
		r.logf("%d recovering: no votes and no candidacy until caught up with a leader of epoch >= %d (quorum-state lost: %t)",
			cfg.NodeID, r.recovery.epoch, r.recovery.learning)
	}
	r.initialize(loaded.State, nowMs)
	r.lastSoft = SoftState{LeaderID: -2} // the first Ready reports the initial state
	r.knownHW, r.reportedHW = -1, -1
	return r, nil
}

func endOfLoaded(l raftlog.Loaded) int64 {
	if n := len(l.Batches); n > 0 {
		return l.Batches[n-1].NextOffset()
	}
	return l.StartOffset
}

func (r *Raft) initialize(st raftlog.QuorumState, nowMs int64) {
	self := r.cfg.NodeID
	switch {
	case st.LeaderEpoch < r.log.lastEpoch():
		r.logf("%d state epoch %d is behind log epoch %d", self, st.LeaderEpoch, r.log.lastEpoch())
		r.becomeUnattached(nowMs, r.log.lastEpoch(), -1)
	case r.recovery != nil && (st.LeaderID == self || st.VotedID == self):
		// Neither Resigned nor Candidate: a recovering node never leads or campaigns.
		// It keeps its vote for itself, so it grants nobody else one in this epoch.
		r.epoch, r.votedID = st.LeaderEpoch, st.VotedID
		r.role = Unattached
		r.enterUnattached(nowMs)
		r.logf("%d became unattached at epoch %d", self, r.epoch)
	case st.LeaderID == self && (r.isVoter || r.removedPendingCommit()):
		r.epoch, r.leaderID, r.votedID = st.LeaderEpoch, self, st.VotedID
		r.becomeResigned(nowMs, r.otherVoters())
	case st.LeaderID >= 0 && st.LeaderID != self:
		// A known leader wins over a vote for self: the node lost that election.
		r.epoch, r.votedID = st.LeaderEpoch, st.VotedID
		r.becomeFollower(nowMs, st.LeaderEpoch, st.LeaderID)
	case st.VotedID == self && r.isVoter:
		r.epoch = st.LeaderEpoch
		r.becomeCandidateAt(nowMs, st.LeaderEpoch)
	default:
		r.epoch = st.LeaderEpoch
		r.votedID = st.VotedID
		if !r.isVoter {
			r.votedID = -1
		}
		r.role = Unattached
		r.enterUnattached(nowMs)
		r.logf("%d became unattached at epoch %d", self, r.epoch)
	}
	if r.votedID >= 0 && r.votedID == st.VotedID && r.epoch == st.LeaderEpoch && r.votedDir == ([16]byte{}) {
		r.votedDir = st.VotedDirectoryID
	}
	if r.campaigns() && r.isVoter && len(r.voterIDs()) == 1 && r.role != Leader {
		// A single-voter quorum needs nobody's vote: elect at once.
		r.becomeCandidate(nowMs)
	}
}

// logf logs a state-transition sentence at info; transcripts show these lines.
func (r *Raft) logf(format string, args ...any) {
	if ce := r.logger.Check(zap.InfoLevel, ""); ce != nil {
		ce.Message = fmt.Sprintf(format, args...)
		ce.Write()
	}
}

// debugf logs a per-message line at debug.
func (r *Raft) debugf(format string, args ...any) {
	if ce := r.logger.Check(zap.DebugLevel, ""); ce != nil {
		ce.Message = fmt.Sprintf(format, args...)
		ce.Write()
	}
}

func (r *Raft) otherVoters() []int32 {
	out := make([]int32, 0, len(r.voterIDs()))
	for _, v := range r.voterIDs() {
		if v != r.cfg.NodeID {
			out = append(out, v)
		}
	}
	return out
}

// randomElectionTimeoutMs is uniform in [T, 2T).
func (r *Raft) randomElectionTimeoutMs() int64 {
	t := r.cfg.ElectionTimeoutMs
	return t + r.cfg.Rand.Int64N(t)
}

// electionBackoffMs is min(100ms * random[0, 2^retries), max); the exponent is capped.
func (r *Raft) electionBackoffMs() int64 {
	exp := min(r.retries, 20)
	return min(100*r.cfg.Rand.Int64N(int64(1)<<exp), r.cfg.ElectionBackoffMaxMs)
}

func (r *Raft) resetTimers() {
	r.electionDeadlineMs = noDeadline
	r.backoffDeadlineMs = noDeadline
}

// persist records the election state to be written before dependent messages go out.
func (r *Raft) persist() {
	st := raftlog.QuorumState{LeaderID: r.leaderID, LeaderEpoch: r.epoch, VotedID: r.votedID}
	if r.role == Leader || r.role == Resigned {
		st.LeaderID = r.cfg.NodeID
	}
	if r.kraftVersion() >= KRaftVersionDynamic {
		// Kafka's quorum-state data_version 1 at kraft.version 1: the voted replica's
		// directory id instead of the voters, which live in the log.
		st.DataVersion, st.VotedDirectoryID = 1, r.votedDir
	} else {
		st.CurrentVoters = slices.Clone(r.voterIDs())
	}
	r.pendingState = &st
}

// leave tears down the state of the current role before a transition.
func (r *Raft) leave() {
	if r.lead != nil {
		r.failParkedFetches()
	}
	r.lead, r.follow, r.resigned, r.ballot, r.discover = nil, nil, nil, nil, nil
	r.resetTimers()
}

// transitionEpoch checks the rule that no transition goes to a lower epoch.
func (r *Raft) transitionEpoch(epoch int32) {
	assertf(epoch >= r.epoch, "monotonic epoch: transition from epoch %d to %d", r.epoch, epoch)
	assertf(epoch < epochCeiling, "epoch ceiling: transition from epoch %d to %d", r.epoch, epoch)
	if epoch > r.epoch {
		r.votedID, r.votedDir = -1, [16]byte{}
		r.leaderID = -1
		r.retries = 0
	}
	r.epoch = epoch
}

// becomeUnattached moves to Unattached in a higher epoch (the same epoch only from
// Prospective, whose epoch was never bumped). votedID is kept within the epoch.
func (r *Raft) becomeUnattached(nowMs int64, epoch int32, leaderHint int32) {
	assertf(epoch > r.epoch || r.role == Prospective,
		"unattached only in a higher epoch: %s at %d -> %d", r.role, r.epoch, epoch)
	// An observer learns of a new epoch only from Fetch answers, so the leader of
	// the epoch it leaves is lost to it; a voter may be leaving for a Vote from
	// that very leader.
	lost := int32(-1)
	if !r.isVoter {
		lost = r.leaderID
		if d := r.discover; lost < 0 && d != nil {
			// Still looking for a leader (a candidate's epoch, then the next):
			// the leader lost before is still to be avoided.
			lost = d.lost
		}
	}
	r.leave()
	r.transitionEpoch(epoch)
	if leaderHint >= 0 {
		r.leaderID = leaderHint
	}
	r.role = Unattached
	if r.dynamic() {
		r.isVoter = r.selfIsVoter() // a removed leader or candidate is a voter no more
	}
	r.enterUnattachedAvoiding(nowMs, lost)
	r.persist()
	r.logf("%d became unattached at epoch %d", r.cfg.NodeID, r.epoch)
}

func (r *Raft) enterUnattached(nowMs int64) { r.enterUnattachedAvoiding(nowMs, -1) }

// enterUnattachedAvoiding is enterUnattached for an observer that just left the epoch
// led by lost (-1: none): its first discovery Fetch goes to another voter. An
// observer that learns of a new epoch from a candidate has lost its leader, most
// likely to a crash or a pause; a Fetch to a paused leader is answered by no one and
// hangs for the request timeout (2.5 s), and one observer of the kraftd bench's
// SIGSTOP scenario followed the new leader 1.1 s after the others for that reason.
func (r *Raft) enterUnattachedAvoiding(nowMs int64, lost int32) {
	if r.campaigns() {
		r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
		return
	}
	r.discover = &followerState{fetchDeadlineMs: noDeadline, nextFetchMs: nowMs, rediscover: true, avoid: lost, lost: lost}
	r.maybeSendDiscoveryFetch(nowMs)
}

// becomeFollower follows leaderID in epoch.
func (r *Raft) becomeFollower(nowMs int64, epoch, leaderID int32) {
	assertf(leaderID != r.cfg.NodeID, "cannot follow self at epoch %d", epoch)
	// Callers reject a conflicting leader first (conflictingLeader): no peer reaches this.
	assertf(epoch > r.epoch || r.leaderID < 0 || r.leaderID == leaderID,
		"single leader per epoch: %d and %d in epoch %d", r.leaderID, leaderID, epoch)
	assertf(epoch > r.epoch || r.role != Leader && r.role != Resigned,
		"leader or resigned follows another at its own epoch %d", epoch)
	r.leave()
	r.transitionEpoch(epoch)
	r.leaderID = leaderID
	r.role = Follower
	if r.dynamic() {
		r.isVoter = r.selfIsVoter()
	}
	r.follow = &followerState{fetchDeadlineMs: nowMs + r.cfg.FetchTimeoutMs, nextFetchMs: nowMs, avoid: -1, lost: -1}
	if r.leftEpoch == epoch {
		// Following a leader that announced its resignation (a Prospective whose
		// pre-vote round was not decided returns to it): campaign again after an
		// election timeout, not a fetch timeout.
		r.follow.fetchDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	}
	r.persist()
	r.logf("%d became follower of %d at epoch %d", r.cfg.NodeID, leaderID, epoch)
	r.maybeSendFetch(nowMs)
}

// startElection is the action of an expired election or fetch timer.
func (r *Raft) startElection(nowMs int64) {
	assertf(r.campaigns(), "observer or recovering node %d never campaigns", r.cfg.NodeID)
	if r.epochExhausted(nowMs) {
		return
	}
	// A resigned leader skips pre-vote: every voter already knows it stepped down.
	if r.role != Resigned && r.preVoteUsable() {
		r.becomeProspective(nowMs)
		return
	}
	r.becomeCandidate(nowMs)
}

// preVoteUsable: KIP-996 pre-vote only if every other voter speaks Vote v2.
func (r *Raft) preVoteUsable() bool {
	if r.cfg.DisablePreVote || len(r.otherVoters()) == 0 {
		return false // the sole voter needs nobody's pre-vote; a removed replica does
	}
	for _, v := range r.otherVoters() {
		if r.noPreVote[v] {
			return false
		}
	}
	return true
}

// becomeProspective asks for pre-votes at the current epoch; nothing durable changes.
func (r *Raft) becomeProspective(nowMs int64) {
	leader, voted := r.leaderID, r.votedID
	if r.role == Resigned || r.role == Leader {
		panic("quorum: invariant violated: leader or resigned cannot become prospective")
	}
	assertf(r.campaigns(), "observer or recovering node %d never campaigns", r.cfg.NodeID)
	r.leave()
	r.leaderID, r.votedID = leader, voted
	r.role = Prospective
	r.ballot = &ballot{preVote: true, granted: map[int32]bool{r.cfg.NodeID: true}, rejected: map[int32]bool{}, deferTo: -1}
	r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	r.logf("%d became prospective at epoch %d", r.cfg.NodeID, r.epoch)
	r.sendVotes(true)
	r.maybeWinElection(nowMs)
}

// becomeCandidate bumps the epoch and votes for itself. At the last usable epoch it
// stays where it is (epochExhausted): epochCeiling is never created.
func (r *Raft) becomeCandidate(nowMs int64) {
	if r.epochExhausted(nowMs) {
		return
	}
	r.becomeCandidateAt(nowMs, r.epoch+1)
}

func (r *Raft) becomeCandidateAt(nowMs int64, epoch int32) {
	assertf(r.campaigns(), "observer or recovering node %d never campaigns", r.cfg.NodeID)
	retries := r.retries
	r.leave()
	r.transitionEpoch(epoch)
	r.retries = retries + 1
	r.votedID, r.votedDir = r.cfg.NodeID, r.ownDirectoryID()
	r.role = Candidate
	r.ballot = &ballot{granted: map[int32]bool{r.cfg.NodeID: true}, rejected: map[int32]bool{}, deferTo: -1}
	r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	r.persist()
	r.logf("%d became candidate at epoch %d", r.cfg.NodeID, r.epoch)
	r.sendVotes(false)
	r.maybeWinElection(nowMs)
}

// becomeResigned hands leadership over without leaving the epoch.
func (r *Raft) becomeResigned(nowMs int64, successors []int32) {
	// A leader elected outside its voter set (removedPendingCommit) resigns once its
	// removal commits.
	assertf(r.isVoter || r.role == Leader || r.removedPendingCommit(), "observer %d cannot resign", r.cfg.NodeID)
	r.leave()
	r.leaderID = r.cfg.NodeID
	r.role = Resigned
	r.resigned = &resignedState{successors: successors, acked: map[int32]bool{}}
	r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	r.logf("%d became resigned at epoch %d", r.cfg.NodeID, r.epoch)
	r.sendEndEpoch(nowMs)
}

// Tick fires every timer due at nowMs. The driver calls it at NextDeadlineMs (calling
// it earlier or more often is harmless).
func (r *Raft) Tick(nowMs int64) {
	r.nowMs = max(r.nowMs, nowMs)
	nowMs = r.nowMs
	r.tickRecovery(nowMs)
	switch r.role {
	case Leader:
		r.tickLeader(nowMs)
	case Follower:
		r.tickFollower(nowMs)
	case Unattached:
		if r.campaigns() && nowMs >= r.electionDeadlineMs {
			r.startElection(nowMs)
		} else if !r.campaigns() {
			r.electionDeadlineMs = noDeadline // left from when it campaigned: not its timer now
			r.maybeSendDiscoveryFetch(nowMs)
		}
	case Prospective:
		if nowMs >= r.electionDeadlineMs && r.leaderID >= 0 && r.leaderID != r.cfg.NodeID {
			// Neither won nor lost while a leader of this epoch is known: fetch from
			// it again (Kafka's prospective follows the leader it knows when its
			// election times out) instead of pre-voting forever without fetching.
			r.becomeFollower(nowMs, r.epoch, r.leaderID)
		} else if nowMs >= r.electionDeadlineMs {
			// Another round, through startElection: it campaigns for real once a
			// voter is known to lack pre-vote (KIP-996).
			r.startElection(nowMs)
		}
	case Candidate:
		r.tickCandidate(nowMs)
	case Resigned:
		r.tickResigned(nowMs)
	}
	r.maybeResignAfterRemoval(nowMs)
}

func (r *Raft) tickCandidate(nowMs int64) {
	switch {
	case nowMs >= r.backoffDeadlineMs:
		r.startElection(nowMs)
	case r.backoffDeadlineMs == noDeadline && nowMs >= r.electionDeadlineMs:
		r.backoff(nowMs)
	}
}

// backoff makes a losing candidate wait a random time before the next round, so two
// candidates do not split the vote forever.
func (r *Raft) backoff(nowMs int64) {
	r.electionDeadlineMs = noDeadline
	r.backoffDeadlineMs = nowMs + r.electionBackoffMs()
	r.logf("%d lost election at epoch %d, backing off", r.cfg.NodeID, r.epoch)
	if nowMs >= r.backoffDeadlineMs {
		r.startElection(nowMs)
	}
}

// NextDeadlineMs is the earliest time Tick has work to do, or MaxInt64 for none.
func (r *Raft) NextDeadlineMs() int64 {
	d := min(r.electionDeadlineMs, r.backoffDeadlineMs, r.recoveryDeadlineMs())
	if r.lead != nil {
		d = min(d, r.lead.nextDeadlineMs())
	}
	if r.follow != nil {
		d = min(d, r.follow.nextDeadlineMs())
	}
	if r.discover != nil {
		d = min(d, r.discover.nextDeadlineMs())
	}
	if r.resigned != nil {
		d = min(d, r.resigned.nextSendMs)
	}
	return d
}

// SetPeerSupportsPreVote records whether a voter speaks Vote v2 (KIP-996). The driver
// learns it from ApiVersions; pre-vote is used only while every voter supports it.
func (r *Raft) SetPeerSupportsPreVote(id int32, ok bool) {
	if ok {
		delete(r.noPreVote, id)
	} else {
		r.noPreVote[id] = true
	}
}

func (r *Raft) newRequestID() uint64 {
	r.nextRequestID++
	return r.nextRequestID
}

// send queues m. Only a leader's Fetch answers may leave before the pending state is
// durable: everything else (votes, epoch acks, a follower's next Fetch, which is its
// durability ack) must wait for the Ready's persistence.
func (r *Raft) send(m Message) {
	m.From = r.cfg.NodeID
	if m.FetchResp != nil && r.role == Leader && r.pendingState == nil && !r.stateInFlight {
		r.msgs = append(r.msgs, m)
		return
	}
	r.msgsAfter = append(r.msgsAfter, m)
}
