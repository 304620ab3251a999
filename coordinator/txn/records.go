package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Topic is the internal topic transaction state lives in.
const Topic = "__transaction_state"

// DefaultNumPartitions is transaction.state.log.num.partitions' default.
const DefaultNumPartitions = 50

// ErrCorruptRecord is returned for a __transaction_state key or value that
// does not decode.
var ErrCorruptRecord = errors.New("txn: corrupt transaction log record")

// Record layouts, Kafka's TransactionLogKey (v0) and TransactionLogValue
// (v0, the version transaction.version 1 writes), each framed by an int16
// version, big-endian:
//
//	key:   int16 version 0, string transactional_id (int16 length + bytes)
//	value: int16 version 0, int64 producer_id, int16 producer_epoch,
//	       int32 transaction_timeout_ms, int8 transaction_status,
//	       transaction_partitions: int32 count (-1: null), each
//	         string topic, int32 count, int32 partition ids,
//	       int64 last_update_timestamp_ms, int64 start_timestamp_ms
//
// A null value (tombstone) deletes the transactional id. Version 1 values
// (flexible, KIP-890's transaction.version 2) decode their common fields;
// tagged fields are skipped.

// EncodeKey renders the TransactionLogKey of a transactional id.
func EncodeKey(transactionalID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(transactionalID)))
	return append(b, transactionalID...)
}

// DecodeKey parses a TransactionLogKey.
func DecodeKey(b []byte) (string, error) {
	r := reader{b: b}
	if v := r.int16(); v != 0 && r.err == nil {
		return "", fmt.Errorf("%w: key version %d", ErrCorruptRecord, v)
	}
	id := r.string()
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing key bytes", ErrCorruptRecord, len(r.b))
	}
	return id, r.err
}

// EncodeValue renders m as a TransactionLogValue v0. Partitions are written
// grouped by topic, sorted; an Empty transaction has none (null).
func EncodeValue(m *Metadata) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, 0)
	b = be.AppendUint64(b, uint64(m.ProducerID))
	b = be.AppendUint16(b, uint16(m.ProducerEpoch))
	b = be.AppendUint32(b, uint32(m.TimeoutMs))
	b = append(b, byte(m.State))
	if m.State == Empty {
		b = be.AppendUint32(b, ^uint32(0)) // null
	} else {
		topics := m.topics()
		b = be.AppendUint32(b, uint32(len(topics)))
		for _, t := range topics {
			b = be.AppendUint16(b, uint16(len(t.Topic)))
			b = append(b, t.Topic...)
			b = be.AppendUint32(b, uint32(len(t.Partitions)))
			for _, p := range t.Partitions {
				b = be.AppendUint32(b, uint32(p))
			}
		}
	}
	b = be.AppendUint64(b, uint64(m.LastUpdateMs))
	return be.AppendUint64(b, uint64(m.StartMs))
}

// DecodeValue parses a TransactionLogValue (v0 or v1) for transactionalID.
// Counts are checked against the bytes left before anything is allocated.
func DecodeValue(transactionalID string, b []byte) (*Metadata, error) {
	r := reader{b: b}
	version := r.int16()
	if r.err == nil && (version < 0 || version > 1) {
		return nil, fmt.Errorf("%w: value version %d", ErrCorruptRecord, version)
	}
	m := &Metadata{TransactionalID: transactionalID, Partitions: map[TopicPartition]struct{}{}}
	m.ProducerID, m.ProducerEpoch, m.TimeoutMs = r.int64(), r.int16(), r.int32()
	m.State = State(r.int8())
	n := r.count(version, 6)
	for range max(n, 0) {
		topic := r.compactOr(version)
		np := r.count(version, 4)
		for range max(np, 0) {
			m.Partitions[TopicPartition{Topic: topic, Partition: r.int32()}] = struct{}{}
		}
		r.skipTags(version)
	}
	m.LastUpdateMs, m.StartMs = r.int64(), r.int64()
	r.skipTags(version)
	switch {
	case r.err != nil:
		return nil, r.err
	case len(r.b) != 0:
		return nil, fmt.Errorf("%w: %d trailing value bytes", ErrCorruptRecord, len(r.b))
	case m.State > PrepareEpochFence || m.ProducerID < 0 || m.TimeoutMs < 0:
		return nil, fmt.Errorf("%w: state %d, producer id %d, timeout %d", ErrCorruptRecord, m.State, m.ProducerID, m.TimeoutMs)
	}
	return m, nil
}

// topicPartitions is one topic's partitions of a transaction.
type topicPartitions struct {
	Topic      string
	Partitions []int32
}

func (m *Metadata) topics() []topicPartitions {
	by := map[string][]int32{}
	for tp := range m.Partitions {
		by[tp.Topic] = append(by[tp.Topic], tp.Partition)
	}
	out := make([]topicPartitions, 0, len(by))
	for t, ps := range by {
		slices.Sort(ps)
		out = append(out, topicPartitions{Topic: t, Partitions: ps})
	}
	slices.SortFunc(out, func(a, b topicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// reader is a sticky-error big-endian cursor: the first short read sets err
// and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: need %d bytes, %d left", ErrCorruptRecord, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	if v := r.take(1); v != nil {
		return int8(v[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if v := r.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *reader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *reader) int64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad varint", ErrCorruptRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 && r.err == nil {
		r.err = fmt.Errorf("%w: null string", ErrCorruptRecord)
	}
	return string(r.take(int(n)))
}

// compactOr reads a string, compact (v1, flexible) or classic (v0).
func (r *reader) compactOr(version int16) string {
	if version == 0 {
		return r.string()
	}
	n := r.uvarint()
	if n == 0 && r.err == nil {
		r.err = fmt.Errorf("%w: null string", ErrCorruptRecord)
	}
	if n > uint64(len(r.b))+1 {
		r.err = fmt.Errorf("%w: string of %d bytes, %d left", ErrCorruptRecord, n-1, len(r.b))
		return ""
	}
	return string(r.take(int(n) - 1))
}

// count reads an array length (classic int32 at v0, compact uvarint+1 at
// v1); -1 is null. A count whose elements (at least minSize bytes each)
// cannot fit in what is left is refused.
func (r *reader) count(version int16, minSize int) int {
	var n int64
	if version == 0 {
		n = int64(r.int32())
	} else {
		n = int64(r.uvarint()) - 1
	}
	if r.err != nil {
		return -1
	}
	if n < -1 || n > int64(len(r.b)/minSize) {
		r.err = fmt.Errorf("%w: array of %d, %d bytes left", ErrCorruptRecord, n, len(r.b))
		return -1
	}
	return int(n)
}

// skipTags skips a flexible version's tagged fields.
func (r *reader) skipTags(version int16) {
	if version == 0 {
		return
	}
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		r.uvarint() // tag
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.err = fmt.Errorf("%w: tagged field of %d bytes", ErrCorruptRecord, size)
			return
		}
		r.take(int(size))
	}
}
