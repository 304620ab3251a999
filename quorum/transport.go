package quorum

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// MetadataTopic is the raft partition's topic; it has one partition, 0.
const MetadataTopic = "__cluster_metadata"

// MetadataTopicID is Kafka's Uuid.METADATA_TOPIC_ID (the UUID 0...01), which Fetch v13+
// carries instead of the topic name.
var MetadataTopicID = [16]byte{15: 1}

// Versions this node serves and sends on the controller listener (Kafka 3.9/4.x ranges;
// Vote v2 is KIP-996 pre-vote).
const (
	voteMaxVersion           = 2
	beginEpochMaxVersion     = 1
	endEpochMaxVersion       = 1
	fetchMaxVersion          = 17
	describeQuorumMaxVersion = 2
	fetchSnapshotMaxVersion  = 1
)

// RegisterHandlers serves the raft RPCs on a controller listener's registry.
func (n *Node) RegisterHandlers(reg *protocol.Registry) {
	reg.Register(52, 0, voteMaxVersion, n.handleVoteRPC)
	reg.Register(53, 0, beginEpochMaxVersion, n.handleBeginEpochRPC)
	reg.Register(54, 0, endEpochMaxVersion, n.handleEndEpochRPC)
	reg.Register(1, 0, fetchMaxVersion, n.handleFetchRPC)
	reg.Register(55, 0, describeQuorumMaxVersion, n.handleDescribeQuorumRPC)
	reg.Register(59, 0, fetchSnapshotMaxVersion, n.handleFetchSnapshotRPC)
	reg.Register(80, 0, addRaftVoterMaxVersion, n.handleAddRaftVoterRPC)
	reg.Register(81, 0, removeRaftVoterMaxVersion, n.handleRemoveRaftVoterRPC)
	reg.Register(82, 0, updateRaftVoterMaxVersion, n.handleUpdateRaftVoterRPC)
}

// encodeRequest builds the kmsg request for an outbound core message at version v.
func encodeRequest(m Message, clusterID string, v int16) kmsg.Request {
	switch {
	case m.Vote != nil:
		return encodeVote(m.Vote, clusterID, v)
	case m.BeginEpoch != nil:
		return encodeBeginEpoch(m.BeginEpoch, clusterID, v)
	case m.EndEpoch != nil:
		return encodeEndEpoch(m.EndEpoch, clusterID, v)
	case m.Fetch != nil:
		return encodeFetch(m.Fetch, clusterID, v)
	case m.FetchSnapshot != nil:
		return encodeFetchSnapshot(m.FetchSnapshot, clusterID, v)
	case m.UpdateVoter != nil:
		return encodeUpdateVoter(m.UpdateVoter, clusterID, v)
	}
	panic(fmt.Sprintf("quorum: no request payload in %s", m))
}

// requestKeyAndMax is the API key of m's request and the highest version we send.
func requestKeyAndMax(m Message) (int16, int16) {
	switch {
	case m.Vote != nil:
		return 52, voteMaxVersion
	case m.BeginEpoch != nil:
		return 53, beginEpochMaxVersion
	case m.EndEpoch != nil:
		return 54, endEpochMaxVersion
	case m.FetchSnapshot != nil:
		return 59, fetchSnapshotMaxVersion
	case m.UpdateVoter != nil:
		return 82, updateRaftVoterMaxVersion
	default:
		return 1, fetchMaxVersion
	}
}

// decodeResponse converts a peer's answer to the core's message.
func decodeResponse(m Message, resp kmsg.Response) (Message, error) {
	switch r := resp.(type) {
	case *kmsg.VoteResponse:
		return Message{VoteResp: decodeVoteResponse(r, m.Vote.PreVote)}, nil
	case *kmsg.BeginQuorumEpochResponse:
		return Message{BeginEpochResp: decodeBeginEpochResponse(r)}, nil
	case *kmsg.EndQuorumEpochResponse:
		return Message{EndEpochResp: decodeEndEpochResponse(r)}, nil
	case *kmsg.FetchResponse:
		fr, err := decodeFetchResponse(r)
		return Message{FetchResp: fr}, err
	case *kmsg.FetchSnapshotResponse:
		fr, err := decodeFetchSnapshotResponse(r)
		return Message{FetchSnapshotResp: fr}, err
	case *kmsg.UpdateRaftVoterResponse:
		return Message{UpdateVoterResp: decodeUpdateVoterResponse(r)}, nil
	}
	return Message{}, fmt.Errorf("unexpected response %T", resp)
}

// clusterIDPtr is nil for "" (not checked), as Kafka's nullable ClusterId.
func clusterIDPtr(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}

func derefClusterID(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// endpoint is host and port of a voter's controller listener.
// VoterAddr is the host:port this node dials for voter id: its configured address
// (controller.quorum.voters) or, in a dynamic quorum, its listener in the voter set
// in force. Safe from any goroutine.
func (n *Node) VoterAddr(id int32) (string, bool) {
	host, port, ok := n.endpoint(id)
	if !ok {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), true
}

func (n *Node) endpoint(id int32) (host string, port uint16, ok bool) {
	addr, found := n.cfg.VoterAddrs[id]
	if !found {
		if m := n.voterAddrs.Load(); m != nil {
			addr, found = (*m)[id]
		}
	}
	if !found {
		return "", 0, false
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	pn, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return h, uint16(pn), true
}

// isMetadataPartition reports whether a request's single topic/partition is ours.
func isMetadataPartition(topic string, topicID [16]byte, byID bool, partition int32) bool {
	if partition != 0 {
		return false
	}
	if byID {
		return topicID == MetadataTopicID
	}
	return topic == MetadataTopic
}

// serveRPC serves one raft RPC: decode turns the request into the core's message and
// an encode for the core's answer, or answers at once (INVALID_REQUEST and the like),
// or fails the request (the connection closes). The halves are separate so that the
// simulation puts the same bytes through them as a peer would.
func (n *Node) serveRPC(ctx context.Context, req *protocol.Request,
	decode func(kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error)) (kmsg.Response, error) {
	m, encode, early, err := decode(req.Body)
	if err != nil || early != nil {
		return early, err
	}
	out, err := n.stepRPC(ctx, req, m)
	if err != nil {
		return nil, err
	}
	return encode(out), nil
}

// decodeRPC is the decode half of serveRPC for any raft RPC a peer sends.
func (n *Node) decodeRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	switch body.(type) {
	case *kmsg.VoteRequest:
		return n.decodeVoteRPC(body)
	case *kmsg.BeginQuorumEpochRequest:
		return n.decodeBeginEpochRPC(body)
	case *kmsg.EndQuorumEpochRequest:
		return n.decodeEndEpochRPC(body)
	case *kmsg.FetchRequest:
		return n.decodeFetchRPC(body)
	case *kmsg.FetchSnapshotRequest:
		return n.decodeFetchSnapshotRPC(body)
	case *kmsg.UpdateRaftVoterRequest:
		return n.decodeUpdateVoterRPC(body)
	}
	return Message{}, nil, nil, fmt.Errorf("quorum: %T is not a raft RPC", body)
}

// stepRPC hands a decoded inbound request to the core and waits for the answer.
func (n *Node) stepRPC(ctx context.Context, req *protocol.Request, m Message) (Message, error) {
	m.To = n.cfg.Raft.NodeID
	resp, err := n.Step(ctx, m)
	if err != nil {
		return Message{}, fmt.Errorf("quorum: %s from %v: %w", kmsg.NameForKey(req.Key), req.RemoteAddr, err)
	}
	return resp, nil
}

var (
	errInvalidRequest = kerr.InvalidRequest.Code
	errNotLeader      = kerr.NotLeaderForPartition.Code
)
