package quorum

// BeginQuorumEpoch (key 53), v0-v1. KIP-595: a new leader announces its epoch to every
// voter, and repeats it until each has fetched. v0 is NOT flexible; v1 is, and adds the
// voter key, the leader's endpoints and the NodeEndpoints response hint (KIP-853).

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

func (n *Node) leaderEndpoints() (name, host string, port uint16, ok bool) {
	host, port, ok = n.endpoint(n.cfg.Raft.NodeID)
	return n.cfg.ListenerName, host, port, ok && n.cfg.ListenerName != ""
}

func encodeBeginEpoch(b *BeginQuorumEpochRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrBeginQuorumEpochRequest()
	req.Version = version
	req.ClusterID = clusterIDPtr(clusterID)
	if version >= 1 {
		req.VoterID = b.VoterID
	}
	p := kmsg.NewBeginQuorumEpochRequestTopicPartition()
	p.LeaderID, p.LeaderEpoch = b.LeaderID, b.LeaderEpoch
	if version >= 1 {
		p.VoterDirectoryID = b.VoterDirectoryID
	}
	t := kmsg.NewBeginQuorumEpochRequestTopic()
	t.Topic = MetadataTopic
	t.Partitions = []kmsg.BeginQuorumEpochRequestTopicPartition{p}
	req.Topics = []kmsg.BeginQuorumEpochRequestTopic{t}
	return req
}

func decodeBeginEpochResponse(r *kmsg.BeginQuorumEpochResponse) *BeginQuorumEpochResponse {
	out := &BeginQuorumEpochResponse{TopLevelErrorCode: r.ErrorCode, LeaderID: -1, LeaderEpoch: -1}
	if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
		p := r.Topics[0].Partitions[0]
		out.ErrorCode, out.LeaderID, out.LeaderEpoch = p.ErrorCode, p.LeaderID, p.LeaderEpoch
	} else if out.TopLevelErrorCode == 0 {
		out.TopLevelErrorCode = errInvalidRequest
	}
	return out
}

func (n *Node) handleBeginEpochRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return n.serveRPC(ctx, req, n.decodeBeginEpochRPC)
}

// decodeBeginEpochRPC is the inbound half of BeginQuorumEpoch (see serveRPC).
func (n *Node) decodeBeginEpochRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.BeginQuorumEpochRequest)
	resp := kmsg.NewPtrBeginQuorumEpochResponse()
	resp.Version = in.Version
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 ||
		!isMetadataPartition(in.Topics[0].Topic, [16]byte{}, false, in.Topics[0].Partitions[0].Partition) {
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	p := in.Topics[0].Partitions[0]
	voterID := int32(-1)
	var voterDir [16]byte
	if in.Version >= 1 {
		voterID, voterDir = in.VoterID, p.VoterDirectoryID
	}
	m := Message{From: p.LeaderID, BeginEpoch: &BeginQuorumEpochRequest{
		ClusterID: derefClusterID(in.ClusterID), VoterID: voterID, VoterDirectoryID: voterDir,
		LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch,
	}}
	for i, e := range in.LeaderEndpoints {
		// The endpoint on our controller listener (or the first, as refreshVoterAddrs
		// picks a voter's): where a follower that does not know the leader's address
		// (a leader added after its log's voter set) fetches from, as Kafka's
		// followers take the leader's endpoints from BeginQuorumEpoch.
		if e.Name == n.cfg.ListenerName || i == 0 && n.cfg.ListenerName == "" {
			m.BeginEpoch.LeaderAddr = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
			break
		}
	}
	return m, func(out Message) kmsg.Response { return n.encodeBeginEpochRPC(in, resp, out) }, nil, nil
}

func (n *Node) encodeBeginEpochRPC(in *kmsg.BeginQuorumEpochRequest, resp *kmsg.BeginQuorumEpochResponse, out Message) kmsg.Response {
	br := out.BeginEpochResp
	resp.ErrorCode = br.TopLevelErrorCode
	rp := kmsg.NewBeginQuorumEpochResponseTopicPartition()
	rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch = br.ErrorCode, br.LeaderID, br.LeaderEpoch
	rt := kmsg.NewBeginQuorumEpochResponseTopic()
	rt.Topic = MetadataTopic
	rt.Partitions = []kmsg.BeginQuorumEpochResponseTopicPartition{rp}
	resp.Topics = []kmsg.BeginQuorumEpochResponseTopic{rt}
	if in.Version >= 1 {
		if host, port, ok := n.endpoint(br.LeaderID); ok {
			resp.NodeEndpoints = []kmsg.BeginQuorumEpochResponseNodeEndpoint{{NodeID: br.LeaderID, Host: host, Port: port}}
		}
	}
	return resp
}
