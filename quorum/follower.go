package quorum

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// followerState is the fetch loop of a Follower (and of an Unattached observer that is
// discovering the leader).
//
// INVARIANTS: at most one Fetch in flight (inflight != 0); responses with another
// request id are stale and dropped.
type followerState struct {
	// fetchDeadlineMs: no successful Fetch response since; a voter campaigns, an
	// observer goes back to the bootstrap voters.
	fetchDeadlineMs int64
	// nextFetchMs: when to send the next Fetch if none is in flight.
	nextFetchMs int64
	inflight    uint64
	// fetchedOK: a Fetch succeeded against the leader in this epoch (KIP-996: such a
	// follower rejects pre-votes).
	fetchedOK bool
	// rediscover: send the next Fetch to a random voter rather than the leader.
	rediscover bool
	// leaderTimedOut: the fetch timer of a fetcher that does not campaign (an
	// observer, a recovering voter) expired in this epoch, and no Fetch from the
	// leader succeeded since. Another voter naming the same leader at this
	// epoch then does not send the fetcher back to it: a paused leader is named
	// by the voters until their own fetch timers expire and they elect another,
	// and a Fetch to it hangs for the request timeout. The fetcher keeps asking
	// the other voters, every retry backoff, until one names a newer epoch; at
	// the next expiry of its fetch timer (the voters have kept naming the leader
	// for a whole fetch timeout, so they still fetch from it) it tries the
	// leader again.
	leaderTimedOut bool
	// lost is the leader an Unattached observer lost (discovery only; -1: none):
	// its discovery Fetches avoid it even after another voter failed one, and
	// through the epochs of an election, until a voter names a leader (a paused
	// leader answers no Fetch, and a discovery Fetch has no fetch timer: one
	// sent there hung for the whole request timeout).
	lost int32
	// avoid is the node whose Fetch just failed (an error from the leader, a
	// timeout, BROKER_NOT_AVAILABLE): the rediscovery Fetch goes to another voter
	// when there is one. -1: none.
	avoid int32
	// snap is a snapshot download in progress: FetchSnapshot replaces Fetch until done.
	snap *snapshotFetch
	// updateInflight is the request id of an UpdateRaftVoter in flight (0: none);
	// updatedLeader: the leader of this epoch accepted one; nextUpdateMs: retry
	// after a failed one (82_update_raft_voter.go).
	updateInflight uint64
	updatedLeader  bool
	nextUpdateMs   int64
}

func (f *followerState) nextDeadlineMs() int64 {
	d := f.fetchDeadlineMs
	if f.inflight == 0 {
		d = min(d, f.nextFetchMs)
	}
	return d
}

func (r *Raft) tickFollower(nowMs int64) {
	f := r.follow
	if nowMs >= f.fetchDeadlineMs {
		if r.campaigns() {
			r.logf("%d fetch timer expired at epoch %d", r.cfg.NodeID, r.epoch)
			f.fetchedOK = false
			r.startElection(nowMs)
			return
		}
		// testObserverSendDiscoveryFetchAfterFetchTimeout: no answer from the leader
		// for a whole fetch timeout; ask another voter who leads now. A recovering
		// voter, which may not campaign, does the same.
		if r.isVoter {
			r.logf("%d fetch timer expired at epoch %d; recovering, it asks the other voters", r.cfg.NodeID, r.epoch)
		}
		// No longer hearing from the leader: no longer a reason to refuse pre-votes
		// (KIP-996), which a replica outside the voter set of its own log may be asked
		// for at kraft.version 1 (its addition may be in the others' logs only).
		f.fetchedOK = false
		if f.leaderTimedOut {
			f.leaderTimedOut, f.rediscover = false, false
		} else {
			f.leaderTimedOut = true
			f.rediscoverAvoiding(r.leaderID)
		}
		f.inflight = 0
		f.fetchDeadlineMs = nowMs + r.cfg.FetchTimeoutMs
	}
	r.maybeSendFetch(nowMs)
}

func (f *followerState) rediscoverAvoiding(id int32) { f.rediscover, f.avoid = true, id }

// fetchFailed handles a Fetch or FetchSnapshot that got no usable answer from node
// from: the request failed (timeout, connection) or the node answered
// BROKER_NOT_AVAILABLE (it is shutting down). The fetcher retries after the retry
// backoff. An observer, or a fetcher that knows no leader, sends that retry to
// another voter (testObserverLeaderRediscoveryAfter{BrokerNotAvailableError,
// RequestTimeout}): Kafka backs off its connection to the failed node and sends the
// Fetch to a bootstrap server that is ready instead.
func (r *Raft) fetchFailed(nowMs int64, f *followerState, from int32) {
	f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
	switch {
	case f.leaderTimedOut:
		f.rediscoverAvoiding(r.leaderID) // another voter failed: still not the silent leader
	case f.lost >= 0:
		f.rediscoverAvoiding(f.lost)
	case !r.isVoter || r.leaderID < 0:
		f.rediscoverAvoiding(from)
	}
}

// maybeSendFetch sends the next Fetch when none is in flight and it is due.
func (r *Raft) maybeSendFetch(nowMs int64) {
	r.maybeSendUpdateVoter(nowMs)
	f := r.follow
	if f == nil || f.inflight != 0 || nowMs < f.nextFetchMs || f.snap != nil && f.snap.done {
		return
	}
	to := r.leaderID
	if f.rediscover {
		to = r.randomVoter(f.avoid)
	} else if f.snap != nil {
		f.inflight = r.sendFetchSnapshot(to, f.snap)
		return
	}
	f.inflight = r.sendFetch(to)
}

// maybeSendDiscoveryFetch is an Unattached observer asking a random voter who leads.
func (r *Raft) maybeSendDiscoveryFetch(nowMs int64) {
	d := r.discover
	if d == nil || d.inflight != 0 || nowMs < d.nextFetchMs {
		return
	}
	d.inflight = r.sendFetch(r.randomVoter(d.avoid))
}

// randomVoter picks one of the other voters at random, never avoid unless it is the
// only one.
func (r *Raft) randomVoter(avoid int32) int32 {
	others := r.otherVoters()
	if len(others) == 0 {
		return AnyVoter // an observer of bootstrap addresses: the driver picks one
	}
	if len(others) > 1 {
		others = slices.DeleteFunc(others, func(v int32) bool { return v == avoid })
	}
	return others[r.cfg.Rand.IntN(len(others))]
}

func (r *Raft) sendFetch(to int32) uint64 {
	id := r.newRequestID()
	r.send(Message{To: to, RequestID: id, Fetch: &FetchRequest{
		ClusterID:          r.cfg.ClusterID,
		ReplicaID:          r.cfg.NodeID,
		ReplicaDirectoryID: r.ownDirectoryID(),
		MaxWaitMs:          r.cfg.FetchMaxWaitMs,
		MaxBytes:           r.cfg.FetchMaxBytes,
		CurrentLeaderEpoch: r.epoch,
		FetchOffset:        r.log.endOffset(),
		LastFetchedEpoch:   r.log.lastEpoch(),
	}})
	return id
}

// handleFetchResponse runs on a Follower (or discovering observer) for the answer to
// its in-flight Fetch. A leader's answer this node cannot apply (fetchedDataUsable) is
// refused and handled as a failed Fetch.
func (r *Raft) handleFetchResponse(nowMs int64, m Message) {
	if r.handleProbeResponse(nowMs, m) {
		return
	}
	f := r.follow
	if f == nil {
		f = r.discover
	}
	if f == nil || f.inflight != m.RequestID {
		return // late: sent in another role, epoch or round
	}
	f.inflight = 0
	resp := m.FetchResp
	if m.Err != nil || resp.ErrorCode == kerr.BrokerNotAvailable.Code {
		r.fetchFailed(nowMs, f, m.From)
		return
	}
	if r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch) {
		if r.follow == f {
			// An error from the leader itself sends an observer back to the bootstrap
			// voters; an error from another voter sends it back to the leader.
			// A voter naming the leader whose Fetch timed out, at this epoch, does
			// not send it back there (leaderTimedOut).
			f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
			f.rediscover = false
			if !r.isVoter && m.From == r.leaderID || f.leaderTimedOut {
				f.rediscoverAvoiding(r.leaderID)
			}
		} else if r.discover == f {
			// Still looking for the leader (an older epoch, an error, a leader it may
			// not follow): ask again after the backoff, not at once, or one peer
			// answering stale epochs keeps the observer fetching at network speed.
			f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
		}
		return
	}
	from := m.From
	if from == AnyVoter && resp.ErrorCode == 0 && resp.LeaderID == r.leaderID && resp.LeaderEpoch == r.epoch {
		// A bootstrap server answered without an error, naming this epoch's leader:
		// only that leader answers a Fetch so, so the bootstrap server is the leader
		// and this is its answer. Dropping it would keep an observer that has no other
		// address for the leader rediscovering through that server forever.
		from = r.leaderID
	}
	if r.role != Follower || resp.ErrorCode != 0 || from != r.leaderID {
		f.nextFetchMs = nowMs + r.cfg.RetryBackoffMs
		return
	}
	if !r.fetchedDataUsable(from, resp) {
		// Not a success: the fetch timer keeps running, as for a failed Fetch.
		r.fetchFailed(nowMs, f, from)
		return
	}
	f.rediscover, f.leaderTimedOut = false, false
	if r.leftEpoch != r.epoch {
		f.fetchedOK = true
		f.fetchDeadlineMs = nowMs + r.cfg.FetchTimeoutMs
	}
	f.nextFetchMs = nowMs
	r.applyFetchedData(resp)
	r.maybeSendFetch(nowMs)
}

// fetchedDataUsable checks what a leader's Fetch answer asks of this follower before
// any of it is applied, and refuses (refuseResponse) what no leader of this epoch can
// ask: a truncation below the high watermark (it would un-commit records others
// applied; Kafka fails there), or a snapshot that ends below the high watermark or
// lies in a later epoch than the leader's (Kafka fails once it is downloaded).
// Batches that do not fit the log are dropped one by one in applyFetchedData.
func (r *Raft) fetchedDataUsable(from int32, resp *FetchResponse) bool {
	switch {
	case resp.DivergingEpoch != nil:
		div := *resp.DivergingEpoch
		if to := r.divergenceTruncation(div); div.Epoch < 0 || div.EndOffset < 0 || to < r.hw {
			r.refuseResponse(from, "diverging epoch would truncate below the high watermark",
				zap.Int32("diverging_epoch", div.Epoch), zap.Int64("diverging_end_offset", div.EndOffset),
				zap.Int64("high_watermark", r.hw))
			return false
		}
	case resp.SnapshotID != nil:
		if why := r.unusableSnapshot(*resp.SnapshotID); why != "" {
			r.refuseResponse(from, why, zap.Int64("snapshot_end_offset", resp.SnapshotID.EndOffset),
				zap.Int32("snapshot_epoch", resp.SnapshotID.Epoch), zap.Int64("high_watermark", r.hw))
			return false
		}
	}
	return true
}

// applyFetchedData truncates on divergence or appends the records, then follows the
// leader's high watermark: hw = max(hw, min(leaderHW, LEO)). fetchedDataUsable
// accepted resp.
func (r *Raft) applyFetchedData(resp *FetchResponse) {
	switch {
	case resp.DivergingEpoch != nil:
		r.truncateDiverged(*resp.DivergingEpoch)
		return
	case resp.SnapshotID != nil:
		r.startSnapshotFetch(*resp.SnapshotID)
		return
	}
	leo := r.log.endOffset()
	for _, b := range resp.Batches {
		if b.LastOffset < leo {
			continue
		}
		if b.BaseOffset != leo {
			r.debugf("%d drops fetched batch at %d, log ends at %d", r.cfg.NodeID, b.BaseOffset, leo)
			break
		}
		if b.LastOffset < b.BaseOffset || b.Epoch < r.log.lastEpoch() || b.Epoch > r.epoch {
			// The leader of this epoch has only written epochs up to it, in order.
			r.debugf("%d drops fetched batch at %d: offsets %d..%d, epoch %d (log epoch %d, epoch %d)",
				r.cfg.NodeID, b.BaseOffset, b.BaseOffset, b.LastOffset, b.Epoch, r.log.lastEpoch(), r.epoch)
			break
		}
		if _, err := kraftRecordsOf(b); err != nil {
			// A voter set nobody can read must not take effect; the leader is
			// refused like any unusable answer and asked again.
			r.refuseResponse(r.leaderID, "fetched control batch does not decode", zap.Int64("offset", b.BaseOffset),
				zap.Error(err))
			break
		}
		r.log.append(b)
		leo = b.NextOffset()
	}
	if resp.HighWatermark >= 0 {
		r.knownHW = max(r.knownHW, resp.HighWatermark)
		r.hw = max(r.hw, min(resp.HighWatermark, r.log.endOffset()))
	}
	r.refreshVoter(r.nowMs)
	r.maybeFinishRecovery(resp)
}

// divergenceTruncation is where the log is cut back to agree with the leader (spec
// section 2.7): the local end of the largest local epoch <= the leader's, at most the
// leader's end, on a batch boundary. Taking the minimum with the leader's end is
// always safe; a further divergence shows up in the next Fetch.
func (r *Raft) divergenceTruncation(div EpochEndOffset) int64 {
	_, localEnd := r.log.endOffsetForEpoch(div.Epoch)
	to := min(localEnd, div.EndOffset, r.log.endOffset())
	if to <= r.log.startOffset {
		// Nothing below the log start can be cut (and batchIndex has no batch there).
		return to
	}
	if i := r.log.batchIndex(to); i >= 0 {
		to = r.log.batches[i].BaseOffset
	}
	return to
}

// truncateDiverged cuts the log back to divergenceTruncation, which
// fetchedDataUsable checked is not below the high watermark.
func (r *Raft) truncateDiverged(div EpochEndOffset) {
	to := r.divergenceTruncation(div)
	assertf(to >= r.hw, "truncation to %d below high watermark %d", to, r.hw)
	r.logf("%d truncated log to %d (diverging epoch %d ends at %d)", r.cfg.NodeID, to, div.Epoch, div.EndOffset)
	r.log.truncateTo(to)
	r.refreshVoter(r.nowMs)
}

// handleBeginEpoch: a new leader announces itself. Every check that can refuse the
// request runs before anything is adopted; a refused request changes nothing.
func (r *Raft) handleBeginEpoch(nowMs int64, m Message) {
	req := m.BeginEpoch
	resp := &BeginQuorumEpochResponse{}
	switch {
	case req.LeaderID < 0 || req.LeaderEpoch < 0:
		resp.ErrorCode = kerr.InvalidRequest.Code
	case !r.isOwnKey(req.VoterID, req.VoterDirectoryID):
		resp.ErrorCode = kerr.InvalidVoterKey.Code
	case req.LeaderEpoch < r.epoch:
		resp.ErrorCode = kerr.FencedLeaderEpoch.Code
	case r.voterSetError(req.LeaderID) != 0:
		resp.ErrorCode = kerr.InconsistentVoterSet.Code
	case req.LeaderID == r.cfg.NodeID || !usableEpoch(req.LeaderEpoch):
		// A leader announces itself to the others only; epochCeiling is never adopted.
		resp.ErrorCode = kerr.InvalidRequest.Code
	case r.conflictingLeader("BeginQuorumEpoch", m.From, req.LeaderEpoch, req.LeaderID):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.LeaderEpoch > r.epoch || r.leaderID < 0:
		r.learnLeader(nowMs, req.LeaderEpoch, req.LeaderID)
	case r.role == Unattached || r.role == Prospective:
		// Leader already known (e.g. a failed pre-vote round): follow it again.
		r.becomeFollower(nowMs, req.LeaderEpoch, req.LeaderID)
	}
	resp.LeaderID, resp.LeaderEpoch = r.leaderID, r.epoch
	if r.role == Leader || r.role == Resigned {
		resp.LeaderID = r.cfg.NodeID
	}
	r.send(Message{To: m.From, RequestID: m.RequestID, BeginEpochResp: resp})
}

// handleEndEpoch: the leader is resigning. Its followers shorten their fetch timer by
// their rank among the preferred successors, so the most caught-up voter campaigns
// first; an Unattached voter campaigns at once.
func (r *Raft) handleEndEpoch(nowMs int64, m Message) {
	req := m.EndEpoch
	resp := &EndQuorumEpochResponse{}
	switch {
	case req.LeaderID < 0 || req.LeaderEpoch < 0:
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.LeaderEpoch < r.epoch:
		resp.ErrorCode = kerr.FencedLeaderEpoch.Code
	case r.voterSetError(req.LeaderID) != 0:
		resp.ErrorCode = kerr.InconsistentVoterSet.Code
	case req.LeaderID == r.cfg.NodeID || !usableEpoch(req.LeaderEpoch):
		// A resigning leader tells the others only; epochCeiling is never adopted.
		resp.ErrorCode = kerr.InvalidRequest.Code
	case r.conflictingLeader("EndQuorumEpoch", m.From, req.LeaderEpoch, req.LeaderID):
		resp.ErrorCode = kerr.InvalidRequest.Code
	default:
		// The sender is leaving: adopt a newer epoch without following it.
		if req.LeaderEpoch > r.epoch {
			r.becomeUnattached(nowMs, req.LeaderEpoch, -1)
		}
		r.leftEpoch = req.LeaderEpoch
		r.reactToEndEpoch(nowMs, req)
	}
	resp.LeaderID, resp.LeaderEpoch = r.leaderID, r.epoch
	if r.role == Leader || r.role == Resigned {
		resp.LeaderID = r.cfg.NodeID
	}
	r.send(Message{To: m.From, RequestID: m.RequestID, EndEpochResp: resp})
}

func (r *Raft) reactToEndEpoch(nowMs int64, req *EndQuorumEpochRequest) {
	if !r.campaigns() {
		return
	}
	switch {
	case r.role == Follower && r.leaderID == req.LeaderID:
		// The leader is leaving: stop protecting it from pre-votes.
		r.follow.fetchedOK = false
		r.follow.fetchDeadlineMs = min(r.follow.fetchDeadlineMs, nowMs+r.endEpochBackoffMs(req.PreferredSuccessors))
		r.tickFollower(nowMs)
	case r.role == Unattached:
		r.startElection(nowMs)
	}
}

// endEpochBackoffMs: rank 0 waits nothing, rank p waits (max >> (n-1)) << (p-1), and a
// voter outside the list waits the full backoff maximum.
func (r *Raft) endEpochBackoffMs(successors []int32) int64 {
	p := slices.Index(successors, r.cfg.NodeID)
	n := len(successors)
	switch {
	case p == 0:
		return 0
	case p < 0:
		return r.cfg.ElectionBackoffMaxMs
	}
	return (r.cfg.ElectionBackoffMaxMs >> (n - 1)) << (p - 1)
}
