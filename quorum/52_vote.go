package quorum

// Vote (key 52), v0-v2. KIP-595; v1 adds voter/candidate directory ids and the
// NodeEndpoints hint (KIP-853); v2 adds PreVote (KIP-996), which is only ever sent to a
// peer that advertises v2. Vote is flexible from v0.

import (
	"context"
	"math"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

func encodeVote(v *VoteRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrVoteRequest()
	req.Version = version
	req.ClusterID = clusterIDPtr(clusterID)
	if version >= 1 {
		req.VoterID = v.VoterID
	}
	p := kmsg.NewVoteRequestTopicPartition()
	p.CandidateEpoch = v.CandidateEpoch
	p.CandidateID = v.CandidateID
	if version >= 1 {
		p.CandidateDirectoryID, p.VoterDirectoryID = v.CandidateDirectoryID, v.VoterDirectoryID
	}
	p.LastOffsetEpoch = v.LastOffsetEpoch
	p.LastOffset = v.LastOffset
	p.PreVote = v.PreVote && version >= 2
	t := kmsg.NewVoteRequestTopic()
	t.Topic = MetadataTopic
	t.Partitions = []kmsg.VoteRequestTopicPartition{p}
	req.Topics = []kmsg.VoteRequestTopic{t}
	return req
}

func decodeVoteResponse(r *kmsg.VoteResponse, preVote bool) *VoteResponse {
	out := &VoteResponse{TopLevelErrorCode: r.ErrorCode, LeaderID: -1, LeaderEpoch: -1, PreVote: preVote}
	if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
		p := r.Topics[0].Partitions[0]
		out.ErrorCode, out.LeaderID, out.LeaderEpoch, out.VoteGranted = p.ErrorCode, p.LeaderID, p.LeaderEpoch, p.VoteGranted
	} else if out.TopLevelErrorCode == 0 {
		out.TopLevelErrorCode = errInvalidRequest
	}
	for _, e := range r.NodeEndpoints {
		if e.NodeID == out.LeaderID && out.LeaderID >= 0 && e.Port > 0 && e.Port <= math.MaxUint16 {
			out.LeaderAddr = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
		}
	}
	return out
}

func (n *Node) handleVoteRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return n.serveRPC(ctx, req, n.decodeVoteRPC)
}

// decodeVoteRPC is the inbound half of Vote (see serveRPC).
func (n *Node) decodeVoteRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.VoteRequest)
	resp := kmsg.NewPtrVoteResponse()
	resp.Version = in.Version
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 ||
		!isMetadataPartition(in.Topics[0].Topic, [16]byte{}, false, in.Topics[0].Partitions[0].Partition) {
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	p := in.Topics[0].Partitions[0]
	voterID := int32(-1)
	var voterDir, candidateDir [16]byte
	if in.Version >= 1 {
		voterID, voterDir, candidateDir = in.VoterID, p.VoterDirectoryID, p.CandidateDirectoryID
	}
	m := Message{From: p.CandidateID, Vote: &VoteRequest{
		ClusterID: derefClusterID(in.ClusterID), VoterID: voterID,
		VoterDirectoryID: voterDir, CandidateDirectoryID: candidateDir,
		CandidateEpoch: p.CandidateEpoch, CandidateID: p.CandidateID,
		LastOffsetEpoch: p.LastOffsetEpoch, LastOffset: p.LastOffset,
		PreVote: in.Version >= 2 && p.PreVote,
	}}
	return m, func(out Message) kmsg.Response { return n.encodeVoteRPC(in, resp, out) }, nil, nil
}

func (n *Node) encodeVoteRPC(in *kmsg.VoteRequest, resp *kmsg.VoteResponse, out Message) kmsg.Response {
	vr := out.VoteResp
	resp.ErrorCode = vr.TopLevelErrorCode
	rp := kmsg.NewVoteResponseTopicPartition()
	rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch, rp.VoteGranted = vr.ErrorCode, vr.LeaderID, vr.LeaderEpoch, vr.VoteGranted
	rt := kmsg.NewVoteResponseTopic()
	rt.Topic = MetadataTopic
	rt.Partitions = []kmsg.VoteResponseTopicPartition{rp}
	resp.Topics = []kmsg.VoteResponseTopic{rt}
	if in.Version >= 1 {
		if host, port, ok := n.endpoint(vr.LeaderID); ok {
			resp.NodeEndpoints = []kmsg.VoteResponseNodeEndpoint{{NodeID: vr.LeaderID, Host: host, Port: port}}
		}
	}
	return resp
}
