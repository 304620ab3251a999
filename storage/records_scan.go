package storage

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs of a batch's attributes.
const (
	CompressionNone   int8 = 0
	CompressionGzip   int8 = 1
	CompressionSnappy int8 = 2
	CompressionLz4    int8 = 3
	CompressionZstd   int8 = 4
)

// MaxDecompressedBatchBytes bounds how far a compressed batch may expand while
// its records are checked. Records are streamed, never held, so this bounds the
// CPU a decompression bomb can cost, not memory.
const MaxDecompressedBatchBytes = 256 << 20

// ErrUnsupportedCompression: the attributes name a codec that does not exist.
var ErrUnsupportedCompression = errors.New("storage: unknown compression codec")

// RecordHeader is what ScanRecords reports of each record.
type RecordHeader struct {
	Offset      int64 // absolute: the batch's base offset + offset delta
	TimestampMs int64 // absolute: the batch's base timestamp + timestamp delta
	// NullKey: the record has no key (length -1), which a compacted topic
	// refuses.
	NullKey bool
}

// ScanRecords walks the batch's records, decompressing them if the batch is
// compressed (gzip, snappy raw or xerial-framed, lz4 frame, zstd), and calls fn
// for each in order; fn's error stops the walk and is returned. It checks what
// Kafka's LogValidator checks of the record data: exactly RecordCount records,
// each record's length matching its fields, nothing after the last one. Memory
// use does not grow with the batch: keys, values and headers are skipped, not
// read.
func (b Batch) ScanRecords(fn func(i int, rec RecordHeader) error) error {
	data := b.Raw[BatchHeaderSize:]
	r, release, err := decompressor(b.Compression(), data)
	if err != nil {
		return err
	}
	defer release()
	br := bufio.NewReaderSize(io.LimitReader(r, MaxDecompressedBatchBytes+1), 32<<10)
	s := recordStream{r: br}
	count := int(b.RecordCount())
	for i := 0; i < count; i++ {
		rec, err := s.next(b.BaseOffset, b.BaseTimestampMs())
		if err != nil {
			return fmt.Errorf("%w: record %d of the batch at offset %d: %w", ErrCorruptBatch, i, b.BaseOffset, err)
		}
		if err := fn(i, rec); err != nil {
			return err
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the last record")
		}
		return fmt.Errorf("%w: batch at offset %d claims %d records: %w", ErrCorruptBatch, b.BaseOffset, count, err)
	}
	if s.total > MaxDecompressedBatchBytes {
		return fmt.Errorf("%w: batch at offset %d expands past %d bytes", ErrCorruptBatch, b.BaseOffset, MaxDecompressedBatchBytes)
	}
	return nil
}

// decompressor returns a reader of the uncompressed records.
func decompressor(codec int8, data []byte) (io.Reader, func(), error) {
	src := bytes.NewReader(data)
	switch codec {
	case CompressionNone:
		return src, func() {}, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %w", ErrCorruptBatch, err)
		}
		return zr, func() {}, nil
	case CompressionSnappy:
		return newSnappyReader(data), func() {}, nil
	case CompressionLz4:
		lr := lz4Readers.Get().(*lz4.Reader)
		lr.Reset(src)
		return lr, func() { lr.Reset(nil); lz4Readers.Put(lr) }, nil
	case CompressionZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		if err := d.Reset(src); err != nil {
			zstdDecoders.Put(d)
			return nil, nil, fmt.Errorf("%w: zstd: %w", ErrCorruptBatch, err)
		}
		return d, func() { _ = d.Reset(nil); zstdDecoders.Put(d) }, nil
	}
	return nil, nil, fmt.Errorf("%w: %d", ErrUnsupportedCompression, codec)
}

// Decoders are pooled: an lz4 reader holds block buffers of up to 4 MiB and a
// zstd decoder its window, too much to allocate per validated batch.
var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		panic(fmt.Sprintf("storage: zstd decoder options rejected: %v", err)) // fixed options; cannot happen
	}
	return d
}}

// xerialMagic starts the snappy framing Kafka's Java producer writes
// (xerial snappy-java's SnappyOutputStream): magic, version, compatible version,
// then blocks of int32 length + raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyReader decodes raw snappy (librdkafka, franz-go) or xerial-framed
// snappy (the Java producer) one block at a time.
type snappyReader struct {
	src    []byte // undecoded input
	xerial bool
	buf    []byte // decoded, not yet read
	err    error
}

func newSnappyReader(data []byte) *snappyReader {
	if len(data) >= 16 && bytes.Equal(data[:8], xerialMagic) {
		return &snappyReader{src: data[16:], xerial: true}
	}
	return &snappyReader{src: data}
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.decodeNext()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// decodeNext decodes the next block into buf; io.EOF after the last.
func (s *snappyReader) decodeNext() error {
	if len(s.src) == 0 {
		return io.EOF
	}
	block := s.src
	if s.xerial {
		if len(s.src) < 4 {
			return fmt.Errorf("%w: xerial snappy block length cut", ErrCorruptBatch)
		}
		n := int64(binary.BigEndian.Uint32(s.src))
		if n > int64(len(s.src)-4) {
			return fmt.Errorf("%w: xerial snappy block of %d bytes, %d left", ErrCorruptBatch, n, len(s.src)-4)
		}
		block, s.src = s.src[4:4+n], s.src[4+n:]
	} else {
		s.src = nil
	}
	size, err := s2.DecodedLen(block)
	if err != nil || size > MaxDecompressedBatchBytes {
		return fmt.Errorf("%w: snappy block decodes to %d bytes: %v", ErrCorruptBatch, size, err)
	}
	out, err := s2.Decode(make([]byte, size), block)
	if err != nil {
		return fmt.Errorf("%w: snappy: %w", ErrCorruptBatch, err)
	}
	s.buf = out
	return nil
}

// recordStream parses records from a stream, skipping their payloads.
type recordStream struct {
	r     *bufio.Reader
	left  int64 // bytes left in the current record
	total int64 // bytes consumed
}

func (s *recordStream) byte() (byte, error) {
	if s.left <= 0 {
		return 0, errors.New("record shorter than its fields")
	}
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, unexpected(err)
	}
	s.left--
	s.total++
	return c, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// varint reads a zig-zag varint of at most 10 bytes.
func (s *recordStream) varint() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

// skip discards a length-prefixed field (-1 is null).
func (s *recordStream) skip() error {
	_, err := s.skipField()
	return err
}

// skipField discards a length-prefixed field and reports whether it was null.
func (s *recordStream) skipField() (null bool, err error) {
	n, err := s.varint()
	if err != nil || n < 0 {
		return n < 0, err
	}
	return false, s.discard(n)
}

func (s *recordStream) discard(n int64) error {
	if n > s.left {
		return fmt.Errorf("field of %d bytes, %d left in the record", n, s.left)
	}
	if _, err := s.r.Discard(int(n)); err != nil {
		return unexpected(err)
	}
	s.left -= n
	s.total += n
	return nil
}

func (s *recordStream) next(baseOffset, baseTs int64) (RecordHeader, error) {
	s.left = binary.MaxVarintLen64
	length, err := s.varint()
	if err != nil {
		return RecordHeader{}, err
	}
	if length < 1 || length > MaxDecompressedBatchBytes {
		return RecordHeader{}, fmt.Errorf("record length %d", length)
	}
	s.left = length
	if _, err := s.byte(); err != nil { // attributes
		return RecordHeader{}, err
	}
	tsDelta, err := s.varint()
	if err != nil {
		return RecordHeader{}, err
	}
	offDelta, err := s.varint()
	if err != nil {
		return RecordHeader{}, err
	}
	nullKey, err := s.skipField() // key
	if err != nil {
		return RecordHeader{}, err
	}
	if err := s.skip(); err != nil { // value
		return RecordHeader{}, err
	}
	headers, err := s.varint()
	if err != nil {
		return RecordHeader{}, err
	}
	if headers < 0 || headers > length {
		return RecordHeader{}, fmt.Errorf("%d headers", headers)
	}
	for range headers {
		if err := s.skip(); err != nil {
			return RecordHeader{}, err
		}
		if err := s.skip(); err != nil {
			return RecordHeader{}, err
		}
	}
	if s.left != 0 {
		return RecordHeader{}, fmt.Errorf("%d bytes left over in the record", s.left)
	}
	return RecordHeader{Offset: baseOffset + offDelta, TimestampMs: baseTs + tsDelta, NullKey: nullKey}, nil
}
