package legacyzk

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

// handleUpdateMetadata is KafkaApis.handleUpdateMetadataRequest +
// ZkMetadataCache.updateMetadata: after the broker- and controller-epoch
// fences the cache is overwritten with what the request carries. There is
// no per-partition epoch comparison and no anti-entropy: a broker that
// misses one stays stale until a later push covers the same partitions.
func (b *Broker) handleUpdateMetadata(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.UpdateMetadataRequest)
	resp := r.ResponseKind().(*kmsg.UpdateMetadataResponse)
	if code, err := b.verifyPush(ctx, r.BrokerEpoch, r.ControllerEpoch); err != nil || code != 0 {
		resp.ErrorCode = code
		return resp, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if code := b.pushFenced(r.BrokerEpoch, r.ControllerEpoch); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	b.controllerEpoch = r.ControllerEpoch
	b.umControllerID.Store(r.ControllerID)
	if err := b.applyUpdateMetadata(r); err != nil {
		// A push the image cannot take is a bug on one side. Kafka answers
		// an exception in the handler with UNKNOWN_SERVER_ERROR; closing
		// the connection instead would make the sender resend it forever.
		b.log.Error("cannot apply UpdateMetadata", zap.Error(err))
		resp.ErrorCode = kerr.UnknownServerError.Code
	}
	return resp, nil
}

// applyUpdateMetadata replays the push as records into the next image and
// publishes it; caller holds mu.
func (b *Broker) applyUpdateMetadata(r *kmsg.UpdateMetadataRequest) error {
	cur := b.cache.Load()
	d := image.NewDelta(cur)
	for _, rec := range updateMetadataRecords(cur, r) {
		b.cacheOffset++
		if err := d.Replay(b.cacheOffset, r.ControllerEpoch, rec); err != nil {
			return err
		}
	}
	b.cache.Store(d.Apply())
	return nil
}
