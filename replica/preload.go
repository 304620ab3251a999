package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// LoadLogs opens every partition log of the directory before any Apply
// names it, as Kafka's LogManager.startup loads (and, after a crash,
// recovers) all logs of its log directories: a ZooKeeper-era broker does
// that before it registers in /brokers/ids, so the controller's
// LeaderAndIsr finds the logs loaded. The loaded logs are hosted by
// nothing: the first Apply of a partition adopts its loaded log (and sets
// the topic's roll settings on it) instead of opening it, Remove with
// deleteLog deletes it, Close closes the ones never adopted. The metadata
// log's directory, "-delete" leftovers and names that are not
// <topic>-<partition> are left alone. Logs open up to applyWorkers at once.
// It returns how many logs it loaded; a log that fails to open is reported
// in the error and left to its Apply (which opens it again and answers
// KAFKA_STORAGE_ERROR if it still fails).
//
// A KRaft broker does not call it: it opens its logs in its first publish
// (Kafka's BrokerMetadataPublisher starts the log manager there too).
func (m *Manager) LoadLogs() (int, error) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	start := time.Now()
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	type loadItem struct {
		tp  TopicPartition
		dir string
		cfg storage.LogConfig
		l   *storage.Log
		err error
	}
	var items []*loadItem
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, ErrClosed
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), "-delete") {
			continue
		}
		tp, ok := parsePartitionDir(e.Name())
		if !ok || tp.Topic == "__cluster_metadata" {
			continue
		}
		if _, hosted := m.parts[tp]; hosted {
			continue
		}
		if _, loaded := m.loadedLogs[tp]; loaded {
			continue
		}
		dir, err := m.partitionDir(tp)
		if err != nil || dir != filepath.Join(m.cfg.Dir, e.Name()) {
			continue // a name partitionDir refuses, or one it spells another way
		}
		cfg := m.cfg.Log
		cfg.Logger = m.log
		tc := m.topicConfigLocked(tp.Topic)
		cfg.SegmentBytes, cfg.SegmentMs = tc.SegmentBytes, tc.SegmentMs
		cfg.RecoveryPoint, cfg.CleanShutdown = m.loaded[recoveryPoints][tp], m.cleanShutdown
		items = append(items, &loadItem{tp: tp, dir: dir, cfg: cfg})
	}
	m.mu.Unlock()

	work := make(chan *loadItem)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(items)) {
		wg.Go(func() {
			for it := range work {
				it.l, it.err = storage.OpenLog(it.dir, it.cfg)
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()

	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	n := 0
	for _, it := range items {
		switch {
		case it.err != nil:
			errs = append(errs, fmt.Errorf("%w: open %s: %w", ErrStorage, it.dir, it.err))
		case m.closed:
			_ = it.l.Close()
		default:
			m.loadedLogs[it.tp] = it.l
			delete(m.unrecovered, it.tp) // scanned from its recovery point
			n++
		}
	}
	if m.closed {
		return 0, ErrClosed
	}
	// As Kafka's LogManager logs "Loaded N logs in X ms".
	m.log.Info("loaded partition logs", zap.Int("logs", n), zap.Duration("elapsed", time.Since(start)))
	return n, errors.Join(errs...)
}

// takeLoadedLog hands tp's log loaded by LoadLogs to its first Apply; mu
// held. Nil when there is none.
func (m *Manager) takeLoadedLog(tp TopicPartition) *storage.Log {
	l, ok := m.loadedLogs[tp]
	if !ok {
		return nil
	}
	delete(m.loadedLogs, tp)
	return l
}

// removeLoadedLog is Remove for a partition that is not hosted but whose
// log LoadLogs loaded: deleted with deleteLog, else only closed; mu held.
func (m *Manager) removeLoadedLog(tp TopicPartition, deleteLog bool) error {
	l := m.takeLoadedLog(tp)
	if l == nil {
		return nil
	}
	if !deleteLog {
		err := l.Close()
		if err != nil {
			m.unrecovered[tp] = struct{}{}
		}
		return err
	}
	m.forgetCheckpoints(tp)
	delete(m.unrecovered, tp)
	m.log.Info("deleting partition log", zap.Stringer("partition", tp))
	return m.deleteLog(l)
}

// closeLoadedLogs closes the logs LoadLogs loaded that no Apply adopted,
// up to applyWorkers at once; mu held. A log whose close failed is
// unrecovered again.
func (m *Manager) closeLoadedLogs() []error {
	tps := make([]TopicPartition, 0, len(m.loadedLogs))
	logs := make([]*storage.Log, 0, len(m.loadedLogs))
	for tp, l := range m.loadedLogs {
		tps = append(tps, tp)
		logs = append(logs, l)
	}
	m.loadedLogs = map[TopicPartition]*storage.Log{}
	errs := make([]error, len(logs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(logs)) {
		wg.Go(func() {
			for i := range work {
				errs[i] = logs[i].Close()
			}
		})
	}
	for i := range logs {
		work <- i
	}
	close(work)
	wg.Wait()
	var out []error
	for i, err := range errs {
		if err != nil {
			m.unrecovered[tps[i]] = struct{}{}
			out = append(out, err)
		}
	}
	return out
}
