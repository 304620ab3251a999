package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DescribeQuorum: v0-v2, forwarded to the active controller, as Kafka
// brokers do, so kafka-metadata-quorum.sh --bootstrap-server works against
// a broker (KIP-595, KIP-836, KIP-853).
//
// Only the raft leader can describe the quorum; a controller that is not
// answers NOT_LEADER_OR_FOLLOWER on the partition (or NOT_CONTROLLER), and
// the broker retries the next one. Without an answer within Kafka's
// request.timeout.ms the top-level error is REQUEST_TIMED_OUT.
func (b *Broker) handleDescribeQuorum(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeQuorumRequest)
	return b.forward(ctx, body, defaultForwardTimeoutMs, forwarded{
		notController: func(r kmsg.Response) bool {
			resp := r.(*kmsg.DescribeQuorumResponse)
			if isNotControllerCode(resp.ErrorCode) {
				return true
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == kerr.NotLeaderForPartition.Code {
						return true
					}
				}
			}
			return false
		},
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.DescribeQuorumResponse)
			resp.ErrorCode = code
			if body.Version >= 2 {
				resp.ErrorMessage = &msg
			}
			return resp
		},
	})
}
