package broker

import (
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
)

// HandleLoadSnapshot implements quorum.SnapshotListener. It queues the snapshot and
// drops the batches queued before it: they lie below its end, which it supersedes.
// The run goroutine builds a fresh image from it and publishes it in one swap.
func (p *publisher) HandleLoadSnapshot(s quorum.Snapshot) {
	p.mu.Lock()
	p.snap = &s
	p.queue = nil
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

var _ quorum.SnapshotListener = (*publisher)(nil)

// loadSnapshot replaces the published image with the snapshot's (during the
// initial catch-up, the image the catch-up continues from).
func (p *publisher) loadSnapshot(s quorum.Snapshot) error {
	img, err := image.FromRecords(records.DecodeAll(s.Values()), image.Provenance{
		Offset: s.ID.EndOffset - 1, Epoch: s.ID.Epoch, TimestampMs: s.LastContainedTimestampMs})
	if err != nil {
		return err
	}
	p.delta, p.preTxn = nil, nil
	if p.catchUpAt(img.Provenance().Offset) {
		p.publish(img)
	} else {
		p.delta = image.NewDelta(img) // published with the rest of the catch-up
	}
	p.log.Info("loaded metadata snapshot", zap.Int64("endOffset", s.ID.EndOffset), zap.Int32("epoch", s.ID.Epoch),
		zap.Int("partitions", img.NumPartitions()))
	return nil
}
