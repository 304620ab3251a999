package image

// Topic config validation: Kafka 3.9's topic config schema (LogConfig's
// ConfigDef: name, type, validator) and the ConfigException messages its
// parser and validators give, which the KRaft controller answers as
// INVALID_CONFIG (ControllerConfigurationValidator, then LogConfig.validate,
// reached from CreateTopics and the AlterConfigs APIs). It lives with the
// image so that every writer of topic configs (the KRaft controller, the
// ZooKeeper-era one) checks them the same way.
//
// A value is parsed as Kafka's ConfigDef.parseType does (trimmed; BOOLEAN
// "true"/"false" in any case; INT and LONG decimal; LIST comma separated),
// then checked by the key's validator. The message is ConfigException's:
// "Invalid value <v> for configuration <name>: <why>".

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// configType is a ConfigDef.Type.
type configType int

const (
	cfgBoolean configType = iota
	cfgInt
	cfgLong
	cfgDouble
	cfgString
	cfgList
)

// topicConfigDef is one topic config: its type, and for numbers the range
// (Range.atLeast/between), for strings and list elements the legal values
// (ValidString/ValidList.in), or a custom check.
type topicConfigDef struct {
	typ      configType
	min, max *float64
	in       []string
	check    func(v string) string // returns the reason a value is bad, or ""
}

func atLeast(n float64) topicConfigDef { return topicConfigDef{min: &n} }

func between(lo, hi float64) topicConfigDef { return topicConfigDef{min: &lo, max: &hi} }

func typed(t configType, d topicConfigDef) topicConfigDef { d.typ = t; return d }

// topicConfigDefs is LogConfig's CONFIG (Kafka 3.9, apache/kafka@1eb7644).
var topicConfigDefs = map[string]topicConfigDef{
	"cleanup.policy":                          {typ: cfgList, in: []string{"compact", "delete"}},
	"compression.type":                        {typ: cfgString, in: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	"compression.gzip.level":                  {typ: cfgInt, check: gzipLevel},
	"compression.lz4.level":                   typed(cfgInt, between(1, 17)),
	"compression.zstd.level":                  typed(cfgInt, between(-131072, 22)),
	"delete.retention.ms":                     typed(cfgLong, atLeast(0)),
	"file.delete.delay.ms":                    typed(cfgLong, atLeast(0)),
	"flush.messages":                          typed(cfgLong, atLeast(1)),
	"flush.ms":                                typed(cfgLong, atLeast(0)),
	"follower.replication.throttled.replicas": {typ: cfgList, check: throttledReplicas},
	"index.interval.bytes":                    typed(cfgInt, atLeast(0)),
	"leader.replication.throttled.replicas":   {typ: cfgList, check: throttledReplicas},
	"local.retention.bytes":                   typed(cfgLong, atLeast(-2)),
	"local.retention.ms":                      typed(cfgLong, atLeast(-2)),
	"max.compaction.lag.ms":                   typed(cfgLong, atLeast(1)),
	"max.message.bytes":                       typed(cfgInt, atLeast(0)),
	"message.downconversion.enable":           {typ: cfgBoolean},
	"message.format.version":                  {typ: cfgString},
	"message.timestamp.after.max.ms":          typed(cfgLong, atLeast(0)),
	"message.timestamp.before.max.ms":         typed(cfgLong, atLeast(0)),
	"message.timestamp.difference.max.ms":     typed(cfgLong, atLeast(0)),
	"message.timestamp.type":                  {typ: cfgString, in: []string{"CreateTime", "LogAppendTime"}},
	"min.cleanable.dirty.ratio":               typed(cfgDouble, between(0, 1)),
	"min.compaction.lag.ms":                   typed(cfgLong, atLeast(0)),
	"min.insync.replicas":                     typed(cfgInt, atLeast(1)),
	"preallocate":                             {typ: cfgBoolean},
	"remote.log.copy.disable":                 {typ: cfgBoolean},
	"remote.log.delete.on.disable":            {typ: cfgBoolean},
	"remote.storage.enable":                   {typ: cfgBoolean},
	"retention.bytes":                         {typ: cfgLong},
	"retention.ms":                            typed(cfgLong, atLeast(-1)),
	"segment.bytes":                           typed(cfgInt, atLeast(14)), // LegacyRecord.RECORD_OVERHEAD_V0
	"segment.index.bytes":                     typed(cfgInt, atLeast(4)),
	"segment.jitter.ms":                       typed(cfgLong, atLeast(0)),
	"segment.ms":                              typed(cfgLong, atLeast(1)),
	"unclean.leader.election.enable":          {typ: cfgBoolean},
}

var typeNames = [...]string{cfgBoolean: "BOOLEAN", cfgInt: "INT", cfgLong: "LONG", cfgDouble: "DOUBLE", cfgString: "STRING", cfgList: "LIST"}

// TopicConfigDefault is a topic config with Kafka's default, as
// DescribeConfigs shows a topic config nobody set.
type TopicConfigDefault struct {
	Name string
	// Value is LogConfig's default ("" for an empty list).
	Value string
	// Synonym and SynonymValue are the broker setting and default Kafka
	// lists as the DEFAULT_CONFIG synonym (KafkaConfig's, e.g.
	// log.retention.hours 168 for retention.ms); "" when there is none.
	Synonym, SynonymValue string
	// Type is the ConfigDef type: BOOLEAN, INT, LONG, DOUBLE, STRING, LIST.
	Type string
}

// TopicConfigDefaults lists every topic config with its default, by name.
func TopicConfigDefaults() []TopicConfigDefault {
	out := make([]TopicConfigDefault, 0, len(topicConfigDefaults))
	for _, d := range topicConfigDefaults {
		d.Type = typeNames[topicConfigDefs[d.Name].typ]
		out = append(out, d)
	}
	return out
}

// topicConfigDefaults are Kafka 3.9's defaults, sorted by name.
var topicConfigDefaults = []TopicConfigDefault{
	{Name: "cleanup.policy", Value: "delete", Synonym: "log.cleanup.policy", SynonymValue: "delete"},
	{Name: "compression.gzip.level", Value: "-1", Synonym: "compression.gzip.level", SynonymValue: "-1"},
	{Name: "compression.lz4.level", Value: "9", Synonym: "compression.lz4.level", SynonymValue: "9"},
	{Name: "compression.type", Value: "producer", Synonym: "compression.type", SynonymValue: "producer"},
	{Name: "compression.zstd.level", Value: "3", Synonym: "compression.zstd.level", SynonymValue: "3"},
	{Name: "delete.retention.ms", Value: "86400000", Synonym: "log.cleaner.delete.retention.ms", SynonymValue: "86400000"},
	{Name: "file.delete.delay.ms", Value: "60000", Synonym: "log.segment.delete.delay.ms", SynonymValue: "60000"},
	{Name: "flush.messages", Value: "9223372036854775807", Synonym: "log.flush.interval.messages", SynonymValue: "9223372036854775807"},
	{Name: "flush.ms", Value: "9223372036854775807", Synonym: "log.flush.scheduler.interval.ms", SynonymValue: "9223372036854775807"},
	{Name: "follower.replication.throttled.replicas", Value: ""},
	{Name: "index.interval.bytes", Value: "4096", Synonym: "log.index.interval.bytes", SynonymValue: "4096"},
	{Name: "leader.replication.throttled.replicas", Value: ""},
	{Name: "local.retention.bytes", Value: "-2", Synonym: "log.local.retention.bytes", SynonymValue: "-2"},
	{Name: "local.retention.ms", Value: "-2", Synonym: "log.local.retention.ms", SynonymValue: "-2"},
	{Name: "max.compaction.lag.ms", Value: "9223372036854775807", Synonym: "log.cleaner.max.compaction.lag.ms", SynonymValue: "9223372036854775807"},
	{Name: "max.message.bytes", Value: "1048588", Synonym: "message.max.bytes", SynonymValue: "1048588"},
	{Name: "message.downconversion.enable", Value: "true", Synonym: "log.message.downconversion.enable", SynonymValue: "true"},
	{Name: "message.format.version", Value: "3.0-IV1", Synonym: "log.message.format.version", SynonymValue: "3.0-IV1"},
	{Name: "message.timestamp.after.max.ms", Value: "9223372036854775807", Synonym: "log.message.timestamp.after.max.ms", SynonymValue: "9223372036854775807"},
	{Name: "message.timestamp.before.max.ms", Value: "9223372036854775807", Synonym: "log.message.timestamp.before.max.ms", SynonymValue: "9223372036854775807"},
	{Name: "message.timestamp.difference.max.ms", Value: "9223372036854775807", Synonym: "log.message.timestamp.difference.max.ms", SynonymValue: "9223372036854775807"},
	{Name: "message.timestamp.type", Value: "CreateTime", Synonym: "log.message.timestamp.type", SynonymValue: "CreateTime"},
	{Name: "min.cleanable.dirty.ratio", Value: "0.5", Synonym: "log.cleaner.min.cleanable.ratio", SynonymValue: "0.5"},
	{Name: "min.compaction.lag.ms", Value: "0", Synonym: "log.cleaner.min.compaction.lag.ms", SynonymValue: "0"},
	{Name: "min.insync.replicas", Value: "1", Synonym: "min.insync.replicas", SynonymValue: "1"},
	{Name: "preallocate", Value: "false", Synonym: "log.preallocate", SynonymValue: "false"},
	{Name: "remote.log.copy.disable", Value: "false"},
	{Name: "remote.log.delete.on.disable", Value: "false"},
	{Name: "remote.storage.enable", Value: "false"},
	{Name: "retention.bytes", Value: "-1", Synonym: "log.retention.bytes", SynonymValue: "-1"},
	{Name: "retention.ms", Value: "604800000", Synonym: "log.retention.hours", SynonymValue: "168"},
	{Name: "segment.bytes", Value: "1073741824", Synonym: "log.segment.bytes", SynonymValue: "1073741824"},
	{Name: "segment.index.bytes", Value: "10485760", Synonym: "log.index.size.max.bytes", SynonymValue: "10485760"},
	{Name: "segment.jitter.ms", Value: "0", Synonym: "log.roll.jitter.hours", SynonymValue: "0"},
	{Name: "segment.ms", Value: "604800000", Synonym: "log.roll.hours", SynonymValue: "168"},
	{Name: "unclean.leader.election.enable", Value: "false", Synonym: "unclean.leader.election.enable", SynonymValue: "false"},
}

// IsTopicConfig reports whether name is one of Kafka's topic configs.
func IsTopicConfig(name string) bool {
	_, ok := topicConfigDefs[name]
	return ok
}

// IsListTopicConfig reports whether name is a topic config of type LIST
// (the only ones IncrementalAlterConfigs may APPEND to or SUBTRACT from).
func IsListTopicConfig(name string) bool {
	def, ok := topicConfigDefs[name]
	return ok && def.typ == cfgList
}

// SplitConfigList is ConfigDef's LIST parsing: comma separated, trimmed,
// "" is empty.
func SplitConfigList(v string) []string { return splitList(strings.TrimSpace(v)) }

// ValidateTopicConfig returns Kafka's message for a bad topic config
// ("Unknown topic config name: x", "Invalid value v for configuration x:
// ..."), or "" when name is a topic config and value parses and passes its
// validator.
func ValidateTopicConfig(name, value string) string {
	def, ok := topicConfigDefs[name]
	if !ok {
		return "Unknown topic config name: " + name
	}
	bad := func(v, why string) string {
		return fmt.Sprintf("Invalid value %s for configuration %s: %s", v, name, why)
	}
	v := strings.TrimSpace(value)
	switch def.typ {
	case cfgBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return bad(v, "Expected value to be either true or false")
		}
	case cfgInt, cfgLong, cfgDouble:
		n, ok := parseNumber(def.typ, v)
		if !ok {
			return bad(v, "Not a number of type "+typeNames[def.typ])
		}
		if def.min != nil && n < *def.min {
			return bad(v, "Value must be at least "+formatBound(*def.min))
		}
		if def.max != nil && n > *def.max {
			return bad(v, "Value must be no more than "+formatBound(*def.max))
		}
	case cfgString:
		if def.in != nil && !contains(def.in, v) {
			return bad(v, "String must be one of: "+strings.Join(def.in, ", "))
		}
	case cfgList:
		for _, e := range splitList(v) {
			if def.in != nil && !contains(def.in, e) {
				return bad(e, "String must be one of: "+strings.Join(def.in, ", "))
			}
		}
	}
	if def.check != nil {
		if why := def.check(v); why != "" {
			return bad(v, why)
		}
	}
	return ""
}

func parseNumber(t configType, v string) (float64, bool) {
	switch t {
	case cfgInt:
		n, err := strconv.ParseInt(v, 10, 32)
		return float64(n), err == nil
	case cfgLong:
		n, err := strconv.ParseInt(v, 10, 64)
		return float64(n), err == nil
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil && !math.IsNaN(f)
}

// formatBound prints a Range bound as Java prints the Integer or Long it is.
func formatBound(f float64) string { return strconv.FormatInt(int64(f), 10) }

// splitList is ConfigDef's LIST parsing: comma separated, trimmed, "" empty.
func splitList(v string) []string {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// gzipLevel is GZIP's level validator: Deflater's -1 (default) or 1-9.
func gzipLevel(v string) string {
	n, _ := strconv.Atoi(v)
	if n == -1 || n >= 1 && n <= 9 {
		return ""
	}
	return "Value must be between 1 and 9, or -1"
}

// throttledReplicas is ThrottledReplicaListValidator: "*" or
// partition:broker pairs.
func throttledReplicas(v string) string {
	items := splitList(v)
	if len(items) == 1 && items[0] == "*" {
		return ""
	}
	for _, it := range items {
		p, b, ok := strings.Cut(it, ":")
		if _, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); !ok || err != nil {
			return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32); err != nil {
			return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
		}
	}
	return ""
}
