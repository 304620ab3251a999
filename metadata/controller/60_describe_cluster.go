package controller

// DescribeCluster, API key 60, versions 0-1 here (v1 EndpointType, KIP-919;
// v2 IncludeFencedBrokers is newer than the Kafka we follow).
//
// On the controller listener only EndpointType 2 (controllers) is served:
// EndpointType 1 is MISMATCHED_ENDPOINT_TYPE, any other value
// UNSUPPORTED_ENDPOINT_TYPE, both INVALID_REQUEST at v0 (whose implicit
// EndpointType is 1), as Kafka's AuthHelper.computeDescribeClusterResponse.
// It is a read answered by any controller, active or not.
//
// The nodes are the registered controllers (RegisterControllerRecord, first
// endpoint) or, while none has registered, Config.Voters. Kafka refuses the
// request below metadata.version 3.7-IV0 because it only knows controllers
// from their registrations; kraftd knows its voters from configuration, so
// kafka-metadata-quorum --bootstrap-controller works at 3.6 too.
// ControllerID is the quorum leader when it is among the nodes, else -1.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster endpoint types (KIP-919).
const (
	endpointTypeBroker     int8 = 1
	endpointTypeController int8 = 2
)

func (c *core) describeCluster(req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.SetVersion(req.Version)
	resp.EndpointType = endpointTypeController
	fail := func(e *kerr.Error, msg string) kmsg.Response {
		if req.Version == 0 {
			e = kerr.InvalidRequest
		}
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return resp
	}
	switch req.EndpointType {
	case endpointTypeController:
	case endpointTypeBroker:
		return fail(kerr.MismatchedEndpointType,
			"The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER")
	default:
		return fail(kerr.UnsupportedEndpointType, fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType))
	}
	resp.ClusterID = c.cfg.ClusterID
	resp.Brokers = c.controllerNodes()
	resp.ControllerID = -1
	if slices.ContainsFunc(resp.Brokers, func(b kmsg.DescribeClusterResponseBroker) bool { return b.NodeID == c.leader.LeaderID }) {
		resp.ControllerID = c.leader.LeaderID
	}
	return resp
}

func (c *core) controllerNodes() []kmsg.DescribeClusterResponseBroker {
	var out []kmsg.DescribeClusterResponseBroker
	for _, ctl := range c.committed.visible().Controllers() {
		if len(ctl.Listeners) == 0 {
			continue
		}
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = ctl.ID, ctl.Listeners[0].Host, int32(ctl.Listeners[0].Port)
		out = append(out, b)
	}
	if len(out) > 0 {
		return out
	}
	for _, v := range c.cfg.Voters {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = v.ID, v.Host, v.Port, v.Rack
		out = append(out, b)
	}
	return out
}
