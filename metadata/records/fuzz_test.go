package records

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the frame decoder, which reaches every
// record type and version. Decoding must never panic, and whatever decodes
// must encode again and decode to the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range samples() {
		b, err := s.rec.AppendTo(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var dec Decoder // shared across inputs: what one input leaves must not leak into the next
	f.Fuzz(func(t *testing.T, in []byte) {
		rec, err := Decode(in)
		reused, rerr := dec.Decode(in)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Decode error %v, Decoder.Decode error %v", err, rerr)
		}
		if err != nil {
			return
		}
		if !sameRecord(reused, rec) {
			t.Fatalf("Decoder.Decode differs from Decode\n got %+v\nwant %+v", reused.Message, rec.Message)
		}
		out, err := rec.AppendTo(nil)
		if err != nil {
			t.Fatalf("re-encode of decoded %x: %v", in, err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("decode of re-encoded %x: %v", out, err)
		}
		if !sameRecord(again, rec) {
			t.Fatalf("round trip changed value\n first %+v\nsecond %+v", rec.Message, again.Message)
		}
		if out2, _ := again.AppendTo(nil); !bytes.Equal(out, out2) {
			t.Fatalf("encoding not stable: %x vs %x", out, out2)
		}
		if _, err := rec.MarshalJSON(); err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
	})
}

// sameRecord is reflect.DeepEqual, except that a ClientQuotaRecord's float64
// Value compares bit for bit, so that a NaN equals itself.
func sameRecord(a, b Record) bool {
	qa, okA := a.Message.(*ClientQuotaRecord)
	qb, okB := b.Message.(*ClientQuotaRecord)
	if okA && okB {
		ca, cb := *qa, *qb
		if math.Float64bits(ca.Value) != math.Float64bits(cb.Value) {
			return false
		}
		ca.Value, cb.Value = 0, 0
		return a.Version == b.Version && reflect.DeepEqual(&ca, &cb)
	}
	return reflect.DeepEqual(a, b)
}

// FuzzControlValue does the same for control record values; the first input
// byte picks the control type.
func FuzzControlValue(f *testing.F) {
	for _, v := range controlSamples() {
		f.Add(append([]byte{byte(v.ControlType())}, v.AppendTo(nil)...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		ct := ControlType(in[0] % 8)
		v, err := DecodeControlValue(ct, in[1:])
		if err != nil {
			return
		}
		out := v.AppendTo(nil)
		again, err := DecodeControlValue(ct, out)
		if err != nil {
			t.Fatalf("decode of re-encoded %x: %v", out, err)
		}
		if !reflect.DeepEqual(again, v) {
			t.Fatalf("round trip changed value\n first %+v\nsecond %+v", v, again)
		}
	})
}

func TestSameRecordNaN(t *testing.T) {
	nan := Record{0, &ClientQuotaRecord{Key: "k", Value: math.NaN()}}
	b, err := nan.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || !sameRecord(got, nan) {
		t.Fatalf("NaN quota did not round trip: %+v %v", got.Message, err)
	}
	if sameRecord(got, Record{0, &ClientQuotaRecord{Key: "k", Value: math.Inf(1)}}) {
		t.Fatal("NaN equals +Inf")
	}
}
