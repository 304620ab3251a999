package quorum

import (
	"fmt"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// FetchSnapshotRequest is Kafka's FetchSnapshot (API key 59) for __cluster_metadata
// partition 0: one chunk of snapshot SnapshotID from byte Position.
type FetchSnapshotRequest struct {
	ClusterID string
	ReplicaID int32
	// ReplicaDirectoryID is the fetcher's directory id (v1+, KIP-853); zero when not
	// sent (static quorums leave it out).
	ReplicaDirectoryID [16]byte
	MaxBytes           int32
	CurrentLeaderEpoch int32
	SnapshotID         raftlog.SnapshotID
	Position           int64
}

// FetchSnapshotResponse answers a FetchSnapshotRequest. Bytes are raw file bytes from
// Position, not aligned to batches; Size is the whole snapshot's size.
type FetchSnapshotResponse struct {
	TopLevelErrorCode int16
	ErrorCode         int16
	LeaderID          int32
	LeaderEpoch       int32
	SnapshotID        raftlog.SnapshotID
	Size              int64
	Position          int64
	Bytes             []byte
}

func (r *FetchSnapshotRequest) String() string {
	return fmt.Sprintf("FetchSnapshot replica=%d epoch=%d snapshot=(%d,%d) position=%d",
		r.ReplicaID, r.CurrentLeaderEpoch, r.SnapshotID.EndOffset, r.SnapshotID.Epoch, r.Position)
}

func (r *FetchSnapshotResponse) String() string {
	return fmt.Sprintf("FetchSnapshotResp leader=%d epoch=%d snapshot=(%d,%d) position=%d size=%d bytes=%d%s",
		r.LeaderID, r.LeaderEpoch, r.SnapshotID.EndOffset, r.SnapshotID.Epoch, r.Position, r.Size, len(r.Bytes),
		errSuffix(r.TopLevelErrorCode, r.ErrorCode))
}
