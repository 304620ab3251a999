package quorum

import (
	"slices"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// recoveryState is a voter that restarted with a recovery marker (raftlog.Recovery,
// written by `kraftd storage recover` before it cut damaged records): it may have
// forgotten records it acknowledged and votes it granted. Protocol-aware recovery
// (FAST 2018, "CTRL"): until it has caught up with a leader it must not help elect
// anyone, so it grants no Vote or PreVote and never stands for election; it keeps
// fetching. It is done once it holds, durably, a high watermark sent after its restart
// by a leader of epoch >= epoch (a leader's high watermark is -1 until it committed an
// entry of its own epoch, so any high watermark it sends was established that way);
// from then on it votes only in epochs above epoch (Raft.voteFloor).
//
// INVARIANTS: target >= 0 only once learning is over; the core is never a Candidate,
// Prospective, Leader or Resigned while recovering.
type recoveryState struct {
	// epoch is E: the highest epoch in which the node may have voted.
	epoch int32
	// learning: the quorum-state was lost, so E may be below an epoch the node voted
	// in. It first learns the epochs of enough other voters to meet every majority
	// that could have elected a leader with its forgotten vote (len(voters) -
	// majority + 1 of them), and raises E to the largest.
	learning bool
	reported map[int32]bool
	// probes are the discovery Fetches sent to learn the other voters' epochs, by
	// request id; nextProbeMs is when the unanswered voters are asked again.
	probes      map[uint64]int32
	nextProbeMs int64
	// target is the first qualifying high watermark (-1: none yet).
	target int64
}

func newRecoveryState(rec raftlog.Recovery, nowMs int64) *recoveryState {
	return &recoveryState{epoch: rec.Epoch, learning: rec.StateLost, reported: map[int32]bool{},
		probes: map[uint64]int32{}, nextProbeMs: nowMs, target: -1}
}

// campaigns reports whether this node may stand for election: a voter that is not
// recovering.
func (r *Raft) campaigns() bool { return (r.isVoter || r.removedPendingCommit()) && r.recovery == nil }

// mayVoteIn reports whether this node may grant a vote (or pre-vote) for a
// candidate that will lead epoch: never while recovering, and after a recovery only
// above the epoch it may have voted in before.
func (r *Raft) mayVoteIn(epoch int32) bool { return r.recovery == nil && epoch > r.voteFloor }

// Recovering reports whether the node runs with a recovery marker.
func (r *Raft) Recovering() bool { return r.recovery != nil }

// reportsNeeded is how many other voters must report their epoch: enough to meet
// every majority that includes this node.
func (r *Raft) reportsNeeded() int { return len(r.voterIDs()) - r.majority() + 1 }

// tickRecovery sends the learning probes that are due.
func (r *Raft) tickRecovery(nowMs int64) {
	rec := r.recovery
	if rec == nil || !rec.learning || nowMs < rec.nextProbeMs {
		return
	}
	rec.nextProbeMs = nowMs + r.cfg.ElectionTimeoutMs
	clear(rec.probes)
	for _, v := range r.otherVoters() {
		if !rec.reported[v] {
			rec.probes[r.sendFetch(v)] = v
		}
	}
}

// recoveryDeadlineMs is when tickRecovery has work.
func (r *Raft) recoveryDeadlineMs() int64 {
	if r.recovery == nil || !r.recovery.learning {
		return noDeadline
	}
	return r.recovery.nextProbeMs
}

// handleProbeResponse takes the answer to a learning probe: the responder's epoch
// counts as its report (any answer without a top-level error names it), and a newer
// epoch or leader is adopted as from any response. It reports whether m was a probe.
func (r *Raft) handleProbeResponse(nowMs int64, m Message) bool {
	rec := r.recovery
	if rec == nil {
		return false
	}
	v, ok := rec.probes[m.RequestID]
	if !ok {
		return false
	}
	delete(rec.probes, m.RequestID)
	resp := m.FetchResp
	if m.Err != nil || m.From != v || resp.TopLevelErrorCode != 0 || !usableEpoch(resp.LeaderEpoch) {
		return true // asked again at the next probe round
	}
	rec.reported[v] = true
	if resp.LeaderEpoch > rec.epoch {
		rec.epoch = resp.LeaderEpoch
	}
	if rec.learning && len(rec.reported) >= r.reportsNeeded() {
		rec.learning = false
		clear(rec.probes)
		r.logf("%d recovering: learned epoch %d from voters %v; waits for a leader of epoch >= %d",
			r.cfg.NodeID, rec.epoch, sortedIDs(rec.reported), rec.epoch)
	}
	r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch)
	return true
}

// maybeFinishRecovery runs after a follower applied a Fetch answer that appended
// (no divergence, no snapshot): the leader found the fetched-from offset consistent
// with its log, so this node's log up to its end is the leader's. The first high
// watermark from a leader of epoch >= E becomes the target; once the log reaches
// it, the next Ready tells the driver to remove the marker after the appends are
// durable (Ready.RecoveryDone).
func (r *Raft) maybeFinishRecovery(resp *FetchResponse) {
	rec := r.recovery
	if rec == nil || rec.learning {
		return
	}
	if rec.target < 0 && r.epoch >= rec.epoch && resp.HighWatermark >= 0 {
		rec.target = resp.HighWatermark
		r.logf("%d recovering: leader %d of epoch %d sent high watermark %d", r.cfg.NodeID, r.leaderID, r.epoch, rec.target)
	}
	if rec.target < 0 || r.log.endOffset() < rec.target {
		return
	}
	r.recovery = nil
	r.voteFloor = rec.epoch
	r.recoveryDone = true
	r.logf("%d recovered at offset %d: votes only in epochs above %d", r.cfg.NodeID, r.log.endOffset(), rec.epoch)
}

func sortedIDs(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// logRefusedVote says why a recovering or recovered node refused a vote.
func (r *Raft) logRefusedVote(req *VoteRequest) {
	if r.recovery != nil {
		r.logf("%d refuses vote for %d at epoch %d (prevote=%t): recovering", r.cfg.NodeID, req.CandidateID,
			req.CandidateEpoch, req.PreVote)
		return
	}
	r.logf("%d refuses vote for %d at epoch %d (prevote=%t): recovered, it votes only in epochs above %d",
		r.cfg.NodeID, req.CandidateID, req.CandidateEpoch, req.PreVote, r.voteFloor)
}
