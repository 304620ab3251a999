package quorum

// DescribeQuorum (key 55), v0-v2. Answered by the raft leader from its replica progress
// (KIP-595); v1 adds LastFetchTimestamp and LastCaughtUpTimestamp (KIP-836); v2 adds
// directory ids, error messages and the voters' endpoints in Nodes (KIP-853). A
// non-leader answers NOT_LEADER_OR_FOLLOWER with its view of the leader. Observers are
// listed until they go 300 s without a fetch (observerSessionTimeoutMs), at most
// Config.MaxTrackedObservers of them (DefaultMaxTrackedObservers, 4096; see noteFetcher).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

func (n *Node) handleDescribeQuorumRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	in := req.Body.(*kmsg.DescribeQuorumRequest)
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.Version = in.Version
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = MetadataTopic
	if len(in.Topics) != 1 || len(in.Topics[0].Partitions) != 1 ||
		!isMetadataPartition(in.Topics[0].Topic, [16]byte{}, false, in.Topics[0].Partitions[0].Partition) {
		resp.ErrorCode = errInvalidRequest
		return resp, nil
	}
	st, err := n.Status(ctx)
	if err != nil {
		return nil, err
	}
	rp.LeaderID, rp.LeaderEpoch = st.LeaderID, st.Epoch
	if st.Role != Leader {
		rp.ErrorCode = errNotLeader
		if in.Version >= 2 {
			msg := "this node is not the quorum leader"
			rp.ErrorMessage = &msg
		}
	} else {
		rp.HighWatermark = st.HighWatermark
		rp.CurrentVoters = replicaStates(st.Voters, in.Version)
		rp.Observers = replicaStates(st.Observers, in.Version)
	}
	rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{rp}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{rt}
	if in.Version >= 2 {
		resp.Nodes = n.voterNodes()
	}
	return resp, nil
}

func replicaStates(rows []ReplicaStatus, version int16) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(rows))
	for _, r := range rows {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset = r.ReplicaID, r.LogEndOffset
		if version >= 2 {
			s.ReplicaDirectoryID = r.DirectoryID
		}
		if version >= 1 {
			s.LastFetchTimestamp, s.LastCaughtUpTimestamp = r.LastFetchTimestampMs, r.LastCaughtUpTimestampMs
		}
		out = append(out, s)
	}
	return out
}

func (n *Node) voterNodes() []kmsg.DescribeQuorumResponseNode {
	if vs := n.voterSet.Load(); vs != nil && len(vs.Voters) > 0 {
		// A dynamic quorum: every listener the voter set lists (KIP-853).
		out := make([]kmsg.DescribeQuorumResponseNode, 0, len(vs.Voters))
		for _, v := range vs.Voters {
			node := kmsg.NewDescribeQuorumResponseNode()
			node.NodeID = v.Key.ID
			for _, e := range v.Endpoints {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = e.Name, e.Host, e.Port
				node.Listeners = append(node.Listeners, l)
			}
			out = append(out, node)
		}
		return out
	}
	ids := slices.Sorted(func(yield func(int32) bool) {
		for id := range n.cfg.VoterAddrs {
			if !yield(id) {
				return
			}
		}
	})
	out := make([]kmsg.DescribeQuorumResponseNode, 0, len(ids))
	for _, id := range ids {
		node := kmsg.NewDescribeQuorumResponseNode()
		node.NodeID = id
		if host, port, ok := n.endpoint(id); ok && n.cfg.ListenerName != "" {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = n.cfg.ListenerName, host, port
			node.Listeners = []kmsg.DescribeQuorumResponseNodeListener{l}
		}
		out = append(out, node)
	}
	return out
}
