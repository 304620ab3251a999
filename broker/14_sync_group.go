package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// SyncGroup: v0-v5; the group coordinator answers once the leader's
// assignment is committed.
func (c *ClientAPI) handleSyncGroup(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	resp := c.groups.SyncGroup(ctx, req.Body.(*kmsg.SyncGroupRequest))
	if resp == nil {
		return nil, ctx.Err()
	}
	return resp, nil
}
