package quorum

import (
	"fmt"
	"strings"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// AnyVoter as Message.To asks the driver to pick a bootstrap voter itself. An
// observer of a dynamic quorum (controller.quorum.bootstrap.servers, KIP-853)
// knows addresses but not ids, so its discovery Fetch cannot name a target id.
// With a static voter set the core always names a concrete voter.
const AnyVoter int32 = -1

// Message is one raft RPC, request or response, between the core and the driver.
// Exactly one payload pointer is set.
//
// Request ids pair requests with responses:
//   - Inbound requests: the driver sets RequestID; the core echoes it on its response
//     so the driver can route the answer back to the waiting connection.
//   - Outbound requests: the core sets RequestID (its own counter); the driver echoes it
//     on the response it steps back in, so the core can drop answers to requests it no
//     longer waits for.
//
// A failed outbound request (timeout, connection error, unsupported version) is stepped
// back in as the matching response type with an empty payload and Err set; the core
// reacts as Kafka does (observers rediscover the leader, followers retry).
type Message struct {
	From, To  int32
	RequestID uint64
	// Err is set only on responses the driver synthesises for a failed outbound request.
	Err error

	Vote           *VoteRequest
	VoteResp       *VoteResponse
	BeginEpoch     *BeginQuorumEpochRequest
	BeginEpochResp *BeginQuorumEpochResponse
	EndEpoch       *EndQuorumEpochRequest
	EndEpochResp   *EndQuorumEpochResponse
	Fetch          *FetchRequest
	FetchResp      *FetchResponse

	FetchSnapshot     *FetchSnapshotRequest
	FetchSnapshotResp *FetchSnapshotResponse

	UpdateVoter     *UpdateVoterRequest
	UpdateVoterResp *UpdateVoterResponse
}

// IsRequest reports whether m carries a request payload.
func (m Message) IsRequest() bool {
	return m.Vote != nil || m.BeginEpoch != nil || m.EndEpoch != nil || m.Fetch != nil || m.FetchSnapshot != nil ||
		m.UpdateVoter != nil
}

// VoteRequest is Kafka's Vote (API key 52) for the __cluster_metadata partition.
// Vote v2 (KIP-996) adds PreVote; it must only be sent to peers that support v2.
type VoteRequest struct {
	ClusterID string
	// VoterID is the id the request is addressed to (v1+); -1 when unknown.
	VoterID int32
	// VoterDirectoryID is the addressed voter's directory id (v1+, KIP-853); zero
	// when unknown (a static voter set has none).
	VoterDirectoryID [16]byte
	// CandidateDirectoryID is the candidate's own directory id (v1+); zero in a
	// static quorum.
	CandidateDirectoryID [16]byte
	// CandidateEpoch is the bumped epoch for a real vote, the sender's current epoch for a
	// pre-vote.
	CandidateEpoch  int32
	CandidateID     int32
	LastOffsetEpoch int32
	// LastOffset is the candidate's log end offset.
	LastOffset int64
	PreVote    bool
}

// VoteResponse answers a VoteRequest.
//
// TopLevelErrorCode carries request-wide errors (INCONSISTENT_CLUSTER_ID,
// INVALID_REQUEST); ErrorCode is the partition-level code (FENCED_LEADER_EPOCH,
// INVALID_VOTER_KEY, ...). Codes are Kafka's (kerr).
type VoteResponse struct {
	TopLevelErrorCode int16
	ErrorCode         int16
	LeaderID          int32
	LeaderEpoch       int32
	VoteGranted       bool
	// PreVote is not on the wire: the transport copies it from the request it sent so the
	// core knows which kind of ballot is answered.
	PreVote bool
	// LeaderAddr is the named leader's host:port from the response's NodeEndpoints
	// (v1+, KIP-853), "" when absent; the driver learns from it, the core ignores it.
	LeaderAddr string
}

// BeginQuorumEpochRequest is Kafka's BeginQuorumEpoch (API key 53): a new leader
// announces itself to the voters.
type BeginQuorumEpochRequest struct {
	ClusterID string
	VoterID   int32
	// VoterDirectoryID is the addressed voter's directory id (v1+, KIP-853); zero
	// when unknown.
	VoterDirectoryID [16]byte
	LeaderID         int32
	LeaderEpoch      int32
	// LeaderAddr is the leader's host:port on this node's controller listener from
	// the request's LeaderEndpoints (v1+, KIP-853), "" when absent; the driver learns
	// from it where to fetch, the core ignores it.
	LeaderAddr string
}

// BeginQuorumEpochResponse answers a BeginQuorumEpochRequest.
type BeginQuorumEpochResponse struct {
	TopLevelErrorCode int16
	ErrorCode         int16
	LeaderID          int32
	LeaderEpoch       int32
}

// EndQuorumEpochRequest is Kafka's EndQuorumEpoch (API key 54): a resigning leader
// tells the voters to elect a successor, most caught-up first.
type EndQuorumEpochRequest struct {
	ClusterID           string
	LeaderID            int32
	LeaderEpoch         int32
	PreferredSuccessors []int32
	// PreferredDirectoryIDs are the successors' directory ids (v1+, KIP-853), in
	// the same order; nil or zero in a static quorum.
	PreferredDirectoryIDs [][16]byte
}

// EndQuorumEpochResponse answers an EndQuorumEpochRequest.
type EndQuorumEpochResponse struct {
	TopLevelErrorCode int16
	ErrorCode         int16
	LeaderID          int32
	LeaderEpoch       int32
}

// FetchRequest is Kafka's Fetch (API key 1) for __cluster_metadata partition 0 as the
// raft client sends it. For a voter, FetchOffset is also the durability ack: everything
// below it is fsynced.
type FetchRequest struct {
	ClusterID string
	// ReplicaID is the fetcher's node id; -1 is an anonymous fetcher (not tracked).
	ReplicaID int32
	// ReplicaDirectoryID is the fetcher's directory id (v17+, KIP-853); zero when
	// not sent (static quorums leave it out).
	ReplicaDirectoryID [16]byte
	MaxWaitMs          int32
	MaxBytes           int32
	CurrentLeaderEpoch int32
	FetchOffset        int64
	// LastFetchedEpoch is the epoch of the fetcher's last record (0 on an empty log).
	LastFetchedEpoch int32
}

// EpochEndOffset is a Fetch response's DivergingEpoch: the largest leader epoch <= the
// fetcher's last epoch and the offset where that epoch ends on the leader.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// FetchResponse answers a FetchRequest. LeaderID/LeaderEpoch are the responder's view
// (Kafka's CurrentLeader), always filled, errors included: that is how observers
// discover the leader.
type FetchResponse struct {
	TopLevelErrorCode int16
	ErrorCode         int16
	// HighWatermark is -1 while the leader has not committed in its epoch.
	HighWatermark  int64
	LogStartOffset int64
	DivergingEpoch *EpochEndOffset
	LeaderID       int32
	LeaderEpoch    int32
	// SnapshotID, when set, tells the fetcher to FetchSnapshot first (KIP-630).
	SnapshotID *raftlog.SnapshotID
	Batches    []raftlog.Batch
	// LeaderAddr is the leader's host:port from the response's NodeEndpoints (v16+),
	// "" when absent; the driver learns from it where to fetch next, the core ignores it.
	LeaderAddr string
}

// String renders m on one line for transcripts and debug logs.
func (m Message) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d->%d", m.From, m.To)
	switch {
	case m.Vote != nil:
		b.WriteString(" " + m.Vote.String())
	case m.VoteResp != nil:
		b.WriteString(" " + m.VoteResp.String())
	case m.BeginEpoch != nil:
		b.WriteString(" " + m.BeginEpoch.String())
	case m.BeginEpochResp != nil:
		b.WriteString(" " + m.BeginEpochResp.String())
	case m.EndEpoch != nil:
		b.WriteString(" " + m.EndEpoch.String())
	case m.EndEpochResp != nil:
		b.WriteString(" " + m.EndEpochResp.String())
	case m.Fetch != nil:
		b.WriteString(" " + m.Fetch.String())
	case m.FetchResp != nil:
		b.WriteString(" " + m.FetchResp.String())
	case m.FetchSnapshot != nil:
		b.WriteString(" " + m.FetchSnapshot.String())
	case m.FetchSnapshotResp != nil:
		b.WriteString(" " + m.FetchSnapshotResp.String())
	case m.UpdateVoter != nil:
		b.WriteString(" " + m.UpdateVoter.String())
	case m.UpdateVoterResp != nil:
		b.WriteString(" " + m.UpdateVoterResp.String())
	default:
		b.WriteString(" <empty>")
	}
	if m.Err != nil {
		fmt.Fprintf(&b, " err=%q", m.Err.Error())
	}
	return b.String()
}

func (r *VoteRequest) String() string {
	kind := "Vote"
	if r.PreVote {
		kind = "PreVote"
	}
	return fmt.Sprintf("%s epoch=%d candidate=%d last=(%d,%d)",
		kind, r.CandidateEpoch, r.CandidateID, r.LastOffsetEpoch, r.LastOffset)
}

func (r *VoteResponse) String() string {
	kind := "VoteResp"
	if r.PreVote {
		kind = "PreVoteResp"
	}
	return fmt.Sprintf("%s granted=%t leader=%d epoch=%d%s",
		kind, r.VoteGranted, r.LeaderID, r.LeaderEpoch, errSuffix(r.TopLevelErrorCode, r.ErrorCode))
}

func (r *BeginQuorumEpochRequest) String() string {
	return fmt.Sprintf("BeginEpoch leader=%d epoch=%d", r.LeaderID, r.LeaderEpoch)
}

func (r *BeginQuorumEpochResponse) String() string {
	return fmt.Sprintf("BeginEpochResp leader=%d epoch=%d%s",
		r.LeaderID, r.LeaderEpoch, errSuffix(r.TopLevelErrorCode, r.ErrorCode))
}

func (r *EndQuorumEpochRequest) String() string {
	return fmt.Sprintf("EndEpoch leader=%d epoch=%d successors=%v", r.LeaderID, r.LeaderEpoch, r.PreferredSuccessors)
}

func (r *EndQuorumEpochResponse) String() string {
	return fmt.Sprintf("EndEpochResp leader=%d epoch=%d%s",
		r.LeaderID, r.LeaderEpoch, errSuffix(r.TopLevelErrorCode, r.ErrorCode))
}

func (r *FetchRequest) String() string {
	return fmt.Sprintf("Fetch replica=%d epoch=%d offset=%d lastEpoch=%d maxWait=%d",
		r.ReplicaID, r.CurrentLeaderEpoch, r.FetchOffset, r.LastFetchedEpoch, r.MaxWaitMs)
}

func (r *FetchResponse) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "FetchResp leader=%d epoch=%d hw=%d", r.LeaderID, r.LeaderEpoch, r.HighWatermark)
	if r.DivergingEpoch != nil {
		fmt.Fprintf(&b, " diverging=(%d,%d)", r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset)
	}
	if r.SnapshotID != nil {
		fmt.Fprintf(&b, " snapshot=(%d,%d)", r.SnapshotID.EndOffset, r.SnapshotID.Epoch)
	}
	if n := len(r.Batches); n > 0 {
		fmt.Fprintf(&b, " batches=[%d..%d]", r.Batches[0].BaseOffset, r.Batches[n-1].LastOffset)
	}
	b.WriteString(errSuffix(r.TopLevelErrorCode, r.ErrorCode))
	return b.String()
}

// errSuffix names non-zero Kafka error codes for transcripts.
func errSuffix(top, part int16) string {
	s := ""
	if top != 0 {
		s += " topErr=" + errName(top)
	}
	if part != 0 {
		s += " err=" + errName(part)
	}
	return s
}
