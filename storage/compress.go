package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Recompress returns the batch with its records compressed with codec
// instead (CompressionNone decompresses), as Kafka's LogValidator rebuilds a
// batch whose codec differs from the topic's compression.type: same header
// fields (offsets, timestamps, producer id, epoch and sequence, attributes
// other than the codec), same records, a new CRC. The record section's
// uncompressed form is the same whatever the codec, so it is decompressed
// once and compressed again; snappy is written raw (no xerial framing), as
// librdkafka and franz-go write it and every client reads it. The records
// must have been validated (ScanRecords) first; the decompressed size is
// bounded by MaxDecompressedBatchBytes all the same.
func (b Batch) Recompress(codec int8) (Batch, error) {
	if codec == b.Compression() {
		return b, nil
	}
	r, release, err := decompressor(b.Compression(), b.Raw[BatchHeaderSize:])
	if err != nil {
		return Batch{}, err
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxDecompressedBatchBytes+1))
	release()
	if err != nil {
		return Batch{}, fmt.Errorf("%w: %w", ErrCorruptBatch, err)
	}
	if len(plain) > MaxDecompressedBatchBytes {
		return Batch{}, fmt.Errorf("%w: batch at offset %d expands past %d bytes", ErrCorruptBatch, b.BaseOffset, MaxDecompressedBatchBytes)
	}
	raw := make([]byte, BatchHeaderSize, BatchHeaderSize+len(plain)/2+64)
	copy(raw, b.Raw[:BatchHeaderSize])
	if raw, err = compressTo(raw, codec, plain); err != nil {
		return Batch{}, err
	}
	be := binary.BigEndian
	be.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	attrs := be.Uint16(raw[offAttributes:])&^attrCompressionMask | uint16(codec)
	be.PutUint16(raw[offAttributes:], attrs)
	be.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	out := b
	out.Raw = raw
	return out, nil
}

// compressTo appends data compressed with codec to dst.
func compressTo(dst []byte, codec int8, data []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	switch codec {
	case CompressionNone:
		return append(dst, data...), nil
	case CompressionGzip:
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(buf)
		if _, err := zw.Write(data); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionSnappy:
		return append(dst, s2.EncodeSnappy(nil, data)...), nil
	case CompressionLz4:
		lw := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(lw)
		lw.Reset(buf)
		if _, err := lw.Write(data); err != nil {
			return nil, err
		}
		if err := lw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		return zstdEncoder.EncodeAll(data, dst), nil
	}
	return nil, fmt.Errorf("%w: %d", ErrUnsupportedCompression, codec)
}

// Encoders are pooled for the same reason as the decoders.
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	// zstdEncoder is safe for concurrent EncodeAll calls. Kafka's zstd
	// window is the codec default; 64 KiB keeps decoders' memory small, as
	// franz-go does.
	zstdEncoder = func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("storage: zstd encoder options rejected: %v", err)) // fixed options; cannot happen
		}
		return e
	}()
)
