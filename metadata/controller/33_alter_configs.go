package controller

// AlterConfigs, API key 33, versions 0-2 (v2 flexible). Brokers forward it
// here (KIP-590).
//
// The legacy, non-incremental alter (Kafka's
// ConfigurationControlManager.legacyAlterConfigs): each resource's configs
// replace all of its dynamic configs, keys not listed are deleted.
// Resources and keys as alter_configs.go; a resource named twice, a key
// twice or a null value is INVALID_REQUEST; every value is checked
// (INVALID_CONFIG with Kafka's ConfigException message). A resource that
// fails writes nothing; ValidateOnly writes nothing.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) alterConfigs(req *kmsg.AlterConfigsRequest) Result {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.SetVersion(req.Version)
	recs, ok := alterEachResource(c, req.Resources,
		func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		c.alterResource,
		func(r kmsg.AlterConfigsRequestResource, err *apiError) {
			rr := kmsg.NewAlterConfigsResponseResource()
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

// alterEachResource is the loop AlterConfigs and IncrementalAlterConfigs share:
// a resource named twice is INVALID_REQUEST (Kafka's "Duplicate resource"), every
// other one is altered on its own and answered through answer; the records of all
// that succeed are returned. ok is false when they exceed
// controller.max.records.per.user.op (the request is then refused whole).
func alterEachResource[R any](c *core, resources []R, key func(R) (kmsg.ConfigResourceType, string),
	alter func(R) ([]records.Record, *apiError), answer func(R, *apiError)) (recs []records.Record, ok bool) {
	counts := map[string]int{}
	for _, r := range resources {
		counts[configResourceKey(key(r))]++
	}
	budget := recordBudget(c.cfg.MaxRecordsPerUserOp)
	for _, r := range resources {
		typ, name := key(r)
		var err *apiError
		if counts[configResourceKey(typ, name)] > 1 {
			err = errf(kerr.InvalidRequest, "Duplicate resource %s", name)
		} else {
			var rs []records.Record
			if rs, err = alter(r); err == nil && !budget.take(len(rs)) {
				return nil, false
			}
			recs = append(recs, rs...)
		}
		answer(r, err)
	}
	return recs, true
}

func (c *core) alterResource(r kmsg.AlterConfigsRequestResource) ([]records.Record, *apiError) {
	res, err := c.configTarget(r.ResourceType, r.ResourceName)
	if err != nil {
		return nil, err
	}
	next := map[string]*string{}
	for _, e := range c.pending.img.Configs(res) {
		next[e.Name] = nil // deleted unless listed
	}
	seen := map[string]bool{}
	for _, cfg := range r.Configs {
		switch {
		case seen[cfg.Name]:
			return nil, errf(kerr.InvalidRequest, "Error due to duplicate config keys")
		case cfg.Value == nil:
			return nil, errf(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
		}
		seen[cfg.Name] = true
		if err := validateConfigValue(res, cfg.Name, *cfg.Value); err != nil {
			return nil, err
		}
		next[cfg.Name] = cfg.Value
	}
	return c.configChanges(res, next), nil
}
