package controller

// IncrementalAlterConfigs, API key 44, versions 0-1 (v1 flexible, KIP-339).
// Brokers forward it here (KIP-590).
//
// Per resource (Kafka's ConfigurationControlManager.incrementalAlterConfigs;
// which resources and keys: alter_configs.go): a resource named twice, or a
// key twice in one resource, is INVALID_REQUEST; ops apply in order to the
// resource's current values: SET (a null value is INVALID_REQUEST "Null
// value not supported for : key"), DELETE, APPEND and SUBTRACT (LIST keys
// only, else INVALID_CONFIG "Can't APPEND to key k because its type is not
// LIST."; from the current value or the default, comma separated, adding
// only missing elements / removing all equal ones); an unknown op is
// INVALID_REQUEST. Every value set is then checked (INVALID_CONFIG with
// Kafka's ConfigException message). A resource that fails writes nothing;
// the others write a ConfigRecord per changed key, unless ValidateOnly.

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

var opNames = [...]string{0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}

func (c *core) incrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) Result {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(req.Version)
	recs, ok := alterEachResource(c, req.Resources,
		func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		c.incrementalAlterResource,
		func(r kmsg.IncrementalAlterConfigsRequestResource, err *apiError) {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = err.code, err.msg
			}
			resp.Resources = append(resp.Resources, rr)
		})
	if !ok {
		return excessivelyLarge(req)
	}
	if req.ValidateOnly {
		recs = nil
	}
	return Result{Records: recs, Response: resp}
}

func (c *core) incrementalAlterResource(r kmsg.IncrementalAlterConfigsRequestResource) ([]records.Record, *apiError) {
	res, err := c.configTarget(r.ResourceType, r.ResourceName)
	if err != nil {
		return nil, err
	}
	next := map[string]*string{}
	for _, cfg := range r.Configs {
		if _, dup := next[cfg.Name]; dup {
			return nil, errf(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		v, err := c.applyConfigOp(res, cfg)
		if err != nil {
			return nil, err
		}
		next[cfg.Name] = v
	}
	for key, v := range next {
		if v == nil {
			continue
		}
		if err := validateConfigValue(res, key, *v); err != nil {
			return nil, err
		}
	}
	return c.configChanges(res, next), nil
}

// applyConfigOp is one key's new value (nil: deleted).
func (c *core) applyConfigOp(res image.ConfigResource, cfg kmsg.IncrementalAlterConfigsRequestResourceConfig) (*string, *apiError) {
	switch cfg.Op {
	case 0: // SET
		if cfg.Value == nil {
			return nil, errf(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
		}
		return cfg.Value, nil
	case 1: // DELETE
		return nil, nil
	case 2, 3: // APPEND, SUBTRACT
		sk := schemaKey(res, cfg.Name)
		if !image.IsListTopicConfig(sk) {
			return nil, errf(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", opNames[cfg.Op], cfg.Name)
		}
		cur, ok := c.pending.img.ConfigValue(res, cfg.Name)
		if !ok {
			cur = listDefault(sk)
		}
		list := image.SplitConfigList(cur)
		var ops []string
		if cfg.Value != nil {
			ops = strings.Split(*cfg.Value, ",")
		}
		for _, v := range ops {
			if cfg.Op == 2 && !slices.Contains(list, v) {
				list = append(list, v)
			}
			if cfg.Op == 3 {
				list = removeAll(list, v)
			}
		}
		joined := strings.Join(list, ",")
		return &joined, nil
	}
	return nil, errf(kerr.InvalidRequest, "Unknown operation type %d", cfg.Op)
}

func removeAll(list []string, v string) []string {
	out := list[:0]
	for _, e := range list {
		if e != v {
			out = append(out, e)
		}
	}
	return out
}
