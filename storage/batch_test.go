package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEncodeBatchDecodesWithKmsg(t *testing.T) {
	recs := []Record{
		{Value: []byte("one")},
		{Key: []byte("k"), Value: []byte("two"), TimestampMs: 1700000000123},
		{Value: nil},
	}
	b := EncodeBatch(42, 7, 1700000000000, false, recs)
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b.Raw); err != nil {
		t.Fatalf("kmsg cannot read our batch: %v", err)
	}
	if kb.FirstOffset != 42 || kb.PartitionLeaderEpoch != 7 || kb.Magic != 2 || kb.NumRecords != 3 ||
		kb.LastOffsetDelta != 2 || kb.ProducerID != -1 || kb.ProducerEpoch != -1 || kb.FirstSequence != -1 ||
		kb.FirstTimestamp != 1700000000000 || kb.MaxTimestamp != 1700000000123 {
		t.Fatalf("header mismatch: %+v", kb)
	}
	// The CRC is CRC-32C (Castagnoli): check the table against the standard check value,
	// then the batch's stored CRC against an independent computation.
	if got := crc32c([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c check value %08x", got)
	}
	if got := crc32c(b.Raw[offAttributes:]); got != uint32(kb.CRC) {
		t.Fatalf("crc mismatch")
	}
	// Records decode through kmsg too.
	rb := kb.Records
	for i := 0; i < 3; i++ {
		var r kmsg.Record
		n, err := readKmsgRecord(&r, rb)
		if err != nil {
			t.Fatal(err)
		}
		rb = rb[n:]
		if int(r.OffsetDelta) != i || !bytes.Equal(r.Value, recs[i].Value) || !bytes.Equal(r.Key, recs[i].Key) {
			t.Fatalf("record %d mismatch: %+v", i, r)
		}
	}
	got, err := ParseBatch(b.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.BaseOffset != 42 || got.LastOffset != 44 || got.Epoch != 7 || got.Control {
		t.Fatalf("parsed %+v", got)
	}
	out, err := got.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[1].Offset != 43 || out[1].TimestampMs != 1700000000123 || out[0].TimestampMs != 1700000000000 ||
		string(out[1].Key) != "k" || out[2].Value != nil || out[0].Key != nil {
		t.Fatalf("records %+v", out)
	}
}

func readKmsgRecord(r *kmsg.Record, b []byte) (int, error) {
	// A record starts with its varint length.
	l, n := varint(b)
	if err := r.ReadFrom(b[:n+int(l)]); err != nil {
		return 0, err
	}
	return n + int(l), nil
}

func TestControlBatchAndKey(t *testing.T) {
	b := EncodeBatch(0, 1, 5, true, []Record{{Key: ControlKey(ControlLeaderChange), Value: []byte{0, 0}}})
	p, err := ParseBatch(b.Raw)
	if err != nil || !p.Control {
		t.Fatalf("control flag lost: %+v %v", p, err)
	}
	recs, _ := p.Records()
	ct, err := ParseControlKey(recs[0].Key)
	if err != nil || ct != ControlLeaderChange {
		t.Fatalf("control key %v %v", ct, err)
	}
	var kk kmsg.ControlRecordKey
	if err := kk.ReadFrom(recs[0].Key); err != nil || kk.Type != 2 {
		t.Fatalf("kmsg reads control key type %d err %v", kk.Type, err)
	}
}

func TestSplitBatchesTornAndCorrupt(t *testing.T) {
	var stream []byte
	for i := int64(0); i < 3; i++ {
		stream = append(stream, EncodeBatch(i*2, 1, 0, false, []Record{{Value: []byte("a")}, {Value: []byte("b")}}).Raw...)
	}
	full := len(stream)
	bs, n, err := SplitBatches(stream)
	if err != nil || len(bs) != 3 || n != full {
		t.Fatalf("full: %d batches n=%d err=%v", len(bs), n, err)
	}
	// Torn tail: partial last batch is left out without error.
	bs, n, err = SplitBatches(stream[:full-5])
	if err != nil || len(bs) != 2 || n != full/3*2 {
		t.Fatalf("torn: %d batches n=%d err=%v", len(bs), n, err)
	}
	// Corrupt middle batch: CRC mismatch stops parsing there.
	bad := append([]byte(nil), stream...)
	bad[full/3+BatchHeaderSize+2] ^= 0xff
	bs, n, err = SplitBatches(bad)
	if !errors.Is(err, ErrCorruptBatch) || len(bs) != 1 || n != full/3 {
		t.Fatalf("corrupt: %d batches n=%d err=%v", len(bs), n, err)
	}
}

func TestWithBaseOffsetKeepsCRC(t *testing.T) {
	b := EncodeBatch(0, 3, 0, false, []Record{{Value: []byte("x")}, {Value: []byte("y")}})
	r := b.WithBaseOffset(100)
	p, err := ParseBatch(r.Raw)
	if err != nil || p.BaseOffset != 100 || p.LastOffset != 101 {
		t.Fatalf("%+v %v", p, err)
	}
	if b.BaseOffset != 0 {
		t.Fatal("original modified")
	}
}

func FuzzSplitBatches(f *testing.F) {
	f.Add(EncodeBatch(0, 1, 0, false, []Record{{Value: []byte("x")}}).Raw)
	f.Add(EncodeBatch(5, 2, 9, true, []Record{{Key: ControlKey(ControlSnapshotHeader), Value: []byte{0, 0, 0}}}).Raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		bs, n, _ := SplitBatches(b)
		if n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		for _, batch := range bs {
			recs, err := batch.Records()
			if err != nil {
				continue
			}
			if len(recs) > 0 && recs[0].Offset != batch.BaseOffset {
				// offsetDelta of a hostile batch may not start at 0; only check bounds.
				_ = recs
			}
		}
	})
}
