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
