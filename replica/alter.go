package replica

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// isrLoop is the manager's ISR goroutine: every replica.lag.time.max.ms / 2
// it asks each led partition whether followers fell out of sync (Kafka's
// isr-expiration task), and it sends queued ISR changes to the controller,
// one AlterPartition request at a time carrying every queued change (Kafka's
// AlterPartitionManager). Each partition has at most one change in flight
// (Partition.pending), so the queue holds at most one item per partition.
//
// INVARIANTS: the goroutine runs only between start and stop; queue items
// are sent in order, and an item whose answer says retry goes back to the
// queue after a backoff.
type isrLoop struct {
	m *Manager

	mu     sync.Mutex
	queue  []queuedAlter
	wake   chan struct{} // capacity 1
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type queuedAlter struct {
	p    *Partition
	item *AlterPartitionItem
}

// alterRetryBackoffMs is the pause before a failed AlterPartition is sent
// again (Kafka's AlterPartitionManager retries after 50 ms).
const alterRetryBackoffMs = 50

func newISRLoop(m *Manager) *isrLoop {
	l := &isrLoop{m: m, wake: make(chan struct{}, 1)}
	m.hooks.submit = l.enqueue
	return l
}

// enqueue queues an ISR change for the controller.
func (l *isrLoop) enqueue(p *Partition, item *AlterPartitionItem) {
	l.mu.Lock()
	l.queue = append(l.queue, queuedAlter{p: p, item: item})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *isrLoop) start(r Replication) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Go(func() { l.run(ctx, r) })
}

// stop cancels the goroutine and waits for it; it cannot be started again.
func (l *isrLoop) stop() {
	l.mu.Lock()
	if l.cancel == nil {
		l.cancel = func() {}
	}
	l.cancel()
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *isrLoop) run(ctx context.Context, r Replication) {
	period := time.Duration(max(l.m.cfg.ReplicaLagTimeMaxMs/2, 1)) * time.Millisecond
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			l.shrinkAll()
		case <-l.wake:
		}
		l.sendQueued(ctx, r)
	}
}

// shrinkAll runs the out-of-sync check on every partition led here.
func (l *isrLoop) shrinkAll() {
	nowMs := l.m.hooks.nowMs()
	l.m.mu.RLock()
	parts := make([]*Partition, 0, len(l.m.parts))
	for _, p := range l.m.parts {
		parts = append(parts, p)
	}
	l.m.mu.RUnlock()
	for _, p := range parts {
		if item := p.maybeShrinkISR(nowMs); item != nil {
			l.enqueue(p, item)
		}
	}
}

// sendQueued sends every queued change in one request and applies the
// answers; changes to retry are queued again after a backoff.
func (l *isrLoop) sendQueued(ctx context.Context, r Replication) {
	l.mu.Lock()
	batch := l.queue
	l.queue = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	items := make([]AlterPartitionItem, len(batch))
	for i, q := range batch {
		items[i] = *q.item
	}
	results, err := r.AlterPartition.AlterPartition(ctx, l.m.cfg.BrokerID, r.BrokerEpoch(), items)
	var retry []queuedAlter
	if err != nil || len(results) != len(items) {
		if ctx.Err() != nil {
			return
		}
		l.m.log.Info("AlterPartition failed; retrying", zap.Int("partitions", len(items)), zap.Error(err))
		retry = batch
	} else {
		nowMs := l.m.hooks.nowMs()
		for i, q := range batch {
			if q.p.handleAlterResult(q.item, results[i], nowMs) {
				retry = append(retry, q)
			}
		}
	}
	if len(retry) == 0 {
		return
	}
	t := time.NewTimer(alterRetryBackoffMs * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	for _, q := range retry {
		l.enqueue(q.p, q.item)
	}
}
