package replica

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// Defaults of the checkpoint intervals (Kafka's).
const (
	// DefaultHighWatermarkCheckpointIntervalMs is
	// replica.high.watermark.checkpoint.interval.ms' default.
	DefaultHighWatermarkCheckpointIntervalMs = 5000
	// DefaultRecoveryPointCheckpointIntervalMs is
	// log.flush.offset.checkpoint.interval.ms' default.
	DefaultRecoveryPointCheckpointIntervalMs = 60000
	// DefaultLogStartOffsetCheckpointIntervalMs is
	// log.flush.start.offset.checkpoint.interval.ms' default.
	DefaultLogStartOffsetCheckpointIntervalMs = 60000
)

// cleanShutdownContent is what Kafka 3.7+'s CleanShutdownFileHandler writes;
// kraftd does not record the broker epoch (-1). Only the file's presence is
// read.
const cleanShutdownContent = `{"version":0,"brokerEpoch":-1}`

// checkpointKind is one of the three broker-level offset checkpoint files.
type checkpointKind int

const (
	recoveryPoints checkpointKind = iota
	highWatermarks
	logStartOffsets
	numCheckpointKinds
)

var checkpointFiles = [numCheckpointKinds]string{
	storage.RecoveryPointCheckpointFile, storage.ReplicationOffsetCheckpointFile, storage.LogStartOffsetCheckpointFile,
}

// checkpoints are the offsets read from the log directory's checkpoint files
// at New, for the logs not opened yet, and what is written for them until
// they are; an opened log's own values replace its entries.
type checkpoints [numCheckpointKinds]map[TopicPartition]int64

// loadCheckpoints reads the checkpoint files and the clean-shutdown marker,
// then removes the marker (durably): a crash from now on must recover.
// Without the marker, every partition log in the directory is unrecovered
// until it is opened. An
// unreadable checkpoint file is logged and treated as missing, as Kafka
// does, which only costs a longer recovery and a lower high watermark.
func (m *Manager) loadCheckpoints() error {
	for k := range numCheckpointKinds {
		m.loaded[k] = map[TopicPartition]int64{}
		entries, err := storage.ReadOffsetCheckpoint(m.cfg.Dir, checkpointFiles[k])
		if err != nil {
			m.log.Warn("ignoring an unreadable checkpoint file", zap.String("file", checkpointFiles[k]), zap.Error(err))
			continue
		}
		for _, e := range entries {
			m.loaded[k][TopicPartition{e.Topic, e.Partition}] = e.Offset
		}
	}
	marker := filepath.Join(m.cfg.Dir, storage.CleanShutdownFile)
	if _, err := os.Stat(marker); err == nil {
		m.cleanShutdown = true
		if err := os.Remove(marker); err != nil {
			return err
		}
		return storage.SyncDir(m.cfg.Dir)
	}
	return m.findUnrecovered()
}

// findUnrecovered lists the directory's partition logs (as Kafka's loadLogs
// does: every directory but the metadata log's; "-delete" leftovers are
// removed, not recovered) into m.unrecovered.
func (m *Manager) findUnrecovered() error {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), "-delete") {
			continue
		}
		if tp, ok := parsePartitionDir(e.Name()); ok && tp.Topic != "__cluster_metadata" {
			m.unrecovered[tp] = struct{}{}
		}
	}
	return nil
}

// forgetCheckpoints drops tp's loaded offsets (its log was deleted); mu held.
func (m *Manager) forgetCheckpoints(tp TopicPartition) {
	for k := range numCheckpointKinds {
		delete(m.loaded[k], tp)
	}
}

// rememberCheckpoints keeps a closed log's offsets for the next checkpoint
// files; mu held.
func (m *Manager) rememberCheckpoints(p *Partition) {
	for k, v := range p.checkpointOffsets() {
		if v >= 0 {
			m.loaded[k][p.tp] = v
		} else {
			delete(m.loaded[k], p.tp)
		}
	}
}

// checkpointOffsets are the partition's recovery point, high watermark and
// (when above its first segment, as Kafka writes it) log start offset; -1
// for none.
func (p *Partition) checkpointOffsets() [numCheckpointKinds]int64 {
	start := p.log.StartOffset()
	if start <= p.log.FirstSegmentBase() {
		start = -1
	}
	return [numCheckpointKinds]int64{p.log.RecoveryPoint(), p.hw.Load(), start}
}

// WriteCheckpoints writes the three offset checkpoint files from the hosted
// partitions (and the loaded entries of logs not opened yet). The
// background goroutine writes them every HighWatermarkCheckpointIntervalMs
// (replication-offset-checkpoint) and RecoveryPointCheckpointIntervalMs /
// LogStartOffsetCheckpointIntervalMs (the others); Close writes all three.
func (m *Manager) WriteCheckpoints() error {
	return m.writeCheckpoints(recoveryPoints, highWatermarks, logStartOffsets)
}

// checkpointRow is one partition's line in each checkpoint file (-1: none
// in that file).
type checkpointRow struct {
	tp  TopicPartition
	off [numCheckpointKinds]int64
}

// writeCheckpoints takes every partition's offsets once, in one row each
// (48 bytes a partition, the only copy: the files are streamed from the
// rows, sorted as Kafka's tools expect them, not built whole).
func (m *Manager) writeCheckpoints(kinds ...checkpointKind) error {
	m.ckptMu.Lock() // one writer at a time: the files share a .tmp name
	defer m.ckptMu.Unlock()
	m.mu.RLock()
	n := len(m.parts)
	for k := range numCheckpointKinds {
		n += len(m.loaded[k])
	}
	rows := make([]checkpointRow, 0, n)
	for k := range numCheckpointKinds {
		for tp, v := range m.loaded[k] {
			if _, hosted := m.parts[tp]; !hosted {
				row := checkpointRow{tp: tp, off: [numCheckpointKinds]int64{-1, -1, -1}}
				row.off[k] = v
				rows = append(rows, row)
			}
		}
	}
	for tp, p := range m.parts {
		rows = append(rows, checkpointRow{tp: tp, off: p.checkpointOffsets()})
	}
	m.mu.RUnlock()
	slices.SortFunc(rows, func(a, b checkpointRow) int {
		if c := strings.Compare(a.tp.Topic, b.tp.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.tp.Partition, b.tp.Partition)
	})
	var errs []error
	for _, k := range kinds {
		count := 0
		for i := range rows {
			if rows[i].off[k] >= 0 {
				count++
			}
		}
		entries := func(yield func(storage.PartitionOffset) bool) {
			for i := range rows {
				if v := rows[i].off[k]; v >= 0 && !yield(storage.PartitionOffset{Topic: rows[i].tp.Topic, Partition: rows[i].tp.Partition, Offset: v}) {
					return
				}
			}
		}
		if err := storage.WriteOffsetCheckpointSeq(m.cfg.Dir, checkpointFiles[k], count, entries); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrStorage, checkpointFiles[k], err))
		}
	}
	return errors.Join(errs...)
}

// writeCleanShutdown marks the log directory clean: every log was flushed
// and closed, and the checkpoints written.
func (m *Manager) writeCleanShutdown() error {
	if err := storage.WriteFileAtomic(m.cfg.Dir, storage.CleanShutdownFile, []byte(cleanShutdownContent)); err != nil {
		return err
	}
	return storage.SyncDir(m.cfg.Dir)
}
