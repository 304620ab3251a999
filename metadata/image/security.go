package image

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/kraftd/kraftd/metadata/records"
)

// This file keeps what the security and quota records describe: ACLs
// (Kafka's AclsImage), client quotas (ClientQuotasImage), SCRAM credentials
// (ScramImage), delegation tokens (DelegationTokenImage) and the ZooKeeper
// migration state (FeaturesImage.zkMigrationState). kraftd enforces none of
// them yet; it keeps them so that a log or snapshot written by Kafka replays,
// and writes them back into its own snapshots.

// ACL is one ACL binding, as its AccessControlEntryRecord states it.
type ACL = records.AccessControlEntryRecord

// ScramCredential is one user's credential for one mechanism. Salt,
// StoredKey and ServerKey are key material: Dump never prints them.
type ScramCredential = records.UserScramCredentialRecord

// DelegationToken is one token's information (its HMAC is not stored).
type DelegationToken = records.DelegationTokenRecord

// ScramKey names one credential.
type ScramKey struct {
	User      string
	Mechanism int8
}

func compareScramKey(a, b ScramKey) int {
	return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
}

// ClientQuota is the quota configuration of one entity.
//
// INVARIANTS: Entity is sorted by EntityType with no type twice; Values is
// sorted by Key and not empty.
type ClientQuota struct {
	Entity []records.ClientQuotaEntity
	Values []QuotaValue
}

// QuotaValue is one quota key and its value.
type QuotaValue struct {
	Key   string
	Value float64
}

// quotaEntityKey is an entity's canonical text: type=name pairs sorted by
// type, a null name written as <default>. Entity types and names cannot
// hold the separators' escaped forms, so two entities share a key exactly
// when Kafka's ClientQuotaEntity maps are equal.
func quotaEntityKey(entity []records.ClientQuotaEntity) string {
	var sb strings.Builder
	for i, e := range entity {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(quoteEntityPart(e.EntityType))
		sb.WriteByte('=')
		if e.EntityName == nil {
			sb.WriteString("<default>")
		} else {
			sb.WriteString(quoteEntityPart(*e.EntityName))
		}
	}
	return sb.String()
}

// quoteEntityPart escapes the separators so that the key is unambiguous.
func quoteEntityPart(s string) string {
	if !strings.ContainsAny(s, `,=<>\`) {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `=`, `\=`, `<`, `\<`, `>`, `\>`)
	return r.Replace(s)
}

// canonicalEntity is Kafka's ClientQuotaEntity map as a sorted list: the
// last name given for a type wins, as when the record's list is put into a
// map.
func canonicalEntity(in []records.ClientQuotaEntity) []records.ClientQuotaEntity {
	byType := map[string]*string{}
	for _, e := range in {
		byType[e.EntityType] = e.EntityName
	}
	out := make([]records.ClientQuotaEntity, 0, len(byType))
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		out = append(out, records.ClientQuotaEntity{EntityType: t, EntityName: cloneString(byType[t])})
	}
	return out
}

// security is the part of an image the security and quota records build.
// Values are never written once they belong to an image.
type security struct {
	acls   ptree[records.UUID, *ACL]
	quotas ptree[string, *ClientQuota]
	scram  ptree[ScramKey, *ScramCredential]
	tokens ptree[string, *DelegationToken]
	// zkMigration is the last ZkMigrationStateRecord's state, None (0)
	// until one is replayed, as Kafka's FeaturesImage starts.
	zkMigration int8
}

func emptySecurity() security {
	return security{
		acls:   newPtree[records.UUID, *ACL](compareUUID),
		quotas: newPtree[string, *ClientQuota](strings.Compare),
		scram:  newPtree[ScramKey, *ScramCredential](compareScramKey),
		tokens: newPtree[string, *DelegationToken](strings.Compare),
	}
}

func (s *security) isEmpty() bool {
	return s.acls.Len() == 0 && s.quotas.Len() == 0 && s.scram.Len() == 0 && s.tokens.Len() == 0 && s.zkMigration == records.ZkMigrationNone
}

// securityDelta holds the changes of one Delta; a nil value means removed.
type securityDelta struct {
	acls        map[records.UUID]*ACL
	quotas      map[string]*ClientQuota
	scram       map[ScramKey]*ScramCredential
	tokens      map[string]*DelegationToken
	zkMigration *int8
}

func lookup[K comparable, V any](changes map[K]*V, base ptree[K, *V], k K) (*V, bool) {
	if v, ok := changes[k]; ok {
		return v, v != nil
	}
	return base.Get(k)
}

func applyChanges[K comparable, V any](t ptree[K, *V], changes map[K]*V, compare func(a, b K) int) ptree[K, *V] {
	if len(changes) == 0 {
		return t
	}
	for _, k := range slices.SortedFunc(maps.Keys(changes), compare) {
		if v := changes[k]; v == nil {
			t = t.Delete(k)
		} else {
			t = t.Set(k, v)
		}
	}
	return t
}

func (d *Delta) replayACL(r *records.AccessControlEntryRecord) error {
	if r.ID == (records.UUID{}) {
		return fmt.Errorf("%w: ACL with the zero id", ErrInvalidRecord)
	}
	acl := *r
	put(&d.security.acls, r.ID, &acl)
	return nil
}

// replayRemoveACL fails for an id it does not hold, as Kafka's
// AclControlManager does.
func (d *Delta) replayRemoveACL(r *records.RemoveAccessControlEntryRecord) error {
	if _, ok := lookup(d.security.acls, d.base.security.acls, r.ID); !ok {
		return fmt.Errorf("%w: no ACL with id %s", ErrInvalidRecord, r.ID)
	}
	put(&d.security.acls, r.ID, nil)
	return nil
}

// replayClientQuota sets or removes one key; an entity left without keys
// disappears, as in Kafka's ClientQuotaControlManager.
func (d *Delta) replayClientQuota(r *records.ClientQuotaRecord) error {
	entity := canonicalEntity(r.Entity)
	if len(entity) == 0 {
		return fmt.Errorf("%w: client quota with an empty entity", ErrInvalidRecord)
	}
	key := quotaEntityKey(entity)
	var values []QuotaValue
	if cur, ok := lookup(d.security.quotas, d.base.security.quotas, key); ok {
		values = slices.Clone(cur.Values)
	}
	i, found := slices.BinarySearchFunc(values, r.Key, func(v QuotaValue, k string) int { return cmp.Compare(v.Key, k) })
	switch {
	case r.Remove && found:
		values = slices.Delete(values, i, i+1)
	case r.Remove:
	case found:
		values[i].Value = r.Value
	default:
		values = slices.Insert(values, i, QuotaValue{Key: r.Key, Value: r.Value})
	}
	if len(values) == 0 {
		put(&d.security.quotas, key, nil)
		return nil
	}
	put(&d.security.quotas, key, &ClientQuota{Entity: entity, Values: values})
	return nil
}

func (d *Delta) replayScram(r *records.UserScramCredentialRecord) error {
	c := *r
	c.Salt, c.StoredKey, c.ServerKey = slices.Clone(r.Salt), slices.Clone(r.StoredKey), slices.Clone(r.ServerKey)
	put(&d.security.scram, ScramKey{r.Name, r.Mechanism}, &c)
	return nil
}

// replayRemoveScram fails for a credential it does not hold, as Kafka's
// ScramControlManager does.
func (d *Delta) replayRemoveScram(r *records.RemoveUserScramCredentialRecord) error {
	k := ScramKey{r.Name, r.Mechanism}
	if _, ok := lookup(d.security.scram, d.base.security.scram, k); !ok {
		return fmt.Errorf("%w: no SCRAM credential for %q mechanism %d", ErrInvalidRecord, r.Name, r.Mechanism)
	}
	put(&d.security.scram, k, nil)
	return nil
}

func (d *Delta) replayDelegationToken(r *records.DelegationTokenRecord) error {
	t := *r
	t.Renewers = slices.Clone(r.Renewers)
	put(&d.security.tokens, r.TokenID, &t)
	return nil
}

// replayRemoveDelegationToken accepts an unknown token, as Kafka's
// DelegationTokenDelta does (an expiry may race a removal).
func (d *Delta) replayRemoveDelegationToken(r *records.RemoveDelegationTokenRecord) error {
	put(&d.security.tokens, r.TokenID, nil)
	return nil
}

func (d *Delta) replayZkMigration(r *records.ZkMigrationStateRecord) error {
	if r.ZkMigrationState < records.ZkMigrationNone || r.ZkMigrationState > records.ZkMigrationPostMigration {
		return fmt.Errorf("%w: ZooKeeper migration state %d", ErrInvalidRecord, r.ZkMigrationState)
	}
	s := r.ZkMigrationState
	d.security.zkMigration = &s
	return nil
}

func (d *Delta) applySecurity() security {
	base := d.base.security
	if d.security.empty() {
		return base
	}
	next := security{
		acls:        applyChanges(base.acls, d.security.acls, compareUUID),
		quotas:      applyChanges(base.quotas, d.security.quotas, strings.Compare),
		scram:       applyChanges(base.scram, d.security.scram, compareScramKey),
		tokens:      applyChanges(base.tokens, d.security.tokens, strings.Compare),
		zkMigration: base.zkMigration,
	}
	if z := d.security.zkMigration; z != nil {
		next.zkMigration = *z
	}
	return next
}

// SecurityChanged reports whether an ACL, quota, SCRAM, delegation-token or
// migration-state record was replayed.
func (d *Delta) SecurityChanged() bool { return !d.security.empty() }

func (s *securityDelta) empty() bool {
	return s.acls == nil && s.quotas == nil && s.scram == nil && s.tokens == nil && s.zkMigration == nil
}

// ACLs returns every ACL binding, sorted by id.
func (img *Image) ACLs() []ACL { return values(img.security.acls) }

// ACL returns the binding with id.
func (img *Image) ACL(id records.UUID) (ACL, bool) {
	a, ok := img.security.acls.Get(id)
	if !ok {
		return ACL{}, false
	}
	return *a, true
}

// ClientQuotas returns every entity's quotas, sorted by entity.
func (img *Image) ClientQuotas() []ClientQuota { return values(img.security.quotas) }

// ScramCredentials returns every SCRAM credential, sorted by user then
// mechanism. They hold key material; never log them.
func (img *Image) ScramCredentials() []ScramCredential { return values(img.security.scram) }

// DelegationTokens returns every delegation token, sorted by token id.
func (img *Image) DelegationTokens() []DelegationToken { return values(img.security.tokens) }

// ZkMigrationState returns the ZooKeeper migration state (ZkMigrationNone
// unless the log says otherwise).
func (img *Image) ZkMigrationState() int8 { return img.security.zkMigration }

func values[K, V any](t ptree[K, *V]) []V {
	out := make([]V, 0, t.Len())
	for _, v := range t.All() {
		out = append(out, *v)
	}
	return out
}

// zkMigrationRecords is written right after the feature levels, as Kafka's
// FeaturesImage.write does from metadata.version 3.4-IV0 (migration
// support) on, whatever the state; below it a state other than None cannot
// be written (Kafka reports the loss) and is left out.
func (s *security) zkMigrationRecords(mv int16) []records.Record {
	if mv < MV34IV0 {
		return nil
	}
	return []records.Record{{Message: &records.ZkMigrationStateRecord{ZkMigrationState: s.zkMigration}}}
}

// quotaRecords, securityRecords: the records that rebuild the rest, in
// Kafka's MetadataImage.write order (client quotas before producer ids,
// then ACLs, SCRAM credentials and delegation tokens).
func (s *security) quotaRecords() []records.Record {
	var out []records.Record
	for _, q := range s.quotas.All() {
		for _, v := range q.Values {
			out = append(out, records.Record{Message: &records.ClientQuotaRecord{
				Entity: q.Entity, Key: v.Key, Value: v.Value}})
		}
	}
	return out
}

func (s *security) securityRecords() []records.Record {
	var out []records.Record
	for _, a := range s.acls.All() {
		out = append(out, records.Record{Message: a})
	}
	for _, c := range s.scram.All() {
		out = append(out, records.Record{Message: c})
	}
	for _, t := range s.tokens.All() {
		out = append(out, records.Record{Message: t})
	}
	return out
}

// dumpSecurity writes the Dump lines. SCRAM key material is left out.
func (s *security) dump(w io.Writer) {
	if s.zkMigration != records.ZkMigrationNone {
		fmt.Fprintf(w, "zkMigrationState %d\n", s.zkMigration)
	}
	for k, q := range s.quotas.All() {
		for _, v := range q.Values {
			fmt.Fprintf(w, "quota %s %s=%v\n", k, v.Key, v.Value)
		}
	}
	for id, a := range s.acls.All() {
		fmt.Fprintf(w, "acl %s resourceType=%d resourceName=%q patternType=%d principal=%q host=%q operation=%d permissionType=%d\n",
			id, a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.PermissionType)
	}
	for k, c := range s.scram.All() {
		fmt.Fprintf(w, "scram %q mechanism=%d iterations=%d salt=%s storedKey=%s serverKey=%s\n",
			k.User, k.Mechanism, c.Iterations, records.Redacted, records.Redacted, records.Redacted)
	}
	for id, t := range s.tokens.All() {
		fmt.Fprintf(w, "delegationToken %q owner=%q requester=%q renewers=%q issue=%d max=%d expiration=%d\n",
			id, t.Owner, t.Requester, t.Renewers, t.IssueTimestamp, t.MaxTimestamp, t.ExpirationTimestamp)
	}
}

// writeSecrets writes what Dump leaves out, the SCRAM key material, for
// Hash only.
func (s *security) writeSecrets(w io.Writer) {
	for k, c := range s.scram.All() {
		fmt.Fprintf(w, "%q %d %x %x %x\n", k.User, k.Mechanism, c.Salt, c.StoredKey, c.ServerKey)
	}
}

// equal compares two security states in full.
func (s *security) equal(o *security) bool {
	var a, b strings.Builder
	s.dump(&a)
	o.dump(&b)
	return a.String() == b.String() && s.secretsEqual(o)
}

// secretsEqual compares what Dump leaves out: the SCRAM key material.
func (s *security) secretsEqual(o *security) bool {
	if s.scram.Len() != o.scram.Len() {
		return false
	}
	for k, c := range s.scram.All() {
		oc, ok := o.scram.Get(k)
		if !ok || !bytes.Equal(c.Salt, oc.Salt) || !bytes.Equal(c.StoredKey, oc.StoredKey) ||
			!bytes.Equal(c.ServerKey, oc.ServerKey) {
			return false
		}
	}
	return true
}
