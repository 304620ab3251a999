package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

// DescribeConfigs: v0-v4, answered from the last published image (KIP-133;
// synonyms v1 KIP-226; config types and documentation v3 KIP-569).
//
// Behaviour:
//   - TOPIC: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. A topic config
//     shows the most specific value of, in Kafka's order (ConfigHelper's
//     createTopicConfigEntry): the topic's own (DYNAMIC_TOPIC_CONFIG), this
//     broker's dynamic value of the broker synonym (DYNAMIC_BROKER_CONFIG,
//     e.g. log.retention.ms), the cluster-wide dynamic default
//     (DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's server.properties value
//     if it was set there (STATIC_BROKER_CONFIG, ClientAPIConfig
//     StaticTopicDefaults), else Kafka's default (DEFAULT_CONFIG); the
//     entry's Source is the source of the value shown, and with
//     IncludeSynonyms every value that is set is listed, most specific
//     first, under the topic key (topic's own) or the broker key (the
//     others; Kafka's default of retention.ms and segment.ms is listed as
//     log.retention.hours / log.roll.hours = 168, as Kafka lists it). The
//     static value of retention.ms and segment.ms is given in ms under
//     log.retention.ms / log.roll.ms whichever of the synonyms was set.
//     Every topic config of Kafka's schema is listed (image
//     TopicConfigDefaults, with its ConfigType); only those kraftd applies
//     (topicBrokerKeys) take broker-level values, the others show Kafka's
//     default. Topic configs are never ReadOnly.
//   - BROKER: the name must be "" (cluster-wide dynamic defaults only, as
//     Kafka) or this broker's id (its dynamic configs, then cluster
//     defaults, then its static settings, source STATIC_BROKER_CONFIG); another id is
//     INVALID_REQUEST, as Kafka's ConfigHelper says "Unexpected broker id".
//   - other resource types: INVALID_REQUEST.
//   - ConfigNames filters the keys; null means all.
func (c *ClientAPI) handleDescribeConfigs(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := c.cfg.Metadata.Image()
	for _, rr := range body.Resources {
		rs := kmsg.NewDescribeConfigsResponseResource()
		rs.ResourceType, rs.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []configEntry
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if _, ok := img.TopicByName(rr.ResourceName); !ok {
				rs.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			entries = c.topicConfigs(img, rr.ResourceName)
		case kmsg.ConfigResourceTypeBroker:
			entries, rs.ErrorCode = c.brokerConfigs(img, rr.ResourceName)
		default:
			rs.ErrorCode = kerr.InvalidRequest.Code
		}
		if rs.ErrorCode != 0 {
			msg := kerr.ErrorForCode(rs.ErrorCode).Error()
			rs.ErrorMessage = &msg
		} else {
			rs.Configs = renderConfigs(entries, rr.ConfigNames, body.Version >= 1 && body.IncludeSynonyms)
		}
		resp.Resources = append(resp.Resources, rs)
	}
	return resp, nil
}

// brokerConfigs layers a broker's configs; see the file comment.
func (c *ClientAPI) brokerConfigs(img *image.Image, name string) ([]configEntry, int16) {
	clusterWide := layer{img.Configs(image.ConfigResource{Type: image.ConfigBroker}), kmsg.ConfigSourceDynamicDefaultBrokerConfig}
	if name == "" {
		return layered(nil, kmsg.ConfigSourceDefaultConfig, clusterWide), 0
	}
	if id, err := strconv.ParseInt(name, 10, 32); err != nil || int32(id) != c.cfg.NodeID {
		return nil, kerr.InvalidRequest.Code
	}
	own := layer{img.Configs(image.ConfigResource{Type: image.ConfigBroker, Name: name}), kmsg.ConfigSourceDynamicBrokerConfig}
	return layered(c.brokerStatics(), kmsg.ConfigSourceStaticBrokerConfig, clusterWide, own), 0
}

// configDefault is a well-known key with Kafka's default value.
type configDefault struct {
	name, value string
	typ         kmsg.ConfigType
}

// topicBrokerKeys are the topic configs kraftd's brokers apply, with the
// broker setting that supplies their default (dynamic or static).
var topicBrokerKeys = map[string]string{
	"cleanup.policy":         "log.cleanup.policy",
	"compression.type":       "compression.type",
	"max.message.bytes":      "message.max.bytes",
	"message.timestamp.type": "log.message.timestamp.type",
	"min.insync.replicas":    "min.insync.replicas",
	"retention.bytes":        "log.retention.bytes",
	"retention.ms":           "log.retention.ms",
	"segment.bytes":          "log.segment.bytes",
	"segment.ms":             "log.roll.ms",
}

var configTypes = map[string]kmsg.ConfigType{
	"BOOLEAN": kmsg.ConfigTypeBoolean, "INT": kmsg.ConfigTypeInt, "LONG": kmsg.ConfigTypeLong,
	"DOUBLE": kmsg.ConfigTypeDouble, "STRING": kmsg.ConfigTypeString, "LIST": kmsg.ConfigTypeList,
}

// topicConfigs layers a topic's configs; see the file comment. Every topic
// config of Kafka's schema is listed (image.TopicConfigDefaults), as Kafka
// lists every LogConfig key.
func (c *ClientAPI) topicConfigs(img *image.Image, topic string) []configEntry {
	own := img.Configs(image.ConfigResource{Type: image.ConfigTopic, Name: topic})
	byName := map[string]string{}
	for _, e := range own {
		byName[e.Name] = e.Value
	}
	self := image.ConfigResource{Type: image.ConfigBroker, Name: strconv.Itoa(int(c.cfg.NodeID))}
	cluster := image.ConfigResource{Type: image.ConfigBroker}
	statics := map[string]string{}
	for _, sc := range c.cfg.StaticTopicDefaults {
		statics[sc.Name] = sc.Value
	}
	var out []configEntry
	known := map[string]bool{}
	for _, d := range image.TopicConfigDefaults() {
		known[d.Name] = true
		e := configEntry{name: d.Name, typ: configTypes[d.Type], topic: true}
		if v, ok := byName[d.Name]; ok {
			e.vals = append(e.vals, sourced{v, kmsg.ConfigSourceDynamicTopicConfig, d.Name})
		}
		if bk, ok := topicBrokerKeys[d.Name]; ok {
			if v, ok := img.ConfigValue(self, bk); ok {
				e.vals = append(e.vals, sourced{v, kmsg.ConfigSourceDynamicBrokerConfig, bk})
			}
			if v, ok := img.ConfigValue(cluster, bk); ok {
				e.vals = append(e.vals, sourced{v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, bk})
			}
			if v, ok := statics[bk]; ok {
				e.vals = append(e.vals, sourced{v, kmsg.ConfigSourceStaticBrokerConfig, bk})
			}
		}
		if d.Synonym != "" {
			e.vals = append(e.vals, sourced{d.SynonymValue, kmsg.ConfigSourceDefaultConfig, d.Synonym})
		}
		if len(e.vals) == 0 || e.vals[0].source == kmsg.ConfigSourceDefaultConfig {
			// Kafka's LogConfig default, not its synonym's; with no
			// synonym the entry has no synonyms either.
			value := d.Value
			e.value = &value
			if len(e.vals) == 0 {
				e.vals = []sourced{{d.Value, kmsg.ConfigSourceDefaultConfig, d.Name}}
				e.noSynonyms = true
			}
		}
		out = append(out, e)
	}
	for _, ce := range own {
		if !known[ce.Name] {
			out = append(out, configEntry{name: ce.Name, typ: kmsg.ConfigTypeString, topic: true,
				vals: []sourced{{ce.Value, kmsg.ConfigSourceDynamicTopicConfig, ce.Name}}})
		}
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// brokerStatics are the static settings of ClientAPIConfig.
func (c *ClientAPI) brokerStatics() []configDefault {
	out := make([]configDefault, 0, len(c.cfg.StaticConfigs))
	for _, sc := range c.cfg.StaticConfigs {
		out = append(out, configDefault{sc.Name, sc.Value, sc.Type})
	}
	return out
}

// staticConfigs are a KRaft broker's static settings from its Config.
func (cfg *Config) staticConfigs() []StaticConfig {
	return []StaticConfig{
		{"auto.create.topics.enable", strconv.FormatBool(cfg.AutoCreateTopicsEnable), kmsg.ConfigTypeBoolean},
		{"broker.heartbeat.interval.ms", strconv.FormatInt(cfg.HeartbeatIntervalMs, 10), kmsg.ConfigTypeInt},
		{"broker.session.timeout.ms", strconv.FormatInt(cfg.SessionTimeoutMs, 10), kmsg.ConfigTypeInt},
		{"default.replication.factor", strconv.Itoa(int(cfg.DefaultReplicationFactor)), kmsg.ConfigTypeInt},
		{"node.id", strconv.Itoa(int(cfg.NodeID)), kmsg.ConfigTypeInt},
		{"num.partitions", strconv.Itoa(int(cfg.DefaultNumPartitions)), kmsg.ConfigTypeInt},
	}
}

// layer is one source of dynamic values.
type layer struct {
	entries []image.ConfigEntry
	source  kmsg.ConfigSource
}

// configEntry is one key with its effective value first and the values it
// overrides after it (synonyms, most specific first).
type configEntry struct {
	name string
	typ  kmsg.ConfigType
	vals []sourced
	// value, when set, is the effective value (else vals[0]'s); topic
	// marks a topic config (never read-only).
	value *string
	topic bool
	// noSynonyms: vals[0] stands for a default no setting names (Kafka
	// lists no synonym then).
	noSynonyms bool
}

// sourced is one value of a key; name is the synonym's name ("" for the
// key's own).
type sourced struct {
	value  string
	source kmsg.ConfigSource
	name   string
}

// layered stacks defaults, then each layer in order (later layers win),
// and returns the keys sorted by name.
func layered(defaults []configDefault, defaultSource kmsg.ConfigSource, layers ...layer) []configEntry {
	byName := make(map[string]*configEntry)
	add := func(name, value string, typ kmsg.ConfigType, src kmsg.ConfigSource) {
		e, ok := byName[name]
		if !ok {
			e = &configEntry{name: name, typ: typ}
			byName[name] = e
		}
		e.vals = append([]sourced{{value, src, name}}, e.vals...)
	}
	for _, d := range defaults {
		add(d.name, d.value, d.typ, defaultSource)
	}
	for _, l := range layers {
		for _, e := range l.entries {
			add(e.Name, e.Value, kmsg.ConfigTypeString, l.source)
		}
	}
	out := make([]configEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// renderConfigs turns entries into response configs, keeping only names
// (nil = all).
func renderConfigs(entries []configEntry, names []string, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range entries {
		if names != nil && !slices.Contains(names, e.name) {
			continue
		}
		top := e.vals[0]
		value := &top.value
		if e.value != nil {
			value = e.value
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source, c.ConfigType = e.name, value, top.source, e.typ
		c.IsDefault = top.source == kmsg.ConfigSourceDefaultConfig
		// Static broker settings cannot be altered without a restart; a
		// topic's config can always be overridden.
		c.ReadOnly = !e.topic && top.source == kmsg.ConfigSourceStaticBrokerConfig
		if synonyms && !e.noSynonyms {
			for _, v := range e.vals {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = v.name, &v.value, v.source
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
		}
		out = append(out, c)
	}
	return out
}
