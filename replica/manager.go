package replica

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// DefaultMaxMessageBytes is message.max.bytes' default (1 MiB + 12 bytes).
const DefaultMaxMessageBytes = 1048588

// Config configures a Manager.
type Config struct {
	// Dir is the log directory partition logs live in (the first of log.dirs).
	// Required.
	Dir string
	// BrokerID is this broker's node.id. Required, >= 0.
	BrokerID int32
	// Log configures every partition log (segment.bytes, index.interval.bytes).
	Log storage.LogConfig
	// MaxMessageBytes is message.max.bytes: the largest batch a producer may
	// append. Zero or negative: DefaultMaxMessageBytes.
	MaxMessageBytes int
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms: a follower that has not
	// caught up with the leader's log end for this long leaves the ISR. Zero
	// or negative: DefaultReplicaLagTimeMaxMs.
	ReplicaLagTimeMaxMs int64
	// Fetch configures the follower fetchers (replica.fetch.*).
	Fetch FetchConfig
	// Now is the clock (tests); nil: time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

// Validate checks c and fills in defaults.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("replica: no log directory")
	case c.BrokerID < 0:
		return fmt.Errorf("replica: broker id %d", c.BrokerID)
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Log.SegmentBytes <= 0 {
		c.Log.SegmentBytes = storage.DefaultLogSegmentBytes
	}
	if c.ReplicaLagTimeMaxMs <= 0 {
		c.ReplicaLagTimeMaxMs = DefaultReplicaLagTimeMaxMs
	}
	c.Fetch.fillDefaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// Manager is the replica manager of one broker: the partitions it hosts, each
// with its log. It knows neither KRaft nor ZooKeeper: it is told "this is the
// state of partition P" (Apply) and "stop P" (Remove) by the KRaft image
// publisher or, later, by LeaderAndIsr/StopReplica in zk-legacy mode.
//
// Goroutines: none until StartReplication; then one fetcher per leader this
// broker follows partitions of, and one ISR goroutine (shrink checks and
// AlterPartition sends), all stopped by StopReplication or Close. Safe for
// concurrent use: Apply and Remove come from the metadata publisher, lookups
// from request handlers.
type Manager struct {
	cfg   Config
	log   *zap.Logger
	hooks *hooks

	mu       sync.RWMutex
	parts    map[TopicPartition]*Partition
	closed   bool
	fetchers *fetcherSet
	isr      *isrLoop
}

// New creates the log directory if needed. Logs are opened as Apply names them.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("replicas"), parts: map[TopicPartition]*Partition{}}
	m.hooks = &hooks{log: m.log, now: cfg.Now, lag: cfg.ReplicaLagTimeMaxMs}
	m.fetchers = newFetcherSet(m)
	m.isr = newISRLoop(m)
	return m, nil
}

// Partition returns the hosted partition tp.
func (m *Manager) Partition(tp TopicPartition) (*Partition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.parts[tp]
	return p, ok
}

// Hosted lists the hosted partitions, sorted.
func (m *Manager) Hosted() []TopicPartition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]TopicPartition, 0, len(m.parts))
	for tp := range m.parts {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// partitionDir is <dir>/<topic>-<partition>. Topic names are checked by the
// controller (Kafka's legal characters [a-zA-Z0-9._-], no __cluster_metadata);
// a name that could leave the directory, or land on the metadata log's
// directory (which shares log.dirs on a combined node), is refused here anyway.
func (m *Manager) partitionDir(tp TopicPartition) (string, error) {
	if tp.Topic == "" || tp.Topic == "." || tp.Topic == ".." || tp.Topic == "__cluster_metadata" ||
		strings.ContainsAny(tp.Topic, `/\`) || tp.Partition < 0 {
		return "", fmt.Errorf("replica: illegal partition name %q-%d", tp.Topic, tp.Partition)
	}
	return filepath.Join(m.cfg.Dir, tp.Topic+"-"+strconv.Itoa(int(tp.Partition))), nil
}

// Apply makes this broker host st's partition in the role st gives it, opening
// (or creating) its log on first sight. A directory left by an older topic of
// the same name (another topic id in partition.metadata) is deleted first.
func (m *Manager) Apply(st PartitionState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if p, ok := m.parts[st.TopicPartition]; ok {
		if id, _ := p.log.TopicID(); id == st.TopicID {
			if p.become(st) {
				m.follow(p, st)
			}
			return nil
		}
		if err := m.removeLocked(st.TopicPartition, true); err != nil {
			return err
		}
	}
	l, err := m.openLog(st)
	if err != nil {
		return err
	}
	p, err := newPartition(st, m.cfg.BrokerID, l, limits{maxMessageBytes: m.cfg.MaxMessageBytes, segmentBytes: m.cfg.Log.SegmentBytes}, m.hooks)
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("%w: %s: %w", ErrStorage, st.TopicPartition, err)
	}
	m.parts[st.TopicPartition] = p
	m.follow(p, st)
	role := "follower"
	if st.Leader == m.cfg.BrokerID {
		role = "leader"
	}
	m.log.Info("hosting partition", zap.Stringer("partition", st.TopicPartition), zap.String("role", role),
		zap.Int32("leaderEpoch", st.LeaderEpoch), zap.Int64("logEndOffset", l.EndOffset()))
	return nil
}

func (m *Manager) openLog(st PartitionState) (*storage.Log, error) {
	dir, err := m.partitionDir(st.TopicPartition)
	if err != nil {
		return nil, err
	}
	cfg := m.cfg.Log
	cfg.Logger = m.log
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStorage, dir, err)
	}
	if id, ok := l.TopicID(); ok && id != st.TopicID {
		m.log.Info("deleting the log of an older topic with the same name",
			zap.String("dir", dir), zap.String("topicId", hex.EncodeToString(id[:])))
		if err := l.Delete(hex.EncodeToString(id[:])); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if l, err = storage.OpenLog(dir, cfg); err != nil {
			return nil, fmt.Errorf("%w: open %s: %w", ErrStorage, dir, err)
		}
	}
	if err := l.SetTopicID(st.TopicID); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return l, nil
}

// DeleteStrays removes the partition directories under Dir that hold a log
// this broker should not have: keep says, for a directory's partition and the
// topic id in its partition.metadata, whether the metadata still assigns that
// replica here (a topic deleted, or a replica moved away, while the broker was
// down). Hosted partitions and directories without a readable
// partition.metadata (the metadata log's __cluster_metadata-0, anything that
// is not a partition log) are left alone. Directories an interrupted Delete
// left ("*-delete") are removed too. It returns the directories removed.
//
// Call it only with metadata the broker has caught up on (Kafka does it once,
// after the broker's initial catch-up): an older image would call a newer
// topic's log a stray.
func (m *Manager) DeleteStrays(keep func(tp TopicPartition, topicID [16]byte) bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(m.cfg.Dir, e.Name())
		if !e.IsDir() || !m.isStray(e.Name(), dir, keep) {
			continue
		}
		m.log.Info("deleting stray partition log", zap.String("dir", dir))
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("%w: %w", ErrStorage, errors.Join(errs...))
	}
	return removed, nil
}

// isStray decides for one directory; mu held.
func (m *Manager) isStray(name, dir string, keep func(TopicPartition, [16]byte) bool) bool {
	if strings.HasSuffix(name, "-delete") {
		return true
	}
	tp, ok := parsePartitionDir(name)
	if !ok {
		return false
	}
	if _, hosted := m.parts[tp]; hosted {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, storage.PartitionMetadataFile))
	if err != nil {
		return false
	}
	id, err := storage.DecodePartitionMetadata(data)
	return err == nil && !keep(tp, id)
}

// parsePartitionDir splits "<topic>-<partition>".
func parsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// Remove stops hosting tp; with deleteLog its directory is removed too (topic
// deleted, or replica moved away), otherwise its log is only closed.
func (m *Manager) Remove(tp TopicPartition, deleteLog bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeLocked(tp, deleteLog)
}

func (m *Manager) removeLocked(tp TopicPartition, deleteLog bool) error {
	p, ok := m.parts[tp]
	if !ok {
		return nil
	}
	delete(m.parts, tp)
	p.stop()
	m.fetchers.remove(tp)
	if !deleteLog {
		return p.log.Close()
	}
	id, _ := p.log.TopicID()
	m.log.Info("deleting partition log", zap.Stringer("partition", tp))
	return p.log.Delete(hex.EncodeToString(id[:]))
}

// follow points the fetchers at st's leader when this broker follows the
// partition, and stops fetching it otherwise; mu held.
func (m *Manager) follow(p *Partition, st PartitionState) {
	if st.Leader >= 0 && st.Leader != m.cfg.BrokerID {
		m.fetchers.add(p, st)
		return
	}
	m.fetchers.remove(st.TopicPartition)
}

// StartReplication starts the follower fetchers and the ISR goroutine with
// the broker's transports. Partitions applied before keep their roles; their
// fetches begin now.
func (m *Manager) StartReplication(r Replication) error {
	if err := r.validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.hooks.repl.Store(&r)
	m.fetchers.start(r)
	m.isr.start(r)
	return nil
}

// StopReplication stops the fetchers and the ISR goroutine and waits for
// them (the broker calls it before closing the connections they use).
// Partitions keep their roles and logs. Safe to call more than once.
func (m *Manager) StopReplication() {
	m.fetchers.stop()
	m.isr.stop()
}

// Close stops replication and closes every log (flushing it). Later Apply
// calls fail.
func (m *Manager) Close() error {
	m.StopReplication()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var errs []error
	for _, p := range m.parts {
		p.stop()
		if err := p.log.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	m.parts = map[TopicPartition]*Partition{}
	return errors.Join(errs...)
}
