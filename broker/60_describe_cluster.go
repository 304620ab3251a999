package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DescribeCluster: v0-v2 (KIP-700), answered from the last published image.
//
// Behaviour:
//   - EndpointType (v1+, KIP-919): 1 = brokers is what a broker answers; 2 =
//     controllers is only answered by controllers, so a broker says
//     UNSUPPORTED_ENDPOINT_TYPE (115); anything else is also unsupported.
//   - Brokers: unfenced brokers having the request's listener; v2
//     IncludeFencedBrokers adds the fenced ones with IsFenced = true.
//   - ControllerID: as in Metadata (ClientAPIConfig.ControllerID).
//   - ClusterAuthorizedOperations: every cluster operation when requested
//     (no authorizer), else -2147483648.
func (c *ClientAPI) handleDescribeCluster(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeClusterRequest)
	resp := body.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = body.EndpointType
	if body.Version >= 1 && body.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "The broker does not support endpoint type " + endpointTypeName(body.EndpointType)
		resp.ErrorMessage = &msg
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

func endpointTypeName(t int8) string {
	switch t {
	case 1:
		return "BROKER"
	case 2:
		return "CONTROLLER"
	}
	return "UNKNOWN"
}
