package quorum

// Fetch (key 1) for __cluster_metadata partition 0, as Kafka's raft client sends and
// serves it (KafkaRaftClient.buildFetchRequest / handleFetchRequest). Served v0-v17 on
// the controller listener. Version notes:
//   - v9+  CurrentLeaderEpoch (epoch fencing); v12+ flexible, LastFetchedEpoch, ClusterId
//     (tag 0), DivergingEpoch / CurrentLeader / SnapshotId response tags (KIP-595, -630).
//   - v13+ the topic travels as its id (Uuid 0...01 for the metadata topic), not its name.
//   - v15+ the fetcher id moves from ReplicaId to ReplicaState.ReplicaId (tag 1, KIP-903).
//   - v16+ the response's NodeEndpoints (kmsg: Brokers, tag 0) names the leader's address
//     on the listener the request came in on (KIP-951).
//   - v17  ReplicaDirectoryId (tag 0, KIP-853); v18 (HighWatermark tag, KIP-1166) is not
//     served yet.
// Errors follow Kafka's validateLeaderOnlyRequest (see validateLeaderRequest), a leader
// that is shutting down answering BROKER_NOT_AVAILABLE.
// kmsg writes a tagged field whenever it is non-default, whatever the version, so every
// version-gated field below is set only at the versions that define it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

func encodeFetch(f *FetchRequest, clusterID string, version int16) kmsg.Request {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if version >= 12 {
		req.ClusterID = clusterIDPtr(clusterID)
	}
	if version >= 15 {
		req.ReplicaState.ID = f.ReplicaID
	} else {
		req.ReplicaID = f.ReplicaID
	}
	req.MaxWaitMillis = f.MaxWaitMs
	req.MinBytes = 0
	req.MaxBytes = f.MaxBytes
	req.SessionEpoch = -1
	p := kmsg.NewFetchRequestTopicPartition()
	p.CurrentLeaderEpoch = f.CurrentLeaderEpoch
	p.FetchOffset = f.FetchOffset
	p.LastFetchedEpoch = f.LastFetchedEpoch
	p.PartitionMaxBytes = f.MaxBytes
	if version >= 17 {
		p.ReplicaDirectoryID = f.ReplicaDirectoryID
	}
	t := kmsg.NewFetchRequestTopic()
	if version >= 13 {
		t.TopicID = MetadataTopicID
	} else {
		t.Topic = MetadataTopic
	}
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{t}
	return req
}

func decodeFetchResponse(r *kmsg.FetchResponse) (*FetchResponse, error) {
	out := &FetchResponse{TopLevelErrorCode: r.ErrorCode, HighWatermark: -1, LeaderID: -1, LeaderEpoch: -1}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		if out.TopLevelErrorCode == 0 {
			return nil, fmt.Errorf("fetch response with %d topics and no error", len(r.Topics))
		}
		return out, nil
	}
	p := &r.Topics[0].Partitions[0]
	out.ErrorCode = p.ErrorCode
	out.HighWatermark = p.HighWatermark
	out.LogStartOffset = p.LogStartOffset
	out.LeaderID, out.LeaderEpoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
	if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
		out.DivergingEpoch = &EpochEndOffset{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset}
	}
	if p.SnapshotID.EndOffset >= 0 && p.SnapshotID.Epoch >= 0 {
		out.SnapshotID = &raftlog.SnapshotID{EndOffset: p.SnapshotID.EndOffset, Epoch: p.SnapshotID.Epoch}
	}
	for _, b := range r.Brokers {
		if b.NodeID == out.LeaderID && out.LeaderID >= 0 && b.Port > 0 && b.Port <= math.MaxUint16 {
			out.LeaderAddr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	batches, _, err := raftlog.SplitBatches(p.RecordBatches)
	if err != nil {
		return nil, fmt.Errorf("fetch response records: %w", err)
	}
	out.Batches = batches
	return out, nil
}

// fetchRequestFromWire extracts the raft fetch from a kmsg request, or reports why it is
// not one (wrong topic/partition count), which is INVALID_REQUEST.
func fetchRequestFromWire(in *kmsg.FetchRequest) (*FetchRequest, bool) {
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 {
		return nil, false
	}
	t := &in.Topics[0]
	p := &t.Partitions[0]
	if !isMetadataPartition(t.Topic, t.TopicID, in.Version >= 13, p.Partition) {
		return nil, false
	}
	replica := in.ReplicaID
	if in.Version >= 15 {
		replica = in.ReplicaState.ID
	}
	last := p.LastFetchedEpoch
	if in.Version < 12 {
		last = -1 // not on the wire: the core rejects it, as Kafka does
	}
	epoch := p.CurrentLeaderEpoch
	if in.Version < 9 {
		epoch = -1
	}
	var dir [16]byte
	if in.Version >= 17 {
		dir = p.ReplicaDirectoryID
	}
	return &FetchRequest{
		ClusterID: derefClusterID(in.ClusterID), ReplicaID: replica, ReplicaDirectoryID: dir, MaxWaitMs: in.MaxWaitMillis,
		MaxBytes: in.MaxBytes, CurrentLeaderEpoch: epoch, FetchOffset: p.FetchOffset, LastFetchedEpoch: last,
	}, true
}

func (n *Node) handleFetchRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	resp, err := n.serveRPC(ctx, req, n.decodeFetchRPC)
	if errors.Is(err, errNotMetadataFetch) {
		err = fmt.Errorf("%w (from %v)", err, req.RemoteAddr)
	}
	return resp, err
}

// errNotMetadataFetch: a Fetch before v7 (no top-level error code) for another
// partition; the connection is closed.
var errNotMetadataFetch = fmt.Errorf("quorum: fetch is not for %s-0", MetadataTopic)

// decodeFetchRPC is the inbound half of Fetch (see serveRPC).
func (n *Node) decodeFetchRPC(body kmsg.Request) (Message, func(Message) kmsg.Response, kmsg.Response, error) {
	in := body.(*kmsg.FetchRequest)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = in.Version
	f, ok := fetchRequestFromWire(in)
	if !ok {
		if in.Version < 7 {
			return Message{}, nil, nil, fmt.Errorf("%w: v%d", errNotMetadataFetch, in.Version)
		}
		resp.ErrorCode = errInvalidRequest
		return Message{}, nil, resp, nil
	}
	encode := func(out Message) kmsg.Response {
		n.encodeFetchResponse(resp, in.Version, out.FetchResp)
		return resp
	}
	return Message{From: f.ReplicaID, Fetch: f}, encode, nil, nil
}

func (n *Node) encodeFetchResponse(resp *kmsg.FetchResponse, version int16, fr *FetchResponse) {
	if version >= 7 {
		resp.ErrorCode = fr.TopLevelErrorCode
	}
	p := kmsg.NewFetchResponseTopicPartition()
	p.ErrorCode = fr.ErrorCode
	if version < 7 && fr.TopLevelErrorCode != 0 {
		p.ErrorCode = fr.TopLevelErrorCode
	}
	p.HighWatermark = fr.HighWatermark
	p.LogStartOffset = fr.LogStartOffset
	if version >= 12 {
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = fr.LeaderID, fr.LeaderEpoch
		if d := fr.DivergingEpoch; d != nil {
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
		}
		if s := fr.SnapshotID; s != nil {
			p.SnapshotID.EndOffset, p.SnapshotID.Epoch = s.EndOffset, s.Epoch
		}
	}
	size := 0
	for _, b := range fr.Batches {
		size += b.Size()
	}
	if size > 0 {
		p.RecordBatches = make([]byte, 0, size)
		for _, b := range fr.Batches {
			p.RecordBatches = append(p.RecordBatches, b.Raw...)
		}
	}
	t := kmsg.NewFetchResponseTopic()
	if version >= 13 {
		t.TopicID = MetadataTopicID
	} else {
		t.Topic = MetadataTopic
	}
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	resp.Topics = []kmsg.FetchResponseTopic{t}
	if version >= 16 && fr.LeaderID >= 0 {
		if host, port, ok := n.endpoint(fr.LeaderID); ok {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = fr.LeaderID, host, int32(port)
			resp.Brokers = []kmsg.FetchResponseBroker{b}
		}
	}
}
