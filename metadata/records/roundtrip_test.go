package records

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func TestRoundTripEveryTypeAndVersion(t *testing.T) {
	seen := map[Type]bool{}
	for _, s := range samples() {
		t.Run(fmt.Sprintf("%s/v%d", s.name, s.rec.Version), func(t *testing.T) {
			seen[s.rec.Message.Type()] = true
			b, err := s.rec.AppendTo(nil)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("decode %x: %v", b, err)
			}
			if !reflect.DeepEqual(got, s.rec) {
				t.Fatalf("round trip mismatch\n got %#v\nwant %#v", got.Message, s.rec.Message)
			}
			again, err := got.AppendTo(nil)
			if err != nil || string(again) != string(b) {
				t.Fatalf("re-encode differs: %x vs %x (%v)", again, b, err)
			}
		})
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("no sample for %s", typ)
		}
	}
}

func TestDecodeAppliesDefaultsForAbsentFields(t *testing.T) {
	// A v0 RegisterBrokerRecord has no IsMigratingZkBroker or
	// InControlledShutdown on the wire; a v0 PartitionChangeRecord with no
	// tags must come back as "no change", not as zeroes.
	b, err := Record{Version: 0, Message: &PartitionChangeRecord{PartitionID: 1, Leader: NoLeaderChange,
		LeaderRecoveryState: NoLeaderRecoveryStateChange}}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	pc := got.Message.(*PartitionChangeRecord)
	if pc.Leader != -2 || pc.LeaderRecoveryState != -1 || pc.ISR != nil || pc.Replicas != nil {
		t.Fatalf("defaults not applied: %+v", pc)
	}
}

func TestReadFromResetsPreviousContent(t *testing.T) {
	full := fullSample(TypePartition, 2).(*PartitionRecord)
	body, err := NewPartitionRecord().AppendTo(nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := full.ReadFrom(body, 2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(full, NewPartitionRecord()) {
		t.Fatalf("ReadFrom kept old fields: %+v", full)
	}
}

func TestNewAppliesSchemaDefaults(t *testing.T) {
	tests := []struct {
		typ  Type
		want Message
	}{
		{TypeRegisterBroker, &RegisterBrokerRecord{Fenced: true}},
		{TypePartition, &PartitionRecord{PartitionID: -1, Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}},
		{TypePartitionChange, &PartitionChangeRecord{PartitionID: -1, Leader: -2, LeaderRecoveryState: -1}},
		{TypeProducerIds, &ProducerIdsRecord{BrokerEpoch: -1}},
		{TypeTopic, &TopicRecord{}},
	}
	for _, tt := range tests {
		got, err := New(tt.typ)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("New(%s) = %+v, want %+v", tt.typ, got, tt.want)
		}
	}
}

func TestControlValueRoundTrip(t *testing.T) {
	for _, v := range controlSamples() {
		b := v.AppendTo(nil)
		got, err := DecodeControlValue(v.ControlType(), b)
		if err != nil {
			t.Fatalf("%T: decode %x: %v", v, b, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%T mismatch\n got %+v\nwant %+v", v, got, v)
		}
	}
}

func TestControlKey(t *testing.T) {
	for ct := ControlAbort; ct <= ControlKRaftVoters; ct++ {
		b := EncodeControlKey(ct)
		got, err := DecodeControlKey(b)
		if err != nil || got != ct {
			t.Fatalf("%s: got %v, %v", ct, got, err)
		}
	}
	if got := EncodeControlKey(ControlLeaderChange); string(got) != "\x00\x00\x00\x02" {
		t.Fatalf("LeaderChange key = %x, want 00000002", got)
	}
	// Newer key versions parse as version 0 and may carry more bytes.
	if got, err := DecodeControlKey([]byte{0, 1, 0, 3, 9, 9}); err != nil || got != ControlSnapshotHeader {
		t.Fatalf("v1 key: %v %v", got, err)
	}
	if _, err := DecodeControlKey([]byte{0, 0, 0}); err == nil {
		t.Fatal("short key accepted")
	}
	if _, err := DecodeControlKey([]byte{0xff, 0xff, 0, 2}); err == nil {
		t.Fatal("negative key version accepted")
	}
	if ControlLeaderChange.String() != "LEADER_CHANGE" || ControlType(9).String() != "UNKNOWN(9)" {
		t.Fatal("ControlType names")
	}
}

// TestDecoderMatchesDecode: one Decoder, reused across every sample in turn
// (each partition type twice in a row, full then sparse), decodes what Decode does.
func TestDecoderMatchesDecode(t *testing.T) {
	var dec Decoder
	ss := samples()
	for round := range 2 {
		for i, s := range ss {
			b, err := s.rec.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.Decode(b)
			if err != nil {
				t.Fatalf("round %d sample %d: %v", round, i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d sample %d (%s v%d): Decoder gave %+v, Decode %+v",
					round, i, want.Message.Type(), want.Version, got.Message, want.Message)
			}
		}
		slices.Reverse(ss)
	}
}
