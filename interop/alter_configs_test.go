package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm's config calls against a KRaft cluster: the controller refuses bad
// topic config values with Kafka's INVALID_CONFIG messages (CreateTopics,
// IncrementalAlterConfigs, AlterConfigs), and DescribeConfigs shows each
// topic config's effective value with its source: the topic's override,
// the cluster-wide dynamic broker default, the broker's static
// server.properties value, or Kafka's default.
func TestAlterAndDescribeTopicConfigs(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1), Override("log.retention.bytes", "1000000000"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	str := func(s string) *string { return &s }
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": str("abc")}, "cfg"); !errors.Is(err, kerr.InvalidConfig) ||
		r.ErrMessage != "Invalid value abc for configuration retention.ms: Not a number of type LONG" {
		t.Fatalf("create with retention.ms=abc: %v %q", err, r.ErrMessage)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "cfg"); err != nil {
		t.Fatal(err)
	}
	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			return nil // the broker has not published the topic yet
		}
		if err != nil || rc.Err != nil {
			t.Fatalf("describe cfg: %v %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	expect := func(cfgs map[string]kadm.Config, key, value string, source kmsg.ConfigSource) bool {
		c, ok := cfgs[key]
		return ok && c.MaybeValue() == value && c.Source == source
	}
	var cfgs map[string]kadm.Config
	waitFor(t, "the broker to know the topic", 10*time.Second, func() bool { cfgs = describe(); return cfgs != nil })
	if !expect(cfgs, "retention.bytes", "1000000000", kmsg.ConfigSourceStaticBrokerConfig) ||
		!expect(cfgs, "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig) {
		t.Fatalf("defaults: retention.bytes %+v retention.ms %+v", cfgs["retention.bytes"], cfgs["retention.ms"])
	}

	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: str("0")}}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.On("cfg", nil); !errors.Is(r.Err, kerr.InvalidConfig) ||
		r.ErrMessage != "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" {
		t.Fatalf("min.insync.replicas=0: %v %q", r.Err, r.ErrMessage)
	}
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Op: kadm.AppendConfig, Value: str("bogus")}}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.On("cfg", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("cleanup.policy += bogus: %v %q", r.Err, r.ErrMessage)
	}
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("3600000")}}, "cfg")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("retention.ms=3600000: %v %+v", err, resps)
	}
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.segment.bytes", Value: str("2097152")}})
	if err != nil || resps[0].Err != nil {
		t.Fatalf("cluster-wide log.segment.bytes: %v %+v", err, resps)
	}
	waitFor(t, "the altered configs in DescribeConfigs", 10*time.Second, func() bool {
		cfgs = describe()
		return expect(cfgs, "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig) &&
			expect(cfgs, "segment.bytes", "2097152", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	})
	// AlterConfigs replaces the topic's overrides: retention.ms goes.
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: str("2048")}}, "cfg")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("AlterConfigs max.message.bytes: %v %+v", err, resps)
	}
	waitFor(t, "the replaced configs in DescribeConfigs", 10*time.Second, func() bool {
		cfgs = describe()
		return expect(cfgs, "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig) &&
			expect(cfgs, "max.message.bytes", "2048", kmsg.ConfigSourceDynamicTopicConfig)
	})
}

// sweepIncrementalAlterConfigs validates (only) a good and a bad value on
// the sweep topic.
func sweepIncrementalAlterConfigs(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = true
	for _, value := range []string{"1000", "abc"} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, e.topic
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr(value)
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
	}
	req.Resources[1].ResourceName = "no-such-topic"
	resp, err := request[*kmsg.IncrementalAlterConfigsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 ||
		resp.Resources[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		return fmt.Errorf("answer %+v", resp.Resources)
	}
	return nil
}

// sweepAlterConfigs validates (only) a bad value on the sweep topic.
func sweepAlterConfigs(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = true
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, e.topic
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("abc")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := request[*kmsg.AlterConfigsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		return fmt.Errorf("answer %+v", resp.Resources)
	}
	return nil
}
