package quorum

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// sendVotes asks every other voter for a vote (or a pre-vote at the current epoch).
func (r *Raft) sendVotes(preVote bool) {
	for _, v := range r.otherVoters() {
		r.send(Message{To: v, RequestID: r.newRequestID(), Vote: &VoteRequest{
			ClusterID:            r.cfg.ClusterID,
			VoterID:              v,
			VoterDirectoryID:     r.voterDirectoryID(v),
			CandidateDirectoryID: r.ownDirectoryID(),
			CandidateEpoch:       r.epoch,
			CandidateID:          r.cfg.NodeID,
			LastOffsetEpoch:      r.log.lastEpoch(),
			LastOffset:           r.log.endOffset(),
			PreVote:              preVote,
		}})
	}
}

// handleVote answers a Vote request (KIP-595 section "Vote", KIP-996 for PreVote).
// Every check that can refuse the request runs before the epoch is adopted, so a
// refused request changes nothing: no epoch, no vote, nothing persisted.
func (r *Raft) handleVote(nowMs int64, m Message) {
	req := m.Vote
	resp := &VoteResponse{PreVote: req.PreVote}
	reply := func() {
		resp.LeaderID, resp.LeaderEpoch = r.leaderID, r.epoch
		r.send(Message{To: m.From, RequestID: m.RequestID, VoteResp: resp})
	}
	var code int16
	switch {
	case req.CandidateID < 0:
		code = kerr.InvalidRequest.Code
	case req.CandidateEpoch < r.epoch:
		code = kerr.FencedLeaderEpoch.Code
	case !r.isOwnKey(req.VoterID, req.VoterDirectoryID):
		code = kerr.InvalidVoterKey.Code
	case r.voterSetError(req.CandidateID) != 0:
		code = kerr.InconsistentVoterSet.Code
	case req.CandidateID == r.cfg.NodeID || !usableEpoch(req.CandidateEpoch):
		// Nobody asks itself for a vote; epochCeiling is never adopted.
		code = kerr.InvalidRequest.Code
	case req.LastOffset < 0 || req.LastOffsetEpoch < 0 || req.LastOffsetEpoch > req.CandidateEpoch ||
		(!req.PreVote && req.LastOffsetEpoch == req.CandidateEpoch):
		// A candidate's log holds only epochs below the one it campaigns in.
		code = kerr.InvalidRequest.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		reply()
		return
	}
	if !req.PreVote && req.CandidateEpoch > r.epoch && r.hasLiveLeader(nowMs) {
		// Leader stickiness: not granted, and the epoch is not adopted.
		r.debugf("%d ignores vote for %d at epoch %d: leader %d is live at epoch %d",
			r.cfg.NodeID, req.CandidateID, req.CandidateEpoch, r.leaderID, r.epoch)
		reply()
		return
	}
	if !req.PreVote && req.CandidateEpoch > r.epoch {
		r.becomeUnattached(nowMs, req.CandidateEpoch, -1)
	}
	upToDate := r.log.isUpToDate(req.LastOffsetEpoch, req.LastOffset)
	leads := req.CandidateEpoch // the epoch the candidate will lead; a pre-vote's is the next
	if req.PreVote {
		leads++
	}
	resp.VoteGranted = r.mayGrantTo(req.CandidateID) && req.CandidateID != r.cfg.NodeID &&
		r.mayVoteIn(leads) && (req.PreVote || r.votedKeyAllows(req.CandidateID, req.CandidateDirectoryID)) &&
		r.canGrantVote(nowMs, req.CandidateID, req.PreVote, req.CandidateEpoch > r.epoch, upToDate)
	if !r.mayVoteIn(leads) {
		r.logRefusedVote(req)
	}
	// Two voters that lost their leader at the same moment (both fetch timers were
	// last reset by the same answer, as after a kill -9 of the leader) become
	// prospective together, and each grants the other's pre-vote (KIP-996: a
	// prospective grants like an unattached voter). Both then became candidates in
	// the next epoch, voted for themselves and rejected each other: a split vote,
	// then an election timeout and a backoff before the next round. The one with
	// the higher id now leaves the election to the other (maybeWinElection): it
	// stays prospective, and the other's Vote, at the next epoch, finds it ready to
	// grant. Pre-votes change nothing durable, so this only orders the candidates.
	// If that Vote never comes, the election deadline ends this round as it ends
	// any undecided one.
	if resp.VoteGranted && req.PreVote && r.role == Prospective && req.CandidateEpoch == r.epoch &&
		req.CandidateID < r.cfg.NodeID && r.ballot.deferTo < 0 {
		r.ballot.deferTo = req.CandidateID
	}
	if resp.VoteGranted && !req.PreVote && r.votedID < 0 {
		r.votedID, r.votedDir = req.CandidateID, req.CandidateDirectoryID
		if r.campaigns() {
			// A replica outside the voter set may grant (kraft.version 1) but never
			// campaigns: an election timer would be a deadline nothing moves.
			r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
		}
		r.persist()
		r.logf("%d voted for %d at epoch %d", r.cfg.NodeID, req.CandidateID, r.epoch)
	}
	r.debugf("%d %s vote for %d at epoch %d (prevote=%t)", r.cfg.NodeID, grantWord(resp.VoteGranted), req.CandidateID, req.CandidateEpoch, req.PreVote)
	reply()
}

// votedKeyAllows reports whether a vote cast in this epoch for the candidate's id
// went to the same replica (KIP-853: a vote is for a replica key, so a controller
// with a replaced disk does not inherit its predecessor's vote). A zero directory id
// on either side matches.
func (r *Raft) votedKeyAllows(candidate int32, dir [16]byte) bool {
	return r.votedID != candidate || r.votedDir == [16]byte{} || dir == [16]byte{} || r.votedDir == dir
}

func grantWord(ok bool) string {
	if ok {
		return "granted"
	}
	return "rejected"
}

// canGrantVote holds the per-state rules of section 2.4 of the spec. A pre-vote from a
// higher epoch is judged on the log, unless this node hears from a live leader
// (hasLiveLeader): KIP-996's rule that a voter which fetched from its leader within
// the fetch timeout rejects pre-votes holds at every epoch. Kafka 4.x instead adopts
// the higher epoch first (leaving the leader) and then grants on the log alone, so a
// single stale or forged prospective at a higher epoch collects pre-votes from
// followers of a healthy leader; here they refuse, and the epoch is not adopted (a
// pre-vote never moves it). A voter stranded at a higher epoch still gets back:
// the leader's BeginQuorumEpoch, answered FENCED_LEADER_EPOCH, moves the leader to
// that epoch (sendBeginEpoch).
func (r *Raft) canGrantVote(nowMs int64, candidate int32, preVote, higherEpoch, upToDate bool) bool {
	if preVote && higherEpoch {
		return upToDate && !r.hasLiveLeader(nowMs)
	}
	switch r.role {
	case Unattached, Prospective:
		switch {
		case preVote:
			return upToDate
		case r.votedID >= 0:
			return r.votedID == candidate
		case r.leaderID >= 0:
			return false
		}
		return upToDate
	case Follower:
		// KIP-996: a follower still hearing from its leader protects it from a
		// disruptive pre-vote; one that has not fetched successfully grants it.
		return preVote && upToDate && !r.follow.fetchedOK
	case Candidate:
		return preVote && upToDate
	}
	return false // Leader, Resigned
}

// handleVoteResponse counts a (pre-)vote for the current election round.
func (r *Raft) handleVoteResponse(nowMs int64, m Message) {
	resp := m.VoteResp
	if m.Err != nil || r.ballot == nil || resp.PreVote != r.ballot.preVote {
		return
	}
	if resp.TopLevelErrorCode == kerr.UnsupportedVersion.Code && resp.PreVote {
		// KIP-996: a peer without Vote v2 cannot pre-vote; campaign for real.
		r.SetPeerSupportsPreVote(m.From, false)
		if r.role == Prospective {
			r.becomeCandidate(nowMs)
		}
		return
	}
	if r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch) {
		return
	}
	if resp.LeaderEpoch != r.epoch || resp.ErrorCode != 0 || !r.isVoterID(m.From) {
		return
	}
	if resp.VoteGranted {
		r.ballot.granted[m.From] = true
	} else {
		r.ballot.rejected[m.From] = true
	}
	r.maybeWinElection(nowMs)
}

// maybeWinElection acts once a majority has answered one way.
func (r *Raft) maybeWinElection(nowMs int64) {
	b := r.ballot
	granted := 0
	for id := range b.granted {
		if r.isVoterID(id) { // a candidate outside its voter set (removedPendingCommit) counts not itself
			granted++
		}
	}
	switch {
	case granted >= r.majority():
		if r.role == Prospective && b.deferTo >= 0 {
			if !b.deferLogged {
				b.deferLogged = true
				r.logf("%d won pre-vote at epoch %d, leaves the election to %d", r.cfg.NodeID, r.epoch, b.deferTo)
			}
			return
		}
		if r.role == Prospective {
			r.becomeCandidate(nowMs)
		} else {
			r.becomeLeader(nowMs)
		}
	case len(b.rejected) >= len(r.voterIDs())-r.majority()+1:
		if r.role == Prospective {
			r.prospectiveLost(nowMs)
		} else if r.backoffDeadlineMs == noDeadline {
			r.backoff(nowMs)
		}
	}
}

// prospectiveLost returns to what the node was before the pre-vote round: following
// the known leader, or Unattached, at the same (never bumped) epoch.
func (r *Raft) prospectiveLost(nowMs int64) {
	r.logf("%d lost pre-vote at epoch %d", r.cfg.NodeID, r.epoch)
	if r.leaderID >= 0 {
		r.becomeFollower(nowMs, r.epoch, r.leaderID)
		return
	}
	r.becomeUnattached(nowMs, r.epoch, -1)
}

// handleCommonResponse applies Kafka's maybeHandleCommonResponse: a response from an
// older epoch or UNKNOWN_LEADER_EPOCH is dropped; a newer epoch, FENCED_LEADER_EPOCH or
// NOT_LEADER_OR_FOLLOWER moves this node to the leader and epoch the response names.
// It reports whether the response was fully handled.
//
// An INVALID_REQUEST answer is refused (refuseResponse: logged at ERROR, counted,
// handled as a failed request); Kafka stops the process on it. A response is checked
// like a request before it moves anything: an epoch that is not usable, a leader outside a static voter set, or a leader other than the one known
// for the epoch (counted and logged at ERROR; Kafka stops the process) is ignored.
func (r *Raft) handleCommonResponse(nowMs int64, from int32, topErr, partErr int16, leaderID, leaderEpoch int32) bool {
	switch {
	case topErr == kerr.InvalidRequest.Code || partErr == kerr.InvalidRequest.Code:
		// Not fatal, unlike Kafka: a forged packet may have made the peer disagree.
		r.refuseResponse(from, "peer answered INVALID_REQUEST",
			zap.Int16("top_error", topErr), zap.Int16("error", partErr),
			zap.Int32("peer_leader", leaderID), zap.Int32("peer_epoch", leaderEpoch))
		return true
	case topErr != 0:
		r.debugf("%d ignores response from %d: %s", r.cfg.NodeID, from, errName(topErr))
		return true
	case leaderEpoch < r.epoch || partErr == kerr.UnknownLeaderEpoch.Code:
		return true
	case !usableEpoch(leaderEpoch) || leaderID >= 0 && !r.mayLead(leaderID):
		r.debugf("%d ignores response from %d naming leader %d at epoch %d", r.cfg.NodeID, from, leaderID, leaderEpoch)
		return true
	case leaderID >= 0 && r.conflictingLeader("response", from, leaderEpoch, leaderID):
		return true
	}
	if leaderEpoch > r.epoch || (leaderEpoch == r.epoch && leaderID >= 0 && r.leaderID < 0) {
		r.learnLeader(nowMs, leaderEpoch, leaderID)
		return true
	}
	return partErr == kerr.FencedLeaderEpoch.Code || partErr == kerr.NotLeaderForPartition.Code
}

// mayLead reports whether id may be a leader here: any id for an observer that knows
// the voters only by address, a voter otherwise (kraft.version 0).
func (r *Raft) mayLead(id int32) bool {
	return r.dynamic() || r.isVoterID(id)
}

// learnLeader moves to epoch with leaderID (-1: unknown), as any message showing a
// newer epoch or a newly known leader requires. Callers have checked that epoch is
// usable and leaderID is neither a conflicting leader nor a non-voter.
func (r *Raft) learnLeader(nowMs int64, epoch, leaderID int32) {
	switch {
	case leaderID == r.cfg.NodeID:
		// Someone believes this node leads an epoch it does not lead here (e.g. a leader
		// that restarted Resigned). Only adopt the epoch.
		if epoch > r.epoch {
			r.becomeUnattached(nowMs, epoch, -1)
		}
	case leaderID >= 0:
		r.becomeFollower(nowMs, epoch, leaderID)
	case epoch > r.epoch:
		r.becomeUnattached(nowMs, epoch, -1)
	}
}
