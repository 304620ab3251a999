package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// OffsetDelete: v0 (KIP-496); the group coordinator answers.
func (c *ClientAPI) handleOffsetDelete(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	resp := c.groups.OffsetDelete(req.Body.(*kmsg.OffsetDeleteRequest))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, nil
}
