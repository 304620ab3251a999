package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// CreatePartitions: v0-v3, forwarded to the active controller (KIP-590).
//
// The controller validates the new count and assignment and commits the
// PartitionRecords; the broker retries NOT_CONTROLLER within TimeoutMillis,
// then every topic answers REQUEST_TIMED_OUT.
func (b *Broker) handleCreatePartitions(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.CreatePartitionsRequest)
	return b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
				if isNotControllerCode(t.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.CreatePartitionsResponse)
			for _, t := range body.Topics {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		},
	})
}
