package records

import (
	"fmt"
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
	r := reader{b: b}
	frame, typ, version := r.uvarint(), r.uvarint(), r.uvarint()
	switch {
	case r.err != nil:
		return Record{}, fmt.Errorf("%w (reading record frame)", r.err)
	case frame != frameVersion:
		return Record{}, fmt.Errorf("%w: %d (only %d is supported)", ErrFrameVersion, frame, frameVersion)
	case typ > math.MaxInt16:
		return Record{}, fmt.Errorf("%w: %d", ErrUnknownType, typ)
	case version > math.MaxInt16:
		return Record{}, fmt.Errorf("%w: %s version %d", ErrUnsupportedVersion, Type(typ), version)
	}
	m, err := New(Type(typ))
	if err != nil {
		return Record{}, err
	}
	if err := m.ReadFrom(r.b, int16(version)); err != nil {
		return Record{}, fmt.Errorf("%w (decoding %s v%d)", err, m.Type(), version)
	}
	return Record{Version: int16(version), Message: m}, nil
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
