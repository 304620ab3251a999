package records

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file holds the small flexible-encoding toolkit every message uses:
// append helpers for the writer side and a sticky-error reader. Keeping the
// primitives here lets each record file read like its JSON schema.

// maxStringLen is Kafka's limit for a string field (Readable.readString).
const maxStringLen = math.MaxInt16

func appendInt8(b []byte, v int8) []byte   { return append(b, byte(v)) }
func appendInt16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func appendUint16(b []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(b, v)
}
func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendUUID(b []byte, u UUID) []byte      { return append(b, u[:]...) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendString writes a compact string: uvarint(len+1) then the bytes.
func appendString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

// appendNullableString writes nil as the compact null marker (uvarint 0).
func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return appendUvarint(b, 0)
	}
	return appendString(b, *s)
}

// appendArrayLen writes a compact array length. A nil slice in a nullable
// field is null (0); everywhere else nil and empty are both the empty array.
func appendArrayLen(b []byte, n int, isNull bool) []byte {
	if isNull {
		return appendUvarint(b, 0)
	}
	return appendUvarint(b, uint64(n)+1)
}

// appendInt32s writes a compact []int32; nullable selects whether nil means null.
func appendInt32s(b []byte, vs []int32, nullable bool) []byte {
	b = appendArrayLen(b, len(vs), nullable && vs == nil)
	for _, v := range vs {
		b = appendInt32(b, v)
	}
	return b
}

// appendUUIDs writes a compact []uuid; nullable selects whether nil means null.
func appendUUIDs(b []byte, vs []UUID, nullable bool) []byte {
	b = appendArrayLen(b, len(vs), nullable && vs == nil)
	for _, v := range vs {
		b = appendUUID(b, v)
	}
	return b
}

// appendNoTags ends a struct that has no tagged field to write.
func appendNoTags(b []byte) []byte { return append(b, 0) }

// tagWriter collects the tagged fields of one struct. Kafka writes them in
// ascending tag order, so callers must add them in that order; add panics on
// a programming error that would produce bytes Kafka rejects.
type tagWriter struct {
	tags []uint32
	data [][]byte
}

// add records a tagged field whose payload is produced by fn.
func (w *tagWriter) add(tag uint32, fn func([]byte) []byte) {
	if n := len(w.tags); n > 0 && w.tags[n-1] >= tag {
		panic(fmt.Sprintf("records: tag %d added after tag %d", tag, w.tags[n-1]))
	}
	w.tags = append(w.tags, tag)
	w.data = append(w.data, fn(nil))
}

// appendTo writes the tag section: count, then (tag, size, payload) triples.
func (w *tagWriter) appendTo(b []byte) []byte {
	b = appendUvarint(b, uint64(len(w.tags)))
	for i, tag := range w.tags {
		b = appendUvarint(b, uint64(tag))
		b = appendUvarint(b, uint64(len(w.data[i])))
		b = append(b, w.data[i]...)
	}
	return b
}

// checkStrings rejects any string over Kafka's length limit; msg names the
// message in the error.
func checkStrings(msg string, ss ...string) error {
	for _, s := range ss {
		if len(s) > maxStringLen {
			return fmt.Errorf("%w: %s has a string of %d bytes (max %d)", ErrStringTooLong, msg, len(s), maxStringLen)
		}
	}
	return nil
}

// deref returns *s, or "" for nil, for length checks of nullable strings.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// notInVersion builds the error for a non-default field that the version
// being encoded cannot carry.
func notInVersion(msg, field string, version int16) error {
	return fmt.Errorf("%w: %s.%s at version %d", ErrFieldNotInVersion, msg, field, version)
}

// reader decodes flexible-encoded fields. The first failure is sticky: later
// reads return zero values and err keeps the original cause, so message code
// reads every field unconditionally and checks once at the end.
type reader struct {
	b   []byte
	err error
	// ints, when set, backs the []int32 the reader decodes (see Decoder):
	// they are carved out of it instead of allocated one by one.
	ints *[]int32
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// take returns the next n bytes, or nil after recording ErrTruncated.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail(fmt.Errorf("%w: need %d bytes, have %d", ErrTruncated, n, len(r.b)))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) uint16() uint16 { return uint16(r.int16()) }

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// bool follows Kafka's Readable: any non-zero byte is true.
func (r *reader) bool() bool { return r.int8() != 0 }

func (r *reader) uuid() UUID {
	var u UUID
	if b := r.take(16); b != nil {
		copy(u[:], b)
	}
	return u
}

// uvarint reads an unsigned varint of at most 5 bytes (a Java int), as
// Kafka's ByteUtils.readUnsignedVarint does.
func (r *reader) uvarint() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.fail(fmt.Errorf("%w: unterminated varint", ErrTruncated))
		return 0
	case n < 0 || n > 5 || v > math.MaxUint32:
		r.fail(fmt.Errorf("%w: varint too long", ErrMalformed))
		return 0
	}
	r.b = r.b[n:]
	return uint32(v)
}

// compactLen reads uvarint(len+1) and returns len, or -1 for null.
func (r *reader) compactLen() int {
	return int(r.uvarint()) - 1
}

func (r *reader) string() string {
	s := r.nullableString()
	if s == nil {
		if r.err == nil {
			r.fail(fmt.Errorf("%w: null in non-nullable string", ErrMalformed))
		}
		return ""
	}
	return *s
}

func (r *reader) nullableString() *string {
	n := r.compactLen()
	if r.err != nil || n < 0 {
		return nil
	}
	if n > maxStringLen {
		r.fail(fmt.Errorf("%w: string length %d", ErrMalformed, n))
		return nil
	}
	b := r.take(n)
	if r.err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// arrayLen reads a compact array length and checks it against the bytes
// left, so that a hostile length cannot force a huge allocation. minSize is
// the smallest encoding of one element. It returns -1 for null (an error
// unless nullable) and for failures.
func (r *reader) arrayLen(nullable bool, minSize int) int {
	n := r.compactLen()
	if r.err != nil {
		return -1
	}
	if n < 0 {
		if !nullable {
			r.fail(fmt.Errorf("%w: null in non-nullable array", ErrMalformed))
		}
		return -1
	}
	if n*minSize > len(r.b) {
		r.fail(fmt.Errorf("%w: array of %d elements needs at least %d bytes, have %d",
			ErrTruncated, n, n*minSize, len(r.b)))
		return -1
	}
	return n
}

// int32s reads a compact []int32. An empty non-nullable array decodes as nil
// so that encode(decode(x)) is stable; a nullable one keeps null (nil) and
// empty (non-nil, length 0) apart.
func (r *reader) int32s(nullable bool) []int32 {
	n := r.arrayLen(nullable, 4)
	if n < 0 || (n == 0 && !nullable) {
		return nil
	}
	var vs []int32
	if r.ints != nil && cap(*r.ints)-len(*r.ints) >= n {
		a := *r.ints
		vs = a[len(a) : len(a)+n : len(a)+n]
		*r.ints = a[:len(a)+n]
	} else {
		vs = make([]int32, n)
	}
	for i := range vs {
		vs[i] = r.int32()
	}
	return vs
}

// uuids reads a compact []uuid with the same nil conventions as int32s.
func (r *reader) uuids(nullable bool) []UUID {
	n := r.arrayLen(nullable, 16)
	if n < 0 || (n == 0 && !nullable) {
		return nil
	}
	vs := make([]UUID, n)
	for i := range vs {
		vs[i] = r.uuid()
	}
	return vs
}

// structs reads a compact array of sub-structs, each decoded by read. minSize
// is the smallest encoding of one element (its fixed fields plus the tag
// count byte).
func structs[T any](r *reader, minSize int, read func(*reader, *T)) []T {
	n := r.arrayLen(false, minSize)
	if n <= 0 {
		return nil
	}
	vs := make([]T, n)
	for i := range vs {
		read(r, &vs[i])
	}
	return vs
}

// tags reads a tag section. For each tag, known is called with a reader over
// exactly that tag's payload; it returns false for tags it does not know,
// which are skipped (see the package doc). A known tag must consume its whole
// payload. A tag the schema defines, but only for other versions, is an
// error (see badTag), as in Kafka.
func (r *reader) tags(known func(tag uint32, sub *reader) bool) {
	ts := r.tagSection()
	for tag, sub, ok := ts.next(); ok; tag, sub, ok = ts.next() {
		if known != nil && known(tag, &sub) {
			ts.check(tag, &sub)
		}
	}
}

// tagSection reads the count of a tag section and returns an iterator over
// its tags. The hot decoders (PartitionRecord, PartitionChangeRecord) loop
// over it with a switch instead of passing tags a closure: a reader handed
// to a func value escapes, which cost a heap allocation per tag, two for
// the typical PartitionChangeRecord of a leader move (a million of them in
// a controlled shutdown at 1M partitions, on every broker and standby).
func (r *reader) tagSection() tagSection { return tagSection{r: r, left: r.uvarint()} }

// tagSection iterates over a tag section; see reader.tagSection.
type tagSection struct {
	r    *reader
	left uint32
}

// next returns the next tag and a reader over exactly its payload, or false
// after the last one or on an error (left in the parent reader).
func (ts *tagSection) next() (uint32, reader, bool) {
	r := ts.r
	if ts.left == 0 || r.err != nil {
		return 0, reader{}, false
	}
	ts.left--
	tag := r.uvarint()
	size := r.uvarint()
	payload := r.take(int(size))
	if r.err != nil {
		return 0, reader{}, false
	}
	return tag, reader{b: payload, ints: r.ints}, true
}

// check ends a known tag: its reader's error, or any payload it left
// unread, fails the parent reader.
func (ts *tagSection) check(tag uint32, sub *reader) {
	switch {
	case sub.err != nil:
		ts.r.fail(fmt.Errorf("tag %d: %w", tag, sub.err))
		ts.left = 0
	case len(sub.b) != 0:
		ts.r.fail(fmt.Errorf("%w: tag %d has %d unread bytes", ErrMalformed, tag, len(sub.b)))
		ts.left = 0
	}
}

// badTag records the error Kafka raises for a known tag that the version
// being read cannot carry ("Tag n is not valid for version v"). It returns
// true so callers can use it as a tags callback result.
func (r *reader) badTag(tag uint32, version int16) bool {
	r.fail(fmt.Errorf("%w: tag %d is not valid for version %d", ErrMalformed, tag, version))
	return true
}

// skipTags reads a tag section of a struct that has no known tagged fields.
func (r *reader) skipTags() { r.tags(nil) }

// done reports the sticky error, or ErrTrailingBytes if input is left over.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes", ErrTrailingBytes, len(r.b))
	}
	return nil
}

func appendFloat64(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
}

// appendBytes writes compact bytes: uvarint(len+1) then the bytes.
func appendBytes(b []byte, v []byte) []byte {
	b = appendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

// appendStrings writes a compact non-nullable []string.
func appendStrings(b []byte, vs []string) []byte {
	b = appendArrayLen(b, len(vs), false)
	for _, v := range vs {
		b = appendString(b, v)
	}
	return b
}

// float64 reads an IEEE 754 double; NaN payloads are kept bit for bit.
func (r *reader) float64() float64 { return math.Float64frombits(uint64(r.int64())) }

// bytes reads non-nullable compact bytes into a fresh slice. Empty decodes
// as nil, as empty non-nullable arrays do, so encode(decode(x)) is stable.
func (r *reader) bytes() []byte {
	n := r.compactLen()
	if r.err != nil {
		return nil
	}
	if n < 0 {
		r.fail(fmt.Errorf("%w: null in non-nullable bytes", ErrMalformed))
		return nil
	}
	b := r.take(n)
	if r.err != nil || n == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// strings reads a compact non-nullable []string (empty decodes as nil).
func (r *reader) strings() []string {
	n := r.arrayLen(false, 1)
	if n <= 0 {
		return nil
	}
	vs := make([]string, n)
	for i := range vs {
		vs[i] = r.string()
	}
	return vs
}
