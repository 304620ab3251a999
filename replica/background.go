package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// Start runs the manager's background goroutines (Kafka's LogManager
// scheduler tasks). One writes new logs' partition.metadata files
// (runTopicIDFlusher). The other, every RetentionCheckIntervalMs, deletes segments by
// retention (CleanupLogs), every ProducerIDExpirationCheckIntervalMs it
// expires idle producers (RemoveExpiredProducers), and it writes each
// checkpoint file at its own interval. Close stops it and waits for it. Start is called
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
	m.wg.Go(func() { m.run(ctx) })
	m.wg.Go(func() { m.runTopicIDFlusher(ctx) })
}

func (m *Manager) run(ctx context.Context) {
	every := func(ms int64) *time.Ticker { return time.NewTicker(time.Duration(ms) * time.Millisecond) }
	retention := every(m.cfg.RetentionCheckIntervalMs)
	hwCkpt := every(m.cfg.HighWatermarkCheckpointIntervalMs)
	recoveryCkpt := every(m.cfg.RecoveryPointCheckpointIntervalMs)
	startCkpt := every(m.cfg.LogStartOffsetCheckpointIntervalMs)
	expiry := every(m.cfg.ProducerIDExpirationCheckIntervalMs)
	defer func() {
		for _, t := range []*time.Ticker{retention, hwCkpt, recoveryCkpt, startCkpt, expiry} {
			t.Stop()
		}
	}()
	checkpoint := func(k checkpointKind) {
		if err := m.writeCheckpoints(k); err != nil {
			m.log.Error("writing a checkpoint file failed", zap.Error(err))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			m.CleanupLogs(m.cfg.Now().UnixMilli())
		case <-hwCkpt.C:
			checkpoint(highWatermarks)
		case <-recoveryCkpt.C:
			checkpoint(recoveryPoints)
		case <-startCkpt.C:
			checkpoint(logStartOffsets)
		case <-expiry.C:
			m.RemoveExpiredProducers(m.cfg.Now().UnixMilli())
		case <-m.deleteKick:
			m.removeDoomed()
		}
	}
}

// runTopicIDFlusher writes new logs' partition.metadata files as ApplyAll
// queues them (flushTopicIDsLater), in batches, off the metadata
// publisher: Kafka's UnifiedLog schedules the same write
// ("flush-metadata-file") rather than doing it while the broker applies a
// metadata delta.
func (m *Manager) runTopicIDFlusher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.flushKick:
			m.flushTopicIDs(ctx)
		}
	}
}

// CleanupLogs applies retention to every hosted partition whose topic's
// cleanup.policy includes delete (Kafka's LogManager.cleanupLogs): whole
// segments below the partition's high watermark, older than retention.ms or
// beyond retention.bytes, are deleted and the log start offset moves up.
// Partitions whose policy includes compact are compacted (Kafka's
// LogCleaner, here on the same goroutine). It returns the number of
// segments deleted.
func (m *Manager) CleanupLogs(nowMs int64) int {
	total := 0
	for _, p := range m.partitions() {
		n, err := p.deleteOldSegments(nowMs)
		total += n
		if err != nil {
			m.log.Error("retention failed", zap.Stringer("partition", p.tp), zap.Error(err))
		}
		if _, err := p.compact(nowMs); err != nil {
			m.log.Error("compaction failed", zap.Stringer("partition", p.tp), zap.Error(err))
		}
	}
	return total
}

// RemoveExpiredProducers forgets, on every hosted partition, the producers
// idle for producer.id.expiration.ms at nowMs with no ongoing transaction
// (Kafka's removeExpiredProducers task); it returns how many went.
func (m *Manager) RemoveExpiredProducers(nowMs int64) int {
	total := 0
	for _, p := range m.partitions() {
		total += p.removeExpiredProducers(nowMs)
	}
	return total
}

// deleteLog closes l and renames its directory to
// "<topic>-<partition>.<random id>-delete" (Kafka's name for a deleted log,
// as Kafka's LogManager.asyncDelete); mu held. The removal itself happens on
// the background goroutine, so a large log's deletion never holds the
// metadata publisher; a manager never started removes it at once. A
// directory left by a crash or by Close before its removal is removed by
// DeleteStrays at the next start.
func (m *Manager) deleteLog(l *storage.Log) error {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	doomed, err := l.MarkDeleted(hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	if m.stop == nil {
		return os.RemoveAll(doomed)
	}
	m.doomedMu.Lock()
	m.doomed = append(m.doomed, doomed)
	m.doomedMu.Unlock()
	select {
	case m.deleteKick <- struct{}{}:
	default: // already kicked
	}
	return nil
}

// removeDoomed removes the directories deleteLog renamed.
func (m *Manager) removeDoomed() {
	m.doomedMu.Lock()
	dirs := m.doomed
	m.doomed = nil
	m.doomedMu.Unlock()
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			m.log.Error("removing a deleted log failed", zap.String("dir", dir), zap.Error(err))
			continue
		}
		m.log.Info("removed deleted log", zap.String("dir", dir))
	}
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
