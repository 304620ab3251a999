package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// CreatePartitions: v0-v3, handed to Admin: forwarded to the active
// controller by a KRaft broker (KIP-590), written to ZooKeeper by a legacy
// one. The controller validates the new count and assignment.
func (c *ClientAPI) handleCreatePartitions(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.CreatePartitionsRequest)
	resp, err := c.cfg.Admin.CreatePartitions(ctx, body)
	if err != nil {
		return adminFailed(ctx, err, createPartitionsFailure(body))
	}
	return resp, nil
}

// CreatePartitions forwards req to the active controller, which commits
// the PartitionRecords; NOT_CONTROLLER is retried within TimeoutMillis,
// then every topic answers REQUEST_TIMED_OUT. The error is non-nil only
// when ctx ended.
func (b *Broker) CreatePartitions(ctx context.Context, body *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error) {
	resp, err := b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
				if isNotControllerCode(t.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: createPartitionsFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.CreatePartitionsResponse), nil
}

// createPartitionsFailure answers every topic of body with one error.
func createPartitionsFailure(body *kmsg.CreatePartitionsRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range body.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}
