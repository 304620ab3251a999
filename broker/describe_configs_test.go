package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func describeConfigs(h *harness, synonyms bool, resources ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsResponse {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms = synonyms
	req.Resources = resources
	return h.request(req).(*kmsg.DescribeConfigsResponse)
}

func resource(typ kmsg.ConfigResourceType, name string, keys ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, keys
	return r
}

func configByName(rs kmsg.DescribeConfigsResponseResource, name string) (kmsg.DescribeConfigsResponseResourceConfig, bool) {
	for _, c := range rs.Configs {
		if c.Name == name {
			return c, true
		}
	}
	return kmsg.DescribeConfigsResponseResourceConfig{}, false
}

func TestDescribeConfigs(t *testing.T) {
	h := newHarness(t, nil)
	h.runPublisher()
	seedCluster(h)
	val := func(s string) *string { return &s }
	h.commit(
		&records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: "foo", Name: "retention.ms", Value: val("1000")},
		&records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: "foo", Name: "custom.key", Value: val("x")},
		&records.ConfigRecord{ResourceType: image.ConfigBroker, ResourceName: "", Name: "log.retention.ms", Value: val("5")},
		&records.ConfigRecord{ResourceType: image.ConfigBroker, ResourceName: "1", Name: "num.partitions", Value: val("7")},
	)
	resp := describeConfigs(h, true,
		resource(kmsg.ConfigResourceTypeTopic, "foo"),
		resource(kmsg.ConfigResourceTypeTopic, "nope"),
		resource(kmsg.ConfigResourceTypeBroker, "1"),
		resource(kmsg.ConfigResourceTypeBroker, "2"),
		resource(kmsg.ConfigResourceTypeBroker, ""),
		resource(kmsg.ConfigResourceTypeTopic, "bar", "cleanup.policy"),
	)
	if len(resp.Resources) != 6 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	foo := resp.Resources[0]
	ret, ok := configByName(foo, "retention.ms")
	if foo.ErrorCode != 0 || !ok || *ret.Value != "1000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		len(ret.ConfigSynonyms) != 3 || *ret.ConfigSynonyms[1].Value != "5" || *ret.ConfigSynonyms[2].Value != "168" {
		t.Errorf("foo retention.ms %+v", ret)
	}
	if c, ok := configByName(foo, "segment.bytes"); !ok || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("foo segment.bytes %+v", c)
	}
	if c, ok := configByName(foo, "custom.key"); !ok || *c.Value != "x" {
		t.Errorf("foo custom.key %+v", c)
	}
	if resp.Resources[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %d", resp.Resources[1].ErrorCode)
	}
	self := resp.Resources[2]
	if c, ok := configByName(self, "num.partitions"); !ok || *c.Value != "7" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("broker 1 num.partitions %+v", c)
	}
	if c, ok := configByName(self, "log.retention.ms"); !ok || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("broker 1 log.retention.ms %+v", c)
	}
	if c, ok := configByName(self, "node.id"); !ok || *c.Value != "1" || !c.ReadOnly {
		t.Errorf("broker 1 node.id %+v", c)
	}
	if resp.Resources[3].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("another broker's id: %d", resp.Resources[3].ErrorCode)
	}
	if cw := resp.Resources[4]; cw.ErrorCode != 0 || len(cw.Configs) != 1 || cw.Configs[0].Name != "log.retention.ms" {
		t.Errorf("cluster-wide broker configs %+v", cw.Configs)
	}
	if bar := resp.Resources[5]; len(bar.Configs) != 1 || bar.Configs[0].Name != "cleanup.policy" || *bar.Configs[0].Value != "delete" {
		t.Errorf("filtered bar configs %+v", bar.Configs)
	}
}

// A topic config without an override shows the broker's effective default
// with the source it comes from (Kafka's createTopicConfigEntry): this
// broker's dynamic log.* value, the cluster-wide one, the static
// server.properties value, else Kafka's default; synonyms list every value
// set, under the broker key.
func TestDescribeTopicConfigDefaults(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.StaticTopicDefaults = []StaticConfig{{Name: "log.retention.ms", Value: "3600000"}, {Name: "log.segment.bytes", Value: "1048576"}}
	})
	h.runPublisher()
	seedCluster(h)
	val := func(s string) *string { return &s }
	h.commit(
		&records.ConfigRecord{ResourceType: image.ConfigBroker, ResourceName: "", Name: "log.cleanup.policy", Value: val("compact")},
		&records.ConfigRecord{ResourceType: image.ConfigBroker, ResourceName: "", Name: "min.insync.replicas", Value: val("2")},
		&records.ConfigRecord{ResourceType: image.ConfigBroker, ResourceName: "1", Name: "min.insync.replicas", Value: val("3")},
		&records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: "foo", Name: "segment.bytes", Value: val("2048")},
	)
	foo := describeConfigs(h, true, resource(kmsg.ConfigResourceTypeTopic, "foo")).Resources[0]
	if len(foo.Configs) != len(image.TopicConfigDefaults()) {
		t.Errorf("%d configs listed, Kafka lists all %d topic configs", len(foo.Configs), len(image.TopicConfigDefaults()))
	}
	type want struct {
		value    string
		source   kmsg.ConfigSource
		synonyms []string // name=value/source
	}
	for name, w := range map[string]want{
		"retention.ms": {"3600000", kmsg.ConfigSourceStaticBrokerConfig,
			[]string{"log.retention.ms=3600000/4", "log.retention.hours=168/5"}},
		"segment.bytes": {"2048", kmsg.ConfigSourceDynamicTopicConfig,
			[]string{"segment.bytes=2048/1", "log.segment.bytes=1048576/4", "log.segment.bytes=1073741824/5"}},
		"cleanup.policy": {"compact", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
			[]string{"log.cleanup.policy=compact/3", "log.cleanup.policy=delete/5"}},
		"min.insync.replicas": {"3", kmsg.ConfigSourceDynamicBrokerConfig,
			[]string{"min.insync.replicas=3/2", "min.insync.replicas=2/3", "min.insync.replicas=1/5"}},
		"segment.ms":            {"604800000", kmsg.ConfigSourceDefaultConfig, []string{"log.roll.hours=168/5"}},
		"preallocate":           {"false", kmsg.ConfigSourceDefaultConfig, []string{"log.preallocate=false/5"}},
		"remote.storage.enable": {"false", kmsg.ConfigSourceDefaultConfig, nil},
	} {
		c, ok := configByName(foo, name)
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		var syn []string
		for _, s := range c.ConfigSynonyms {
			syn = append(syn, fmt.Sprintf("%s=%s/%d", s.Name, *s.Value, s.Source))
		}
		if *c.Value != w.value || c.Source != w.source || c.ReadOnly ||
			!slices.Equal(syn, w.synonyms) {
			t.Errorf("%s: %s source %d readOnly %v synonyms %v, want %s source %d synonyms %v",
				name, *c.Value, c.Source, c.ReadOnly, syn, w.value, w.source, w.synonyms)
		}
	}
}
