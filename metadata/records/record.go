package records

import (
	"fmt"
	"iter"
	"math"
)

// frameVersion is AbstractApiMessageSerde's only frame version. Version 0
// was the KRaft preview in Kafka 2.8 and is rejected, as Kafka does.
const frameVersion = 1

// Record is Kafka's ApiMessageAndVersion: a metadata record body together
// with the version it is (to be) encoded at. It is the value of one record
// in a __cluster_metadata batch (whose key is always null).
type Record struct {
	Version int16
	Message Message
}

// AppendTo appends the framed record: uvarint frame version 1, uvarint
// record type, uvarint record version, then the body.
func (r Record) AppendTo(dst []byte) ([]byte, error) {
	if r.Message == nil {
		return dst, ErrNilMessage
	}
	if r.Version < 0 {
		return dst, fmt.Errorf("%w: %s version %d", ErrUnsupportedVersion, r.Message.Type(), r.Version)
	}
	start := len(dst)
	dst = appendUvarint(dst, frameVersion)
	dst = appendUvarint(dst, uint64(r.Message.Type()))
	dst = appendUvarint(dst, uint64(r.Version))
	out, err := r.Message.AppendTo(dst, r.Version)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// Decode parses one framed record. The whole slice must be the record:
// trailing bytes are an error, as in Kafka's MetadataRecordSerde. Errors
// wrap ErrFrameVersion, ErrUnknownType, ErrUnsupportedVersion,
// ErrTruncated, ErrMalformed or ErrTrailingBytes.
func Decode(b []byte) (Record, error) {
	typ, version, body, err := decodeFrame(b)
	if err != nil {
		return Record{}, err
	}
	m, err := New(typ)
	if err != nil {
		return Record{}, err
	}
	if err := m.ReadFrom(body, version); err != nil {
		return Record{}, fmt.Errorf("%w (decoding %s v%d)", err, m.Type(), version)
	}
	return Record{Version: version, Message: m}, nil
}

// decodeFrame reads a record's frame version, type and version.
func decodeFrame(b []byte) (Type, int16, []byte, error) {
	r := reader{b: b}
	frame, typ, version := r.uvarint(), r.uvarint(), r.uvarint()
	switch {
	case r.err != nil:
		return 0, 0, nil, fmt.Errorf("%w (reading record frame)", r.err)
	case frame != frameVersion:
		return 0, 0, nil, fmt.Errorf("%w: %d (only %d is supported)", ErrFrameVersion, frame, frameVersion)
	case typ > math.MaxInt16:
		return 0, 0, nil, fmt.Errorf("%w: %d", ErrUnknownType, typ)
	case version > math.MaxInt16:
		return 0, 0, nil, fmt.Errorf("%w: %s version %d", ErrUnsupportedVersion, Type(typ), version)
	}
	return Type(typ), int16(version), r.b, nil
}

// Decoder decodes records as Decode does, but reuses its memory: the
// PartitionRecord or PartitionChangeRecord it returns, and the replica lists
// of either, are overwritten by the next call. It is for replaying a log or a
// snapshot into an image, which copies what it keeps, where a million records
// would otherwise be millions of short-lived allocations. Other record types
// are allocated as by Decode. The zero value is ready; it is not safe for
// concurrent use.
type Decoder struct {
	partition PartitionRecord
	change    PartitionChangeRecord
	ints      []int32
}

// DecodeAll decodes a stream of record values with one Decoder: each record
// is valid only until the next is yielded. An error ends the stream; one of
// decoding names the record's index in it.
func DecodeAll(values iter.Seq2[[]byte, error]) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		var d Decoder
		i := 0
		for v, err := range values {
			if err != nil {
				yield(Record{}, err)
				return
			}
			rec, err := d.Decode(v)
			if err != nil {
				yield(Record{}, fmt.Errorf("record %d: %w", i, err))
				return
			}
			if !yield(rec, nil) {
				return
			}
			i++
		}
	}
}

// Decode decodes one record value; see Decoder for how long it stays valid.
func (d *Decoder) Decode(b []byte) (Record, error) {
	typ, version, body, err := decodeFrame(b)
	if err != nil {
		return Record{}, err
	}
	if d.ints == nil {
		d.ints = make([]int32, 0, 256)
	}
	d.ints = d.ints[:0]
	var m interface {
		Message
		readFrom(reader, int16) error
	}
	switch typ {
	case TypePartition:
		m = &d.partition
	case TypePartitionChange:
		m = &d.change
	default:
		return Decode(b)
	}
	if err := m.readFrom(reader{b: body, ints: &d.ints}, version); err != nil {
		return Record{}, fmt.Errorf("%w (decoding %s v%d)", err, m.Type(), version)
	}
	return Record{Version: version, Message: m}, nil
}

// MarshalJSON prints the record as kafka-dump-log --cluster-metadata-decoder
// does: {"type":"TOPIC_RECORD","version":0,"data":{...}}, where data follows
// Kafka's generated JSON converter for that version (see json.go). Like the
// converter, it fails when the record could not be encoded at its version.
// Call it directly for Kafka's exact text: encoding/json re-escapes <, > and
// & in a Marshaler's output.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Message == nil {
		return nil, ErrNilMessage
	}
	if _, err := r.Message.AppendTo(nil, r.Version); err != nil {
		return nil, err
	}
	jw, ok := r.Message.(jsonWriter)
	if !ok {
		return nil, fmt.Errorf("%w: %T has no JSON form", ErrUnknownType, r.Message)
	}
	var data jsonObject
	jw.writeJSON(&data, r.Version)
	d, err := data.bytes()
	if err != nil {
		return nil, err
	}
	var o jsonObject
	o.add("type", r.Message.Type().String())
	o.add("version", r.Version)
	o.add("data", d)
	return o.bytes()
}
