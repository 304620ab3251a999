package quorum

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// epochCeiling is the one quorum epoch no node adopts or creates. A candidate bumps
// its epoch by one, so a node at math.MaxInt32 could never campaign again (the next
// epoch would overflow to a negative one). Requests carrying it get INVALID_REQUEST;
// a node at epochCeiling-1 refuses to campaign (epochExhausted). No election reaches
// either on its own: 2^31 elections at one per second take 68 years.
const epochCeiling int32 = math.MaxInt32

// usableEpoch reports whether a request or response may move this node to epoch.
func usableEpoch(epoch int32) bool { return epoch >= 0 && epoch < epochCeiling }

// voterSetError is the membership half of Kafka 3.7's validateVoterOnlyRequest for
// Vote, BeginQuorumEpoch and EndQuorumEpoch: with a static voter set (kraft.version
// 0) both this node and the sender (candidate or leader) must be voters, or the
// answer is INCONSISTENT_VOTER_SET and nothing changes. Checking before anything is
// adopted is what keeps a packet from a non-voter (id 99, say) from moving the epoch.
//
// KIP-853 (kraft.version 1, dynamic quorums) drops this check: a voter set read from
// the log may lag, so a replica grants votes and follows leaders it does not yet know
// as voters. When kraft.version 1 is implemented, that is this function returning 0.
func (r *Raft) voterSetError(remoteID int32) int16 {
	if r.kraftVersion() >= KRaftVersionDynamic {
		return 0
	}
	if !r.isVoter || !r.isVoterID(remoteID) {
		r.counters.inconsistentVoterSet++
		return kerr.InconsistentVoterSet.Code
	}
	return 0
}

// conflictingLeader reports whether leaderID contradicts the leader this node knows
// for epoch (itself when it leads or resigned). Two leaders in one epoch cannot both
// be real, so the request is answered INVALID_REQUEST, logged at ERROR and counted,
// and the node keeps its leader. Kafka stops the process here; a forged packet must
// not be able to stop a controller.
func (r *Raft) conflictingLeader(kind string, from, epoch, leaderID int32) bool {
	if epoch != r.epoch || r.leaderID < 0 || r.leaderID == leaderID {
		return false
	}
	r.counters.conflictingLeader++
	r.logger.Error("quorum: request names another leader for an epoch whose leader is known; rejected",
		zap.String("request", kind), zap.Int32("from", from), zap.Int32("epoch", epoch),
		zap.Int32("claimed_leader", leaderID), zap.Int32("known_leader", r.leaderID))
	return true
}

// refuseResponse logs at ERROR and counts a peer's answer to one of this node's
// requests that it will not act on: an INVALID_REQUEST answer, or content it cannot
// apply without breaking an invariant (a divergence below its high watermark, a
// snapshot that ends below it or lies in a later epoch). Kafka stops the process on
// the first (it takes it for a bug in its own request) and on most of the others
// (IllegalStateException); here a peer's answer never stops the node, since the peer
// may be a forged voter, or a real one misled by a forged packet. The caller then
// treats the response as a failed request: a fetcher retries after the retry backoff,
// an election round waits for its timer, BeginQuorumEpoch and EndQuorumEpoch are sent
// again on their schedule.
func (r *Raft) refuseResponse(from int32, what string, fields ...zap.Field) {
	r.counters.refusedResponse++
	r.logger.Error("quorum: refused a peer's response; treating it as a failed request",
		append([]zap.Field{zap.String("reason", what), zap.Int32("from", from), zap.Int32("epoch", r.epoch),
			zap.Stringer("role", r.role)}, fields...)...)
}

// Counters are totals since the core started, for monitoring.
type Counters struct {
	// ConflictingLeader counts requests and responses that named a leader other than
	// the one this node knows for its epoch (all rejected or ignored).
	ConflictingLeader int64
	// InconsistentVoterSet counts Vote, BeginQuorumEpoch and EndQuorumEpoch requests
	// answered INCONSISTENT_VOTER_SET (a sender or receiver outside the voter set).
	InconsistentVoterSet int64
	// RefusedResponse counts peers' responses refused as invalid (refuseResponse):
	// INVALID_REQUEST answers and content that cannot be applied. Each was logged at
	// ERROR and handled as a failed request.
	RefusedResponse int64
	// ObserversUntracked counts Fetches from observers that were served but not
	// tracked because the leader already tracked maxTrackedObservers of them.
	ObserversUntracked int64
}

type counters struct {
	conflictingLeader    int64
	inconsistentVoterSet int64
	refusedResponse      int64
	observersUntracked   int64
}

// Counters returns the monitoring totals.
func (r *Raft) Counters() Counters {
	return Counters{
		ConflictingLeader:    r.counters.conflictingLeader,
		InconsistentVoterSet: r.counters.inconsistentVoterSet,
		RefusedResponse:      r.counters.refusedResponse,
		ObserversUntracked:   r.counters.observersUntracked,
	}
}

// hasLiveLeader is leader stickiness (Raft thesis section 4.2.3): a voter that has
// heard from a live leader within the fetch timeout does not let a Vote request for a
// higher epoch move it, so a single stale or forged candidate cannot depose a healthy
// leader. A follower counts as hearing from its leader while its last successful
// Fetch is within controller.quorum.fetch.timeout.ms; EndQuorumEpoch from the leader
// clears it at once (a resigned leader is not live). The leader itself counts as live
// while a majority of the voters, itself included, fetched within that time (the
// thesis: the leader ignores such votes too; Kafka has no stickiness and relies on
// pre-vote alone).
//
// Legitimate elections still happen: a follower of a crashed leader stops being
// sticky when its own fetch timer expires, which is when it would campaign itself;
// pre-vote (KIP-996) already keeps a follower that hears from its leader from helping
// a candidate. A voter stranded in a higher epoch still gets back through the
// leader's BeginQuorumEpoch, whose FENCED_LEADER_EPOCH answer moves the leader to that
// epoch (sendBeginEpoch).
func (r *Raft) hasLiveLeader(nowMs int64) bool {
	switch r.role {
	case Follower:
		return r.follow.fetchedOK && nowMs < r.follow.fetchDeadlineMs
	case Leader:
		heard := 1 // itself
		for _, v := range r.otherVoters() {
			if t := r.lead.replicas[v].lastFetchMs; t >= 0 && nowMs-t < r.cfg.FetchTimeoutMs {
				heard++
			}
		}
		return heard >= r.majority()
	}
	return false
}

// epochExhausted reports whether this node is at the last epoch it may create
// (epochCeiling-1) and so cannot campaign. Only a voter can move it there (a forged
// voter id on an unauthenticated listener, or 2^31 elections). It logs at ERROR and
// re-arms the timer that fired, so the node keeps following or waiting instead of
// spinning; the cluster needs an operator (see validateQuorumState for what to do).
func (r *Raft) epochExhausted(nowMs int64) bool {
	if r.epoch < epochCeiling-1 {
		return false
	}
	r.logger.Error("quorum: epoch space exhausted, cannot start an election; stop the quorum, move every controller's quorum-state aside and restart",
		zap.Int32("epoch", r.epoch))
	switch {
	case r.follow != nil:
		r.follow.fetchDeadlineMs = nowMs + r.cfg.FetchTimeoutMs
	default:
		r.backoffDeadlineMs = noDeadline
		r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	}
	return true
}

// ErrUnusableQuorumState: the persisted quorum-state cannot be used with this
// configuration. The node does not start.
var ErrUnusableQuorumState = fmt.Errorf("quorum: unusable quorum-state")

// validateQuorumState checks a loaded quorum-state before the core adopts it: the
// epoch must be one an election can follow, and with a static voter set the leader
// and the voted-for id must be voters. Anything else would panic later or keep the
// node from ever electing, so it stops the node with what to do.
func validateQuorumState(cfg *Config, st raftlog.QuorumState, logEpoch int32, logKRaftVersion int16) error {
	const moveAside = "stop this node, move the quorum-state file in its __cluster_metadata-0 directory " +
		"aside, run `kraftd storage recover` [same flags] and restart it (it then rejoins the quorum without " +
		"voting until it has caught up with a leader)"
	const forged = "; it was written from a forged or corrupt request: " + moveAside
	const voters = "; check controller.quorum.voters against the other controllers; if it is right, " + moveAside
	// A static quorum upgraded to kraft.version 1 takes its voters from the log, where
	// a voter added after the upgrade may have been voted for.
	static := len(cfg.Voters) > 0 && cfg.KRaftVersion == 0 && logKRaftVersion == KRaftVersionStatic
	switch {
	case !usableEpoch(st.LeaderEpoch):
		return fmt.Errorf("%w: leader epoch %d is not in [0, %d]%s", ErrUnusableQuorumState, st.LeaderEpoch, epochCeiling-1, forged)
	case !usableEpoch(logEpoch):
		return fmt.Errorf("%w: the log's last epoch %d is not in [0, %d]%s", ErrUnusableQuorumState, logEpoch, epochCeiling-1, forged)
	case st.LeaderID < -1 || st.VotedID < -1:
		return fmt.Errorf("%w: leader %d, voted-for %d%s", ErrUnusableQuorumState, st.LeaderID, st.VotedID, forged)
	case static && st.LeaderID >= 0 && !cfg.isVoter(st.LeaderID):
		return fmt.Errorf("%w: leader %d is not a voter of %v%s", ErrUnusableQuorumState, st.LeaderID, cfg.Voters, voters)
	case static && st.VotedID >= 0 && !cfg.isVoter(st.VotedID):
		return fmt.Errorf("%w: voted-for %d is not a voter of %v%s", ErrUnusableQuorumState, st.VotedID, cfg.Voters, voters)
	}
	return nil
}

// checkStateNotLost refuses a voter with no quorum-state file that has run before
// (Loaded.RanBefore: the file is written at the first start) or whose log shows it
// took part in the quorum (a batch or snapshot of epoch > 0; every such node wrote the
// file before it fetched or led; this covers directories from Kafka or older kraftd):
// the file was lost, with the votes it recorded, and starting without it could grant a
// second vote in an epoch it already voted in (even with an empty log, at the first
// elections). A recovery marker (Loaded.Recovery) is the way on. A fresh node and an
// observer, which never votes, start as before.
//
// voter is whether this replica is in the voter set in force (the static one, or
// in a dynamic quorum the one its snapshot and log name).
func checkStateNotLost(l raftlog.Loaded, logEpoch int32, voter bool) error {
	if !l.StateMissing || l.Recovery != nil || !voter {
		return nil
	}
	epoch := logEpoch
	if l.Snapshot != nil {
		epoch = max(epoch, l.Snapshot.Epoch)
	}
	if epoch <= 0 && !l.RanBefore {
		return nil
	}
	return fmt.Errorf("%w: the quorum-state file is missing, but this voter ran before (its log shows epoch %d): "+
		"the votes it recorded are lost. Ways out: restore the file from a copy; or run `kraftd storage recover` "+
		"[same flags]: the node then rejoins without voting until it has caught up with a leader", ErrUnusableQuorumState, epoch)
}
