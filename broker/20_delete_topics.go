package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DeleteTopics: v0-v6, handed to Admin: forwarded to the active
// controller by a KRaft broker (KIP-590), written to ZooKeeper by a legacy
// one.
//
// v0-v5 name topics in TopicNames; v6 names them in Topics by name or by
// TopicID (KIP-516). Errors come from the controller
// (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, ...).
func (c *ClientAPI) handleDeleteTopics(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DeleteTopicsRequest)
	resp, err := c.cfg.Admin.DeleteTopics(ctx, body)
	if err != nil {
		return adminFailed(ctx, err, deleteTopicsFailure(body))
	}
	return resp, nil
}

// DeleteTopics forwards req to the active controller; NOT_CONTROLLER is
// retried within TimeoutMillis, then every topic answers
// REQUEST_TIMED_OUT. The error is non-nil only when ctx ended.
func (b *Broker) DeleteTopics(ctx context.Context, body *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error) {
	resp, err := b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
				if isNotControllerCode(t.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: deleteTopicsFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.DeleteTopicsResponse), nil
}

// deleteTopicsFailure answers every topic of body with one error.
func deleteTopicsFailure(body *kmsg.DeleteTopicsRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		if body.Version >= 6 {
			for _, t := range body.Topics {
				add(t.Topic, t.TopicID)
			}
			return resp
		}
		for _, n := range body.TopicNames {
			add(&n, [16]byte{})
		}
		return resp
	}
}
