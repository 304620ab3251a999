package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// AddRaftVoter (key 80, v0-1) and RemoveRaftVoter (key 81, v0), KIP-853: forwarded
// to the active controller, as Kafka's brokers do (KafkaApis
// forwardToControllerOrFail), so kafka-metadata-quorum.sh --bootstrap-server
// add-controller / remove-controller work against a broker. A controller that is
// not the quorum leader answers NOT_LEADER_OR_FOLLOWER (or NOT_CONTROLLER) and the
// broker tries the next one; without an answer in time the error is
// REQUEST_TIMED_OUT.

func isNotLeaderCode(code int16) bool {
	return isNotControllerCode(code) || code == kerr.NotLeaderForPartition.Code
}

func (b *Broker) handleAddRaftVoter(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.AddRaftVoterRequest)
	return b.forward(ctx, body, max(body.TimeoutMillis, 0), forwarded{
		notController: func(r kmsg.Response) bool { return isNotLeaderCode(r.(*kmsg.AddRaftVoterResponse).ErrorCode) },
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.AddRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, &msg
			return resp
		},
	})
}

func (b *Broker) handleRemoveRaftVoter(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.RemoveRaftVoterRequest)
	return b.forward(ctx, body, defaultForwardTimeoutMs, forwarded{
		notController: func(r kmsg.Response) bool { return isNotLeaderCode(r.(*kmsg.RemoveRaftVoterResponse).ErrorCode) },
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, &msg
			return resp
		},
	})
}
