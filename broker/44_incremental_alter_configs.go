package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// IncrementalAlterConfigs (v0-v1) and AlterConfigs (v0-v2): a KRaft broker
// forwards them to the active controller (KIP-590), which validates the
// keys and values (INVALID_CONFIG with Kafka's messages) and writes
// ConfigRecords; brokers apply them from the published image. Served only
// when the Admin is a ConfigAdmin (zk-legacy brokers do not serve them
// yet). The advertised max is capped by the controller's.

// ConfigAdmin carries out config changes; a KRaft broker forwards them.
type ConfigAdmin interface {
	IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) (*kmsg.IncrementalAlterConfigsResponse, error)
	AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) (*kmsg.AlterConfigsResponse, error)
}

// registerConfigAdmin serves 33 and 44 on reg when Admin can.
func (c *ClientAPI) registerConfigAdmin(reg *protocol.Registry) {
	ca, ok := c.cfg.Admin.(ConfigAdmin)
	if !ok {
		return
	}
	reg.Register(44, 0, 1, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
		body := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
		resp, err := ca.IncrementalAlterConfigs(ctx, body)
		if err != nil {
			return adminFailed(ctx, err, incrementalAlterConfigsFailure(body))
		}
		return resp, nil
	})
	reg.Register(33, 0, 2, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
		body := req.Body.(*kmsg.AlterConfigsRequest)
		resp, err := ca.AlterConfigs(ctx, body)
		if err != nil {
			return adminFailed(ctx, err, alterConfigsFailure(body))
		}
		return resp, nil
	})
}

// IncrementalAlterConfigs forwards req to the active controller.
func (b *Broker) IncrementalAlterConfigs(ctx context.Context, body *kmsg.IncrementalAlterConfigsRequest) (*kmsg.IncrementalAlterConfigsResponse, error) {
	resp, err := b.forward(ctx, body, defaultForwardTimeoutMs, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, res := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
				if isNotControllerCode(res.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: incrementalAlterConfigsFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.IncrementalAlterConfigsResponse), nil
}

// AlterConfigs forwards req to the active controller.
func (b *Broker) AlterConfigs(ctx context.Context, body *kmsg.AlterConfigsRequest) (*kmsg.AlterConfigsResponse, error) {
	resp, err := b.forward(ctx, body, defaultForwardTimeoutMs, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, res := range r.(*kmsg.AlterConfigsResponse).Resources {
				if isNotControllerCode(res.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: alterConfigsFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterConfigsResponse), nil
}

func incrementalAlterConfigsFailure(body *kmsg.IncrementalAlterConfigsRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range body.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
}

func alterConfigsFailure(body *kmsg.AlterConfigsRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, r := range body.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
}
