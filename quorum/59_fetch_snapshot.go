package quorum

// FetchSnapshot (key 59) for __cluster_metadata partition 0 (KIP-630), as Kafka's raft
// client sends and serves it (KafkaRaftClient.handleFetchSnapshotRequest/Response).
// Served v0-v1 on the controller listener; flexible from v0.
//   - The leader answers a chunk of at most min(MaxBytes, FetchMaxBytes) raw file bytes
//     from Position, with the snapshot's total Size; chunks are not batch aligned.
//   - Errors: SNAPSHOT_NOT_FOUND (unknown id, or the bootstrap id 0-0),
//     POSITION_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
//     NOT_LEADER_OR_FOLLOWER / BROKER_NOT_AVAILABLE (leader shutting down) as for
//     Fetch, UNKNOWN_TOPIC_OR_PARTITION for another partition, INCONSISTENT_CLUSTER_ID.
//   - v1 (KIP-853): ReplicaDirectoryId (request tag 0) and NodeEndpoints (response tag
//     0) naming the leader's address on this listener.
// kmsg writes tagged fields whenever they are non-default, so the v1 fields are set
// only at v1.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

func encodeFetchSnapshot(f *FetchSnapshotRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.Version = version
	req.ClusterID = clusterIDPtr(clusterID)
	req.ReplicaID = f.ReplicaID
	req.MaxBytes = f.MaxBytes
	p := kmsg.NewFetchSnapshotRequestTopicPartition()
	p.Partition = 0
	p.CurrentLeaderEpoch = f.CurrentLeaderEpoch
	p.SnapshotID.EndOffset, p.SnapshotID.Epoch = f.SnapshotID.EndOffset, f.SnapshotID.Epoch
	p.Position = f.Position
	if version >= 1 {
		p.ReplicaDirectoryID = f.ReplicaDirectoryID
	}
	t := kmsg.NewFetchSnapshotRequestTopic()
	t.Topic = MetadataTopic
	t.Partitions = []kmsg.FetchSnapshotRequestTopicPartition{p}
	req.Topics = []kmsg.FetchSnapshotRequestTopic{t}
	return req
}

func decodeFetchSnapshotResponse(r *kmsg.FetchSnapshotResponse) (*FetchSnapshotResponse, error) {
	out := &FetchSnapshotResponse{TopLevelErrorCode: r.ErrorCode, LeaderID: -1, LeaderEpoch: -1}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		if out.TopLevelErrorCode == 0 {
			return nil, fmt.Errorf("fetch snapshot response with %d topics and no error", len(r.Topics))
		}
		return out, nil
	}
	p := &r.Topics[0].Partitions[0]
	out.ErrorCode = p.ErrorCode
	out.LeaderID, out.LeaderEpoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
	out.SnapshotID = raftlog.SnapshotID{EndOffset: p.SnapshotID.EndOffset, Epoch: p.SnapshotID.Epoch}
	out.Size, out.Position, out.Bytes = p.Size, p.Position, p.Bytes
	return out, nil
}

func (n *Node) handleFetchSnapshotRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return n.serveRPC(ctx, req, n.decodeFetchSnapshotRPC)
}

// decodeFetchSnapshotRPC is the inbound half of FetchSnapshot (see serveRPC).
func (n *Node) decodeFetchSnapshotRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.FetchSnapshotRequest)
	resp := kmsg.NewPtrFetchSnapshotResponse()
	resp.Version = in.Version
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 {
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	t, p := &in.Topics[0], &in.Topics[0].Partitions[0]
	rp := kmsg.NewFetchSnapshotResponseTopicPartition()
	rp.Partition = p.Partition
	rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = p.SnapshotID.EndOffset, p.SnapshotID.Epoch
	rt := kmsg.NewFetchSnapshotResponseTopic()
	rt.Topic = t.Topic
	if !isMetadataPartition(t.Topic, [16]byte{}, false, p.Partition) {
		rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		rt.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{rp}
		resp.Topics = []kmsg.FetchSnapshotResponseTopic{rt}
		return Message{}, nil, resp, nil
	}
	f := &FetchSnapshotRequest{
		ClusterID: derefClusterID(in.ClusterID), ReplicaID: in.ReplicaID, MaxBytes: in.MaxBytes,
		CurrentLeaderEpoch: p.CurrentLeaderEpoch, Position: p.Position, ReplicaDirectoryID: fetchSnapshotDirID(in.Version, p),
		SnapshotID: raftlog.SnapshotID{EndOffset: p.SnapshotID.EndOffset, Epoch: p.SnapshotID.Epoch},
	}
	encode := func(out Message) kmsg.Response { return n.encodeFetchSnapshotRPC(in, resp, rt, rp, out) }
	return Message{From: f.ReplicaID, FetchSnapshot: f}, encode, nil, nil
}

func (n *Node) encodeFetchSnapshotRPC(in *kmsg.FetchSnapshotRequest, resp *kmsg.FetchSnapshotResponse,
	rt kmsg.FetchSnapshotResponseTopic, rp kmsg.FetchSnapshotResponseTopicPartition, out Message) kmsg.Response {
	fr := out.FetchSnapshotResp
	resp.ErrorCode = fr.TopLevelErrorCode
	rp.ErrorCode = fr.ErrorCode
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = fr.LeaderID, fr.LeaderEpoch
	rp.Size, rp.Position, rp.Bytes = fr.Size, fr.Position, fr.Bytes
	rt.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{rp}
	resp.Topics = []kmsg.FetchSnapshotResponseTopic{rt}
	if in.Version >= 1 && fr.LeaderID >= 0 {
		if host, port, ok := n.endpoint(fr.LeaderID); ok {
			e := kmsg.NewFetchSnapshotResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = fr.LeaderID, host, port
			resp.NodeEndpoints = []kmsg.FetchSnapshotResponseNodeEndpoint{e}
		}
	}
	return resp
}

// fetchSnapshotDirID is the fetcher's directory id a FetchSnapshot carries (v1+).
func fetchSnapshotDirID(version int16, p *kmsg.FetchSnapshotRequestTopicPartition) [16]byte {
	if version < 1 {
		return [16]byte{}
	}
	return p.ReplicaDirectoryID
}
