package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// ElectLeaders: v0-v2 (v1 election types, KIP-460, and a top-level error
// code; v2 flexible), handed to Admin: forwarded to the active controller
// by a KRaft broker (Kafka's KafkaApis: maybeForwardToController), carried
// out by the ZooKeeper-era controller for a legacy one. A null topic list
// elects every partition that needs it. Kafka requires ALTER on the
// CLUSTER resource (CLUSTER_AUTHORIZATION_FAILED); kraftd has no ACLs and
// allows every request.
func (c *ClientAPI) handleElectLeaders(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.ElectLeadersRequest)
	resp, err := c.cfg.Admin.ElectLeaders(ctx, body)
	if err != nil {
		return adminFailed(ctx, err, electLeadersFailure(body))
	}
	return resp, nil
}

// ElectLeaders forwards req to the active controller, which answers once
// the PartitionChangeRecords commit (as Kafka's KRaft broker, it does not
// wait for its own metadata to show the new leaders); NOT_CONTROLLER is
// retried within TimeoutMillis, then every partition answers
// REQUEST_TIMED_OUT. The error is non-nil only when ctx ended.
func (b *Broker) ElectLeaders(ctx context.Context, body *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, error) {
	resp, err := b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			er := r.(*kmsg.ElectLeadersResponse)
			if isNotControllerCode(er.ErrorCode) {
				return true
			}
			for _, t := range er.Topics {
				for _, p := range t.Partitions {
					if isNotControllerCode(p.ErrorCode) {
						return true
					}
				}
			}
			return false
		},
		failure: electLeadersFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ElectLeadersResponse), nil
}

// maxElectFailureEntries bounds the per-partition results of a failure
// answer: past it (a request naming more topic and partition entries) only
// the top-level error is set, so a hostile request is not answered ten
// times its size.
const maxElectFailureEntries = 100_000

// electLeadersFailure is Kafka's ElectLeadersRequest.getErrorResponse: the
// top-level error and, for each partition named (up to
// maxElectFailureEntries entries), the same error.
func electLeadersFailure(body *kmsg.ElectLeadersRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
		n := len(body.Topics)
		for _, t := range body.Topics {
			n += len(t.Partitions)
		}
		if n > maxElectFailureEntries {
			return resp
		}
		for _, t := range body.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, &msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}
