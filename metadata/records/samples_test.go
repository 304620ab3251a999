package records

// Sample records shared by the round-trip, JSON and fuzz tests: for every
// type and every valid version, one record with everything at its default
// and one with every field the version carries set to a non-default value.

func ptr[T any](v T) *T { return &v }

var (
	topicA = UUID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	dirA   = UUID{0xd1, 15: 0xa}
	dirB   = UUID{0xd2, 15: 0xb}
	incA   = UUID{0x1c, 1, 2, 3, 15: 0x42}
)

type sample struct {
	name string
	rec  Record
}

func samples() []sample {
	var out []sample
	add := func(name string, version int16, m Message) {
		out = append(out, sample{name, Record{Version: version, Message: m}})
	}
	for _, t := range Types() {
		m, _ := New(t)
		for v := m.LowestVersion(); v <= m.HighestVersion(); v++ {
			d, _ := New(t)
			add(t.String()+"/default", v, d)
			if full := fullSample(t, v); full != nil {
				add(t.String()+"/full", v, full)
			}
		}
	}
	return out
}

// fullSample returns a record of type t with every field present at version
// v set to something other than its default.
func fullSample(t Type, v int16) Message {
	switch t {
	case TypeRegisterBroker:
		m := &RegisterBrokerRecord{
			BrokerID: 1, IncarnationID: incA, BrokerEpoch: 10,
			EndPoints: []BrokerEndpoint{{"PLAINTEXT", "localhost", 9092, 0}, {"SSL", "h", 65535, 1}},
			Features:  []BrokerFeature{{"metadata.version", 1, 21}},
			Rack:      ptr("rack-1"), Fenced: false,
		}
		m.InControlledShutdown = v >= 1
		m.IsMigratingZkBroker = v >= 2
		if v >= 3 {
			m.LogDirs = []UUID{dirA, dirB}
		}
		return m
	case TypeUnregisterBroker:
		return &UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 99}
	case TypeTopic:
		return &TopicRecord{Name: "foo", TopicID: topicA}
	case TypePartition:
		m := &PartitionRecord{
			PartitionID: 7, TopicID: topicA, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2},
			RemovingReplicas: []int32{3}, AddingReplicas: []int32{4}, Leader: 1,
			LeaderRecoveryState: 1, LeaderEpoch: 5, PartitionEpoch: 6,
		}
		if v >= 1 {
			m.Directories = []UUID{dirA, dirB, dirA}
		}
		if v >= 2 {
			m.EligibleLeaderReplicas = []int32{3}
			m.LastKnownELR = []int32{}
		}
		return m
	case TypeConfig:
		return &ConfigRecord{ResourceType: 2, ResourceName: "foo", Name: "retention.ms", Value: ptr("1000")}
	case TypePartitionChange:
		m := &PartitionChangeRecord{
			PartitionID: 2, TopicID: topicA, ISR: []int32{1}, Leader: -1, Replicas: []int32{1, 2},
			RemovingReplicas: []int32{}, AddingReplicas: []int32{2}, LeaderRecoveryState: 0,
		}
		if v >= 1 {
			m.Directories = []UUID{dirA, dirB}
		}
		if v >= 2 {
			m.EligibleLeaderReplicas = []int32{2}
			m.LastKnownELR = []int32{1}
		}
		return m
	case TypeFenceBroker:
		return &FenceBrokerRecord{ID: 1, Epoch: 2}
	case TypeUnfenceBroker:
		return &UnfenceBrokerRecord{ID: 1, Epoch: 2}
	case TypeRemoveTopic:
		return &RemoveTopicRecord{TopicID: topicA}
	case TypeFeatureLevel:
		return &FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 21}
	case TypeProducerIds:
		return &ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 4, NextProducerID: 2000}
	case TypeBrokerRegistrationChange:
		m := &BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: FenceChangeUnfence}
		if v >= 1 {
			m.InControlledShutdown = 1
		}
		if v >= 2 {
			m.LogDirs = []UUID{dirB}
		}
		return m
	case TypeBeginTransaction:
		return &BeginTransactionRecord{Name: ptr("bootstrap")}
	case TypeAbortTransaction:
		return &AbortTransactionRecord{Reason: ptr("")}
	case TypeRegisterController:
		return &RegisterControllerRecord{
			ControllerID: 3000, IncarnationID: incA, ZkMigrationReady: true,
			EndPoints: []ControllerEndpoint{{"CONTROLLER", "127.0.0.1", 9093, 0}},
			Features:  []ControllerFeature{{"kraft.version", 0, 1}, {"metadata.version", 1, 21}},
		}
	case TypeDelegationToken:
		return &DelegationTokenRecord{Owner: "User:alice", Requester: "User:bob", Renewers: []string{"User:carol", ""},
			IssueTimestamp: 1, MaxTimestamp: -2, ExpirationTimestamp: 1 << 40, TokenID: "tok-1"}
	case TypeRemoveDelegationToken:
		return &RemoveDelegationTokenRecord{TokenID: "tok-1"}
	case TypeUserScramCredential:
		return &UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512, Salt: []byte{1, 2},
			StoredKey: []byte{3}, ServerKey: []byte{0, 0, 4}, Iterations: 4096}
	case TypeRemoveUserScramCredential:
		return &RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256}
	case TypeClientQuota:
		return &ClientQuotaRecord{Entity: []ClientQuotaEntity{{"user", ptr("alice")}, {"client-id", nil}},
			Key: "producer_byte_rate", Value: 1024.5, Remove: true}
	case TypeAccessControlEntry:
		return &AccessControlEntryRecord{ID: incA, ResourceType: ACLResourceTopic, ResourceName: "foo",
			PatternType: ACLPatternPrefixed, Principal: "User:alice", Host: "*", Operation: 3,
			PermissionType: ACLPermissionAllow}
	case TypeRemoveAccessControlEntry:
		return &RemoveAccessControlEntryRecord{ID: incA}
	case TypeZkMigrationState:
		return &ZkMigrationStateRecord{ZkMigrationState: ZkMigrationPostMigration}
	}
	return nil // NoOp, EndTransaction: no fields
}

// controlSamples covers every control value type.
func controlSamples() []ControlValue {
	return []ControlValue{
		&LeaderChangeMessage{Version: 0, LeaderID: 1,
			Voters: []Voter{{VoterID: 1}, {VoterID: 2}, {VoterID: 3}}, GrantingVoters: []Voter{{VoterID: 1}}},
		&LeaderChangeMessage{Version: 1, LeaderID: 2,
			Voters: []Voter{{1, dirA}, {2, dirB}}, GrantingVoters: []Voter{{2, dirB}}},
		&LeaderChangeMessage{},
		&SnapshotHeaderRecord{Version: 0, LastContainedLogTimestamp: 1729800000000},
		&SnapshotFooterRecord{},
		&KRaftVersionRecord{Version: 0, KRaftVersion: 1},
		&VotersRecord{Version: 0, Voters: []VotersRecordVoter{
			{VoterID: 1, VoterDirectoryID: dirA,
				Endpoints:           []VotersRecordEndpoint{{"CONTROLLER", "127.0.0.1", 9093}},
				KRaftVersionFeature: KRaftVersionFeature{0, 1}},
			{VoterID: 2, VoterDirectoryID: dirB, KRaftVersionFeature: KRaftVersionFeature{0, 1}},
		}},
		&VotersRecord{},
	}
}
