package quorum

// EndQuorumEpoch (key 54), v0-v1. KIP-595: a resigning leader (graceful shutdown or
// failed check-quorum) asks the voters to elect a successor, listing preferred
// successors most caught-up first. v0 is NOT flexible and carries PreferredSuccessors;
// v1 is flexible and carries PreferredCandidates with directory ids (KIP-853).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

func encodeEndEpoch(e *EndQuorumEpochRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrEndQuorumEpochRequest()
	req.Version = version
	req.ClusterID = clusterIDPtr(clusterID)
	p := kmsg.NewEndQuorumEpochRequestTopicPartition()
	p.LeaderID, p.LeaderEpoch = e.LeaderID, e.LeaderEpoch
	if version == 0 {
		p.PreferredSuccessors = append([]int32(nil), e.PreferredSuccessors...)
	} else {
		for i, id := range e.PreferredSuccessors {
			c := kmsg.NewEndQuorumEpochRequestTopicPartitionPreferredCandidate()
			c.CandidateID = id
			if i < len(e.PreferredDirectoryIDs) {
				c.CandidateDirectoryID = e.PreferredDirectoryIDs[i]
			}
			p.PreferredCandidates = append(p.PreferredCandidates, c)
		}
	}
	t := kmsg.NewEndQuorumEpochRequestTopic()
	t.Topic = MetadataTopic
	t.Partitions = []kmsg.EndQuorumEpochRequestTopicPartition{p}
	req.Topics = []kmsg.EndQuorumEpochRequestTopic{t}
	return req
}

func decodeEndEpochResponse(r *kmsg.EndQuorumEpochResponse) *EndQuorumEpochResponse {
	out := &EndQuorumEpochResponse{TopLevelErrorCode: r.ErrorCode, LeaderID: -1, LeaderEpoch: -1}
	if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
		p := r.Topics[0].Partitions[0]
		out.ErrorCode, out.LeaderID, out.LeaderEpoch = p.ErrorCode, p.LeaderID, p.LeaderEpoch
	} else if out.TopLevelErrorCode == 0 {
		out.TopLevelErrorCode = errInvalidRequest
	}
	return out
}

func (n *Node) handleEndEpochRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return n.serveRPC(ctx, req, n.decodeEndEpochRPC)
}

// decodeEndEpochRPC is the inbound half of EndQuorumEpoch (see serveRPC).
func (n *Node) decodeEndEpochRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.EndQuorumEpochRequest)
	resp := kmsg.NewPtrEndQuorumEpochResponse()
	resp.Version = in.Version
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 ||
		!isMetadataPartition(in.Topics[0].Topic, [16]byte{}, false, in.Topics[0].Partitions[0].Partition) {
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	p := in.Topics[0].Partitions[0]
	successors := p.PreferredSuccessors
	if in.Version >= 1 {
		successors = nil
		for _, c := range p.PreferredCandidates {
			successors = append(successors, c.CandidateID)
		}
	}
	m := Message{From: p.LeaderID, EndEpoch: &EndQuorumEpochRequest{
		ClusterID: derefClusterID(in.ClusterID), LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch,
		PreferredSuccessors: successors,
	}}
	return m, func(out Message) kmsg.Response { return n.encodeEndEpochRPC(in, resp, out) }, nil, nil
}

func (n *Node) encodeEndEpochRPC(in *kmsg.EndQuorumEpochRequest, resp *kmsg.EndQuorumEpochResponse, out Message) kmsg.Response {
	er := out.EndEpochResp
	resp.ErrorCode = er.TopLevelErrorCode
	rp := kmsg.NewEndQuorumEpochResponseTopicPartition()
	rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch = er.ErrorCode, er.LeaderID, er.LeaderEpoch
	rt := kmsg.NewEndQuorumEpochResponseTopic()
	rt.Topic = MetadataTopic
	rt.Partitions = []kmsg.EndQuorumEpochResponseTopicPartition{rp}
	resp.Topics = []kmsg.EndQuorumEpochResponseTopic{rt}
	if in.Version >= 1 {
		if host, port, ok := n.endpoint(er.LeaderID); ok {
			resp.NodeEndpoints = []kmsg.EndQuorumEpochResponseNodeEndpoint{{NodeID: er.LeaderID, Host: host, Port: port}}
		}
	}
	return resp
}
