package records

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	topic, err := Record{0, &TopicRecord{Name: "foo", TopicID: topicA}}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"frame version 0", []byte{0, 2, 0, 0}, ErrFrameVersion},
		{"frame version 2", []byte{2, 2, 0, 0}, ErrFrameVersion},
		{"unknown type 6 (retired)", []byte{1, 6, 0, 0}, ErrUnknownType},
		{"unknown type 100", []byte{1, 100, 0, 0}, ErrUnknownType},
		{"type beyond int16", []byte{1, 0x80, 0x80, 0x02, 0, 0}, ErrUnknownType},
		{"unsupported version", []byte{1, 2, 1, 4, 'f', 'o', 'o'}, ErrUnsupportedVersion},
		{"PartitionRecord v3", []byte{1, 3, 3}, ErrUnsupportedVersion},
		{"trailing bytes", append(append([]byte{}, topic...), 0), ErrTrailingBytes},
		{"truncated body", topic[:len(topic)-3], ErrTruncated},
		{"missing tag section", topic[:len(topic)-1], ErrTruncated},
		{"varint too long", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrMalformed},
		{"null non-nullable string", []byte{1, 2, 0, 0}, ErrMalformed},
		{"array longer than input", unhex(t, "01 03 00 00000000", hexTopicA, "ffffffff0f"), ErrTruncated},
		{"known tag with extra bytes", []byte{1, 17, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
			1, 0, 2, 1, 1}, ErrMalformed},
		{"known tag too short", []byte{1, 17, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
			1, 0, 0}, ErrTruncated},
		{"tag size beyond input", []byte{1, 17, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
			1, 0, 5, 1}, ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode(%x) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
}

func TestDecodeSkipsUnknownTags(t *testing.T) {
	// TopicRecord v0 followed by one unknown tag (tag 9, 2 bytes), and a
	// BrokerRegistrationChangeRecord v0 with tag 0 and an unknown tag 5.
	topic := unhex(t, "01 02 00", "04 666f6f", hexTopicA, "01 09 02 abcd")
	got, err := Decode(topic)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Message.(*TopicRecord); m.Name != "foo" || m.TopicID != topicA {
		t.Fatalf("got %+v", m)
	}
	brc := unhex(t, "01 11 00", "00000001 0000000000000002", "02 00 01 01 05 01 01")
	got, err = Decode(brc)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Message.(*BrokerRegistrationChangeRecord); m.Fenced != 1 || m.InControlledShutdown != 0 {
		t.Fatalf("got %+v", m)
	}
}

func TestDecodeRejectsTagOutsideItsVersions(t *testing.T) {
	// Kafka's generated readers throw "Tag n is not valid for version v".
	tests := map[string][]byte{
		"BrokerRegistrationChange v0 tag 1": unhex(t, "01 11 00", "00000001 0000000000000002", "01 01 01 01"),
		"BrokerRegistrationChange v1 tag 2": unhex(t, "01 11 01", "00000001 0000000000000002", "01 02 01 01"),
		"RegisterBroker v2 tag 0": unhex(t, "01 00 02", "00000001 00", hexIncA, "0000000000000001",
			"01 01 00 01 00", "01 00 01 01"),
		"Partition v1 tag 1": unhex(t, "01 03 01 00000000", hexTopicA, "01 01 01 01 00000000 00000000 00000000 01",
			"01 01 01 01"),
		"PartitionChange v0 tag 8": unhex(t, "01 05 00 00000000", hexTopicA, "01 08 01 01"),
		"PartitionChange v1 tag 6": unhex(t, "01 05 01 00000000", hexTopicA, "01 06 01 01"),
	}
	for name, in := range tests {
		if _, err := Decode(in); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "is not valid for version") {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want error
	}{
		{"nil message", Record{}, ErrNilMessage},
		{"version too high", Record{1, &TopicRecord{}}, ErrUnsupportedVersion},
		{"negative version", Record{-1, &TopicRecord{}}, ErrUnsupportedVersion},
		{"RegisterBroker v0 InControlledShutdown", Record{0, &RegisterBrokerRecord{InControlledShutdown: true}}, ErrFieldNotInVersion},
		{"RegisterBroker v1 IsMigratingZkBroker", Record{1, &RegisterBrokerRecord{IsMigratingZkBroker: true}}, ErrFieldNotInVersion},
		{"RegisterBroker v2 LogDirs", Record{2, &RegisterBrokerRecord{LogDirs: []UUID{dirA}}}, ErrFieldNotInVersion},
		{"Partition v0 Directories", Record{0, &PartitionRecord{Directories: []UUID{dirA}}}, ErrFieldNotInVersion},
		{"Partition v1 ELR", Record{1, &PartitionRecord{EligibleLeaderReplicas: []int32{}}}, ErrFieldNotInVersion},
		{"Partition v1 LastKnownELR", Record{1, &PartitionRecord{LastKnownELR: []int32{1}}}, ErrFieldNotInVersion},
		{"PartitionChange v0 Directories", Record{0, &PartitionChangeRecord{Directories: []UUID{}}}, ErrFieldNotInVersion},
		{"PartitionChange v1 ELR", Record{1, &PartitionChangeRecord{EligibleLeaderReplicas: []int32{1}}}, ErrFieldNotInVersion},
		{"PartitionChange v1 LastKnownELR", Record{1, &PartitionChangeRecord{LastKnownELR: []int32{1}}}, ErrFieldNotInVersion},
		{"BrokerRegChange v0 InControlledShutdown", Record{0, &BrokerRegistrationChangeRecord{InControlledShutdown: 1}}, ErrFieldNotInVersion},
		{"BrokerRegChange v1 LogDirs", Record{1, &BrokerRegistrationChangeRecord{LogDirs: []UUID{dirA}}}, ErrFieldNotInVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte{0xaa}
			out, err := tt.rec.AppendTo(prefix)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if len(out) != 1 || out[0] != 0xaa {
				t.Fatalf("failed encode left bytes behind: %x", out)
			}
			if _, err := tt.rec.MarshalJSON(); !errors.Is(err, tt.want) {
				t.Fatalf("MarshalJSON err = %v, want %v", err, tt.want)
			}
		})
	}
	// The default for an absent field is fine: an empty (non-nil) LogDirs is
	// the default of a non-nullable array and may be encoded at any version.
	if _, err := (Record{0, &RegisterBrokerRecord{LogDirs: []UUID{}}}).AppendTo(nil); err != nil {
		t.Fatalf("empty LogDirs at v0: %v", err)
	}
}

func TestControlValueErrors(t *testing.T) {
	tests := []struct {
		name string
		t    ControlType
		in   []byte
		want error
	}{
		{"commit is not a KRaft value", ControlCommit, []byte{0, 0, 0, 0, 0, 0}, ErrUnknownType},
		{"unknown type", ControlType(42), nil, ErrUnknownType},
		{"LeaderChange v2", ControlLeaderChange, unhex(t, "0002 00000001 01 01 00"), ErrUnsupportedVersion},
		{"LeaderChange negative version", ControlLeaderChange, unhex(t, "ffff 00000001 01 01 00"), ErrUnsupportedVersion},
		{"LeaderChange truncated", ControlLeaderChange, unhex(t, "0000 000000"), ErrTruncated},
		{"SnapshotHeader trailing", ControlSnapshotHeader, unhex(t, "0000 0000000000000001 00 00"), ErrTrailingBytes},
		{"SnapshotFooter empty", ControlSnapshotFooter, nil, ErrTruncated},
		{"KRaftVersion truncated", ControlKRaftVersion, unhex(t, "0000 00"), ErrTruncated},
		{"Voters huge array", ControlKRaftVoters, unhex(t, "0000 ffffffff0f"), ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeControlValue(tt.t, tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEncodeRejectsOverlongStrings(t *testing.T) {
	long := string(make([]byte, 1<<15))
	ok := long[:1<<15-1]
	for _, m := range []Message{
		&TopicRecord{Name: long},
		&ConfigRecord{Value: &long},
		&FeatureLevelRecord{Name: long},
		&RegisterBrokerRecord{Rack: &long},
		&RegisterBrokerRecord{EndPoints: []BrokerEndpoint{{Host: long}}},
		&RegisterControllerRecord{Features: []ControllerFeature{{Name: long}}},
		&BeginTransactionRecord{Name: &long},
		&AbortTransactionRecord{Reason: &long},
	} {
		if _, err := m.AppendTo(nil, 0); !errors.Is(err, ErrStringTooLong) {
			t.Errorf("%T: err = %v, want ErrStringTooLong", m, err)
		}
	}
	// The limit itself is allowed and decodes.
	b, err := Record{0, &TopicRecord{Name: ok}}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decode(b); err != nil || got.Message.(*TopicRecord).Name != ok {
		t.Fatalf("32767-byte name: %v", err)
	}
}

// The PartitionChangeRecord decoder loops over its tag section itself (no
// closure, see reader.tagSection): an unknown tag is still skipped, and a
// known tag whose payload is longer than its field still fails.
func TestPartitionChangeTagSection(t *testing.T) {
	skip := unhex(t, "01 05 00 00000003", hexTopicA, "02 01 04 00000002 14 01 ff")
	got, err := Decode(skip)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Message.(*PartitionChangeRecord); m.PartitionID != 3 || m.Leader != 2 || m.ISR != nil {
		t.Fatalf("got %+v", m)
	}
	var d Decoder
	if got, err := d.Decode(skip); err != nil || got.Message.(*PartitionChangeRecord).Leader != 2 {
		t.Fatalf("Decoder: %+v, %v", got, err)
	}
	long := unhex(t, "01 05 00 00000003", hexTopicA, "01 01 05 00000002 ff")
	if _, err := Decode(long); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "unread bytes") {
		t.Fatalf("err = %v, want ErrMalformed (unread bytes)", err)
	}
	short := unhex(t, "01 05 00 00000003", hexTopicA, "01 01 02 0000")
	if _, err := Decode(short); err == nil {
		t.Fatal("a leader tag of 2 bytes decoded")
	}
}
