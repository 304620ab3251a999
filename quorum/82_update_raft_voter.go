package quorum

// UpdateRaftVoter (key 82, v0, flexible), KIP-853: a voter tells the leader the
// listeners it serves and the kraft.version range it supports.
//
// The voter (a Follower that fetched successfully in this epoch and has endpoints
// configured, Config.Endpoints) sends it:
//   - at kraft.version 0, once to every new leader (KAFKA-16538): the leader keeps
//     what it hears in memory only, for the upgrade to kraft.version 1
//     (UpgradeKRaftVersion), which needs every voter's directory id and range;
//   - at kraft.version >= 1, when the voter set in force lists other endpoints or
//     another range for it than it has; the leader appends a VotersRecord with the
//     voter updated (the one-change-at-a-time rules of AddRaftVoter) and answers at
//     once, without waiting for the commit, as Kafka's UpdateVoterHandler.
//
// Errors as Kafka: NOT_LEADER_OR_FOLLOWER off the leader, FENCED_LEADER_EPOCH and
// UNKNOWN_LEADER_EPOCH for another epoch, INVALID_REQUEST without a directory id, with
// a range that is not one or that leaves out the finalized kraft.version, or without
// an endpoint on the leader's listener; REQUEST_TIMED_OUT before the high watermark
// is established in the epoch or while a VotersRecord is uncommitted; VOTER_NOT_FOUND
// for a replica that is not a voter (id and directory id). A voter whose entry already
// says what it asks for gets NONE and a copy of the voter set is appended, as Kafka's
// handler does.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

const updateRaftVoterMaxVersion = 0

// maxVoterEndpoints caps the listeners one voter may name in UpdateRaftVoter (a
// controller has a handful; the cap bounds what a peer makes the leader keep).
const maxVoterEndpoints = 16

// UpdateVoterRequest is Kafka's UpdateRaftVoter: Voter.Key is the sender's replica
// key, Voter.Endpoints its listeners, Voter.KRaftVersionMin/Max its supported range.
type UpdateVoterRequest struct {
	ClusterID          string
	CurrentLeaderEpoch int32
	Voter              VoterNode
}

// UpdateVoterResponse answers an UpdateVoterRequest; LeaderID/LeaderEpoch are the
// answering node's view (the CurrentLeader tag on the wire).
type UpdateVoterResponse struct {
	ErrorCode   int16
	LeaderID    int32
	LeaderEpoch int32
}

func (r *UpdateVoterRequest) String() string {
	return fmt.Sprintf("UpdateVoter voter=%d:%s epoch=%d endpoints=%d kraft=%d-%d", r.Voter.Key.ID,
		shortUUID(r.Voter.Key.DirectoryID), r.CurrentLeaderEpoch, len(r.Voter.Endpoints),
		r.Voter.KRaftVersionMin, r.Voter.KRaftVersionMax)
}

func (r *UpdateVoterResponse) String() string {
	return fmt.Sprintf("UpdateVoterResp leader=%d epoch=%d%s", r.LeaderID, r.LeaderEpoch, errSuffix(0, r.ErrorCode))
}

// localVoterNode is this replica as UpdateRaftVoter describes it; ok is false when
// no endpoints are configured (then it never sends one).
func (r *Raft) localVoterNode() (VoterNode, bool) {
	if len(r.cfg.Endpoints) == 0 {
		return VoterNode{}, false
	}
	return VoterNode{Key: ReplicaKey{ID: r.cfg.NodeID, DirectoryID: r.cfg.DirectoryID},
		Endpoints: r.cfg.Endpoints, KRaftVersionMin: KRaftVersionStatic, KRaftVersionMax: KRaftVersionMax}, true
}

// sameVoterNode reports whether two entries of a voter agree on the replica key, the
// endpoints and the supported range, as Kafka's VoterNode.equals: endpoints are
// compared as a set (Kafka keeps them in a map by listener name), so listing the
// same listeners in another order is no change.
func sameVoterNode(a, b VoterNode) bool {
	if a.Key != b.Key || a.KRaftVersionMin != b.KRaftVersionMin || a.KRaftVersionMax != b.KRaftVersionMax ||
		len(a.Endpoints) != len(b.Endpoints) {
		return false
	}
	for _, e := range a.Endpoints {
		if !slices.Contains(b.Endpoints, e) {
			return false
		}
	}
	return true
}

// isReplicaOf reports whether key names voter v, as Kafka's VoterNode.isVoter: the
// ids are equal and, when v has a directory id, so are the directory ids. Unlike
// VoterSet.IsVoter a zero directory id in key does not match a voter that has one:
// an entry is only ever replaced by the replica it names.
func isReplicaOf(v VoterNode, key ReplicaKey) bool {
	return v.Key.ID == key.ID && (v.Key.DirectoryID == [16]byte{} || v.Key.DirectoryID == key.DirectoryID)
}

// voterNodeNeedsUpdate reports whether n is a voter of vs whose entry says something
// else (Kafka's VoterSet.voterNodeNeedsUpdate): a follower then sends
// UpdateRaftVoter, a new leader rewrites its own entry at the start of its epoch.
func (vs VoterSet) voterNodeNeedsUpdate(n VoterNode) bool {
	old, ok := vs.Voter(n.Key.ID)
	return ok && isReplicaOf(old, n.Key) && !sameVoterNode(old, n)
}

// withVoter is vs with the entry of n's id replaced by n (Kafka's
// VoterSet.updateVoter, once the caller checked isReplicaOf). The set keeps its
// voters, so it stays valid.
func (vs VoterSet) withVoter(n VoterNode) VoterSet {
	out := VoterSet{Voters: slices.Clone(vs.Voters)}
	for i := range out.Voters {
		if out.Voters[i].Key.ID == n.Key.ID {
			out.Voters[i] = cloneVoterNode(n)
		}
	}
	return out
}

// maybeSendUpdateVoter sends UpdateRaftVoter to the leader when this follower is a
// voter the leader has not heard from in this epoch (kraft.version 0) or whose entry
// in the voter set in force is out of date (kraft.version >= 1). One at a time; a
// failed one is retried after the request timeout.
func (r *Raft) maybeSendUpdateVoter(nowMs int64) {
	f := r.follow
	if r.role != Follower || f == nil || !f.fetchedOK || !r.isVoter || f.updateInflight != 0 ||
		f.updatedLeader || nowMs < f.nextUpdateMs || r.recovery != nil {
		return
	}
	local, ok := r.localVoterNode()
	if !ok {
		return
	}
	if r.kraftVersion() >= KRaftVersionDynamic {
		v, ok := r.log.kraft.latestVoters()
		if !ok {
			return
		}
		if !v.set.voterNodeNeedsUpdate(local) {
			return
		}
	}
	f.updateInflight = r.newRequestID()
	r.send(Message{To: r.leaderID, RequestID: f.updateInflight, UpdateVoter: &UpdateVoterRequest{
		ClusterID: r.cfg.ClusterID, CurrentLeaderEpoch: r.epoch, Voter: local}})
}

// handleUpdateVoterResponse ends the in-flight UpdateRaftVoter. A leader that does
// not implement it (UNSUPPORTED_VERSION from a Kafka leader older than KAFKA-16538
// at kraft.version 0) is not asked again in this epoch.
func (r *Raft) handleUpdateVoterResponse(nowMs int64, m Message) {
	f := r.follow
	if r.role != Follower || f == nil || m.RequestID != f.updateInflight {
		return
	}
	f.updateInflight = 0
	resp := m.UpdateVoterResp
	switch {
	case m.Err == nil && (resp.ErrorCode == 0 || resp.ErrorCode == kerr.UnsupportedVersion.Code):
		f.updatedLeader = true
	default:
		f.nextUpdateMs = nowMs + r.cfg.RequestTimeoutMs
		if m.Err == nil {
			r.logf("%d UpdateRaftVoter refused by %d: %s", r.cfg.NodeID, m.From, errName(resp.ErrorCode))
		}
	}
}

// handleUpdateVoter answers a voter's UpdateRaftVoter (leader only).
func (r *Raft) handleUpdateVoter(nowMs int64, m Message) {
	code := r.updateVoter(nowMs, m.UpdateVoter)
	r.send(Message{To: m.From, RequestID: m.RequestID,
		UpdateVoterResp: &UpdateVoterResponse{ErrorCode: code, LeaderID: r.leaderID, LeaderEpoch: r.epoch}})
}

// updateVoter applies an UpdateRaftVoter and returns its error code (0: done).
func (r *Raft) updateVoter(nowMs int64, req *UpdateVoterRequest) int16 {
	v := req.Voter
	switch {
	case req.CurrentLeaderEpoch < r.epoch:
		return kerr.FencedLeaderEpoch.Code
	case req.CurrentLeaderEpoch > r.epoch:
		return kerr.UnknownLeaderEpoch.Code
	case r.role != Leader:
		return kerr.NotLeaderForPartition.Code
	case v.Key.ID < 0 || v.Key.DirectoryID == [16]byte{} || len(v.Endpoints) == 0 ||
		len(v.Endpoints) > maxVoterEndpoints || v.KRaftVersionMin < 0 || v.KRaftVersionMin > v.KRaftVersionMax:
		return kerr.InvalidRequest.Code
	case len(r.cfg.Endpoints) > 0 &&
		!slices.ContainsFunc(v.Endpoints, func(e Endpoint) bool { return e.Name == r.cfg.Endpoints[0].Name }):
		// The voter must be reachable on the leader's (default) controller listener.
		return kerr.InvalidRequest.Code
	case !r.lead.hwEstablished:
		return kerr.RequestTimedOut.Code
	}
	level := r.kraftVersion()
	if level == KRaftVersionStatic {
		return r.noteReportedVoter(v)
	}
	cur, ok := r.log.kraft.latestVoters()
	switch {
	case !ok || cur.offset >= r.hw:
		return kerr.RequestTimedOut.Code // one voter change at a time
	case v.KRaftVersionMin > level || v.KRaftVersionMax < level:
		return kerr.InvalidRequest.Code
	}
	if old, ok := cur.set.Voter(v.Key.ID); !ok || !isReplicaOf(old, v.Key) {
		return kerr.VoterNotFound.Code
	}
	// Kafka's UpdateVoterHandler appends the updated set even when it equals the set
	// in force (VoterSet.updateVoter never reports "no change"), so a voter that asks
	// again gets a committed copy, and its answer means the same thing either way: a
	// VotersRecord naming it as it asked was appended in this epoch.
	next, err := NewVoterSet(cur.set.withVoter(v).Voters)
	if err != nil {
		return kerr.InvalidRequest.Code
	}
	r.nowMs = max(r.nowMs, nowMs)
	r.appendVoters(next)
	return 0
}

// noteReportedVoter keeps what a voter of a kraft.version 0 quorum reported, in
// memory, for UpgradeKRaftVersion (KAFKA-16538).
func (r *Raft) noteReportedVoter(v VoterNode) int16 {
	switch {
	case v.KRaftVersionMin > KRaftVersionStatic:
		return kerr.InvalidRequest.Code
	case !r.isVoterID(v.Key.ID):
		return kerr.VoterNotFound.Code
	}
	if r.reportedEpoch != r.epoch {
		r.reported, r.reportedEpoch = map[int32]VoterNode{}, r.epoch
	}
	r.reported[v.Key.ID] = cloneVoterNode(v)
	return 0
}

func cloneVoterNode(v VoterNode) VoterNode {
	v.Endpoints = slices.Clone(v.Endpoints)
	return v
}

// Wire side.

func encodeUpdateVoter(u *UpdateVoterRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrUpdateRaftVoterRequest()
	req.Version = version
	req.ClusterID = clusterIDPtr(clusterID)
	req.CurrentLeaderEpoch = u.CurrentLeaderEpoch
	req.VoterID, req.VoterDirectoryID = u.Voter.Key.ID, u.Voter.Key.DirectoryID
	for _, e := range u.Voter.Endpoints {
		req.Listeners = append(req.Listeners, kmsg.UpdateRaftVoterRequestListener{Name: e.Name, Host: e.Host, Port: e.Port})
	}
	req.KRaftVersionFeature.MinSupportedVersion = u.Voter.KRaftVersionMin
	req.KRaftVersionFeature.MaxSupportedVersion = u.Voter.KRaftVersionMax
	return req
}

func decodeUpdateVoterResponse(r *kmsg.UpdateRaftVoterResponse) *UpdateVoterResponse {
	return &UpdateVoterResponse{ErrorCode: r.ErrorCode, LeaderID: r.CurrentLeader.LeaderID, LeaderEpoch: r.CurrentLeader.LeaderEpoch}
}

func (n *Node) handleUpdateRaftVoterRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return n.serveRPC(ctx, req, n.decodeUpdateVoterRPC)
}

// decodeUpdateVoterRPC is the inbound half of UpdateRaftVoter (see serveRPC). More
// listeners than maxVoterEndpoints, or a name twice, is INVALID_REQUEST before the
// core sees it.
func (n *Node) decodeUpdateVoterRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.UpdateRaftVoterRequest)
	resp := kmsg.NewPtrUpdateRaftVoterResponse()
	resp.Version = in.Version
	resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = -1, -1
	v := VoterNode{Key: ReplicaKey{ID: in.VoterID, DirectoryID: in.VoterDirectoryID},
		KRaftVersionMin: in.KRaftVersionFeature.MinSupportedVersion, KRaftVersionMax: in.KRaftVersionFeature.MaxSupportedVersion}
	if len(in.Listeners) > maxVoterEndpoints {
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	for _, l := range in.Listeners {
		if slices.ContainsFunc(v.Endpoints, func(e Endpoint) bool { return e.Name == l.Name }) {
			resp.ErrorCode = errInvalidRequest
			return Message{}, nil, resp, nil
		}
		v.Endpoints = append(v.Endpoints, Endpoint{Name: l.Name, Host: l.Host, Port: l.Port})
	}
	m := Message{From: in.VoterID, UpdateVoter: &UpdateVoterRequest{
		ClusterID: derefClusterID(in.ClusterID), CurrentLeaderEpoch: in.CurrentLeaderEpoch, Voter: v}}
	return m, func(out Message) kmsg.Response {
		u := out.UpdateVoterResp
		resp.ErrorCode = u.ErrorCode
		resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = u.LeaderID, u.LeaderEpoch
		if host, port, ok := n.endpoint(u.LeaderID); ok && u.LeaderID >= 0 {
			resp.CurrentLeader.Host, resp.CurrentLeader.Port = host, int32(port)
		}
		return resp
	}, nil, nil
}
