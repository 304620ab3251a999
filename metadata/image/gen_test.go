package image

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// gen produces random records that are valid on top of the image it is
// given, so that every replay path must accept them. It reads the image
// only; all randomness comes from its seeded source.
type gen struct {
	rng *rand.Rand
}

const genBrokers = 6

func (g *gen) uuid() records.UUID {
	var u records.UUID
	for i := range u {
		u[i] = byte(g.rng.IntN(256))
	}
	return u
}

func (g *gen) ids(n int) []int32 {
	perm := g.rng.Perm(genBrokers)[:n]
	out := make([]int32, n)
	for i, b := range perm {
		out[i] = int32(b)
	}
	return out
}

func (g *gen) subset(from []int32) []int32 {
	out := []int32{}
	for _, b := range from {
		if g.rng.IntN(3) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// next returns one valid record for img; offset is where it will land
// (used as a broker epoch).
func (g *gen) next(img *Image, offset int64) records.Message {
	for {
		if m := g.try(img, offset); m != nil {
			return m
		}
	}
}

func (g *gen) try(img *Image, offset int64) records.Message {
	switch g.rng.IntN(20) {
	case 0:
		return g.feature(img)
	case 1:
		return g.registerBroker(offset)
	case 2, 3:
		return g.brokerChange(img)
	case 4:
		return g.topic(img)
	case 5, 6:
		return g.partition(img)
	case 7, 8, 9:
		return g.partitionChange(img)
	case 10:
		if t := g.someTopic(img); t != nil && g.rng.IntN(10) == 0 {
			return &records.RemoveTopicRecord{TopicID: t.id}
		}
	case 11, 12:
		return g.config(img)
	case 13:
		return &records.ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 1,
			NextProducerID: max(0, img.ProducerIDs().NextProducerID) + 1000}
	case 14:
		return &records.NoOpRecord{}
	case 15:
		return &records.RegisterControllerRecord{ControllerID: int32(100 + g.rng.IntN(3)),
			IncarnationID: g.uuid(), EndPoints: []records.BrokerEndpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}}
	case 16:
		return g.acl(img)
	case 17:
		return g.quota()
	case 18:
		return g.scram(img)
	case 19:
		return g.token(img)
	}
	return nil
}

// acl adds a binding or removes an existing one.
func (g *gen) acl(img *Image) records.Message {
	if acls := img.ACLs(); len(acls) > 0 && g.rng.IntN(3) == 0 {
		return &records.RemoveAccessControlEntryRecord{ID: acls[g.rng.IntN(len(acls))].ID}
	}
	return &records.AccessControlEntryRecord{ID: g.uuid(), ResourceType: int8(2 + g.rng.IntN(6)),
		ResourceName: fmt.Sprintf("r%d", g.rng.IntN(5)), PatternType: int8(3 + g.rng.IntN(2)),
		Principal: "User:u" + fmt.Sprint(g.rng.IntN(3)), Host: "*", Operation: int8(2 + g.rng.IntN(12)),
		PermissionType: int8(2 + g.rng.IntN(2))}
}

// quota sets or removes a key of one of a few entities; the entity list
// comes in either order and may name a type twice (the last name wins).
func (g *gen) quota() records.Message {
	users := []*string{nil, ptrTo("alice"), ptrTo("bob")}
	entity := []records.ClientQuotaEntity{{EntityType: "user", EntityName: users[g.rng.IntN(3)]}}
	if g.rng.IntN(2) == 0 {
		entity = append(entity, records.ClientQuotaEntity{EntityType: "client-id", EntityName: ptrTo("c,=1")})
	}
	if g.rng.IntN(2) == 0 {
		entity[0], entity[len(entity)-1] = entity[len(entity)-1], entity[0]
	}
	keys := []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}
	return &records.ClientQuotaRecord{Entity: entity, Key: keys[g.rng.IntN(3)],
		Value: float64(g.rng.IntN(1<<20)) / 4, Remove: g.rng.IntN(4) == 0}
}

func (g *gen) scram(img *Image) records.Message {
	if cs := img.ScramCredentials(); len(cs) > 0 && g.rng.IntN(3) == 0 {
		c := cs[g.rng.IntN(len(cs))]
		return &records.RemoveUserScramCredentialRecord{Name: c.Name, Mechanism: c.Mechanism}
	}
	secret := func() []byte { u := g.uuid(); return u[:] }
	return &records.UserScramCredentialRecord{Name: fmt.Sprintf("user%d", g.rng.IntN(4)),
		Mechanism: int8(1 + g.rng.IntN(2)), Salt: secret(), StoredKey: secret(), ServerKey: secret(),
		Iterations: int32(4096 + g.rng.IntN(4096))}
}

// token creates, renews or removes a delegation token, or restates the
// migration state.
func (g *gen) token(img *Image) records.Message {
	switch n := g.rng.IntN(4); {
	case n == 0 && img.MetadataVersion() >= MV34IV0:
		// Below 3.4-IV0 no migration state exists (snapshots cannot carry one).
		return &records.ZkMigrationStateRecord{ZkMigrationState: int8(g.rng.IntN(4))}
	case n == 1 && len(img.DelegationTokens()) > 0:
		ts := img.DelegationTokens()
		return &records.RemoveDelegationTokenRecord{TokenID: ts[g.rng.IntN(len(ts))].TokenID}
	}
	return &records.DelegationTokenRecord{Owner: "User:o", Requester: "User:r",
		Renewers: []string{"User:x"}[:g.rng.IntN(2)], IssueTimestamp: int64(g.rng.IntN(1000)),
		MaxTimestamp: 5000, ExpirationTimestamp: int64(1000 + g.rng.IntN(4000)), TokenID: fmt.Sprintf("t%d", g.rng.IntN(4))}
}

func ptrTo[T any](v T) *T { return &v }

// feature sets metadata.version or kraft.version; metadata.version does not
// go below 3.4-IV0 once a migration state other than None is set (Kafka
// cannot write that state at older levels).
func (g *gen) feature(img *Image) records.Message {
	if g.rng.IntN(2) == 0 {
		levels := []int16{7, 14, 17}
		if img.ZkMigrationState() != records.ZkMigrationNone {
			levels = levels[1:]
		}
		return &records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: levels[g.rng.IntN(len(levels))]}
	}
	return &records.FeatureLevelRecord{Name: "kraft.version", FeatureLevel: int16(g.rng.IntN(2))}
}

func (g *gen) registerBroker(offset int64) records.Message {
	r := records.NewRegisterBrokerRecord()
	r.BrokerID = int32(g.rng.IntN(genBrokers))
	r.BrokerEpoch = offset
	r.IncarnationID = g.uuid()
	r.EndPoints = []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9092 + r.BrokerID)}}
	r.Features = []records.BrokerFeature{{Name: MetadataVersionFeature, MinSupportedVersion: 1, MaxSupportedVersion: 17}}
	r.Fenced = g.rng.IntN(4) > 0
	if g.rng.IntN(2) == 0 {
		rack := fmt.Sprintf("rack%d", r.BrokerID%2)
		r.Rack = &rack
	}
	if g.rng.IntN(3) == 0 {
		r.LogDirs = []records.UUID{g.uuid()}
	}
	r.InControlledShutdown = g.rng.IntN(8) == 0
	return r
}

func (g *gen) someBroker(img *Image) *Broker {
	bs := img.Brokers()
	if len(bs) == 0 {
		return nil
	}
	return &bs[g.rng.IntN(len(bs))]
}

func (g *gen) brokerChange(img *Image) records.Message {
	b := g.someBroker(img)
	if b == nil {
		return nil
	}
	switch g.rng.IntN(5) {
	case 0:
		return &records.UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch}
	case 1:
		return &records.FenceBrokerRecord{ID: b.ID, Epoch: b.Epoch}
	case 2:
		return &records.UnfenceBrokerRecord{ID: b.ID, Epoch: b.Epoch}
	}
	r := &records.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch,
		Fenced: int8(g.rng.IntN(3) - 1), InControlledShutdown: int8(g.rng.IntN(2))}
	if g.rng.IntN(3) == 0 {
		r.LogDirs = []records.UUID{g.uuid(), g.uuid()}
	}
	return r
}

func (g *gen) topic(img *Image) records.Message {
	name := fmt.Sprintf("t%d", g.rng.IntN(8))
	if _, ok := img.TopicByName(name); ok {
		return nil
	}
	return &records.TopicRecord{Name: name, TopicID: g.uuid()}
}

func (g *gen) someTopic(img *Image) *Topic {
	if img.NumTopics() == 0 {
		return nil
	}
	i := g.rng.IntN(img.NumTopics())
	for t := range img.Topics() {
		if i == 0 {
			return t
		}
		i--
	}
	return nil
}

// partition creates the next partition of a topic, or (sometimes) one past
// a gap, which Kafka's map-based TopicImage allows.
func (g *gen) partition(img *Image) records.Message {
	t := g.someTopic(img)
	if t == nil {
		return nil
	}
	r := records.NewPartitionRecord()
	r.TopicID = t.id
	r.PartitionID = int32(t.NumPartitions() + g.rng.IntN(2)*g.rng.IntN(40))
	if g.rng.IntN(30) == 0 {
		r.PartitionID += 1500 // grow the radix vector by a level
	}
	r.Replicas = g.ids(1 + g.rng.IntN(3))
	r.ISR = g.subset(r.Replicas)
	r.Leader = NoLeader
	if len(r.ISR) > 0 {
		r.Leader = r.ISR[0]
	}
	r.LeaderEpoch, r.PartitionEpoch = int32(g.rng.IntN(3)), int32(g.rng.IntN(3))
	if g.rng.IntN(3) == 0 {
		r.Directories = make([]records.UUID, len(r.Replicas))
		for i := range r.Directories {
			r.Directories[i] = g.uuid()
		}
	}
	if g.rng.IntN(4) == 0 {
		r.EligibleLeaderReplicas = g.subset(r.Replicas)
	}
	return r
}

func (g *gen) partitionChange(img *Image) records.Message {
	t := g.someTopic(img)
	if t == nil || t.NumPartitions() == 0 {
		return nil
	}
	var ids []int32
	for id := range t.Partitions() {
		ids = append(ids, id)
	}
	id := ids[g.rng.IntN(len(ids))]
	p, _ := t.Partition(id)
	r := records.NewPartitionChangeRecord()
	r.TopicID, r.PartitionID = t.id, id
	replicas := p.Replicas()
	if g.rng.IntN(4) == 0 {
		replicas = g.ids(1 + g.rng.IntN(3))
		r.Replicas = replicas
	}
	if r.Replicas != nil || g.rng.IntN(2) == 0 {
		r.ISR = g.subset(replicas)
	}
	isr := p.ISR()
	if r.ISR != nil {
		isr = r.ISR
	}
	if r.Replicas != nil || r.ISR != nil || g.rng.IntN(3) == 0 {
		r.Leader = NoLeader
		if len(isr) > 0 {
			r.Leader = isr[g.rng.IntN(len(isr))]
		}
	}
	if g.rng.IntN(5) == 0 {
		r.LeaderRecoveryState = int8(g.rng.IntN(2))
	}
	if g.rng.IntN(5) == 0 {
		r.LastKnownELR = g.subset(replicas)
	}
	if r.Replicas != nil && g.rng.IntN(3) == 0 {
		r.Directories = slices.Repeat([]records.UUID{g.uuid()}, len(r.Replicas))
	}
	return r
}

func (g *gen) config(img *Image) records.Message {
	r := &records.ConfigRecord{ResourceType: ConfigBroker, ResourceName: fmt.Sprint(g.rng.IntN(3)),
		Name: fmt.Sprintf("k%d", g.rng.IntN(3))}
	if t := g.someTopic(img); t != nil && g.rng.IntN(2) == 0 {
		r.ResourceType, r.ResourceName = ConfigTopic, t.name
	}
	if g.rng.IntN(3) > 0 {
		v := fmt.Sprintf("v%d", g.rng.IntN(100))
		r.Value = &v
	}
	return r
}
