package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compressed rebuilds b with its records compressed by codec (franz-go's
// compressors, as a producer would send them).
func compressed(t *testing.T, b Batch, codec int8) Batch {
	t.Helper()
	records := b.Raw[BatchHeaderSize:]
	var body []byte
	switch codec {
	case CompressionSnappy + 10: // xerial framing, as the Java producer writes it
		body = append([]byte(nil), xerialMagic...)
		body = binary.BigEndian.AppendUint32(body, 1)
		body = binary.BigEndian.AppendUint32(body, 1)
		for len(records) > 0 {
			n := min(len(records), 7) // several blocks
			block := s2.EncodeSnappy(nil, records[:n])
			body = binary.BigEndian.AppendUint32(body, uint32(len(block)))
			body = append(body, block...)
			records = records[n:]
		}
		codec = CompressionSnappy
	default:
		kc := map[int8]kgo.CompressionCodec{CompressionGzip: kgo.GzipCompression(), CompressionSnappy: kgo.SnappyCompression(),
			CompressionLz4: kgo.Lz4Compression(), CompressionZstd: kgo.ZstdCompression()}[codec]
		c, err := kgo.DefaultCompressor(kc)
		if err != nil {
			t.Fatal(err)
		}
		out, used := c.Compress(new(bytes.Buffer), records)
		if int8(used) != codec {
			t.Fatalf("compressed with %d, want %d", used, codec)
		}
		body = append([]byte(nil), out...)
	}
	raw := append(append([]byte(nil), b.Raw[:BatchHeaderSize]...), body...)
	raw[offAttributes+1] |= byte(codec)
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	pb, err := ParseBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

func TestScanRecordsEveryCodec(t *testing.T) {
	recs := []Record{
		{Value: bytes.Repeat([]byte("x"), 300), TimestampMs: 1000},
		{Key: []byte("k"), Value: []byte("v"), TimestampMs: 1005},
		{Value: nil, TimestampMs: 1002},
	}
	plain := EncodeBatch(40, 1, 1000, false, recs)
	for _, codec := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionSnappy + 10, CompressionLz4, CompressionZstd} {
		b := plain
		if codec != CompressionNone {
			b = compressed(t, plain, codec)
		}
		var got []RecordHeader
		err := b.ScanRecords(func(i int, r RecordHeader) error {
			got = append(got, r)
			return nil
		})
		if err != nil || len(got) != 3 || got[0] != (RecordHeader{40, 1000, true}) || got[1] != (RecordHeader{41, 1005, false}) || got[2] != (RecordHeader{42, 1002, true}) {
			t.Errorf("codec %d: %v %v", codec, got, err)
		}
	}
}

func TestScanRecordsRejectsLies(t *testing.T) {
	plain := EncodeBatch(0, 1, 1000, false, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	setCount := func(b Batch, n uint32) Batch {
		raw := append([]byte(nil), b.Raw...)
		binary.BigEndian.PutUint32(raw[offRecordCount:], n)
		binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
		out, _ := ParseBatch(raw)
		return out
	}
	noop := func(int, RecordHeader) error { return nil }
	for _, codec := range []int8{CompressionNone, CompressionZstd} {
		for _, n := range []uint32{1, 3} {
			b := plain
			if codec != CompressionNone {
				b = compressed(t, plain, codec)
			}
			if err := setCount(b, n).ScanRecords(noop); !errors.Is(err, ErrCorruptBatch) {
				t.Errorf("codec %d, count %d of 2: %v", codec, n, err)
			}
		}
	}
	// Garbage where gzip data should be.
	raw := append([]byte(nil), plain.Raw...)
	raw[offAttributes+1] |= byte(CompressionGzip)
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	b, _ := ParseBatch(raw)
	if err := b.ScanRecords(noop); !errors.Is(err, ErrCorruptBatch) {
		t.Errorf("gzip garbage: %v", err)
	}
	raw[offAttributes+1] |= 7
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	b, _ = ParseBatch(raw)
	if err := b.ScanRecords(noop); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 7: %v", err)
	}
}

// A snappy block claiming a huge decoded size is refused before anything is
// allocated for it.
func TestScanRecordsSnappyBomb(t *testing.T) {
	plain := EncodeBatch(0, 1, 1000, false, []Record{{Value: []byte("a")}})
	body := binary.AppendUvarint(nil, MaxDecompressedBatchBytes+1) // snappy's preamble: the decoded length
	body = append(body, 0)
	raw := append(append([]byte(nil), plain.Raw[:BatchHeaderSize]...), body...)
	raw[offAttributes+1] |= byte(CompressionSnappy)
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	b, err := ParseBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ScanRecords(func(int, RecordHeader) error { return nil }); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("snappy bomb: %v", err)
	}
}

func FuzzScanRecords(f *testing.F) {
	f.Add(EncodeBatch(0, 1, 0, false, []Record{{Value: []byte("x")}, {Key: []byte("k")}}).Raw[BatchHeaderSize:], int8(0), uint32(2))
	f.Fuzz(func(t *testing.T, body []byte, codec int8, count uint32) {
		raw := append(make([]byte, BatchHeaderSize), body...)
		raw[offMagic] = 2
		binary.BigEndian.PutUint16(raw[offAttributes:], uint16(codec&7))
		binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
		binary.BigEndian.PutUint32(raw[offRecordCount:], count%100000)
		binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
		b, err := ParseBatch(raw)
		if err != nil {
			return
		}
		_ = b.ScanRecords(func(int, RecordHeader) error { return nil })
	})
}

// Recompress turns a batch of any codec (franz-go's compressors, xerial
// snappy) into any other: the result parses (CRC), names the new codec, keeps
// every header field but the length, CRC and codec bits, holds the same
// records (read by this package and by franz-go's decompressor), and is
// smaller than the plain batch when compressed.
func TestRecompressEveryCodec(t *testing.T) {
	recs := []Record{
		{Value: bytes.Repeat([]byte("x"), 3000), TimestampMs: 1000},
		{Key: []byte("k"), Value: []byte("v"), TimestampMs: 1005},
	}
	plain := EncodeBatch(40, 1, 1000, false, recs)
	dec := kgo.DefaultDecompressor()
	for _, from := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionSnappy + 10, CompressionLz4, CompressionZstd} {
		src := plain
		if from != CompressionNone {
			src = compressed(t, plain, from)
		}
		for _, to := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd} {
			out, err := src.Recompress(to)
			if err != nil {
				t.Fatalf("%d -> %d: %v", from, to, err)
			}
			pb, err := ParseBatch(out.Raw)
			if err != nil || pb.Compression() != to {
				t.Fatalf("%d -> %d: parse %v, codec %d", from, to, err, pb.Compression())
			}
			if !bytes.Equal(out.Raw[offLastDelta:offRecordCount+4], plain.Raw[offLastDelta:offRecordCount+4]) ||
				!bytes.Equal(out.Raw[:offBatchLength], plain.Raw[:offBatchLength]) {
				t.Fatalf("%d -> %d: header fields changed", from, to)
			}
			body := out.Raw[BatchHeaderSize:]
			if to != CompressionNone {
				if body, err = dec.Decompress(body, kgo.CompressionCodecType(to)); err != nil {
					t.Fatalf("%d -> %d: franz-go cannot decompress: %v", from, to, err)
				}
				if src.Compression() != to && len(out.Raw) >= len(plain.Raw) {
					t.Errorf("%d -> %d: %d bytes, plain %d", from, to, len(out.Raw), len(plain.Raw))
				}
			}
			if !bytes.Equal(body, plain.Raw[BatchHeaderSize:]) {
				t.Fatalf("%d -> %d: records differ", from, to)
			}
			n := 0
			if err := out.ScanRecords(func(int, RecordHeader) error { n++; return nil }); err != nil || n != 2 {
				t.Fatalf("%d -> %d: scan %d records, %v", from, to, n, err)
			}
		}
	}
}
