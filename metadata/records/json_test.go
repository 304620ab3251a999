package records

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The expected strings follow Kafka's generated JSON converters: schema
// order, lowerCamel names, UUIDs in base64, tagged fields only when not at
// their default, fields absent at the version left out.
func TestRecordJSON(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want string
	}{
		{"topic", Record{0, &TopicRecord{Name: "foo", TopicID: topicA}},
			`{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"AAECAwQFBgcICQoLDA0ODw"}}`},
		{"register broker v0", Record{0, &RegisterBrokerRecord{BrokerID: 1, IncarnationID: OneUUID,
			EndPoints: []BrokerEndpoint{{"PLAINTEXT", "localhost", 9092, 0}}, Fenced: true}},
			`{"type":"REGISTER_BROKER_RECORD","version":0,"data":{"brokerId":1,` +
				`"incarnationId":"AAAAAAAAAAAAAAAAAAAAAQ","brokerEpoch":0,` +
				`"endPoints":[{"name":"PLAINTEXT","host":"localhost","port":9092,"securityProtocol":0}],` +
				`"features":[],"rack":null,"fenced":true}}`},
		{"register broker v3", Record{3, &RegisterBrokerRecord{BrokerID: 1, Rack: ptr("r<1>"), LogDirs: []UUID{OneUUID}}},
			`{"type":"REGISTER_BROKER_RECORD","version":3,"data":{"brokerId":1,"isMigratingZkBroker":false,` +
				`"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA","brokerEpoch":0,"endPoints":[],"features":[],` +
				`"rack":"r<1>","fenced":false,"inControlledShutdown":false,"logDirs":["AAAAAAAAAAAAAAAAAAAAAQ"]}}`},
		{"partition v1", Record{1, &PartitionRecord{PartitionID: 0, TopicID: OneUUID, Replicas: []int32{1},
			ISR: []int32{1}, Leader: 1, LeaderRecoveryState: 1}},
			`{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ",` +
				`"replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,` +
				`"leaderRecoveryState":1,"leaderEpoch":0,"partitionEpoch":0,"directories":[]}}`},
		{"partition change", Record{0, &PartitionChangeRecord{PartitionID: 2, TopicID: OneUUID,
			ISR: []int32{}, Leader: -1, LeaderRecoveryState: -1}},
			`{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":2,` +
				`"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","isr":[],"leader":-1}}`},
		{"broker registration change", Record{1, &BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 9, Fenced: -1}},
			`{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":1,"data":{"brokerId":1,"brokerEpoch":9,"fenced":-1}}`},
		{"config delete", Record{0, &ConfigRecord{ResourceType: 4, Name: "x"}},
			`{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":4,"resourceName":"","name":"x","value":null}}`},
		{"no-op", Record{0, &NoOpRecord{}}, `{"type":"NO_OP_RECORD","version":0,"data":{}}`},
		{"scram secrets redacted", Record{0, &UserScramCredentialRecord{Name: "alice", Mechanism: 2,
			Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096}},
			`{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":0,"data":{"name":"alice","mechanism":2,` +
				`"salt":"(redacted)","storedKey":"(redacted)","serverKey":"(redacted)","iterations":4096}}`},
		{"client quota", Record{0, &ClientQuotaRecord{Entity: []ClientQuotaEntity{{"user", ptr("a")}, {"client-id", nil}},
			Key: "producer_byte_rate", Value: 1024}},
			`{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user","entityName":"a"},` +
				`{"entityType":"client-id","entityName":null}],"key":"producer_byte_rate","value":1024.0,"remove":false}}`},
		{"client quota big value", Record{0, &ClientQuotaRecord{Key: "k", Value: 1.5e7, Remove: true}},
			`{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[],"key":"k","value":1.5E7,"remove":true}}`},
		{"acl", Record{0, &AccessControlEntryRecord{ID: OneUUID, ResourceType: 2, ResourceName: "t", PatternType: 3,
			Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}},
			`{"type":"ACCESS_CONTROL_ENTRY_RECORD","version":0,"data":{"id":"AAAAAAAAAAAAAAAAAAAAAQ","resourceType":2,` +
				`"resourceName":"t","patternType":3,"principal":"User:a","host":"*","operation":3,"permissionType":3}}`},
		{"delegation token", Record{0, &DelegationTokenRecord{Owner: "User:a", Requester: "User:b", IssueTimestamp: 1,
			MaxTimestamp: 2, ExpirationTimestamp: 3, TokenID: "t"}},
			`{"type":"DELEGATION_TOKEN_RECORD","version":0,"data":{"owner":"User:a","requester":"User:b","renewers":[],` +
				`"issueTimestamp":1,"maxTimestamp":2,"expirationTimestamp":3,"tokenId":"t"}}`},
		{"zk migration state", Record{0, &ZkMigrationStateRecord{}},
			`{"type":"ZK_MIGRATION_STATE_RECORD","version":0,"data":{"zkMigrationState":0}}`},
		{"feature level", Record{0, &FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 21}},
			`{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rec.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
			// Through encoding/json the output is the same JSON value (it
			// may escape <, > and & as \u003c and so on).
			viaPkg, err := json.Marshal(tt.rec)
			var a, b any
			if err != nil || json.Unmarshal(viaPkg, &a) != nil || json.Unmarshal(got, &b) != nil ||
				!reflect.DeepEqual(a, b) {
				t.Fatalf("json.Marshal differs: %s (%v)", viaPkg, err)
			}
		})
	}
}

func TestEverySampleMarshalsToValidJSON(t *testing.T) {
	for _, s := range samples() {
		b, err := json.Marshal(s.rec)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var v struct {
			Type    string          `json:"type"`
			Version int16           `json:"version"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Type != s.rec.Message.Type().String() || v.Version != s.rec.Version {
			t.Fatalf("%s: %s (%v)", s.name, b, err)
		}
	}
}

func TestControlValueJSON(t *testing.T) {
	tests := []struct {
		v    ControlValue
		want string
	}{
		{&SnapshotHeaderRecord{LastContainedLogTimestamp: 5}, `{"version":0,"lastContainedLogTimestamp":5}`},
		{&SnapshotFooterRecord{}, `{"version":0}`},
		{&KRaftVersionRecord{KRaftVersion: 1}, `{"version":0,"kRaftVersion":1}`},
		{&LeaderChangeMessage{LeaderID: 1, Voters: []Voter{{VoterID: 1}}},
			`{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[]}`},
		{&LeaderChangeMessage{Version: 1, LeaderID: 1, Voters: []Voter{{1, OneUUID}}},
			`{"version":1,"leaderId":1,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAQ"}],"grantingVoters":[]}`},
		{&VotersRecord{Voters: []VotersRecordVoter{{VoterID: 1, VoterDirectoryID: OneUUID,
			Endpoints: []VotersRecordEndpoint{{"CONTROLLER", "127.0.0.1", 9093}}, KRaftVersionFeature: KRaftVersionFeature{0, 1}}}},
			`{"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAQ",` +
				`"endpoints":[{"name":"CONTROLLER","host":"127.0.0.1","port":9093}],` +
				`"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Fatalf("%T\n got %s\nwant %s", tt.v, got, tt.want)
		}
	}
}

func TestJavaDouble(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 1e-3: "0.001", 9999999: "9999999.0", 1e7: "1.0E7",
		1.25e-4: "1.25E-4", 1.7976931348623157e308: "1.7976931348623157E308",
	} {
		if got := string(javaDouble(v)); got != want {
			t.Errorf("javaDouble(%v) = %s, want %s", v, got, want)
		}
	}
}
