package quorum

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Step hands the core one inbound request, or the response (or failure) of a request
// it sent. An error is fatal to the node (the driver must stop it), and only local
// storage can cause one (reading a snapshot chunk to serve FetchSnapshot). Nothing a
// peer sends makes Step fail or panic, whatever its sender, ids, epochs, offsets or
// error codes (FuzzStep): a request that cannot be honoured is answered with an error
// code and changes nothing; a response that cannot be used is ignored, or refused
// (logged at ERROR, counted in Counters.RefusedResponse) and handled as a failed
// request.
func (r *Raft) Step(nowMs int64, m Message) error {
	r.nowMs = max(r.nowMs, nowMs)
	nowMs = r.nowMs
	if m.IsRequest() && r.rejectClusterID(m) {
		return nil
	}
	switch {
	case m.Vote != nil:
		r.handleVote(nowMs, m)
	case m.VoteResp != nil:
		r.handleVoteResponse(nowMs, m)
	case m.BeginEpoch != nil:
		r.handleBeginEpoch(nowMs, m)
	case m.BeginEpochResp != nil:
		r.handleBeginEpochResponse(nowMs, m)
	case m.EndEpoch != nil:
		r.handleEndEpoch(nowMs, m)
	case m.EndEpochResp != nil:
		r.handleEndEpochResponse(nowMs, m)
	case m.Fetch != nil:
		r.handleFetch(nowMs, m)
	case m.FetchResp != nil:
		r.handleFetchResponse(nowMs, m)
	case m.FetchSnapshot != nil:
		return r.handleFetchSnapshot(nowMs, m)
	case m.FetchSnapshotResp != nil:
		r.handleFetchSnapshotResponse(nowMs, m)
	case m.UpdateVoter != nil:
		r.handleUpdateVoter(nowMs, m)
	case m.UpdateVoterResp != nil:
		r.handleUpdateVoterResponse(nowMs, m)
	}
	r.maybeResignAfterRemoval(nowMs)
	return nil
}

// rejectClusterID answers INCONSISTENT_CLUSTER_ID (104) to a request from another
// cluster. An empty id on either side is not checked, as in Kafka.
func (r *Raft) rejectClusterID(m Message) bool {
	var id string
	switch {
	case m.Vote != nil:
		id = m.Vote.ClusterID
	case m.BeginEpoch != nil:
		id = m.BeginEpoch.ClusterID
	case m.EndEpoch != nil:
		id = m.EndEpoch.ClusterID
	case m.Fetch != nil:
		id = m.Fetch.ClusterID
	case m.FetchSnapshot != nil:
		id = m.FetchSnapshot.ClusterID
	case m.UpdateVoter != nil:
		id = m.UpdateVoter.ClusterID
	}
	if id == "" || r.cfg.ClusterID == "" || id == r.cfg.ClusterID {
		return false
	}
	code := kerr.InconsistentClusterID.Code
	out := Message{To: m.From, RequestID: m.RequestID}
	switch {
	case m.Vote != nil:
		out.VoteResp = &VoteResponse{TopLevelErrorCode: code, LeaderID: -1, LeaderEpoch: -1, PreVote: m.Vote.PreVote}
	case m.BeginEpoch != nil:
		out.BeginEpochResp = &BeginQuorumEpochResponse{TopLevelErrorCode: code, LeaderID: -1, LeaderEpoch: -1}
	case m.EndEpoch != nil:
		out.EndEpochResp = &EndQuorumEpochResponse{TopLevelErrorCode: code, LeaderID: -1, LeaderEpoch: -1}
	case m.Fetch != nil:
		out.FetchResp = &FetchResponse{TopLevelErrorCode: code, HighWatermark: -1, LeaderID: -1, LeaderEpoch: -1}
	case m.FetchSnapshot != nil:
		out.FetchSnapshotResp = &FetchSnapshotResponse{TopLevelErrorCode: code, LeaderID: -1, LeaderEpoch: -1}
	case m.UpdateVoter != nil:
		out.UpdateVoterResp = &UpdateVoterResponse{ErrorCode: code, LeaderID: -1, LeaderEpoch: -1}
	}
	r.send(out)
	return true
}
