package image

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kraftd/kraftd/metadata/records"
)

// parseUUID reads a transcript id: migrating/unassigned/lost, a 22-char
// Kafka UUID, or a small integer n, which becomes 01 00 .. 00 nn so that it
// cannot collide with the reserved directory ids.
func parseUUID(s string) (records.UUID, error) {
	switch s {
	case "migrating":
		return DirMigrating, nil
	case "unassigned":
		return DirUnassigned, nil
	case "lost":
		return DirLost, nil
	}
	if len(s) == 22 {
		return records.ParseUUID(s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return records.UUID{}, fmt.Errorf("bad id %q", s)
	}
	return records.UUID{0: 1, 15: byte(n)}, nil
}

// kv is the key=value arguments of one record line; get marks keys used
// so unknown keys are reported.
type kv struct {
	m   map[string]string
	err error
}

func (a *kv) str(k, def string) string {
	if v, ok := a.m[k]; ok {
		delete(a.m, k)
		return v
	}
	return def
}

func (a *kv) has(k string) bool { _, ok := a.m[k]; return ok }

func (a *kv) int(k string, def int64) int64 {
	v := a.str(k, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("%s: %v", k, err)
	}
	return n
}

// ints returns nil when k is absent (= "unchanged" in change records) and
// an empty non-nil slice for k= .
func (a *kv) ints(k string) []int32 {
	if !a.has(k) {
		return nil
	}
	out := []int32{}
	for _, f := range strings.Split(a.str(k, ""), ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil && a.err == nil {
			a.err = fmt.Errorf("%s: %v", k, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func (a *kv) uuid(k string) records.UUID {
	u, err := parseUUID(a.str(k, "0"))
	if err != nil && a.err == nil {
		a.err = err
	}
	return u
}

func (a *kv) uuids(k string) []records.UUID {
	if !a.has(k) {
		return nil
	}
	var out []records.UUID
	for _, f := range strings.Split(a.str(k, ""), ",") {
		u, err := parseUUID(f)
		if err != nil && a.err == nil {
			a.err = err
		}
		out = append(out, u)
	}
	return out
}

// parseRecord turns one transcript line into a record message.
func parseRecord(line string) (records.Message, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty record line")
	}
	a := &kv{m: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a.m[k] = v
	}
	build, ok := recordParsers[fields[0]]
	if !ok {
		return nil, fmt.Errorf("unknown record kind %q", fields[0])
	}
	m := build(a)
	if a.err != nil {
		return nil, a.err
	}
	if len(a.m) > 0 {
		return nil, fmt.Errorf("unknown keys %v", a.m)
	}
	return m, nil
}

var recordParsers = map[string]func(a *kv) records.Message{
	"feature": func(a *kv) records.Message {
		return &records.FeatureLevelRecord{Name: a.str("name", MetadataVersionFeature), FeatureLevel: int16(a.int("level", 0))}
	},
	"broker": func(a *kv) records.Message {
		r := records.NewRegisterBrokerRecord()
		r.BrokerID, r.BrokerEpoch = int32(a.int("id", 0)), a.int("epoch", 0)
		r.IncarnationID = a.uuid("incarnation")
		r.EndPoints = []records.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9092 + r.BrokerID)}}
		r.Fenced = a.str("fenced", "true") == "true"
		r.InControlledShutdown = a.str("shutdown", "false") == "true"
		if a.has("rack") {
			rack := a.str("rack", "")
			r.Rack = &rack
		}
		r.LogDirs = a.uuids("logdirs")
		return r
	},
	"unregister": func(a *kv) records.Message {
		return &records.UnregisterBrokerRecord{BrokerID: int32(a.int("id", 0)), BrokerEpoch: a.int("epoch", 0)}
	},
	"fence": func(a *kv) records.Message {
		return &records.FenceBrokerRecord{ID: int32(a.int("id", 0)), Epoch: a.int("epoch", 0)}
	},
	"unfence": func(a *kv) records.Message {
		return &records.UnfenceBrokerRecord{ID: int32(a.int("id", 0)), Epoch: a.int("epoch", 0)}
	},
	"broker-change": func(a *kv) records.Message {
		return &records.BrokerRegistrationChangeRecord{BrokerID: int32(a.int("id", 0)), BrokerEpoch: a.int("epoch", 0),
			Fenced: int8(a.int("fenced", 0)), InControlledShutdown: int8(a.int("shutdown", 0)), LogDirs: a.uuids("logdirs")}
	},
	"controller": func(a *kv) records.Message {
		return &records.RegisterControllerRecord{ControllerID: int32(a.int("id", 0)), IncarnationID: a.uuid("incarnation"),
			EndPoints: []records.BrokerEndpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}}
	},
	"topic": func(a *kv) records.Message {
		return &records.TopicRecord{Name: a.str("name", ""), TopicID: a.uuid("id")}
	},
	"remove-topic": func(a *kv) records.Message { return &records.RemoveTopicRecord{TopicID: a.uuid("id")} },
	"partition": func(a *kv) records.Message {
		r := records.NewPartitionRecord()
		r.TopicID, r.PartitionID = a.uuid("topic"), int32(a.int("p", 0))
		r.Replicas, r.ISR = a.ints("replicas"), a.ints("isr")
		r.RemovingReplicas, r.AddingReplicas = a.ints("removing"), a.ints("adding")
		r.Leader = int32(a.int("leader", -1))
		r.LeaderEpoch, r.PartitionEpoch = int32(a.int("leaderEpoch", 0)), int32(a.int("partitionEpoch", 0))
		r.LeaderRecoveryState = int8(a.int("lrs", 0))
		r.Directories = a.uuids("dirs")
		r.EligibleLeaderReplicas, r.LastKnownELR = a.ints("elr"), a.ints("lke")
		return r
	},
	"change": func(a *kv) records.Message {
		r := records.NewPartitionChangeRecord()
		r.TopicID, r.PartitionID = a.uuid("topic"), int32(a.int("p", 0))
		r.Replicas, r.ISR = a.ints("replicas"), a.ints("isr")
		r.RemovingReplicas, r.AddingReplicas = a.ints("removing"), a.ints("adding")
		r.Leader = int32(a.int("leader", int64(records.NoLeaderChange)))
		r.LeaderRecoveryState = int8(a.int("lrs", int64(records.NoLeaderRecoveryStateChange)))
		r.Directories = a.uuids("dirs")
		r.EligibleLeaderReplicas, r.LastKnownELR = a.ints("elr"), a.ints("lke")
		return r
	},
	"config": func(a *kv) records.Message {
		r := &records.ConfigRecord{ResourceType: int8(a.int("type", int64(ConfigTopic))),
			ResourceName: a.str("resource", ""), Name: a.str("key", "")}
		if a.has("value") {
			v := a.str("value", "")
			r.Value = &v
		}
		return r
	},
	"producer-ids": func(a *kv) records.Message {
		return &records.ProducerIdsRecord{BrokerID: int32(a.int("broker", 0)), BrokerEpoch: a.int("epoch", -1),
			NextProducerID: a.int("next", 0)}
	},
	"noop": func(a *kv) records.Message { return &records.NoOpRecord{} },
}
