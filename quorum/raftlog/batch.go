package raftlog

import (
	"fmt"

	"github.com/kraftd/kraftd/storage"
)

// The RecordBatch v2 codec and the leader epoch cache live in package storage,
// shared with the partition logs of the data plane; these names keep the quorum's
// vocabulary. The metadata log differs in one rule: KRaft never compresses, so
// ParseBatch and SplitBatches here refuse compressed batches.

// BatchHeaderSize is the size of a RecordBatch v2 header, records excluded.
const BatchHeaderSize = storage.BatchHeaderSize

type (
	Batch       = storage.Batch
	Record      = storage.Record
	ControlType = storage.ControlType
	EpochEntry  = storage.EpochEntry
	EpochCache  = storage.EpochCache
)

const (
	ControlAbort          = storage.ControlAbort
	ControlCommit         = storage.ControlCommit
	ControlLeaderChange   = storage.ControlLeaderChange
	ControlSnapshotHeader = storage.ControlSnapshotHeader
	ControlSnapshotFooter = storage.ControlSnapshotFooter
	ControlKRaftVersion   = storage.ControlKRaftVersion
	ControlKRaftVoters    = storage.ControlKRaftVoters
)

// LeaderEpochCheckpointFile is the epoch cache's file name in the partition directory.
const LeaderEpochCheckpointFile = storage.LeaderEpochCheckpointFile

// Errors of the batch and checkpoint codecs.
var (
	ErrCorruptBatch           = storage.ErrCorruptBatch
	ErrShortBatch             = storage.ErrShortBatch
	ErrCorruptEpochCheckpoint = storage.ErrCorruptEpochCheckpoint
)

// Codec functions shared with the partition logs.
var (
	EncodeBatch           = storage.EncodeBatch
	ControlKey            = storage.ControlKey
	ParseControlKey       = storage.ParseControlKey
	EncodeEpochCheckpoint = storage.EncodeEpochCheckpoint
	DecodeEpochCheckpoint = storage.DecodeEpochCheckpoint
)

// ParseBatch is storage.ParseBatch for the metadata log: a compressed batch is
// corrupt here.
func ParseBatch(raw []byte) (Batch, error) {
	b, err := storage.ParseBatch(raw)
	if err != nil {
		return Batch{}, err
	}
	if b.Compression() != 0 {
		return Batch{}, fmt.Errorf("%w: compressed batches are not used by the metadata log", ErrCorruptBatch)
	}
	return b, nil
}

// SplitBatches is storage.SplitBatches for the metadata log: a compressed batch
// stops parsing as a corrupt one does.
func SplitBatches(b []byte) (batches []Batch, n int, err error) {
	batches, n, err = storage.SplitBatches(b)
	for i, batch := range batches {
		if batch.Compression() != 0 {
			pos := 0
			for _, prev := range batches[:i] {
				pos += prev.Size()
			}
			return batches[:i], pos, fmt.Errorf("at byte %d: %w: compressed batches are not used by the metadata log",
				pos, ErrCorruptBatch)
		}
	}
	return batches, n, err
}
