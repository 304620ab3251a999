package records

import (
	"bytes"
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
		if !reflect.DeepEqual(reused, rec) {
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
		if !reflect.DeepEqual(again, rec) {
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
