package quorum

// resignedState is a former leader handing over. It rejects every vote in its epoch
// and resends EndQuorumEpoch to voters that have not answered.
type resignedState struct {
	successors []int32
	acked      map[int32]bool
	nextSendMs int64
	// shutdown: the hand-over is a graceful shutdown (Shutdown), not a lost
	// check-quorum, a Resign or a restart; Fetch and FetchSnapshot get
	// BROKER_NOT_AVAILABLE until the node leaves the epoch.
	shutdown bool
	// shutdownMs is when the shutdown began; for a fetch timeout from then the
	// node does not campaign while a voter has not acknowledged (tickResigned).
	shutdownMs int64
}

func (r *Raft) sendEndEpoch(nowMs int64) {
	rs := r.resigned
	for _, v := range r.otherVoters() {
		if rs.acked[v] {
			continue
		}
		req := &EndQuorumEpochRequest{
			ClusterID: r.cfg.ClusterID, LeaderID: r.cfg.NodeID, LeaderEpoch: r.epoch,
			PreferredSuccessors: rs.successors,
		}
		if r.dynamic() {
			for _, id := range rs.successors {
				req.PreferredDirectoryIDs = append(req.PreferredDirectoryIDs, r.voterDirectoryID(id))
			}
		}
		r.send(Message{To: v, RequestID: r.newRequestID(), EndEpoch: req})
	}
	rs.nextSendMs = noDeadline
	if len(rs.acked) < len(r.otherVoters()) {
		rs.nextSendMs = nowMs + r.cfg.RequestTimeoutMs
	}
}

func (r *Raft) tickResigned(nowMs int64) {
	if rs := r.resigned; rs.shutdown && nowMs >= r.electionDeadlineMs && nowMs < rs.shutdownMs+r.cfg.FetchTimeoutMs &&
		r.endEpochUnacked() {
		// A leader shutting down does not stand as a candidate while a voter has
		// not acknowledged its EndQuorumEpoch (Kafka's pollResigned stays Resigned
		// for the whole graceful shutdown): Node.Close waits only while Resigned,
		// so a candidacy ended the hand-over, and a voter that never got the
		// EndQuorumEpoch (one that had just restarted: the request failed in the
		// client's reconnect backoff) refused the others' pre-votes while its
		// fetch timer ran, holding up the election for a whole fetch timeout. The
		// election timer starts again. Once every voter acknowledged (at once for
		// a sole voter), or after a fetch timeout (by then a voter that missed the
		// EndQuorumEpoch campaigns by itself; a voter that is down may be needed
		// by nobody but this node to form a majority), a shutdown that never
		// completes campaigns as before.
		r.electionDeadlineMs = nowMs + r.randomElectionTimeoutMs()
	}
	if nowMs >= r.electionDeadlineMs && r.dynamic() && !r.selfIsVoter() && !r.removedPendingCommit() {
		// A leader that removed itself (KIP-853) does not campaign: it leaves the
		// epoch as a non-voter and fetches from whoever leads next.
		r.becomeUnattached(nowMs, r.epoch+1, -1)
		return
	}
	if nowMs >= r.electionDeadlineMs {
		r.becomeCandidate(nowMs)
		return
	}
	if nowMs >= r.resigned.nextSendMs {
		r.sendEndEpoch(nowMs)
	}
}

// endEpochUnacked reports whether a voter has not acknowledged this resigned
// leader's EndQuorumEpoch.
func (r *Raft) endEpochUnacked() bool {
	for _, v := range r.otherVoters() {
		if !r.resigned.acked[v] {
			return true
		}
	}
	return false
}

func (r *Raft) handleEndEpochResponse(nowMs int64, m Message) {
	resp := m.EndEpochResp
	if m.Err != nil {
		if rs := r.resigned; rs != nil {
			// Resend after the retry backoff, as Kafka's RequestManager makes a
			// failed node ready again, not only after the request timeout.
			rs.nextSendMs = min(rs.nextSendMs, nowMs+r.cfg.RetryBackoffMs)
		}
		return
	}
	if r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch) {
		return
	}
	if r.resigned != nil && resp.LeaderEpoch == r.epoch && resp.ErrorCode == 0 {
		r.resigned.acked[m.From] = true
	}
}

func (r *Raft) handleBeginEpochResponse(nowMs int64, m Message) {
	resp := m.BeginEpochResp
	if m.Err != nil {
		return
	}
	r.handleCommonResponse(nowMs, m.From, resp.TopLevelErrorCode, resp.ErrorCode, resp.LeaderID, resp.LeaderEpoch)
}
