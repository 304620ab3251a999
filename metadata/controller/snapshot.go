package controller

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
)

// HandleLoadSnapshot implements quorum.SnapshotListener; it only queues. The quorum
// never calls it while this node leads, so there is nothing in flight to drop.
func (c *Controller) HandleLoadSnapshot(s quorum.Snapshot) { c.enqueue(s) }

var _ quorum.SnapshotListener = (*Controller)(nil)

// SnapshotImage decodes a snapshot's records into the image they describe.
func SnapshotImage(s quorum.Snapshot) (*image.Image, error) {
	img, err := image.FromRecordsIndexed(records.DecodeAll(s.Values()), image.Provenance{
		Offset: s.ID.EndOffset - 1, Epoch: s.ID.Epoch, TimestampMs: s.LastContainedTimestampMs})
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot (%d,%d): %w", ErrReplay, s.ID.EndOffset, s.ID.Epoch, err)
	}
	return img, nil
}

// loadSnapshot replaces the committed state with a snapshot in one step. Broker
// epochs are the offsets of their registrations, which the image keeps; the
// registration offsets of the caught-up check become the snapshot's last offset.
func (c *core) loadSnapshot(s quorum.Snapshot, nowMs int64) {
	img, err := SnapshotImage(s)
	if err != nil {
		c.fail(fmt.Errorf("%w: snapshot %d-%d: %w", ErrReplay, s.ID.EndOffset, s.ID.Epoch, err))
		return
	}
	v := emptyView()
	v.img = img
	// Kafka replays a snapshot's RegisterBrokerRecords at the snapshot's last
	// contained offset, so a broker counts as caught up only once it has
	// applied the whole snapshot: later than its registration, which is
	// what the broker epoch says.
	for _, b := range img.Brokers() {
		v.regOffsets[b.ID] = s.ID.EndOffset - 1
	}
	c.renounce("loading snapshot")
	c.committed, c.pending, c.committedOffset = v, v, s.ID.EndOffset-1
	c.failed = nil
	c.log.Info("loaded snapshot", zap.Int64("endOffset", s.ID.EndOffset), zap.Int32("epoch", s.ID.Epoch))
	if c.onCommit != nil {
		c.onCommit(v.visible(), c.committedOffset)
	}
	c.maybeActivate(nowMs)
}
