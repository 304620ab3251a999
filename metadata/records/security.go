package records

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// The security and quota records: ACLs (KIP-801's StandardAuthorizer state),
// client quotas, SCRAM credentials (KIP-554), delegation tokens (KIP-900)
// and the ZooKeeper migration state (KIP-866). Every schema is version 0 only
// and has no tagged fields, as of Kafka 4.0 (apache/kafka trunk 1eb7644,
// 2024-10-25, metadata/src/main/resources/common/metadata/*.json).

// DelegationTokenRecord (apiKey 10, version 0) creates or renews a
// delegation token. The token's HMAC is not in the record: brokers derive it
// from TokenID and their delegation.token.secret.key.
type DelegationTokenRecord struct {
	Owner               string
	Requester           string
	Renewers            []string
	IssueTimestamp      int64
	MaxTimestamp        int64
	ExpirationTimestamp int64
	TokenID             string
}

func (*DelegationTokenRecord) Type() Type            { return TypeDelegationToken }
func (*DelegationTokenRecord) LowestVersion() int16  { return 0 }
func (*DelegationTokenRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *DelegationTokenRecord) Default() { *m = DelegationTokenRecord{} }

func (m *DelegationTokenRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("DelegationTokenRecord", append([]string{m.Owner, m.Requester, m.TokenID}, m.Renewers...)...); err != nil {
		return b, err
	}
	b = appendString(b, m.Owner)
	b = appendString(b, m.Requester)
	b = appendStrings(b, m.Renewers)
	b = appendInt64(b, m.IssueTimestamp)
	b = appendInt64(b, m.MaxTimestamp)
	b = appendInt64(b, m.ExpirationTimestamp)
	b = appendString(b, m.TokenID)
	return appendNoTags(b), nil
}

func (m *DelegationTokenRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.Owner = r.string()
	m.Requester = r.string()
	m.Renewers = r.strings()
	m.IssueTimestamp = r.int64()
	m.MaxTimestamp = r.int64()
	m.ExpirationTimestamp = r.int64()
	m.TokenID = r.string()
	r.skipTags()
	return r.done()
}

func (m *DelegationTokenRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("owner", m.Owner)
	o.add("requester", m.Requester)
	o.add("renewers", orEmpty(m.Renewers))
	o.add("issueTimestamp", m.IssueTimestamp)
	o.add("maxTimestamp", m.MaxTimestamp)
	o.add("expirationTimestamp", m.ExpirationTimestamp)
	o.add("tokenId", m.TokenID)
}

// RemoveDelegationTokenRecord (apiKey 26, version 0) expires a token.
type RemoveDelegationTokenRecord struct {
	TokenID string
}

func (*RemoveDelegationTokenRecord) Type() Type            { return TypeRemoveDelegationToken }
func (*RemoveDelegationTokenRecord) LowestVersion() int16  { return 0 }
func (*RemoveDelegationTokenRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *RemoveDelegationTokenRecord) Default() { *m = RemoveDelegationTokenRecord{} }

func (m *RemoveDelegationTokenRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("RemoveDelegationTokenRecord", m.TokenID); err != nil {
		return b, err
	}
	return appendNoTags(appendString(b, m.TokenID)), nil
}

func (m *RemoveDelegationTokenRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.TokenID = r.string()
	r.skipTags()
	return r.done()
}

func (m *RemoveDelegationTokenRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("tokenId", m.TokenID)
}

// SCRAM mechanisms as Kafka's ScramMechanism numbers them.
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

// UserScramCredentialRecord (apiKey 11, version 0) sets one user's SCRAM
// credential for one mechanism. Salt, StoredKey and ServerKey are key
// material: the JSON form prints them as "(redacted)", as Kafka's
// RecordRedactor does when it logs the record.
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

func (*UserScramCredentialRecord) Type() Type            { return TypeUserScramCredential }
func (*UserScramCredentialRecord) LowestVersion() int16  { return 0 }
func (*UserScramCredentialRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero, empty bytes).
func (m *UserScramCredentialRecord) Default() { *m = UserScramCredentialRecord{} }

func (m *UserScramCredentialRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("UserScramCredentialRecord", m.Name); err != nil {
		return b, err
	}
	b = appendString(b, m.Name)
	b = appendInt8(b, m.Mechanism)
	b = appendBytes(b, m.Salt)
	b = appendBytes(b, m.StoredKey)
	b = appendBytes(b, m.ServerKey)
	b = appendInt32(b, m.Iterations)
	return appendNoTags(b), nil
}

func (m *UserScramCredentialRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.Name = r.string()
	m.Mechanism = r.int8()
	m.Salt = r.bytes()
	m.StoredKey = r.bytes()
	m.ServerKey = r.bytes()
	m.Iterations = r.int32()
	r.skipTags()
	return r.done()
}

// Redacted is what the JSON forms print in place of secrets.
const Redacted = "(redacted)"

func (m *UserScramCredentialRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("name", m.Name)
	o.add("mechanism", m.Mechanism)
	o.add("salt", Redacted)
	o.add("storedKey", Redacted)
	o.add("serverKey", Redacted)
	o.add("iterations", m.Iterations)
}

// RemoveUserScramCredentialRecord (apiKey 22, version 0) deletes one user's
// credential for one mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

func (*RemoveUserScramCredentialRecord) Type() Type            { return TypeRemoveUserScramCredential }
func (*RemoveUserScramCredentialRecord) LowestVersion() int16  { return 0 }
func (*RemoveUserScramCredentialRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *RemoveUserScramCredentialRecord) Default() { *m = RemoveUserScramCredentialRecord{} }

func (m *RemoveUserScramCredentialRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("RemoveUserScramCredentialRecord", m.Name); err != nil {
		return b, err
	}
	b = appendString(b, m.Name)
	b = appendInt8(b, m.Mechanism)
	return appendNoTags(b), nil
}

func (m *RemoveUserScramCredentialRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.Name = r.string()
	m.Mechanism = r.int8()
	r.skipTags()
	return r.done()
}

func (m *RemoveUserScramCredentialRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("name", m.Name)
	o.add("mechanism", m.Mechanism)
}

// ClientQuotaEntity is one (type, name) part of a quota entity, e.g.
// ("user", "alice") or ("client-id", nil) for the default client id.
type ClientQuotaEntity struct {
	EntityType string
	EntityName *string // nil = the default entity of this type
}

// ClientQuotaRecord (apiKey 14, version 0) sets (or, with Remove, deletes)
// one quota key of one entity.
type ClientQuotaRecord struct {
	Entity []ClientQuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) Type() Type            { return TypeClientQuota }
func (*ClientQuotaRecord) LowestVersion() int16  { return 0 }
func (*ClientQuotaRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *ClientQuotaRecord) Default() { *m = ClientQuotaRecord{} }

func (m *ClientQuotaRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	ss := []string{m.Key}
	for _, e := range m.Entity {
		ss = append(ss, e.EntityType, deref(e.EntityName))
	}
	if err := checkStrings("ClientQuotaRecord", ss...); err != nil {
		return b, err
	}
	b = appendArrayLen(b, len(m.Entity), false)
	for _, e := range m.Entity {
		b = appendString(b, e.EntityType)
		b = appendNullableString(b, e.EntityName)
		b = appendNoTags(b)
	}
	b = appendString(b, m.Key)
	b = appendFloat64(b, m.Value)
	b = appendBool(b, m.Remove)
	return appendNoTags(b), nil
}

func (m *ClientQuotaRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	// Smallest entity: a one-byte type, the null name marker, no tags.
	m.Entity = structs(&r, 3, func(r *reader, e *ClientQuotaEntity) {
		e.EntityType = r.string()
		e.EntityName = r.nullableString()
		r.skipTags()
	})
	m.Key = r.string()
	m.Value = r.float64()
	m.Remove = r.bool()
	r.skipTags()
	return r.done()
}

func (m *ClientQuotaRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("entity", jsonArray(m.Entity, func(o *jsonObject, e *ClientQuotaEntity) {
		o.add("entityType", e.EntityType)
		o.add("entityName", e.EntityName)
	}))
	o.add("key", m.Key)
	o.add("value", javaDouble(m.Value))
	o.add("remove", m.Remove)
}

// javaDouble prints v as Jackson prints a DoubleNode: Java's
// Double.toString (1024.0, 1.0E7, 1.0E-4), with NaN and the infinities as
// strings (Jackson's default WRITE_NAN_AS_STRINGS).
func javaDouble(v float64) json.RawMessage {
	switch {
	case math.IsNaN(v):
		return json.RawMessage(`"NaN"`)
	case math.IsInf(v, 1):
		return json.RawMessage(`"Infinity"`)
	case math.IsInf(v, -1):
		return json.RawMessage(`"-Infinity"`)
	}
	if a := math.Abs(v); a == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		if v == 0 && math.Signbit(v) {
			s = "-0.0"
		}
		return json.RawMessage(s)
	}
	s := strconv.FormatFloat(v, 'E', -1, 64) // 1.5E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return json.RawMessage(mant + "E" + strconv.Itoa(e))
}

// Standard ACL values, as Kafka's ResourceType, PatternType, AclOperation
// and AclPermissionType number them.
const (
	ACLResourceTopic           int8 = 2
	ACLResourceGroup           int8 = 3
	ACLResourceCluster         int8 = 4
	ACLResourceTransactionalID int8 = 5
	ACLResourceDelegationToken int8 = 6
	ACLResourceUser            int8 = 7

	ACLPatternLiteral  int8 = 3
	ACLPatternPrefixed int8 = 4

	ACLPermissionDeny  int8 = 2
	ACLPermissionAllow int8 = 3
)

// AccessControlEntryRecord (apiKey 18, version 0) adds one ACL binding,
// identified by ID.
type AccessControlEntryRecord struct {
	ID             UUID
	ResourceType   int8
	ResourceName   string
	PatternType    int8
	Principal      string
	Host           string
	Operation      int8
	PermissionType int8
}

func (*AccessControlEntryRecord) Type() Type            { return TypeAccessControlEntry }
func (*AccessControlEntryRecord) LowestVersion() int16  { return 0 }
func (*AccessControlEntryRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *AccessControlEntryRecord) Default() { *m = AccessControlEntryRecord{} }

func (m *AccessControlEntryRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("AccessControlEntryRecord", m.ResourceName, m.Principal, m.Host); err != nil {
		return b, err
	}
	b = appendUUID(b, m.ID)
	b = appendInt8(b, m.ResourceType)
	b = appendString(b, m.ResourceName)
	b = appendInt8(b, m.PatternType)
	b = appendString(b, m.Principal)
	b = appendString(b, m.Host)
	b = appendInt8(b, m.Operation)
	b = appendInt8(b, m.PermissionType)
	return appendNoTags(b), nil
}

func (m *AccessControlEntryRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.ID = r.uuid()
	m.ResourceType = r.int8()
	m.ResourceName = r.string()
	m.PatternType = r.int8()
	m.Principal = r.string()
	m.Host = r.string()
	m.Operation = r.int8()
	m.PermissionType = r.int8()
	r.skipTags()
	return r.done()
}

func (m *AccessControlEntryRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("id", m.ID)
	o.add("resourceType", m.ResourceType)
	o.add("resourceName", m.ResourceName)
	o.add("patternType", m.PatternType)
	o.add("principal", m.Principal)
	o.add("host", m.Host)
	o.add("operation", m.Operation)
	o.add("permissionType", m.PermissionType)
}

// RemoveAccessControlEntryRecord (apiKey 19, version 0) deletes the ACL
// binding with ID.
type RemoveAccessControlEntryRecord struct {
	ID UUID
}

func (*RemoveAccessControlEntryRecord) Type() Type            { return TypeRemoveAccessControlEntry }
func (*RemoveAccessControlEntryRecord) LowestVersion() int16  { return 0 }
func (*RemoveAccessControlEntryRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *RemoveAccessControlEntryRecord) Default() { *m = RemoveAccessControlEntryRecord{} }

func (m *RemoveAccessControlEntryRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendNoTags(appendUUID(b, m.ID)), nil
}

func (m *RemoveAccessControlEntryRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.ID = r.uuid()
	r.skipTags()
	return r.done()
}

func (m *RemoveAccessControlEntryRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("id", m.ID)
}

// ZooKeeper migration states as Kafka 3.5+ numbers them (3.4 had 1 and 2
// the other way round, but never wrote either).
const (
	ZkMigrationNone          int8 = 0
	ZkMigrationMigration     int8 = 1
	ZkMigrationPreMigration  int8 = 2
	ZkMigrationPostMigration int8 = 3
)

// ZkMigrationStateRecord (apiKey 21, version 0) marks the start and end of a
// ZooKeeper-to-KRaft migration (KIP-866). Kafka 3.5-3.9 writes one with
// state None into the log of every cluster created in KRaft mode.
type ZkMigrationStateRecord struct {
	ZkMigrationState int8
}

func (*ZkMigrationStateRecord) Type() Type            { return TypeZkMigrationState }
func (*ZkMigrationStateRecord) LowestVersion() int16  { return 0 }
func (*ZkMigrationStateRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (state 0, None).
func (m *ZkMigrationStateRecord) Default() { *m = ZkMigrationStateRecord{} }

func (m *ZkMigrationStateRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendNoTags(appendInt8(b, m.ZkMigrationState)), nil
}

func (m *ZkMigrationStateRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.ZkMigrationState = r.int8()
	r.skipTags()
	return r.done()
}

func (m *ZkMigrationStateRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("zkMigrationState", m.ZkMigrationState)
}
