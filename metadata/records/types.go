package records

import (
	"fmt"
	"strconv"
)

// Type is a metadata record type: the schema's apiKey, written as a uvarint
// in the ApiMessageAndVersion frame.
type Type int16

// Record types, numbered as Kafka's metadata/*.json schemas. Ids 6, 13 and 16
// are retired and never written; the other 25 are all here.
const (
	TypeRegisterBroker            Type = 0
	TypeUnregisterBroker          Type = 1
	TypeTopic                     Type = 2
	TypePartition                 Type = 3
	TypeConfig                    Type = 4
	TypePartitionChange           Type = 5
	TypeFenceBroker               Type = 7
	TypeUnfenceBroker             Type = 8
	TypeRemoveTopic               Type = 9
	TypeDelegationToken           Type = 10
	TypeUserScramCredential       Type = 11
	TypeFeatureLevel              Type = 12
	TypeClientQuota               Type = 14
	TypeProducerIds               Type = 15
	TypeBrokerRegistrationChange  Type = 17
	TypeAccessControlEntry        Type = 18
	TypeRemoveAccessControlEntry  Type = 19
	TypeNoOp                      Type = 20
	TypeZkMigrationState          Type = 21
	TypeRemoveUserScramCredential Type = 22
	TypeBeginTransaction          Type = 23
	TypeEndTransaction            Type = 24
	TypeAbortTransaction          Type = 25
	TypeRemoveDelegationToken     Type = 26
	TypeRegisterController        Type = 27
)

// typeInfo is one row of the registry: Kafka's MetadataRecordType name and a
// constructor returning a defaulted message.
type typeInfo struct {
	name string
	make func() Message
}

// registry is immutable after package initialisation; it is a lookup table,
// not mutable state.
var registry = map[Type]typeInfo{
	TypeRegisterBroker:            {"REGISTER_BROKER_RECORD", maker[RegisterBrokerRecord]()},
	TypeUnregisterBroker:          {"UNREGISTER_BROKER_RECORD", maker[UnregisterBrokerRecord]()},
	TypeTopic:                     {"TOPIC_RECORD", maker[TopicRecord]()},
	TypePartition:                 {"PARTITION_RECORD", maker[PartitionRecord]()},
	TypeConfig:                    {"CONFIG_RECORD", maker[ConfigRecord]()},
	TypePartitionChange:           {"PARTITION_CHANGE_RECORD", maker[PartitionChangeRecord]()},
	TypeFenceBroker:               {"FENCE_BROKER_RECORD", maker[FenceBrokerRecord]()},
	TypeUnfenceBroker:             {"UNFENCE_BROKER_RECORD", maker[UnfenceBrokerRecord]()},
	TypeRemoveTopic:               {"REMOVE_TOPIC_RECORD", maker[RemoveTopicRecord]()},
	TypeFeatureLevel:              {"FEATURE_LEVEL_RECORD", maker[FeatureLevelRecord]()},
	TypeProducerIds:               {"PRODUCER_IDS_RECORD", maker[ProducerIdsRecord]()},
	TypeBrokerRegistrationChange:  {"BROKER_REGISTRATION_CHANGE_RECORD", maker[BrokerRegistrationChangeRecord]()},
	TypeNoOp:                      {"NO_OP_RECORD", maker[NoOpRecord]()},
	TypeDelegationToken:           {"DELEGATION_TOKEN_RECORD", maker[DelegationTokenRecord]()},
	TypeUserScramCredential:       {"USER_SCRAM_CREDENTIAL_RECORD", maker[UserScramCredentialRecord]()},
	TypeClientQuota:               {"CLIENT_QUOTA_RECORD", maker[ClientQuotaRecord]()},
	TypeAccessControlEntry:        {"ACCESS_CONTROL_ENTRY_RECORD", maker[AccessControlEntryRecord]()},
	TypeRemoveAccessControlEntry:  {"REMOVE_ACCESS_CONTROL_ENTRY_RECORD", maker[RemoveAccessControlEntryRecord]()},
	TypeZkMigrationState:          {"ZK_MIGRATION_STATE_RECORD", maker[ZkMigrationStateRecord]()},
	TypeRemoveUserScramCredential: {"REMOVE_USER_SCRAM_CREDENTIAL_RECORD", maker[RemoveUserScramCredentialRecord]()},
	TypeRemoveDelegationToken:     {"REMOVE_DELEGATION_TOKEN_RECORD", maker[RemoveDelegationTokenRecord]()},
	TypeBeginTransaction:          {"BEGIN_TRANSACTION_RECORD", maker[BeginTransactionRecord]()},
	TypeEndTransaction:            {"END_TRANSACTION_RECORD", maker[EndTransactionRecord]()},
	TypeAbortTransaction:          {"ABORT_TRANSACTION_RECORD", maker[AbortTransactionRecord]()},
	TypeRegisterController:        {"REGISTER_CONTROLLER_RECORD", maker[RegisterControllerRecord]()},
}

// defaulted is a pointer message type that can reset itself to its schema
// defaults; every message in this package satisfies it.
type defaulted[T any] interface {
	*T
	Message
	Default()
}

// maker returns a constructor of defaulted messages of type T.
func maker[T any, P defaulted[T]]() func() Message {
	return func() Message {
		p := P(new(T))
		p.Default()
		return p
	}
}

// String returns Kafka's MetadataRecordType name, e.g. "TOPIC_RECORD", as
// kafka-dump-log prints it; unknown types print as "UNKNOWN_RECORD(n)".
func (t Type) String() string {
	if info, ok := registry[t]; ok {
		return info.name
	}
	return "UNKNOWN_RECORD(" + strconv.Itoa(int(t)) + ")"
}

// Types returns every record type this package can decode, in id order.
func Types() []Type {
	out := make([]Type, 0, len(registry))
	for t := range Type(28) {
		if _, ok := registry[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Message is one metadata record body. Implementations are pointers to the
// structs in this package.
type Message interface {
	// Type is the schema's apiKey.
	Type() Type
	// LowestVersion and HighestVersion bound the schema's validVersions.
	LowestVersion() int16
	HighestVersion() int16
	// AppendTo appends the body (no frame) encoded at version. It fails with
	// ErrUnsupportedVersion outside the valid range and with
	// ErrFieldNotInVersion when a non-default field cannot be carried.
	AppendTo(dst []byte, version int16) ([]byte, error)
	// ReadFrom replaces the message with the body in b, decoded at version.
	// The whole slice must be consumed.
	ReadFrom(b []byte, version int16) error
}

// New returns a zero message of type t with its schema defaults applied
// (e.g. RegisterBrokerRecord.Fenced = true, PartitionChangeRecord.Leader = -2).
func New(t Type) (Message, error) {
	info, ok := registry[t]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, t)
	}
	return info.make(), nil
}

// checkVersion rejects a version outside m's validVersions.
func checkVersion(m Message, version int16) error {
	if version < m.LowestVersion() || version > m.HighestVersion() {
		return fmt.Errorf("%w: %s version %d (valid %d-%d)", ErrUnsupportedVersion,
			m.Type(), version, m.LowestVersion(), m.HighestVersion())
	}
	return nil
}
