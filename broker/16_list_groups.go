package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// ListGroups: v0-v4 (v4 filters by state); the groups this broker
// coordinates, as in Kafka (admin clients ask every broker).
func (c *ClientAPI) handleListGroups(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	return c.groups.ListGroups(req.Body.(*kmsg.ListGroupsRequest)), nil
}
