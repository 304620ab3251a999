package records

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// unhex joins hex fragments (spaces allowed) into bytes. Each golden case
// below lists one fragment per schema field so the expected bytes can be
// checked against the JSON schema by eye.
func unhex(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(parts, ""), " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	hexTopicA = "000102030405060708090a0b0c0d0e0f"
	hexDirA   = "d100000000000000000000000000000a"
	hexDirB   = "d200000000000000000000000000000b"
	hexIncA   = "1c010203000000000000000000000042"
)

func TestGoldenRecords(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want []string
	}{
		{"TopicRecord v0", Record{0, &TopicRecord{Name: "foo", TopicID: topicA}}, []string{
			"01 02 00",  // frame version 1, type 2, version 0
			"04 666f6f", // Name: compact string len 3 -> uvarint 4, "foo"
			hexTopicA,   // TopicId: 16 raw bytes
			"00",        // no tagged fields
		}},
		{"PartitionRecord v0", Record{0, &PartitionRecord{PartitionID: 0, TopicID: topicA,
			Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1}}, []string{
			"01 03 00",
			"00000000",             // PartitionId 0
			hexTopicA,              // TopicId
			"03 00000001 00000002", // Replicas [1 2]: uvarint(2+1)
			"02 00000001",          // Isr [1]
			"01",                   // RemovingReplicas []
			"01",                   // AddingReplicas []
			"00000001",             // Leader 1
			"00000000",             // LeaderEpoch 0
			"00000000",             // PartitionEpoch 0
			"00",                   // no tags (LeaderRecoveryState 0 is default)
		}},
		{"PartitionRecord v0 LeaderRecoveryState", Record{0, &PartitionRecord{PartitionID: 1, TopicID: topicA,
			Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderRecoveryState: 1, LeaderEpoch: 3, PartitionEpoch: 4}}, []string{
			"01 03 00",
			"00000001", hexTopicA,
			"02 00000002", "02 00000002", "01", "01", // Replicas, Isr, Removing, Adding
			"00000002", "00000003", "00000004", // Leader, LeaderEpoch, PartitionEpoch
			"01",       // one tagged field
			"00 01 01", // tag 0 (LeaderRecoveryState), size 1, value 1
		}},
		{"PartitionRecord v1 Directories", Record{1, &PartitionRecord{PartitionID: 0, TopicID: topicA,
			Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, Directories: []UUID{dirA, dirB}}}, []string{
			"01 03 01",
			"00000000", hexTopicA,
			"03 00000001 00000002", "03 00000001 00000002", "01", "01",
			"00000001", "00000000", "00000000",
			"03", hexDirA, hexDirB, // Directories (v1+, positional): uvarint(2+1), two uuids
			"00",
		}},
		{"PartitionRecord v2 ELR tags", Record{2, &PartitionRecord{PartitionID: 0, TopicID: topicA,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, Directories: []UUID{dirA},
			EligibleLeaderReplicas: []int32{2}, LastKnownELR: []int32{}}}, []string{
			"01 03 02",
			"00000000", hexTopicA,
			"02 00000001", "02 00000001", "01", "01",
			"00000001", "00000000", "00000000",
			"02", hexDirA,
			"02",                // two tagged fields
			"01 05 02 00000002", // tag 1 ELR, size 5: [2]
			"02 01 01",          // tag 2 LastKnownElr, size 1: [] (empty, not null)
		}},
		{"RegisterBrokerRecord v3 LogDirs", Record{3, &RegisterBrokerRecord{BrokerID: 1, IncarnationID: incA,
			BrokerEpoch: 10, EndPoints: []BrokerEndpoint{{"PLAINTEXT", "localhost", 9092, 0}},
			Features: []BrokerFeature{{"metadata.version", 1, 21}}, Fenced: true, LogDirs: []UUID{dirA}}}, []string{
			"01 00 03",
			"00000001",                            // BrokerId
			"00",                                  // IsMigratingZkBroker false (v2+)
			hexIncA,                               // IncarnationId
			"000000000000000a",                    // BrokerEpoch 10
			"02",                                  // EndPoints: 1 element
			"0a 504c41494e54455854",               // Name "PLAINTEXT"
			"0a 6c6f63616c686f7374",               // Host "localhost"
			"2384",                                // Port 9092
			"0000",                                // SecurityProtocol 0
			"00",                                  // endpoint tags
			"02",                                  // Features: 1 element
			"11 6d657461646174612e76657273696f6e", // Name "metadata.version"
			"0001 0015",                           // Min 1, Max 21
			"00",                                  // feature tags
			"00",                                  // Rack null
			"01",                                  // Fenced true
			"00",                                  // InControlledShutdown false (v1+)
			"01",                                  // one tagged field
			"00 11 02", hexDirA,                   // tag 0 LogDirs, size 17: [dirA]
		}},
		{"RegisterBrokerRecord v0", Record{0, &RegisterBrokerRecord{BrokerID: 2, IncarnationID: incA,
			BrokerEpoch: 3, Rack: ptr("r"), Fenced: false}}, []string{
			"01 00 00",
			"00000002", hexIncA, "0000000000000003",
			"01", "01", // EndPoints [], Features []
			"02 72", // Rack "r"
			"00",    // Fenced false; no InControlledShutdown at v0
			"00",
		}},
		{"PartitionChangeRecord v0 Isr+Leader", Record{0, &PartitionChangeRecord{PartitionID: 0, TopicID: topicA,
			ISR: []int32{1, 2}, Leader: 2, LeaderRecoveryState: -1}}, []string{
			"01 05 00",
			"00000000", hexTopicA,
			"02",                         // two tagged fields
			"00 09 03 00000001 00000002", // tag 0 Isr, size 9: [1 2]
			"01 04 00000002",             // tag 1 Leader, size 4: 2
		}},
		{"PartitionChangeRecord v1 Directories", Record{1, &PartitionChangeRecord{PartitionID: 3, TopicID: topicA,
			Leader: -2, LeaderRecoveryState: 0, Directories: []UUID{dirB}}}, []string{
			"01 05 01",
			"00000003", hexTopicA,
			"02",
			"05 01 00",          // tag 5 LeaderRecoveryState 0 (default is -1, so written)
			"08 11 02", hexDirB, // tag 8 Directories, size 17
		}},
		{"BrokerRegistrationChangeRecord v0 unfence", Record{0, &BrokerRegistrationChangeRecord{BrokerID: 1,
			BrokerEpoch: 5, Fenced: -1}}, []string{
			"01 11 00", // type 17
			"00000001", "0000000000000005",
			"01 00 01 ff", // one tag: tag 0 Fenced, size 1, -1
		}},
		{"BrokerRegistrationChangeRecord v1 shutdown", Record{1, &BrokerRegistrationChangeRecord{BrokerID: 1,
			BrokerEpoch: 5, InControlledShutdown: 1}}, []string{
			"01 11 01",
			"00000001", "0000000000000005",
			"01 01 01 01", // tag 1 InControlledShutdown, size 1, 1
		}},
		{"ConfigRecord v0 delete", Record{0, &ConfigRecord{ResourceType: 2, ResourceName: "t", Name: "x"}}, []string{
			"01 04 00", "02", "02 74", "02 78", "00", "00", // Value null
		}},
		{"FeatureLevelRecord v0", Record{0, &FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 21}}, []string{
			"01 0c 00", "11 6d657461646174612e76657273696f6e", "0015", "00",
		}},
		{"NoOpRecord v0", Record{0, &NoOpRecord{}}, []string{"01 14 00", "00"}},
		{"BeginTransactionRecord v0", Record{0, &BeginTransactionRecord{Name: ptr("ab")}}, []string{
			"01 17 00", "01 00 03 03 6162", // tag 0, size 3, "ab"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.want...)
			got, err := tt.rec.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encode\n got %x\nwant %x", got, want)
			}
			dec, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, tt.rec) {
				t.Fatalf("decode\n got %+v\nwant %+v", dec.Message, tt.rec.Message)
			}
		})
	}
}

func TestGoldenControlValues(t *testing.T) {
	tests := []struct {
		name string
		v    ControlValue
		want []string
	}{
		{"LeaderChangeMessage v0", &LeaderChangeMessage{Version: 0, LeaderID: 1,
			Voters: []Voter{{VoterID: 1}, {VoterID: 2}, {VoterID: 3}}, GrantingVoters: []Voter{{VoterID: 1}, {VoterID: 2}}}, []string{
			"0000",                                   // Version 0
			"00000001",                               // LeaderId
			"04 00000001 00 00000002 00 00000003 00", // Voters: 3 x (VoterId, tags)
			"03 00000001 00 00000002 00",             // GrantingVoters
			"00",
		}},
		{"LeaderChangeMessage v1", &LeaderChangeMessage{Version: 1, LeaderID: 2,
			Voters: []Voter{{2, dirB}}, GrantingVoters: []Voter{{2, dirB}}}, []string{
			"0001", "00000002",
			"02 00000002", hexDirB, "00",
			"02 00000002", hexDirB, "00",
			"00",
		}},
		{"SnapshotHeaderRecord", &SnapshotHeaderRecord{Version: 0, LastContainedLogTimestamp: 1}, []string{
			"0000", "0000000000000001", "00",
		}},
		{"SnapshotFooterRecord", &SnapshotFooterRecord{}, []string{"0000", "00"}},
		{"KRaftVersionRecord", &KRaftVersionRecord{KRaftVersion: 1}, []string{"0000", "0001", "00"}},
		{"VotersRecord", &VotersRecord{Voters: []VotersRecordVoter{{VoterID: 1, VoterDirectoryID: dirA,
			Endpoints:           []VotersRecordEndpoint{{"C", "h", 9093}},
			KRaftVersionFeature: KRaftVersionFeature{0, 1}}}}, []string{
			"0000",
			"02", "00000001", hexDirA, // one voter: id, directory id
			"02 02 43 02 68 2385 00", // Endpoints: [{"C","h",9093}] + tags
			"0000 0001 00",           // KRaftVersionFeature struct + its tags
			"00",                     // voter tags
			"00",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.want...)
			if got := tt.v.AppendTo(nil); !bytes.Equal(got, want) {
				t.Fatalf("encode\n got %x\nwant %x", got, want)
			}
			dec, err := DecodeControlValue(tt.v.ControlType(), want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, tt.v) {
				t.Fatalf("decode\n got %+v\nwant %+v", dec, tt.v)
			}
		})
	}
}

// TestLeaderChangeMatchesKmsg cross-checks our LeaderChangeMessage encoding
// against franz-go's generated codec for both schema versions.
func TestLeaderChangeMatchesKmsg(t *testing.T) {
	for version := int16(0); version <= 1; version++ {
		ours := &LeaderChangeMessage{Version: version, LeaderID: 7,
			Voters: []Voter{{1, dirA}, {7, dirB}}, GrantingVoters: []Voter{{7, dirB}}}
		if version == 0 { // v0 has no directory ids on the wire
			ours.Voters = []Voter{{VoterID: 1}, {VoterID: 7}}
			ours.GrantingVoters = []Voter{{VoterID: 7}}
		}
		theirs := kmsg.NewLeaderChangeMessage()
		theirs.Version = version
		theirs.LeaderID = 7
		for _, v := range ours.Voters {
			kv := kmsg.NewLeaderChangeMessageVoter()
			kv.VoterID, kv.VoterDirectoryID = v.VoterID, v.VoterDirectoryID
			theirs.Voters = append(theirs.Voters, kv)
		}
		for _, v := range ours.GrantingVoters {
			kv := kmsg.NewLeaderChangeMessageVoter()
			kv.VoterID, kv.VoterDirectoryID = v.VoterID, v.VoterDirectoryID
			theirs.GrantingVoters = append(theirs.GrantingVoters, kv)
		}
		want := theirs.AppendTo(nil)
		if got := ours.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("v%d: ours %x, kmsg %x", version, got, want)
		}
		var back LeaderChangeMessage
		if err := back.ReadFrom(want); err != nil || !reflect.DeepEqual(&back, ours) {
			t.Fatalf("v%d: decoding kmsg bytes: %+v, %v", version, back, err)
		}
	}
}
