package controller

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transcript commands for the config APIs:
//
//	incremental-alter-configs [validate-only]   input: topic|broker NAME OP:KEY[=VALUE]...
//	                          OP is set, delete, append, subtract; set:KEY alone sets null;
//	                          NAME "-" is the empty name (cluster-wide broker default)
//	alter-configs [validate-only]               input: topic|broker NAME KEY=VALUE...

var configOps = map[string]kmsg.IncrementalAlterConfigOp{"set": 0, "delete": 1, "append": 2, "subtract": 3}

func configResource(e *env, fields []string) (kmsg.ConfigResourceType, string) {
	typ := map[string]kmsg.ConfigResourceType{"topic": kmsg.ConfigResourceTypeTopic, "broker": kmsg.ConfigResourceTypeBroker,
		"group": kmsg.ConfigResourceType(32)}[fields[0]]
	if typ == 0 {
		e.t.Fatalf("unknown resource type %q", fields[0])
	}
	name := fields[1]
	if name == "-" {
		name = ""
	}
	return typ, name
}

func (e *env) incrementalAlterConfigsRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	req.ValidateOnly = tc.has("validate-only")
	for _, line := range tc.input {
		fields := strings.Fields(line)
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = configResource(e, fields)
		for _, f := range fields[2:] {
			op, kv, _ := strings.Cut(f, ":")
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Op = configOps[op]
			if op == "bogus" {
				c.Op = 9
			}
			k, v, ok := strings.Cut(kv, "=")
			c.Name = k
			if ok {
				c.Value = kmsg.StringPtr(v)
			}
			r.Configs = append(r.Configs, c)
		}
		req.Resources = append(req.Resources, r)
	}
	return req
}

func (e *env) alterConfigsRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	req.ValidateOnly = tc.has("validate-only")
	for _, line := range tc.input {
		fields := strings.Fields(line)
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = configResource(e, fields)
		for _, f := range fields[2:] {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			k, v, ok := strings.Cut(f, "=")
			c.Name = k
			if ok {
				c.Value = kmsg.StringPtr(v)
			}
			r.Configs = append(r.Configs, c)
		}
		req.Resources = append(req.Resources, r)
	}
	return req
}

func formatConfigResource(b *strings.Builder, typ kmsg.ConfigResourceType, name string, code int16, m *string) {
	fmt.Fprintf(b, "  %s/%s: error=%s%s\n", strings.ToLower(typ.String()), name, errName(code), msg(m))
}
