package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// ErrShutdownIncomplete: controlled shutdown used up its retries while the
// broker still led partitions; Kafka then shuts down anyway.
var ErrShutdownIncomplete = errors.New("legacyzk: controlled shutdown incomplete")

// Shutdown is KafkaServer.controlledShutdown followed by Close: send
// ControlledShutdown(brokerId, brokerEpoch) to the controller, up to
// controlled.shutdown.max.retries attempts spaced by
// controlled.shutdown.retry.backoff.ms, until the answer lists no
// partition this broker still leads; then stop (the session closes and the
// ephemeral registration vanishes at once). It returns
// ErrShutdownIncomplete (after closing anyway) when the retries ran out.
// A broker already closed or killed returns at once.
func (b *Broker) Shutdown(ctx context.Context) error {
	if b.closed.Load() {
		return nil
	}
	err := b.controlledShutdown(ctx)
	b.Close()
	return err
}

func (b *Broker) controlledShutdown(ctx context.Context) error {
	var last error
	for attempt := 0; attempt < b.cfg.ControlledShutdownMaxRetries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(b.cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		remaining, err := b.sendControlledShutdown(ctx)
		if err == nil && remaining == 0 {
			b.log.Info("controlled shutdown succeeded")
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("%w: still leading %d partitions", ErrShutdownIncomplete, remaining)
		}
		b.log.Info("controlled shutdown attempt failed", zap.Int("attempt", attempt+1), zap.Error(last))
	}
	return fmt.Errorf("%w: %w", ErrShutdownIncomplete, last)
}

// sendControlledShutdown sends one request to the controller the last
// UpdateMetadata named, at its address in this broker's cache, as Kafka's
// KafkaServer.controlledShutdown does.
func (b *Broker) sendControlledShutdown(ctx context.Context) (int, error) {
	id := b.ControllerID()
	ctrl, ok := b.Image().Broker(id)
	if id < 0 || !ok {
		return 0, fmt.Errorf("%w: controller %d unknown to the cache", ErrControllerMoved, id)
	}
	ep, ok := ctrl.Listener(b.cfg.ListenerName)
	if !ok {
		return 0, fmt.Errorf("%w: controller %d has no %s listener", ErrControllerMoved, id, b.cfg.ListenerName)
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = ControlledShutdownVersion
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, b.BrokerEpoch()
	resp, err := b.client.Request(ctx, joinHostPort(ep.Host, ep.Port), req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.ControlledShutdownResponse)
	if r.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(r.ErrorCode)
	}
	return len(r.PartitionsRemaining), nil
}
