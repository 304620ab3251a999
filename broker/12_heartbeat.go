package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// Heartbeat: v0-v4; the group coordinator answers.
func (c *ClientAPI) handleHeartbeat(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	return c.groups.Heartbeat(req.Body.(*kmsg.HeartbeatRequest)), nil
}
