package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DescribeGroups: v0-v5, one answer per group from the group coordinator
// (NOT_COORDINATOR for groups another broker coordinates). Authorized
// operations are not computed (no authorizer): the field keeps its
// "not requested" value.
func (c *ClientAPI) handleDescribeGroups(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range body.Groups {
		resp.Groups = append(resp.Groups, c.groups.DescribeGroup(g))
	}
	return resp, nil
}
