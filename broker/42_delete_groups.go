package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// DeleteGroups: v0-v2; each group's coordinator deletes it if Empty
// (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR otherwise).
func (c *ClientAPI) handleDeleteGroups(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DeleteGroupsRequest)
	resp := body.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range body.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, c.groups.DeleteGroup(g)
		resp.Groups = append(resp.Groups, rg)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, nil
}
