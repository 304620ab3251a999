package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// OffsetCommit: v0-v8. The group coordinator checks the member and
// generation (generation -1 only for an Empty group), writes the offsets to
// __consumer_offsets and answers once they are committed there; partitions
// of unknown topics are UNKNOWN_TOPIC_OR_PARTITION, metadata over
// offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE.
func (c *ClientAPI) handleOffsetCommit(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	resp := c.groups.OffsetCommit(req.Body.(*kmsg.OffsetCommitRequest))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, nil
}
