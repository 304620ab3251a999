package controller

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/kraftd/kraftd/metadata/records"
)

// split must keep every record, in order, with its own encoding; wrap
// several batches in Begin/End; keep each batch within the limits; and
// cut greedily (a batch ends only when the next record would not fit), as
// it did when it built the batches by appending.
func TestSplitBatchesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 300).Draw(t, "records")
		recs := make([]records.Record, n)
		for i := range recs {
			r := records.NewPartitionChangeRecord()
			r.TopicID, r.PartitionID = records.UUID{0: byte(i), 15: 1}, int32(i)
			r.ISR = make([]int32, rapid.IntRange(0, 40).Draw(t, "isr"))
			recs[i] = records.Record{Message: r}
		}
		maxRecords := rapid.IntRange(3, 50).Draw(t, "maxRecords")
		maxBytes := rapid.IntRange(1024, 8192).Draw(t, "maxBytes")
		out, ok, err := split(recs, maxRecords, maxBytes, true, true)
		if err != nil || !ok {
			t.Fatalf("split: ok %t, err %v", ok, err)
		}
		begin, _, _ := encodeAll([]records.Record{{Message: &records.BeginTransactionRecord{}}})
		end, _, _ := encodeAll([]records.Record{{Message: &records.EndTransactionRecord{}}})
		var got []records.Record
		for k, b := range out {
			if len(b.recs) != len(b.raw) {
				t.Fatalf("batch %d: %d records, %d encoded", k, len(b.recs), len(b.raw))
			}
			body, raw := b.recs, b.raw
			if len(out) > 1 {
				if k == 0 {
					if _, isBegin := body[0].Message.(*records.BeginTransactionRecord); !isBegin || !bytes.Equal(raw[0].Value, begin[0].Value) {
						t.Fatalf("batch 0 does not start with Begin")
					}
					body, raw = body[1:], raw[1:]
				}
				if k == len(out)-1 {
					m := len(body) - 1
					if _, isEnd := body[m].Message.(*records.EndTransactionRecord); !isEnd || !bytes.Equal(raw[m].Value, end[0].Value) {
						t.Fatalf("last batch does not end with End")
					}
					body, raw = body[:m], raw[:m]
				}
			}
			size := batchOverheadBytes
			for i, r := range b.recs {
				want, err := r.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.raw[i].Value, want) {
					t.Fatalf("batch %d record %d encodes as %x, want %x", k, i, b.raw[i].Value, want)
				}
				size += len(want) + recordOverheadBytes
			}
			if len(b.recs) > maxRecords || size > maxBytes && len(b.recs) > 2 {
				t.Fatalf("batch %d: %d records, %d bytes over the limits %d, %d", k, len(b.recs), size, maxRecords, maxBytes)
			}
			if k < len(out)-1 {
				// Greedy: the next batch's first record (plus End) would not have fit.
				next := out[k+1].raw[0]
				if len(b.recs)+2 <= maxRecords && size+len(next.Value)+len(end[0].Value)+2*recordOverheadBytes <= maxBytes {
					t.Fatalf("batch %d was cut though the next record fits", k)
				}
			}
			got = append(got, body...)
		}
		if len(got) != len(recs) {
			t.Fatalf("%d records out, %d in", len(got), len(recs))
		}
		for i := range recs {
			if got[i].Message != recs[i].Message {
				t.Fatalf("record %d out of order", i)
			}
		}
	})
}

// A non-atomic operation is cut into plain batches: no transaction
// markers, every record once and in order, each batch within the limits
// (a record alone over maxBytes gets a batch of its own), cut greedily,
// whatever the metadata.version supports.
func TestSplitNonAtomicPlainBatches(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 300).Draw(t, "records")
		recs := make([]records.Record, n)
		for i := range recs {
			r := records.NewPartitionChangeRecord()
			r.TopicID, r.PartitionID = records.UUID{0: byte(i), 15: 1}, int32(i)
			r.ISR = make([]int32, rapid.IntRange(0, 40).Draw(t, "isr"))
			recs[i] = records.Record{Message: r}
		}
		maxRecords := rapid.IntRange(1, 50).Draw(t, "maxRecords")
		maxBytes := rapid.IntRange(256, 8192).Draw(t, "maxBytes")
		txns := rapid.Bool().Draw(t, "txns")
		out, ok, err := split(recs, maxRecords, maxBytes, txns, false)
		if err != nil || !ok {
			t.Fatalf("split: ok %t, err %v", ok, err)
		}
		var got []records.Record
		for k, b := range out {
			if len(b.recs) == 0 && n > 0 || len(b.recs) != len(b.raw) {
				t.Fatalf("batch %d: %d records, %d encoded", k, len(b.recs), len(b.raw))
			}
			size := batchOverheadBytes
			for i, r := range b.recs {
				switch r.Message.(type) {
				case *records.BeginTransactionRecord, *records.EndTransactionRecord:
					t.Fatalf("batch %d record %d is a transaction marker", k, i)
				}
				want, err := r.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.raw[i].Value, want) {
					t.Fatalf("batch %d record %d encodes as %x, want %x", k, i, b.raw[i].Value, want)
				}
				size += len(want) + recordOverheadBytes
			}
			if len(b.recs) > maxRecords || size > maxBytes && len(b.recs) > 1 {
				t.Fatalf("batch %d: %d records, %d bytes over the limits %d, %d", k, len(b.recs), size, maxRecords, maxBytes)
			}
			if k < len(out)-1 {
				next := out[k+1].raw[0]
				if len(b.recs)+1 <= maxRecords && size+len(next.Value)+recordOverheadBytes <= maxBytes {
					t.Fatalf("batch %d was cut though the next record fits", k)
				}
			}
			got = append(got, b.recs...)
		}
		if len(got) != len(recs) {
			t.Fatalf("%d records out, %d in", len(got), len(recs))
		}
		for i := range recs {
			if got[i].Message != recs[i].Message {
				t.Fatalf("record %d out of order", i)
			}
		}
	})
}
