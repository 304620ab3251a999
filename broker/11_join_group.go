package broker

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// JoinGroup: v0-v9; the group coordinator (coordinator/group) decides. The
// answer waits for the join phase; the connection's later requests wait
// behind it, as in Kafka.
func (c *ClientAPI) handleJoinGroup(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.JoinGroupRequest)
	resp := c.groups.JoinGroup(ctx, body, clientIDOf(req), clientHostOf(req))
	if resp == nil {
		return nil, ctx.Err()
	}
	return resp, nil
}

func clientIDOf(req *protocol.Request) string {
	if req.ClientID == nil {
		return ""
	}
	return *req.ClientID
}

// clientHostOf is Kafka's clientHost: "/" and the peer's IP address (Java's
// InetAddress.toString with no host name).
func clientHostOf(req *protocol.Request) string {
	if req.RemoteAddr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr.String())
	if err != nil {
		return "/" + req.RemoteAddr.String()
	}
	return "/" + host
}
