package image

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

// securityLog is what a Kafka 3.5-3.9 cluster's log may hold besides topics:
// the migration state every new cluster writes, ACLs, quotas, SCRAM
// credentials and delegation tokens, some of them removed again.
func securityLog() []records.Record {
	aclA, aclB := records.UUID{0xa1}, records.UUID{0xa2}
	alice := "alice"
	return []records.Record{
		rec(&records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 21}),
		rec(&records.ZkMigrationStateRecord{ZkMigrationState: records.ZkMigrationNone}),
		rec(&records.AccessControlEntryRecord{ID: aclA, ResourceType: records.ACLResourceTopic, ResourceName: "orders",
			PatternType: records.ACLPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3,
			PermissionType: records.ACLPermissionAllow}),
		rec(&records.AccessControlEntryRecord{ID: aclB, ResourceType: records.ACLResourceGroup, ResourceName: "g",
			PatternType: records.ACLPatternPrefixed, Principal: "User:bob", Host: "10.0.0.1", Operation: 2,
			PermissionType: records.ACLPermissionDeny}),
		rec(&records.RemoveAccessControlEntryRecord{ID: aclB}),
		rec(&records.ClientQuotaRecord{Entity: []records.ClientQuotaEntity{{EntityType: "user", EntityName: &alice},
			{EntityType: "client-id"}}, Key: "producer_byte_rate", Value: 1024}),
		// The same entity with its parts the other way round.
		rec(&records.ClientQuotaRecord{Entity: []records.ClientQuotaEntity{{EntityType: "client-id"},
			{EntityType: "user", EntityName: &alice}}, Key: "consumer_byte_rate", Value: 2048.5}),
		rec(&records.ClientQuotaRecord{Entity: []records.ClientQuotaEntity{{EntityType: "user"}},
			Key: "request_percentage", Value: 50}),
		rec(&records.ClientQuotaRecord{Entity: []records.ClientQuotaEntity{{EntityType: "user"}},
			Key: "request_percentage", Remove: true}),
		rec(&records.UserScramCredentialRecord{Name: "alice", Mechanism: records.ScramSHA256,
			Salt: []byte("SALT-SECRET"), StoredKey: []byte("STORED-SECRET"), ServerKey: []byte("SERVER-SECRET"), Iterations: 4096}),
		rec(&records.UserScramCredentialRecord{Name: "alice", Mechanism: records.ScramSHA512,
			Salt: []byte("s2"), StoredKey: []byte("k2"), ServerKey: []byte("v2"), Iterations: 8192}),
		rec(&records.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: records.ScramSHA512}),
		rec(&records.DelegationTokenRecord{Owner: "User:alice", Requester: "User:alice", Renewers: []string{"User:bob"},
			IssueTimestamp: 1, MaxTimestamp: 100, ExpirationTimestamp: 50, TokenID: "tok-1"}),
		rec(&records.DelegationTokenRecord{Owner: "User:bob", TokenID: "tok-2"}),
		rec(&records.RemoveDelegationTokenRecord{TokenID: "tok-2"}),
		rec(&records.ZkMigrationStateRecord{ZkMigrationState: records.ZkMigrationPostMigration}),
	}
}

func TestSecurityRecordsReplay(t *testing.T) {
	img := replayAll(t, Empty(), securityLog(), 0)
	if acls := img.ACLs(); len(acls) != 1 || acls[0].ResourceName != "orders" || acls[0].Principal != "User:alice" {
		t.Fatalf("ACLs: %+v", acls)
	}
	qs := img.ClientQuotas()
	if len(qs) != 1 || len(qs[0].Entity) != 2 || qs[0].Entity[0].EntityType != "client-id" ||
		fmt.Sprint(qs[0].Values) != "[{consumer_byte_rate 2048.5} {producer_byte_rate 1024}]" {
		t.Fatalf("quotas: %+v", qs)
	}
	if cs := img.ScramCredentials(); len(cs) != 1 || cs[0].Mechanism != records.ScramSHA256 || string(cs[0].Salt) != "SALT-SECRET" {
		t.Fatalf("SCRAM: %+v", cs)
	}
	if ts := img.DelegationTokens(); len(ts) != 1 || ts[0].TokenID != "tok-1" || ts[0].Renewers[0] != "User:bob" {
		t.Fatalf("tokens: %+v", ts)
	}
	if s := img.ZkMigrationState(); s != records.ZkMigrationPostMigration {
		t.Fatalf("migration state %d", s)
	}
	want := `zkMigrationState 3
quota client-id=<default>,user=alice consumer_byte_rate=2048.5
quota client-id=<default>,user=alice producer_byte_rate=1024
acl oQAAAAAAAAAAAAAAAAAAAA resourceType=2 resourceName="orders" patternType=3 principal="User:alice" host="*" operation=3 permissionType=3
scram "alice" mechanism=1 iterations=4096 salt=(redacted) storedKey=(redacted) serverKey=(redacted)
delegationToken "tok-1" owner="User:alice" requester="User:alice" renewers=["User:bob"] issue=1 max=100 expiration=50
`
	dump := stateDump(img)
	if !strings.HasSuffix(dump, want) {
		t.Fatalf("dump:\n%s\nwant it to end with:\n%s", dump, want)
	}
	if strings.Contains(dump, "SECRET") || strings.Contains(dump, fmt.Sprintf("%x", "SALT-SECRET")) {
		t.Fatalf("dump shows key material:\n%s", dump)
	}
}

// TestSecuritySnapshotRoundTrip: a snapshot of the image (its records, through
// the wire codec) rebuilds it exactly, key material included, and an image
// that differs only in a SCRAM salt is not Equal.
func TestSecuritySnapshotRoundTrip(t *testing.T) {
	img := replayAll(t, Empty(), securityLog(), 0)
	got := rebuild(t, img)
	if !got.Equal(img) || got.Hash() != img.Hash() {
		t.Fatalf("snapshot differs:\n%s\nvs\n%s", got.Dump(), img.Dump())
	}
	types := map[records.Type]int{}
	for _, r := range img.Records() {
		types[r.Message.Type()]++
	}
	for typ, n := range map[records.Type]int{records.TypeZkMigrationState: 1, records.TypeAccessControlEntry: 1,
		records.TypeClientQuota: 2, records.TypeUserScramCredential: 1, records.TypeDelegationToken: 1} {
		if types[typ] != n {
			t.Errorf("snapshot has %d %s, want %d", types[typ], typ, n)
		}
	}
	other := NewDelta(img)
	if err := other.Replay(100, 1, rec(&records.UserScramCredentialRecord{Name: "alice", Mechanism: records.ScramSHA256,
		Salt: []byte("OTHER"), StoredKey: []byte("STORED-SECRET"), ServerKey: []byte("SERVER-SECRET"), Iterations: 4096})); err != nil {
		t.Fatal(err)
	}
	changed := other.Apply()
	if stateDump(changed) != stateDump(img) {
		t.Fatal("a salt change shows in the dump")
	}
	if changed.Equal(rebuild(t, img)) || changed.Hash() == img.Hash() || !Diff(img, changed).SecurityChanged {
		t.Fatal("images differing in a SCRAM salt compare equal")
	}
}

func TestSecurityReplayErrors(t *testing.T) {
	base := replayAll(t, Empty(), securityLog(), 0)
	for _, tt := range []struct {
		name string
		msg  records.Message
	}{
		{"remove unknown ACL", &records.RemoveAccessControlEntryRecord{ID: records.UUID{0xa2}}},
		{"ACL with zero id", &records.AccessControlEntryRecord{ResourceName: "x"}},
		{"remove unknown SCRAM credential", &records.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: records.ScramSHA512}},
		{"quota without entity", &records.ClientQuotaRecord{Key: "k", Value: 1}},
		{"migration state 4", &records.ZkMigrationStateRecord{ZkMigrationState: 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDelta(base)
			if err := d.Replay(100, 1, rec(tt.msg)); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got %v, want ErrInvalidRecord", err)
			}
			if !d.Apply().Equal(base) {
				t.Fatal("failed record changed the image")
			}
		})
	}
}

// TestBrokerIndexMatchesScan: at every prefix of random logs (partitions
// created, changed, topics deleted and recreated), the index answers what a
// scan of every partition answers.
func TestBrokerIndexMatchesScan(t *testing.T) {
	for seed := range uint64(6) {
		_, imgs := genLog(t, seed, 300)
		last := imgs[len(imgs)-1]
		// An image without the index (a broker's) answers by scanning.
		plain, err := FromSnapshot(last.Records(), last.Provenance())
		if err != nil || plain.Indexed() || !last.Indexed() {
			t.Fatalf("seed %d: %v, indexed %t/%t", seed, err, plain.Indexed(), last.Indexed())
		}
		for i, img := range append(imgs, plain) {
			for b := int32(-1); b <= genBrokers; b++ {
				led := img.partitionsWhere(func(p *Partition) bool { return p.Leader == b })
				isr := img.partitionsWhere(func(p *Partition) bool { return b >= 0 && p.InISR(b) })
				any := img.partitionsWhere(func(p *Partition) bool { return b >= 0 && (p.Leader == b || p.InISR(b)) })
				if b < 0 {
					isr, any = nil, nil
				}
				if got := img.PartitionsLedBy(b); fmt.Sprint(got) != fmt.Sprint(led) {
					t.Fatalf("seed %d prefix %d broker %d led: index %v, scan %v", seed, i, b, got, led)
				}
				if got := img.PartitionsWithISRMember(b); fmt.Sprint(got) != fmt.Sprint(isr) {
					t.Fatalf("seed %d prefix %d broker %d isr: index %v, scan %v", seed, i, b, got, isr)
				}
				if got := img.PartitionsInISROrLedBy(b); fmt.Sprint(got) != fmt.Sprint(any) {
					t.Fatalf("seed %d prefix %d broker %d isr or led: index %v, scan %v", seed, i, b, got, any)
				}
				if b >= 0 && img.LeaderCount(b) != len(led) {
					t.Fatalf("seed %d prefix %d broker %d leads %d, counted %d", seed, i, b, len(led), img.LeaderCount(b))
				}
			}
		}
	}
}

// TestZkMigrationStateInSnapshots: as Kafka's FeaturesImage.write, every
// snapshot at metadata.version 3.4-IV0 or later carries the migration state
// (None for a log that never stated one), right after the feature levels;
// older levels carry none.
func TestZkMigrationStateInSnapshots(t *testing.T) {
	for _, tc := range []struct {
		mv   int16
		want int
	}{{MV33IV3, 0}, {MV34IV0, 1}, {14, 1}} {
		img := replayAll(t, Empty(), []records.Record{
			rec(&records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: tc.mv}),
		}, 0)
		recs := img.Records()
		n := 0
		for i, r := range recs {
			if z, ok := r.Message.(*records.ZkMigrationStateRecord); ok {
				n++
				if i != 1 || z.ZkMigrationState != records.ZkMigrationNone {
					t.Errorf("mv %d: record %d is %+v", tc.mv, i, z)
				}
			}
		}
		if n != tc.want {
			t.Errorf("mv %d: %d ZkMigrationStateRecords, want %d", tc.mv, n, tc.want)
		}
		if got := rebuild(t, img); !got.Equal(img) {
			t.Errorf("mv %d: snapshot differs", tc.mv)
		}
	}
}
