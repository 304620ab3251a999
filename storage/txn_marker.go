package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Transaction markers (KIP-98): a control batch with the transactional
// attribute, written by a partition's leader for the transaction
// coordinator (WriteTxnMarkers), carrying one record whose key is
// ControlKey(ControlCommit or ControlAbort) and whose value is Kafka's
// EndTxnMarker: int16 version (0), int32 coordinator epoch.

// endTxnMarkerSize is the EndTxnMarker value's size at version 0.
const endTxnMarkerSize = 6

// EncodeEndTxnMarker is the value of a COMMIT or ABORT control record.
func EncodeEndTxnMarker(coordinatorEpoch int32) []byte {
	v := make([]byte, endTxnMarkerSize)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// DecodeEndTxnMarker parses an EndTxnMarker value. Kafka reads version 0's
// fields from any version and ignores what follows them.
func DecodeEndTxnMarker(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < endTxnMarkerSize {
		return 0, fmt.Errorf("%w: end transaction marker of %d bytes", ErrCorruptBatch, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return 0, fmt.Errorf("%w: end transaction marker version %d", ErrCorruptBatch, v)
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// EncodeTxnMarkerBatch builds the control batch that ends producer
// (producerID, producerEpoch)'s transaction on a partition: commit or abort,
// stamped with the coordinator's epoch, at offset 0 (the leader assigns the
// offset and its leader epoch). Sequence is -1, as Kafka writes markers.
func EncodeTxnMarkerBatch(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, timestampMs int64) Batch {
	t := ControlAbort
	if commit {
		t = ControlCommit
	}
	b := EncodeBatch(0, -1, timestampMs, true, []Record{{Key: ControlKey(t), Value: EncodeEndTxnMarker(coordinatorEpoch), TimestampMs: timestampMs}})
	be := binary.BigEndian
	be.PutUint16(b.Raw[offAttributes:], be.Uint16(b.Raw[offAttributes:])|attrTransactional)
	be.PutUint64(b.Raw[offProducerID:], uint64(producerID))
	be.PutUint16(b.Raw[offProducerEpoch:], uint16(producerEpoch))
	b.setCRC()
	return b
}

func (b *Batch) setCRC() {
	binary.BigEndian.PutUint32(b.Raw[offCRC:], crc32.Checksum(b.Raw[offAttributes:], castagnoli))
}

// ControlMarker decodes a control batch's record: its control type and, for
// COMMIT and ABORT, the coordinator epoch (-1 for other types). Kafka's
// control batches hold exactly one record.
func (b Batch) ControlMarker() (ControlType, int32, error) {
	if !b.Control {
		return 0, -1, fmt.Errorf("%w: batch at offset %d is not a control batch", ErrCorruptBatch, b.BaseOffset)
	}
	recs, err := b.Records()
	if err != nil {
		return 0, -1, err
	}
	if len(recs) != 1 {
		return 0, -1, fmt.Errorf("%w: control batch at offset %d has %d records", ErrCorruptBatch, b.BaseOffset, len(recs))
	}
	t, err := ParseControlKey(recs[0].Key)
	if err != nil {
		return 0, -1, err
	}
	if t != ControlCommit && t != ControlAbort {
		return t, -1, nil
	}
	epoch, err := DecodeEndTxnMarker(recs[0].Value)
	return t, epoch, err
}

// Info is the batch's header as a BatchInfo (position and size as if it
// started a file); a control batch's marker is decoded into it, a marker that
// does not decode leaves ControlType -1.
func (b Batch) Info() BatchInfo {
	info := BatchInfo{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Epoch: b.Epoch,
		MaxTimestampMs: b.MaxTimestampMs, Size: int64(b.Size()), ProducerID: b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(), Attributes: b.Attributes(),
		CoordinatorEpoch: -1}
	if b.Control {
		t, epoch, err := b.ControlMarker()
		if err != nil {
			t = -1
		}
		info.ControlType, info.CoordinatorEpoch = t, epoch
	}
	return info
}

// EncodeTxnBatch builds a transactional batch of recs for producer
// (producerID, producerEpoch) with sequence -1, at offset 0: a
// coordinator's write inside the producer's transaction (TxnOffsetCommit's
// offsets), as Kafka's group coordinator writes them.
func EncodeTxnBatch(producerID int64, producerEpoch int16, timestampMs int64, recs []Record) Batch {
	b := EncodeBatch(0, -1, timestampMs, false, recs)
	be := binary.BigEndian
	be.PutUint16(b.Raw[offAttributes:], be.Uint16(b.Raw[offAttributes:])|attrTransactional)
	be.PutUint64(b.Raw[offProducerID:], uint64(producerID))
	be.PutUint16(b.Raw[offProducerEpoch:], uint16(producerEpoch))
	b.setCRC()
	return b
}
