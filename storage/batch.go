package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// RecordBatch v2 layout (Kafka's DefaultRecordBatch; identical on disk and on the wire):
//
//	off len field
//	  0   8 baseOffset
//	  8   4 batchLength          bytes after this field
//	 12   4 partitionLeaderEpoch the raft epoch that appended the batch
//	 16   1 magic = 2
//	 17   4 crc                  CRC-32C of bytes [21, end)
//	 21   2 attributes           bits 0-2 compression, 3 timestamp type,
//	                             4 transactional, 5 control; KRaft never compresses
//	 23   4 lastOffsetDelta
//	 27   8 baseTimestamp
//	 35   8 maxTimestamp
//	 43   8 producerId           -1 unless idempotent
//	 51   2 producerEpoch        -1 unless idempotent
//	 53   4 baseSequence         -1 unless idempotent
//	 57   4 recordCount
//	 61     records
const (
	// BatchHeaderSize is the size of a RecordBatch v2 header, records excluded.
	BatchHeaderSize = 61
	// logOverhead is the part of the header not counted by batchLength.
	logOverhead = 12

	offBaseOffset    = 0
	offBatchLength   = 8
	offLeaderEpoch   = 12
	offMagic         = 16
	offCRC           = 17
	offAttributes    = 21
	offLastDelta     = 23
	offBaseTimestamp = 27
	offMaxTimestamp  = 35
	offProducerID    = 43
	offProducerEpoch = 51
	offBaseSequence  = 53
	offRecordCount   = 57

	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by the batch codec.
var (
	ErrCorruptBatch = errors.New("storage: corrupt record batch")
	ErrShortBatch   = errors.New("storage: incomplete record batch")
)

// ControlType is the type in a control record's key (Kafka's ControlRecordType).
//
// kmsg's ControlRecordKeyTypeLeaderChange is a deprecated alias for 3 (SnapshotHeader);
// Kafka's LeaderChange is 2. These constants are the real ones.
type ControlType int16

const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case ControlLeaderChange:
		return "LEADER_CHANGE"
	case ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	case ControlKRaftVersion:
		return "KRAFT_VERSION"
	case ControlKRaftVoters:
		return "KRAFT_VOTERS"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// ControlKey is the 4-byte key of a control record: int16 version (0), int16 type.
func ControlKey(t ControlType) []byte {
	return []byte{0, 0, byte(uint16(t) >> 8), byte(t)}
}

// ParseControlKey decodes a control record key.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control key of %d bytes", ErrCorruptBatch, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return 0, fmt.Errorf("%w: control key version %d", ErrCorruptBatch, v)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// Record is one record inside a batch. Metadata records have a nil Key and a framed
// ApiMessageAndVersion Value; control records carry ControlKey(type) and the control
// message body.
type Record struct {
	// Offset is absolute (baseOffset + offsetDelta) when decoded.
	Offset      int64
	TimestampMs int64
	Key         []byte
	Value       []byte
}

// Batch is one RecordBatch v2: its raw bytes plus the header fields the log needs.
//
// INVARIANTS: Raw is a complete batch with a valid CRC; BaseOffset, LastOffset and
// Epoch equal the values encoded in Raw; LastOffset >= BaseOffset.
type Batch struct {
	BaseOffset int64
	LastOffset int64
	Epoch      int32
	Control    bool
	// MaxTimestampMs is the batch's maxTimestamp (append time on the leader).
	MaxTimestampMs int64
	Raw            []byte
}

// NextOffset is the offset following the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset + 1 }

// Size is the batch's size in bytes.
func (b Batch) Size() int { return len(b.Raw) }

// EncodeBatch builds a RecordBatch v2 holding recs at offsets baseOffset, baseOffset+1, ...
// Record Offset fields are ignored; timestamps come from each record (0 means timestampMs).
// The batch is never compressed, as KRaft writes it.
func EncodeBatch(baseOffset int64, epoch int32, timestampMs int64, control bool, recs []Record) Batch {
	if len(recs) == 0 {
		panic("storage: EncodeBatch with no records")
	}
	raw := make([]byte, BatchHeaderSize, BatchHeaderSize+estimateRecords(recs))
	maxTs := timestampMs
	for i, r := range recs {
		ts := r.TimestampMs
		if ts == 0 {
			ts = timestampMs
		}
		if ts > maxTs {
			maxTs = ts
		}
		raw = appendRecord(raw, int32(i), ts-timestampMs, r.Key, r.Value)
	}
	be := binary.BigEndian
	be.PutUint64(raw[offBaseOffset:], uint64(baseOffset))
	be.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	be.PutUint32(raw[offLeaderEpoch:], uint32(epoch))
	raw[offMagic] = 2
	var attrs uint16
	if control {
		attrs |= attrControl
	}
	be.PutUint16(raw[offAttributes:], attrs)
	be.PutUint32(raw[offLastDelta:], uint32(len(recs)-1))
	be.PutUint64(raw[offBaseTimestamp:], uint64(timestampMs))
	be.PutUint64(raw[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(raw[43:], ^uint64(0)) // producerId -1
	be.PutUint16(raw[51:], ^uint16(0)) // producerEpoch -1
	be.PutUint32(raw[53:], ^uint32(0)) // baseSequence -1
	be.PutUint32(raw[offRecordCount:], uint32(len(recs)))
	be.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return Batch{
		BaseOffset:     baseOffset,
		LastOffset:     baseOffset + int64(len(recs)) - 1,
		Epoch:          epoch,
		Control:        control,
		MaxTimestampMs: maxTs,
		Raw:            raw,
	}
}

func estimateRecords(recs []Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value) + 16
	}
	return n
}

func appendRecord(dst []byte, offsetDelta int32, tsDelta int64, key, value []byte) []byte {
	// The length prefix comes first, so size the body before writing it
	// rather than building it in a scratch buffer: this runs for every
	// record the leader appends and every record of a snapshot.
	n := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) +
		varBytesLen(key) + varBytesLen(value) + 1
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendVarBytes(dst, key)
	dst = appendVarBytes(dst, value)
	return binary.AppendVarint(dst, 0) // headers
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func varBytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// WithBaseOffset returns a copy of b rebased to baseOffset. The CRC does not cover the
// base offset, so only the header field changes.
func (b Batch) WithBaseOffset(baseOffset int64) Batch {
	raw := append([]byte(nil), b.Raw...)
	binary.BigEndian.PutUint64(raw[offBaseOffset:], uint64(baseOffset))
	b.LastOffset = baseOffset + (b.LastOffset - b.BaseOffset)
	b.BaseOffset = baseOffset
	b.Raw = raw
	return b
}

// ParseBatch decodes and validates the header of the single complete batch in raw
// (which must be exactly one batch): its length, magic 2 and CRC-32C. Records are
// not decoded; see Records. Compressed batches are accepted: the CRC covers the
// compressed bytes, and the metadata log refuses them itself.
func ParseBatch(raw []byte) (Batch, error) {
	if len(raw) < BatchHeaderSize {
		return Batch{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrShortBatch, len(raw), BatchHeaderSize)
	}
	be := binary.BigEndian
	length := int64(int32(be.Uint32(raw[offBatchLength:])))
	if length < BatchHeaderSize-logOverhead {
		return Batch{}, fmt.Errorf("%w: batch length %d", ErrCorruptBatch, length)
	}
	if int64(len(raw)) != length+logOverhead {
		return Batch{}, fmt.Errorf("%w: batch length %d does not match %d bytes", ErrCorruptBatch, length, len(raw))
	}
	if raw[offMagic] != 2 {
		return Batch{}, fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, raw[offMagic])
	}
	if want, got := be.Uint32(raw[offCRC:]), crc32.Checksum(raw[offAttributes:], castagnoli); want != got {
		return Batch{}, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, want, got)
	}
	attrs := be.Uint16(raw[offAttributes:])
	base := int64(be.Uint64(raw[offBaseOffset:]))
	lastDelta := int32(be.Uint32(raw[offLastDelta:]))
	if base < 0 || lastDelta < 0 {
		return Batch{}, fmt.Errorf("%w: base offset %d, last offset delta %d", ErrCorruptBatch, base, lastDelta)
	}
	return Batch{
		BaseOffset:     base,
		LastOffset:     base + int64(lastDelta),
		Epoch:          int32(be.Uint32(raw[offLeaderEpoch:])),
		Control:        attrs&attrControl != 0,
		MaxTimestampMs: int64(be.Uint64(raw[offMaxTimestamp:])),
		Raw:            raw,
	}, nil
}

// SplitBatches parses consecutive batches from a stream (a segment file or a Fetch
// response's records). It returns the complete, valid batches and the number of bytes
// they occupy. A trailing partial batch (Fetch responses may end with one) is not an
// error: it is left out and n stops before it. A corrupt batch stops parsing with err
// set; the batches before it are still returned, so a log can truncate a torn tail.
func SplitBatches(b []byte) (batches []Batch, n int, err error) {
	for n < len(b) {
		rest := b[n:]
		if len(rest) < logOverhead {
			return batches, n, nil
		}
		length := int64(int32(binary.BigEndian.Uint32(rest[offBatchLength:])))
		if length < BatchHeaderSize-logOverhead {
			return batches, n, fmt.Errorf("%w at byte %d: batch length %d", ErrCorruptBatch, n, length)
		}
		size := length + logOverhead
		if int64(len(rest)) < size {
			return batches, n, nil
		}
		batch, perr := ParseBatch(rest[:size:size])
		if perr != nil {
			return batches, n, fmt.Errorf("at byte %d: %w", n, perr)
		}
		batches = append(batches, batch)
		n += int(size)
	}
	return batches, n, nil
}

// Records decodes the batch's records with absolute offsets and timestamps.
func (b Batch) Records() ([]Record, error) {
	be := binary.BigEndian
	count := int32(be.Uint32(b.Raw[offRecordCount:]))
	baseTs := int64(be.Uint64(b.Raw[offBaseTimestamp:]))
	if count < 0 || int64(count) > int64(len(b.Raw)) {
		return nil, fmt.Errorf("%w: record count %d", ErrCorruptBatch, count)
	}
	out := make([]Record, 0, count)
	r := reader{b: b.Raw[BatchHeaderSize:]}
	for i := int32(0); i < count; i++ {
		rec, err := r.record(b.BaseOffset, baseTs)
		if err != nil {
			return nil, fmt.Errorf("batch at offset %d, record %d: %w", b.BaseOffset, i, err)
		}
		out = append(out, rec)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in batch at offset %d", ErrCorruptBatch, len(r.b), b.BaseOffset)
	}
	// A compacted batch (cleanup.policy=compact) keeps its offset range
	// with fewer records, so its last record may lie below LastOffset; it
	// never lies past it.
	if n := len(out); n > 0 && out[n-1].Offset > b.LastOffset {
		return nil, fmt.Errorf("%w: last record offset %d, header says %d", ErrCorruptBatch, out[n-1].Offset, b.LastOffset)
	}
	return out, nil
}

// reader is a sticky-error-free cursor; every read checks bounds.
type reader struct{ b []byte }

func (r *reader) varint() (int64, error) {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad varint", ErrCorruptBatch)
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *reader) bytes() ([]byte, error) {
	n, err := r.varint()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	if n > int64(len(r.b)) {
		return nil, fmt.Errorf("%w: field of %d bytes, %d left", ErrCorruptBatch, n, len(r.b))
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, nil
}

func (r *reader) record(baseOffset, baseTs int64) (Record, error) {
	length, err := r.varint()
	if err != nil {
		return Record{}, err
	}
	if length < 0 || length > int64(len(r.b)) {
		return Record{}, fmt.Errorf("%w: record length %d, %d left", ErrCorruptBatch, length, len(r.b))
	}
	body := reader{b: r.b[:length]}
	r.b = r.b[length:]
	if len(body.b) < 1 {
		return Record{}, fmt.Errorf("%w: empty record", ErrCorruptBatch)
	}
	body.b = body.b[1:] // attributes, unused
	tsDelta, err := body.varint()
	if err != nil {
		return Record{}, err
	}
	offDelta, err := body.varint()
	if err != nil {
		return Record{}, err
	}
	key, err := body.bytes()
	if err != nil {
		return Record{}, err
	}
	value, err := body.bytes()
	if err != nil {
		return Record{}, err
	}
	headers, err := body.varint()
	if err != nil {
		return Record{}, err
	}
	for i := int64(0); i < headers; i++ {
		if _, err := body.bytes(); err != nil { // header key
			return Record{}, err
		}
		if _, err := body.bytes(); err != nil { // header value
			return Record{}, err
		}
	}
	if len(body.b) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes in record", ErrCorruptBatch, len(body.b))
	}
	return Record{Offset: baseOffset + offDelta, TimestampMs: baseTs + tsDelta, Key: key, Value: value}, nil
}

// Compression is the compression codec in the batch's attributes: 0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd.
func (b Batch) Compression() int8 {
	return int8(binary.BigEndian.Uint16(b.Raw[offAttributes:]) & attrCompressionMask)
}

// Attributes are the batch's attributes field.
func (b Batch) Attributes() uint16 { return binary.BigEndian.Uint16(b.Raw[offAttributes:]) }

// Transactional reports the transactional bit of the batch's attributes.
func (b Batch) Transactional() bool {
	return binary.BigEndian.Uint16(b.Raw[offAttributes:])&attrTransactional != 0
}

// ProducerID is the batch's producer id, -1 for a non-idempotent batch.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b.Raw[offProducerID:])) }

// ProducerEpoch is the batch's producer epoch, -1 for a non-idempotent batch.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b.Raw[offProducerEpoch:])) }

// BaseSequence is the sequence number of the batch's first record, -1 for a
// non-idempotent batch.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b.Raw[offBaseSequence:])) }

// RecordCount is the record count the header claims.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b.Raw[offRecordCount:])) }

// BaseTimestampMs is the batch's baseTimestamp (the first record's timestamp).
func (b Batch) BaseTimestampMs() int64 {
	return int64(binary.BigEndian.Uint64(b.Raw[offBaseTimestamp:]))
}

// SetBaseOffset rewrites the batch's base offset in place (the CRC does not cover
// it); the producer's batch becomes the log's.
func (b *Batch) SetBaseOffset(baseOffset int64) {
	binary.BigEndian.PutUint64(b.Raw[offBaseOffset:], uint64(baseOffset))
	b.LastOffset = baseOffset + (b.LastOffset - b.BaseOffset)
	b.BaseOffset = baseOffset
}

// SetLeaderEpoch rewrites the batch's partitionLeaderEpoch in place (not covered
// by the CRC either): the leader stamps its epoch on every batch it appends.
func (b *Batch) SetLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b.Raw[offLeaderEpoch:], uint32(epoch))
	b.Epoch = epoch
}

// SetLogAppendTime marks the batch as timestamped by the broker
// (message.timestamp.type=LogAppendTime): the timestamp-type attribute is set
// and maxTimestamp becomes tsMs, which consumers then read as every record's
// timestamp; the CRC is recomputed. Records keep their bytes.
func (b *Batch) SetLogAppendTime(tsMs int64) {
	be := binary.BigEndian
	be.PutUint16(b.Raw[offAttributes:], be.Uint16(b.Raw[offAttributes:])|attrLogAppendTime)
	be.PutUint64(b.Raw[offMaxTimestamp:], uint64(tsMs))
	be.PutUint32(b.Raw[offCRC:], crc32.Checksum(b.Raw[offAttributes:], castagnoli))
	b.MaxTimestampMs = tsMs
}

// LogAppendTime reports whether the batch's timestamps are the broker's
// (the timestamp-type attribute).
func (b Batch) LogAppendTime() bool {
	return binary.BigEndian.Uint16(b.Raw[offAttributes:])&attrLogAppendTime != 0
}
