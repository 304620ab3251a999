package controller

// Shared by AlterConfigs (33) and IncrementalAlterConfigs (44): which
// resources kraftd lets clients configure, and how a resource's new
// configuration becomes ConfigRecords (Kafka's ConfigurationControlManager).
//
//   - TOPIC: the topic must exist (UNKNOWN_TOPIC_OR_PARTITION "The topic
//     'x' does not exist."); keys and values are checked against the topic
//     config schema (image.ValidateTopicConfig, INVALID_CONFIG).
//   - BROKER: "" (the cluster-wide default) or a broker id (anything else
//     is INVALID_REQUEST "Invalid broker name x"); only the broker settings
//     behind topic configs (log.retention.ms, log.segment.bytes, ...,
//     which the brokers apply to topics without an override) and
//     unclean.leader.election.enable may be set, checked against their
//     topic config's schema; any other key is INVALID_CONFIG.
//   - other types: INVALID_REQUEST.
//
// A record is written only for a key whose value changes (null: deleted).

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// dynamicBrokerConfigs are the broker settings a BROKER resource may set,
// with the topic config whose schema checks them.
var dynamicBrokerConfigs = map[string]string{
	"compression.type":               "compression.type",
	"log.cleanup.policy":             "cleanup.policy",
	"log.message.timestamp.type":     "message.timestamp.type",
	"log.retention.bytes":            "retention.bytes",
	"log.retention.ms":               "retention.ms",
	"log.roll.ms":                    "segment.ms",
	"log.segment.bytes":              "segment.bytes",
	"message.max.bytes":              "max.message.bytes",
	"min.insync.replicas":            "min.insync.replicas",
	"unclean.leader.election.enable": "unclean.leader.election.enable",
}

// configTarget resolves a request's resource: the image resource, or the
// error Kafka gives for it.
func (c *core) configTarget(typ kmsg.ConfigResourceType, name string) (image.ConfigResource, *apiError) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := c.pending.img.TopicByName(name); !ok {
			return image.ConfigResource{}, errf(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
		}
		return image.ConfigResource{Type: image.ConfigTopic, Name: name}, nil
	case kmsg.ConfigResourceTypeBroker:
		if name != "" {
			if _, err := strconv.ParseInt(name, 10, 32); err != nil {
				return image.ConfigResource{}, errf(kerr.InvalidRequest, "Invalid broker name %s", name)
			}
		}
		return image.ConfigResource{Type: image.ConfigBroker, Name: name}, nil
	}
	return image.ConfigResource{}, errf(kerr.InvalidRequest, "Unsupported resource type %d", int8(typ))
}

// schemaKey is the topic config whose schema checks key on res, or "" when
// res may not have key.
func schemaKey(res image.ConfigResource, key string) string {
	if res.Type == image.ConfigTopic {
		if image.IsTopicConfig(key) {
			return key
		}
		return ""
	}
	return dynamicBrokerConfigs[key]
}

// validateConfigValue is image.ValidateTopicConfig under the resource's key name.
func validateConfigValue(res image.ConfigResource, key, value string) *apiError {
	sk := schemaKey(res, key)
	switch {
	case sk == "" && res.Type == image.ConfigTopic:
		return errf(kerr.InvalidConfig, "Unknown topic config name: %s", key)
	case sk == "":
		return errf(kerr.InvalidConfig, "kraftd cannot update broker config %s dynamically", key)
	}
	if why := image.ValidateTopicConfig(sk, value); why != "" {
		return errf(kerr.InvalidConfig, "%s", strings.Replace(why, "configuration "+sk+":", "configuration "+key+":", 1))
	}
	return nil
}

// configChanges turns res's new configuration (key -> value, nil to
// delete) into records for the keys whose value changes, sorted by key.
func (c *core) configChanges(res image.ConfigResource, next map[string]*string) []records.Record {
	var recs []records.Record
	for _, key := range slices.Sorted(maps.Keys(next)) {
		v := next[key]
		old, had := c.pending.img.ConfigValue(res, key)
		if v == nil && !had || v != nil && had && old == *v {
			continue
		}
		recs = append(recs, records.Record{Message: &records.ConfigRecord{
			ResourceType: res.Type, ResourceName: res.Name, Name: key, Value: v}})
	}
	return recs
}

// listDefault is the default of a LIST config APPEND/SUBTRACT start from
// when there is no value (Kafka's ConfigDef default).
func listDefault(key string) string {
	if key == "cleanup.policy" {
		return "delete"
	}
	return ""
}

func configResourceKey(typ kmsg.ConfigResourceType, name string) string {
	return fmt.Sprintf("%d/%s", typ, name)
}
