package quorum

import "slices"

// ReplicaStatus is one row of DescribeQuorum (leader only).
type ReplicaStatus struct {
	ReplicaID int32
	// DirectoryID is a voter's directory id in the voter set in force (KIP-853); zero
	// in a static quorum and for observers.
	DirectoryID [16]byte
	// LogEndOffset is the replica's last fetch offset as seen by the leader (-1 unknown).
	LogEndOffset            int64
	LastFetchTimestampMs    int64
	LastCaughtUpTimestampMs int64
}

// Status is a snapshot of the core's state for DescribeQuorum, metrics and tests.
type Status struct {
	NodeID   int32
	IsVoter  bool
	Role     Role
	Epoch    int32
	LeaderID int32
	VotedID  int32

	LogStartOffset   int64
	LogEndOffset     int64
	FlushedEndOffset int64
	LastEpoch        int32
	// HighWatermark is this node's high watermark; on a leader -1 until it committed in
	// its epoch (DescribeQuorum's convention).
	HighWatermark int64
	AppliedOffset int64
	// KRaftVersion is the kraft.version in force and VoterIDs the ids of the voter
	// set in force as this replica knows it (KIP-853: from its log in a dynamic
	// quorum, empty until the log names one).
	KRaftVersion int16
	VoterIDs     []int32

	// Leader only.
	EpochStartOffset int64
	Voters           []ReplicaStatus
	Observers        []ReplicaStatus
	// Resigned only: voters that have not acknowledged EndQuorumEpoch.
	EndEpochPending []int32
}

// Status reports the current state. Timestamps of the leader's own row are the latest
// time the core has seen, as Kafka fills in its current time.
func (r *Raft) Status() Status {
	s := Status{
		NodeID: r.cfg.NodeID, IsVoter: r.isVoter, Role: r.role, Epoch: r.epoch,
		LeaderID: r.leaderID, VotedID: r.votedID,
		LogStartOffset: r.log.startOffset, LogEndOffset: r.log.endOffset(),
		FlushedEndOffset: r.log.flushedEnd, LastEpoch: r.log.lastEpoch(),
		HighWatermark: r.hw, AppliedOffset: r.applied, EpochStartOffset: -1,
		KRaftVersion: r.kraftVersion(), VoterIDs: slices.Clone(r.voterIDs()),
	}
	if r.lead != nil {
		s.HighWatermark = r.leaderHW()
		s.EpochStartOffset = r.lead.epochStartOffset
		s.Voters, s.Observers = r.replicaRows()
	}
	if r.resigned != nil {
		for _, v := range r.otherVoters() {
			if !r.resigned.acked[v] {
				s.EndEpochPending = append(s.EndEpochPending, v)
			}
		}
	}
	return s
}

func (r *Raft) replicaRows() (voters, observers []ReplicaStatus) {
	for _, rs := range r.lead.replicas {
		row := ReplicaStatus{ReplicaID: rs.id, LogEndOffset: rs.endOffset,
			LastFetchTimestampMs: rs.lastFetchMs, LastCaughtUpTimestampMs: rs.lastCaughtUpMs}
		if rs.id == r.cfg.NodeID {
			row.LogEndOffset = r.log.endOffset()
			row.LastFetchTimestampMs, row.LastCaughtUpTimestampMs = r.nowMs, r.nowMs
		}
		row.DirectoryID = rs.dirID
		if rs.voter {
			row.DirectoryID = r.voterDirectoryID(rs.id)
			voters = append(voters, row)
		} else {
			observers = append(observers, row)
		}
	}
	byID := func(a, b ReplicaStatus) int { return int(a.ReplicaID - b.ReplicaID) }
	slices.SortFunc(voters, byID)
	slices.SortFunc(observers, byID)
	return voters, observers
}
