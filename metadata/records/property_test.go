package records

import (
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Property tests: random values of the records with the most version- and
// tag-dependent layouts must survive encode -> decode at every version they
// can be encoded at.

func genInt32s(nullable bool) *rapid.Generator[[]int32] {
	return rapid.Custom(func(t *rapid.T) []int32 {
		if nullable && rapid.Bool().Draw(t, "null") {
			return nil
		}
		vs := rapid.SliceOfN(rapid.Int32(), 0, 5).Draw(t, "ints")
		if !nullable && len(vs) == 0 {
			return nil // non-nullable empty arrays decode as nil
		}
		return vs
	})
}

func genUUIDs(nullable bool) *rapid.Generator[[]UUID] {
	return rapid.Custom(func(t *rapid.T) []UUID {
		ints := genInt32s(nullable).Draw(t, "seeds")
		if ints == nil {
			return nil
		}
		out := make([]UUID, len(ints))
		for i, v := range ints {
			out[i] = UUID{byte(v), byte(v >> 8), 15: byte(i)}
		}
		return out
	})
}

var genUUID = rapid.Custom(func(t *rapid.T) UUID {
	var u UUID
	copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid"))
	return u
})

func genOptString(t *rapid.T, label string) *string {
	if rapid.Bool().Draw(t, label+"Null") {
		return nil
	}
	s := rapid.String().Draw(t, label)
	return &s
}

func genPartitionRecord(t *rapid.T, v int16) *PartitionRecord {
	m := &PartitionRecord{
		PartitionID: rapid.Int32().Draw(t, "pid"), TopicID: genUUID.Draw(t, "topic"),
		Replicas: genInt32s(false).Draw(t, "replicas"), ISR: genInt32s(false).Draw(t, "isr"),
		RemovingReplicas: genInt32s(false).Draw(t, "removing"), AddingReplicas: genInt32s(false).Draw(t, "adding"),
		Leader: rapid.Int32().Draw(t, "leader"), LeaderRecoveryState: rapid.Int8().Draw(t, "lrs"),
		LeaderEpoch: rapid.Int32().Draw(t, "le"), PartitionEpoch: rapid.Int32().Draw(t, "pe"),
	}
	if v >= 1 {
		m.Directories = genUUIDs(false).Draw(t, "dirs")
	}
	if v >= 2 {
		m.EligibleLeaderReplicas = genInt32s(true).Draw(t, "elr")
		m.LastKnownELR = genInt32s(true).Draw(t, "lkelr")
	}
	return m
}

func genPartitionChangeRecord(t *rapid.T, v int16) *PartitionChangeRecord {
	m := &PartitionChangeRecord{
		PartitionID: rapid.Int32().Draw(t, "pid"), TopicID: genUUID.Draw(t, "topic"),
		ISR: genInt32s(true).Draw(t, "isr"), Leader: rapid.Int32Range(-3, 5).Draw(t, "leader"),
		Replicas: genInt32s(true).Draw(t, "replicas"), RemovingReplicas: genInt32s(true).Draw(t, "removing"),
		AddingReplicas: genInt32s(true).Draw(t, "adding"), LeaderRecoveryState: rapid.Int8Range(-2, 2).Draw(t, "lrs"),
	}
	if v >= 1 {
		m.Directories = genUUIDs(true).Draw(t, "dirs")
	}
	if v >= 2 {
		m.EligibleLeaderReplicas = genInt32s(true).Draw(t, "elr")
		m.LastKnownELR = genInt32s(true).Draw(t, "lkelr")
	}
	return m
}

func genRegisterBrokerRecord(t *rapid.T, v int16) *RegisterBrokerRecord {
	m := &RegisterBrokerRecord{
		BrokerID: rapid.Int32().Draw(t, "id"), IncarnationID: genUUID.Draw(t, "inc"),
		BrokerEpoch: rapid.Int64().Draw(t, "epoch"), Rack: genOptString(t, "rack"),
		Fenced: rapid.Bool().Draw(t, "fenced"),
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "neps") {
		m.EndPoints = append(m.EndPoints, BrokerEndpoint{rapid.String().Draw(t, "name"),
			rapid.String().Draw(t, "host"), rapid.Uint16().Draw(t, "port"), int16(i)})
	}
	for range rapid.IntRange(0, 3).Draw(t, "nfeat") {
		m.Features = append(m.Features, BrokerFeature{rapid.String().Draw(t, "fname"),
			rapid.Int16().Draw(t, "min"), rapid.Int16().Draw(t, "max")})
	}
	if v >= 1 {
		m.InControlledShutdown = rapid.Bool().Draw(t, "ics")
	}
	if v >= 2 {
		m.IsMigratingZkBroker = rapid.Bool().Draw(t, "zk")
	}
	if v >= 3 {
		m.LogDirs = genUUIDs(false).Draw(t, "logdirs")
	}
	return m
}

func genBrokerRegistrationChange(t *rapid.T, v int16) *BrokerRegistrationChangeRecord {
	m := &BrokerRegistrationChangeRecord{BrokerID: rapid.Int32().Draw(t, "id"),
		BrokerEpoch: rapid.Int64().Draw(t, "epoch"), Fenced: rapid.Int8().Draw(t, "fenced")}
	if v >= 1 {
		m.InControlledShutdown = rapid.Int8().Draw(t, "ics")
	}
	if v >= 2 {
		m.LogDirs = genUUIDs(false).Draw(t, "logdirs")
	}
	return m
}

func TestPropertyRoundTrip(t *testing.T) {
	gens := map[string]func(*rapid.T, int16) Message{
		"PartitionRecord":                func(t *rapid.T, v int16) Message { return genPartitionRecord(t, v) },
		"PartitionChangeRecord":          func(t *rapid.T, v int16) Message { return genPartitionChangeRecord(t, v) },
		"RegisterBrokerRecord":           func(t *rapid.T, v int16) Message { return genRegisterBrokerRecord(t, v) },
		"BrokerRegistrationChangeRecord": func(t *rapid.T, v int16) Message { return genBrokerRegistrationChange(t, v) },
		"ConfigRecord": func(t *rapid.T, _ int16) Message {
			return &ConfigRecord{rapid.Int8().Draw(t, "rt"), rapid.String().Draw(t, "rn"),
				rapid.String().Draw(t, "n"), genOptString(t, "value")}
		},
		"AbortTransactionRecord": func(t *rapid.T, _ int16) Message {
			return &AbortTransactionRecord{Reason: genOptString(t, "reason")}
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				probe := gen(t, 0)
				v := rapid.Int16Range(probe.LowestVersion(), probe.HighestVersion()).Draw(t, "version")
				rec := Record{Version: v, Message: gen(t, v)}
				b, err := rec.AppendTo(nil)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				got, err := Decode(b)
				if err != nil {
					t.Fatalf("decode %x: %v", b, err)
				}
				if !reflect.DeepEqual(got, rec) {
					t.Fatalf("mismatch\n got %+v\nwant %+v", got.Message, rec.Message)
				}
			})
		})
	}
}

func TestPropertyVotersRecord(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := &VotersRecord{Version: rapid.Int16().Draw(t, "version")}
		for range rapid.IntRange(0, 4).Draw(t, "n") {
			voter := VotersRecordVoter{VoterID: rapid.Int32().Draw(t, "id"), VoterDirectoryID: genUUID.Draw(t, "dir"),
				KRaftVersionFeature: KRaftVersionFeature{rapid.Int16().Draw(t, "min"), rapid.Int16().Draw(t, "max")}}
			for range rapid.IntRange(0, 2).Draw(t, "neps") {
				voter.Endpoints = append(voter.Endpoints, VotersRecordEndpoint{rapid.String().Draw(t, "name"),
					rapid.String().Draw(t, "host"), rapid.Uint16().Draw(t, "port")})
			}
			v.Voters = append(v.Voters, voter)
		}
		var got VotersRecord
		if err := got.ReadFrom(v.AppendTo(nil)); err != nil || !reflect.DeepEqual(&got, v) {
			t.Fatalf("got %+v, %v; want %+v", got, err, v)
		}
	})
}

// tagWriterPartitionChange encodes m the generic way (a tagWriter, one
// buffer per field): the reference the direct encoding must equal.
func tagWriterPartitionChange(m *PartitionChangeRecord) []byte {
	b := appendUUID(appendInt32(nil, m.PartitionID), m.TopicID)
	var tags tagWriter
	ints := func(tag uint32, vs []int32) {
		if vs != nil {
			tags.add(tag, func(p []byte) []byte { return appendInt32s(p, vs, true) })
		}
	}
	ints(0, m.ISR)
	if m.Leader != NoLeaderChange {
		tags.add(1, func(p []byte) []byte { return appendInt32(p, m.Leader) })
	}
	ints(2, m.Replicas)
	ints(3, m.RemovingReplicas)
	ints(4, m.AddingReplicas)
	if m.LeaderRecoveryState != NoLeaderRecoveryStateChange {
		tags.add(5, func(p []byte) []byte { return appendInt8(p, m.LeaderRecoveryState) })
	}
	ints(6, m.EligibleLeaderReplicas)
	ints(7, m.LastKnownELR)
	if m.Directories != nil {
		tags.add(8, func(p []byte) []byte { return appendUUIDs(p, m.Directories, true) })
	}
	return tags.appendTo(b)
}

// The PartitionChangeRecord encoder writes its tagged fields directly with
// precomputed sizes; it must produce the tagWriter's bytes, also for
// fields of 128 bytes or more (a two-byte size).
func TestPartitionChangeDirectEncodingEqualsTagWriter(t *testing.T) {
	long := func(t *rapid.T, name string) []int32 {
		if rapid.Bool().Draw(t, name+"-null") {
			return nil
		}
		return rapid.SliceOfN(rapid.Int32(), 0, 70).Draw(t, name)
	}
	rapid.Check(t, func(t *rapid.T) {
		m := genPartitionChangeRecord(t, 2)
		m.ISR, m.Replicas, m.LastKnownELR = long(t, "isr"), long(t, "replicas"), long(t, "elr")
		if rapid.Bool().Draw(t, "manyDirs") {
			m.Directories = make([]UUID, rapid.IntRange(0, 20).Draw(t, "dirs"))
		}
		got, err := m.AppendTo(nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := tagWriterPartitionChange(m); !slices.Equal(got, want) {
			t.Fatalf("direct encoding\n%x\ntagWriter\n%x", got, want)
		}
	})
}
