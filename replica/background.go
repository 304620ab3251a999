package replica

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Start runs the manager's background goroutine (Kafka's LogManager
// scheduler tasks): every RetentionCheckIntervalMs it deletes segments by
// retention (CleanupLogs). Close stops it and waits for it. Start is called
// at most once; a manager never started does no background work, which is
// what most tests want.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.run(ctx)
	}()
}

func (m *Manager) run(ctx context.Context) {
	retention := time.NewTicker(time.Duration(m.cfg.RetentionCheckIntervalMs) * time.Millisecond)
	defer retention.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			m.CleanupLogs(m.cfg.Now().UnixMilli())
		}
	}
}

// CleanupLogs applies retention to every hosted partition whose topic's
// cleanup.policy includes delete (Kafka's LogManager.cleanupLogs): whole
// segments below the partition's high watermark, older than retention.ms or
// beyond retention.bytes, are deleted and the log start offset moves up. It
// returns the number of segments deleted.
func (m *Manager) CleanupLogs(nowMs int64) int {
	total := 0
	for _, p := range m.partitions() {
		n, err := p.deleteOldSegments(nowMs)
		total += n
		if err != nil {
			m.log.Error("retention failed", zap.Stringer("partition", p.tp), zap.Error(err))
		}
	}
	return total
}

// partitions snapshots the hosted partitions.
func (m *Manager) partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}
