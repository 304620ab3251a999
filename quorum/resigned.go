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

func (r *Raft) handleEndEpochResponse(nowMs int64, m Message) {
	resp := m.EndEpochResp
	if m.Err != nil {
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
