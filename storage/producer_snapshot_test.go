package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The snapshot is Kafka's ProducerStateManager layout byte for byte: version
// 1, CRC-32C of what follows it, an int32 count, then 46-byte entries in
// schema order.
func TestProducerSnapshotFormat(t *testing.T) {
	e := ProducerSnapshotEntry{ProducerID: 0x0102030405060708, ProducerEpoch: 3, LastSequence: 41,
		LastOffset: 1000, OffsetDelta: 4, TimestampMs: 1700000000000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}
	body := []byte{0, 0, 0, 1, // count
		1, 2, 3, 4, 5, 6, 7, 8, // producer_id
		0, 3, // epoch
		0, 0, 0, 41, // last_sequence
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, // last_offset 1000
		0, 0, 0, 4, // offset_delta
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // timestamp 1700000000000
		0xff, 0xff, 0xff, 0xff, // coordinator_epoch -1
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // current_txn_first_offset -1
	}
	want := binary.BigEndian.AppendUint16(nil, 1)
	want = binary.BigEndian.AppendUint32(want, crc32c(body))
	want = append(want, body...)
	got := EncodeProducerSnapshot([]ProducerSnapshotEntry{e})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeProducerSnapshot(got)
	if err != nil || len(back) != 1 || back[0] != e {
		t.Fatalf("decoded %+v %v", back, err)
	}
	if empty, err := DecodeProducerSnapshot(EncodeProducerSnapshot(nil)); err != nil || len(empty) != 0 {
		t.Fatalf("empty snapshot: %v %v", empty, err)
	}
	// A count claiming more entries than the bytes hold is refused before
	// anything is allocated; so are a flipped bit, another version, a
	// truncated file.
	huge := slices.Clone(got)
	binary.BigEndian.PutUint32(huge[6:], 0x7fffffff)
	binary.BigEndian.PutUint32(huge[2:], crc32c(huge[6:]))
	flipped := slices.Clone(got)
	flipped[20] ^= 1
	v2 := slices.Clone(got)
	v2[1] = 2
	for name, bad := range map[string][]byte{"huge count": huge, "flipped": flipped, "version 2": v2,
		"short": got[:8], "truncated entry": got[:len(got)-1]} {
		if _, err := DecodeProducerSnapshot(bad); !errors.Is(err, ErrCorruptProducerSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestProducerSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	for _, off := range []int64{500, 20, 0} {
		if err := WriteProducerSnapshot(dir, off, []ProducerSnapshotEntry{{ProducerID: off, LastOffset: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000500.snapshot")); err != nil {
		t.Fatal(err)
	}
	offs, err := ProducerSnapshotOffsets(dir)
	if err != nil || !slices.Equal(offs, []int64{0, 20, 500}) {
		t.Fatalf("offsets %v %v", offs, err)
	}
	es, err := ReadProducerSnapshot(dir, 20)
	if err != nil || len(es) != 1 || es[0].ProducerID != 20 {
		t.Fatalf("read %v %v", es, err)
	}
	if n, err := DeleteProducerSnapshots(dir, func(o int64) bool { return o < 500 }); n != 2 || err != nil {
		t.Fatalf("deleted %d %v", n, err)
	}
	if offs, _ := ProducerSnapshotOffsets(dir); !slices.Equal(offs, []int64{500}) {
		t.Fatalf("left %v", offs)
	}
}

// Decoding untrusted snapshot, transaction index and marker bytes never
// panics, and what decodes encodes back to the same bytes.
func FuzzProducerStateFiles(f *testing.F) {
	f.Add(EncodeProducerSnapshot([]ProducerSnapshotEntry{{ProducerID: 7, ProducerEpoch: 1, LastSequence: 4, LastOffset: 9, OffsetDelta: 4,
		TimestampMs: 1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}}))
	f.Add(EncodeTxnIndexEntry(AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4}))
	f.Add(EncodeEndTxnMarker(5))
	f.Fuzz(func(t *testing.T, data []byte) {
		if es, err := DecodeProducerSnapshot(data); err == nil && !bytes.Equal(EncodeProducerSnapshot(es), data) {
			t.Fatalf("snapshot %x decodes to %+v, which encodes differently", data, es)
		}
		txns, n := DecodeTxnIndex(data)
		var back []byte
		for _, e := range txns {
			back = append(back, EncodeTxnIndexEntry(e)...)
		}
		if n > len(data) || !bytes.Equal(back, data[:n]) {
			t.Fatalf("txn index %x: %d valid bytes, %+v", data, n, txns)
		}
		if epoch, err := DecodeEndTxnMarker(data); err == nil && len(data) == endTxnMarkerSize && data[0] == 0 && data[1] == 0 &&
			!bytes.Equal(EncodeEndTxnMarker(epoch), data) {
			t.Fatalf("marker %x", data)
		}
	})
}
