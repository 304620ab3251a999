package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// UpdateFeatures (key 57, v0-2): forwarded to the active controller, as Kafka's
// brokers do, so kafka-features.sh --bootstrap-server upgrade reaches it (kraftd's
// controllers change kraft.version this way). NOT_CONTROLLER, at the top level or
// for a feature, sends it to the next controller; without an answer in time every
// feature gets REQUEST_TIMED_OUT.
func (b *Broker) handleUpdateFeatures(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.UpdateFeaturesRequest)
	return b.forward(ctx, body, max(body.TimeoutMillis, 0), forwarded{
		notController: func(r kmsg.Response) bool {
			resp := r.(*kmsg.UpdateFeaturesResponse)
			if isNotControllerCode(resp.ErrorCode) {
				return true
			}
			for _, res := range resp.Results {
				if isNotControllerCode(res.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.UpdateFeaturesResponse)
			resp.ErrorCode, resp.ErrorMessage = code, &msg
			if body.Version < 2 {
				for _, u := range body.FeatureUpdates {
					r := kmsg.NewUpdateFeaturesResponseResult()
					r.Feature, r.ErrorCode, r.ErrorMessage = u.Feature, code, &msg
					resp.Results = append(resp.Results, r)
				}
			}
			return resp
		},
	})
}
