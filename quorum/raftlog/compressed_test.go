package raftlog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/kraftd/kraftd/storage"
)

// gzipFlagged returns a valid batch whose attributes claim gzip (the CRC is
// recomputed), as a peer could send one.
func gzipFlagged(t *testing.T) []byte {
	t.Helper()
	raw := append([]byte(nil), EncodeBatch(0, 1, 0, false, []Record{{Value: []byte("x")}}).Raw...)
	raw[22] |= 1 // attributes low byte: compression 1 (gzip)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// The batch codec is shared with the partition logs, which store compressed
// batches; the metadata log must still refuse them.
func TestMetadataLogRefusesCompressedBatches(t *testing.T) {
	raw := gzipFlagged(t)
	if b, err := storage.ParseBatch(raw); err != nil || b.Compression() != 1 {
		t.Fatalf("storage.ParseBatch: %v compression %d", err, b.Compression())
	}
	if _, err := ParseBatch(raw); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("raftlog.ParseBatch accepted a compressed batch: %v", err)
	}
	plain := EncodeBatch(0, 1, 0, false, []Record{{Value: []byte("a")}}).Raw
	stream := append(append([]byte(nil), plain...), raw...)
	bs, n, err := SplitBatches(stream)
	if !errors.Is(err, ErrCorruptBatch) || len(bs) != 1 || n != len(plain) {
		t.Fatalf("SplitBatches: %d batches, n=%d, err=%v", len(bs), n, err)
	}
}
