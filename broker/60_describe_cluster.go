package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DescribeCluster: v0-v2 (KIP-700), answered from the last published image.
//
// Behaviour:
//   - EndpointType (v1+, KIP-919): 1 = brokers is what a broker answers;
//     2 = controllers is MISMATCHED_ENDPOINT_TYPE (114) and any other value
//     UNSUPPORTED_ENDPOINT_TYPE (115), both INVALID_REQUEST at v0, as
//     Kafka's AuthHelper.computeDescribeClusterResponse answers. The
//     response's EndpointType is always 1 (BROKER), the schema default
//     Kafka leaves in its error answers and the type it sets otherwise.
//   - Brokers: unfenced brokers having the request's listener; v2
//     IncludeFencedBrokers adds the fenced ones with IsFenced = true.
//   - ControllerID: as in Metadata (ClientAPIConfig.ControllerID).
//   - ClusterAuthorizedOperations: every cluster operation when requested
//     (no authorizer), else -2147483648.
func (c *ClientAPI) handleDescribeCluster(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeClusterRequest)
	resp := body.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if e, msg := describeClusterEndpointError(body); e != nil {
		resp.ErrorCode, resp.ErrorMessage = e.Code, &msg
		return resp, nil
	}
	img := c.cfg.Metadata.Image()
	resp.ClusterID = c.cfg.ClusterID
	resp.ControllerID = c.controllerID(img, req.Listener)
	if body.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
	}
	includeFenced := body.Version >= 2 && body.IncludeFencedBrokers
	for _, br := range img.Brokers() {
		ep, ok := br.Listener(req.Listener)
		if !ok || (br.Fenced && !includeFenced) {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack, db.IsFenced = br.ID, ep.Host, int32(ep.Port), br.Rack, br.Fenced
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp, nil
}

// describeClusterEndpointError is the error a broker answers for the
// request's EndpointType, or nil for BROKER.
func describeClusterEndpointError(body *kmsg.DescribeClusterRequest) (*kerr.Error, string) {
	var e *kerr.Error
	var msg string
	switch body.EndpointType {
	case 1:
		return nil, ""
	case 2:
		e, msg = kerr.MismatchedEndpointType, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
	default:
		e, msg = kerr.UnsupportedEndpointType, fmt.Sprintf("Unsupported endpoint type %d", body.EndpointType)
	}
	if body.Version == 0 {
		e = kerr.InvalidRequest
	}
	return e, msg
}
