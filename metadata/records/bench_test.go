package records

import "testing"

func BenchmarkPartitionRecordEncode(b *testing.B) {
	rec := Record{Version: 2, Message: fullSample(TypePartition, 2)}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = rec.AppendTo(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPartitionRecordDecode(b *testing.B) {
	in, err := Record{Version: 2, Message: fullSample(TypePartition, 2)}.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPartitionChangeDecode is what a broker or standby controller does
// per record of a controlled shutdown or broker loss: decode a
// PartitionChangeRecord (new ISR, new leader) into a reused Decoder.
func BenchmarkPartitionChangeDecode(b *testing.B) {
	r := NewPartitionChangeRecord()
	r.PartitionID, r.TopicID, r.ISR, r.Leader = 7, UUID{1, 2, 3}, []int32{2, 3}, 2
	in, err := Record{Message: r}.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	var d Decoder
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

// A Decoder decodes a PartitionChangeRecord without allocating: brokers and
// standby controllers decode one per partition moved (a million at 1M
// partitions). Each tag used to cost a heap-allocated reader.
func TestPartitionChangeDecodeAllocs(t *testing.T) {
	r := NewPartitionChangeRecord()
	r.PartitionID, r.TopicID, r.ISR, r.Leader = 7, UUID{1, 2, 3}, []int32{2, 3}, 2
	in, err := Record{Message: r}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	if n := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(in); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%.1f allocations per decode, want 0", n)
	}
}
