package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
)

// Producer-state snapshots, as Kafka's ProducerStateManager writes them:
// <offset>.snapshot in the partition directory (offset zero-padded to 20
// digits, like a segment), holding the idempotent and transactional
// producers' state built from every batch below offset.
//
//	off len field
//	  0   2 version = 1
//	  2   4 crc                CRC-32C of bytes [6, end)
//	  6   4 entry count
//	 10  46 per entry: int64 producer_id, int16 epoch, int32 last_sequence,
//	                  int64 last_offset, int32 offset_delta, int64 timestamp,
//	                  int32 coordinator_epoch, int64 current_txn_first_offset
//
// All big-endian, as Kafka's protocol Struct serializes them. last_offset is
// the last offset of the producer's last data batch (-1 if it has none: only
// a transaction marker), offset_delta that batch's last minus first
// sequence, timestamp its max timestamp, current_txn_first_offset the first
// offset of the producer's ongoing transaction (-1: none).

// ProducerSnapshotSuffix is the file name suffix of producer-state snapshots.
const ProducerSnapshotSuffix = ".snapshot"

const (
	producerSnapshotVersion    = 1
	producerSnapshotHeaderSize = 10 // version, crc, entry count
	producerSnapshotEntrySize  = 46
)

// ErrCorruptProducerSnapshot is returned for a snapshot file that is too short,
// of another version, whose entry count does not match its size, or whose CRC
// is wrong.
var ErrCorruptProducerSnapshot = errors.New("storage: corrupt producer snapshot")

// ProducerSnapshotEntry is one producer's state in a snapshot (Kafka's
// ProducerStateEntry with its last batch's metadata).
type ProducerSnapshotEntry struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the last record of the producer's last
	// data batch.
	LastSequence int32
	// LastOffset is that batch's last offset, -1 when there is none.
	LastOffset int64
	// OffsetDelta is that batch's last sequence minus its first.
	OffsetDelta int32
	// TimestampMs is the max timestamp of the producer's last batch (expiry
	// counts from it).
	TimestampMs int64
	// CoordinatorEpoch is the epoch of the transaction coordinator that wrote
	// the producer's last transaction marker, -1 if none.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's ongoing
	// transaction, -1 when none.
	CurrentTxnFirstOffset int64
}

// EncodeProducerSnapshot renders entries in Kafka's snapshot format, in the
// order given.
func EncodeProducerSnapshot(entries []ProducerSnapshotEntry) []byte {
	buf := make([]byte, producerSnapshotHeaderSize, producerSnapshotHeaderSize+len(entries)*producerSnapshotEntrySize)
	be := binary.BigEndian
	be.PutUint16(buf[0:], producerSnapshotVersion)
	be.PutUint32(buf[6:], uint32(len(entries)))
	for _, e := range entries {
		buf = be.AppendUint64(buf, uint64(e.ProducerID))
		buf = be.AppendUint16(buf, uint16(e.ProducerEpoch))
		buf = be.AppendUint32(buf, uint32(e.LastSequence))
		buf = be.AppendUint64(buf, uint64(e.LastOffset))
		buf = be.AppendUint32(buf, uint32(e.OffsetDelta))
		buf = be.AppendUint64(buf, uint64(e.TimestampMs))
		buf = be.AppendUint32(buf, uint32(e.CoordinatorEpoch))
		buf = be.AppendUint64(buf, uint64(e.CurrentTxnFirstOffset))
	}
	be.PutUint32(buf[2:], crc32.Checksum(buf[6:], castagnoli))
	return buf
}

// DecodeProducerSnapshot parses a snapshot file's bytes. The entry count is
// checked against the file's size before anything is allocated.
func DecodeProducerSnapshot(data []byte) ([]ProducerSnapshotEntry, error) {
	if len(data) < producerSnapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptProducerSnapshot, len(data))
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(data)); v != producerSnapshotVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptProducerSnapshot, v)
	}
	if want, got := be.Uint32(data[2:]), crc32.Checksum(data[6:], castagnoli); want != got {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptProducerSnapshot, want, got)
	}
	n := int64(int32(be.Uint32(data[6:])))
	if n < 0 || n*producerSnapshotEntrySize != int64(len(data)-producerSnapshotHeaderSize) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptProducerSnapshot, n, len(data))
	}
	out := make([]ProducerSnapshotEntry, n)
	p := data[producerSnapshotHeaderSize:]
	for i := range out {
		out[i] = ProducerSnapshotEntry{
			ProducerID:            int64(be.Uint64(p[0:])),
			ProducerEpoch:         int16(be.Uint16(p[8:])),
			LastSequence:          int32(be.Uint32(p[10:])),
			LastOffset:            int64(be.Uint64(p[14:])),
			OffsetDelta:           int32(be.Uint32(p[22:])),
			TimestampMs:           int64(be.Uint64(p[26:])),
			CoordinatorEpoch:      int32(be.Uint32(p[34:])),
			CurrentTxnFirstOffset: int64(be.Uint64(p[38:])),
		}
		p = p[producerSnapshotEntrySize:]
	}
	return out, nil
}

// WriteProducerSnapshot writes dir/<offset>.snapshot durably (temporary file,
// fsync, rename, directory fsync).
func WriteProducerSnapshot(dir string, offset int64, entries []ProducerSnapshotEntry) error {
	if err := WriteFileAtomic(dir, SegmentFileName(offset, ProducerSnapshotSuffix), EncodeProducerSnapshot(entries)); err != nil {
		return err
	}
	return SyncDir(dir)
}

// ReadProducerSnapshot reads and decodes dir/<offset>.snapshot.
func ReadProducerSnapshot(dir string, offset int64) ([]ProducerSnapshotEntry, error) {
	data, err := os.ReadFile(filepath.Join(dir, SegmentFileName(offset, ProducerSnapshotSuffix)))
	if err != nil {
		return nil, err
	}
	return DecodeProducerSnapshot(data)
}

// ProducerSnapshotOffsets lists the offsets of the snapshots in dir, ascending.
func ProducerSnapshotOffsets(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range entries {
		if off, ok := ParseSegmentFileName(e.Name(), ProducerSnapshotSuffix); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteProducerSnapshots removes the snapshots in dir whose offset doom
// selects, and returns how many went.
func DeleteProducerSnapshots(dir string, doom func(offset int64) bool) (int, error) {
	offsets, err := ProducerSnapshotOffsets(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, off := range offsets {
		if !doom(off) {
			continue
		}
		err := os.Remove(filepath.Join(dir, SegmentFileName(off, ProducerSnapshotSuffix)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}
