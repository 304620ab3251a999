package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// LeaveGroup: v0-v5 (v3+ batched, KIP-345); the group coordinator answers.
func (c *ClientAPI) handleLeaveGroup(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	return c.groups.LeaveGroup(req.Body.(*kmsg.LeaveGroupRequest)), nil
}
