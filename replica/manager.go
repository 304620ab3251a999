package replica

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// Config configures a Manager.
type Config struct {
	// Dir is the log directory partition logs live in (the first of log.dirs).
	// Required.
	Dir string
	// BrokerID is this broker's node.id. Required, >= 0.
	BrokerID int32
	// Log configures every partition log (index.interval.bytes); its segment
	// settings are the topic's (Topic, SetTopicConfig).
	Log storage.LogConfig
	// Topic is the broker's default topic configuration (its static
	// log.segment.bytes, log.roll.ms, log.retention.ms, log.retention.bytes,
	// message.max.bytes, compression.type, log.cleanup.policy); a topic
	// without a config of its own (SetTopicConfig) gets it. The zero value
	// is Kafka's defaults (DefaultTopicConfig).
	Topic TopicConfig
	// RetentionCheckIntervalMs is log.retention.check.interval.ms: how often
	// the background goroutine deletes segments by retention. Zero or
	// negative: DefaultRetentionCheckIntervalMs.
	RetentionCheckIntervalMs int64
	// HighWatermarkCheckpointIntervalMs
	// (replica.high.watermark.checkpoint.interval.ms),
	// RecoveryPointCheckpointIntervalMs
	// (log.flush.offset.checkpoint.interval.ms) and
	// LogStartOffsetCheckpointIntervalMs
	// (log.flush.start.offset.checkpoint.interval.ms) are how often the
	// background goroutine writes each checkpoint file. Zero or negative:
	// Kafka's defaults.
	HighWatermarkCheckpointIntervalMs  int64
	RecoveryPointCheckpointIntervalMs  int64
	LogStartOffsetCheckpointIntervalMs int64
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms: a follower that has not
	// caught up with the leader's log end for this long leaves the ISR. Zero
	// or negative: DefaultReplicaLagTimeMaxMs.
	ReplicaLagTimeMaxMs int64
	// ProducerIDExpirationMs is producer.id.expiration.ms: a producer with
	// no ongoing transaction whose last batch's timestamp is this far in the
	// past is forgotten by its partitions (a retry of its batches is then no
	// longer a duplicate). Zero or negative: DefaultProducerIDExpirationMs.
	ProducerIDExpirationMs int64
	// ProducerIDExpirationCheckIntervalMs is
	// producer.id.expiration.check.interval.ms: how often the background
	// goroutine expires producers. Zero or negative:
	// DefaultProducerIDExpirationCheckIntervalMs.
	ProducerIDExpirationCheckIntervalMs int64
	// Fetch configures the follower fetchers (replica.fetch.*).
	Fetch FetchConfig
	// BackgroundThreads is background.threads: how many new logs'
	// partition.metadata files the background writer writes at once. Kafka
	// schedules each such write ("flush-metadata-file") on the broker's
	// scheduler, a pool of background.threads threads, so that is how many
	// it writes at once too. Zero or negative: DefaultBackgroundThreads.
	BackgroundThreads int
	// Now is the wall clock retention compares record timestamps with and
	// replication's clock (tests); nil is time.Now.
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
	c.Topic.fillDefaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	setDefault(&c.HighWatermarkCheckpointIntervalMs, DefaultHighWatermarkCheckpointIntervalMs)
	setDefault(&c.RecoveryPointCheckpointIntervalMs, DefaultRecoveryPointCheckpointIntervalMs)
	setDefault(&c.LogStartOffsetCheckpointIntervalMs, DefaultLogStartOffsetCheckpointIntervalMs)
	if c.RetentionCheckIntervalMs <= 0 {
		c.RetentionCheckIntervalMs = DefaultRetentionCheckIntervalMs
	}
	setDefault(&c.ProducerIDExpirationMs, DefaultProducerIDExpirationMs)
	setDefault(&c.ProducerIDExpirationCheckIntervalMs, DefaultProducerIDExpirationCheckIntervalMs)
	if c.ReplicaLagTimeMaxMs <= 0 {
		c.ReplicaLagTimeMaxMs = DefaultReplicaLagTimeMaxMs
	}
	c.Fetch.fillDefaults()
	if c.BackgroundThreads <= 0 {
		c.BackgroundThreads = DefaultBackgroundThreads
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

func setDefault(v *int64, d int64) {
	if *v <= 0 {
		*v = d
	}
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

	// applyMu serializes Apply, ApplyAll and Remove: ApplyAll opens logs
	// outside mu, and no other change of the hosted set may interleave.
	applyMu sync.Mutex
	mu      sync.RWMutex
	parts   map[TopicPartition]*Partition
	// topicCfgs are the topics' configurations (SetTopicConfig; absent:
	// defaultTopicCfg, which is &cfg.Topic). Each is shared by every
	// partition of its topic, never changed: an update replaces it (a new
	// pointer stored in the topic's partitions), so the partitions cost a
	// pointer each, not a copy (a million hosted partitions, 80 MB).
	topicCfgs       map[string]*TopicConfig
	defaultTopicCfg *TopicConfig
	// hostedByTopic counts parts' partitions of each topic (absent: none),
	// so that SetTopicConfig of a topic this broker hosts nothing of yet (a
	// new topic, whose config is set as its partitions arrive) does not
	// scan every hosted partition: at a million hosted partitions a create
	// of 1,000 topics made that about 5*10^8 map steps.
	hostedByTopic map[string]int
	closed        bool
	stop          context.CancelFunc // ends the background goroutine (Start)
	wg            sync.WaitGroup     // the background goroutine
	// loaded are the checkpoint files' offsets of the logs not open; the
	// clean-shutdown marker was found at New (it is removed then).
	loaded        checkpoints
	cleanShutdown bool
	// unrecovered are the partition logs of the directory that may need a
	// recovery scan at their next open: without the marker at New, every
	// log found then, until it is opened (recovered) or deleted; a log whose
	// close failed joins them. Close writes the marker only when there is
	// none (Kafka's LogManager writes it for a directory that had it at
	// start or whose logs were all loaded, hence recovered).
	unrecovered map[TopicPartition]struct{}
	// loadedLogs are the logs LoadLogs opened that no Apply adopted yet.
	loadedLogs map[TopicPartition]*storage.Log
	ckptMu     sync.Mutex // serializes checkpoint file writes
	// doomed are renamed directories of deleted logs the background
	// goroutine removes; deleteKick wakes it (capacity 1).
	doomedMu   sync.Mutex
	doomed     []string
	deleteKick chan struct{}
	// unflushed are new logs whose partition.metadata the background
	// goroutine writes (Kafka's "flush-metadata-file" task); flushKick
	// wakes it (capacity 1). pendingTopicIDs counts the logs queued and
	// not yet gone through a flush (PendingTopicIDWrites).
	// Invariant: pendingTopicIDs >= len(unflushed).
	unflushedMu     sync.Mutex
	unflushed       []*storage.Log
	flushKick       chan struct{}
	pendingTopicIDs atomic.Int64
	fetchers        *fetcherSet
	isr             *isrLoop
}

// New creates the log directory if needed. Logs are opened as Apply names them.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("replicas"), parts: map[TopicPartition]*Partition{},
		topicCfgs: map[string]*TopicConfig{}, hostedByTopic: map[string]int{}, deleteKick: make(chan struct{}, 1), flushKick: make(chan struct{}, 1), unrecovered: map[TopicPartition]struct{}{},
		loadedLogs: map[TopicPartition]*storage.Log{}}
	if err := m.loadCheckpoints(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	m.defaultTopicCfg = &m.cfg.Topic
	m.hooks = &hooks{log: m.log, now: cfg.Now, lag: cfg.ReplicaLagTimeMaxMs, producerExpiryMs: cfg.ProducerIDExpirationMs}
	m.fetchers = newFetcherSet(m)
	m.isr = newISRLoop(m)
	return m, nil
}

// FetchConfig is the follower fetchers' configuration, defaults filled in.
func (m *Manager) FetchConfig() FetchConfig { return m.cfg.Fetch }

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

// DefaultTopicConfig is the broker's default topic configuration
// (Config.Topic after Validate).
func (m *Manager) DefaultTopicConfig() TopicConfig { return m.cfg.Topic }

// TopicConfig is the configuration the partitions of topic get.
func (m *Manager) TopicConfig(topic string) TopicConfig {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return *m.topicConfigLocked(topic)
}

// topicConfigLocked is topic's shared configuration (read only); mu held.
func (m *Manager) topicConfigLocked(topic string) *TopicConfig {
	if c, ok := m.topicCfgs[topic]; ok {
		return c
	}
	return m.defaultTopicCfg
}

// SetTopicConfig sets topic's effective configuration (from the metadata:
// the topic's configs layered over the broker's defaults) and applies it to
// the open logs of its hosted partitions: the next append rolls and checks
// sizes by it, the next retention pass deletes by it. Partitions hosted
// later open with it.
func (m *Manager) SetTopicConfig(topic string, cfg TopicConfig) {
	cfg.fillDefaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.topicCfgs[topic]; ok && *old == cfg {
		return
	}
	shared := &cfg
	m.topicCfgs[topic] = shared
	if m.hostedByTopic[topic] == 0 {
		return // its partitions take the config when they are created
	}
	for tp, p := range m.parts {
		if tp.Topic == topic {
			p.setConfig(shared)
		}
	}
}

// ForgetTopicConfig drops what SetTopicConfig set for a deleted topic.
func (m *Manager) ForgetTopicConfig(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.topicCfgs, topic)
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
func (m *Manager) Apply(st PartitionState) error { return m.ApplyAll([]PartitionState{st}) }

// applyWorkers bounds how many partitions ApplyAll opens or moves at once.
// Creating a log costs file creations of a millisecond or more
// each on a shared disk; done one partition after the other (with nine
// fsyncs each then), 1,000 new partitions took 23 s on the bench machine.
// Concurrent fsyncs share the file system's journal commits.
const applyWorkers = 16

// DefaultBackgroundThreads is background.threads' default, Kafka's: how
// many partition.metadata files the background writer writes at once
// (Config.BackgroundThreads). Nothing waits for them (a log's first append,
// flush or close writes its own), but a broker stopped with some pending
// writes them before it exits; each costs two fsyncs, and many at once delay
// every other fsync on the file system's journal, the metadata log's
// included.
const DefaultBackgroundThreads = 10

// applyItem is one partition of an ApplyAll.
type applyItem struct {
	st PartitionState
	p  *Partition // hosted already (become), or opened by the item
	// For a partition not hosted yet, read under mu before the open.
	dir       string
	logCfg    storage.LogConfig
	topicCfg  *TopicConfig
	hw, start int64
	hasStart  bool
	// pre is the log LoadLogs loaded for a partition not hosted yet.
	pre *storage.Log
	// serial: the directory holds an older topic's log; it is deleted and
	// recreated under mu by openLog.
	serial  bool
	changed bool // become changed the partition's state
	opened  bool // p was opened by this item
	err     error
}

// ApplyAll is Apply for many partitions (a metadata publish), with the
// same outcome as applying them one by one in order, but with the logs'
// file work (opens, creations, leader epoch starts) of different
// partitions done concurrently by up to applyWorkers goroutines, outside
// the manager's lock. A partition that fails is logged in the returned
// error and the others are applied. States naming the same partition twice
// are applied in order (the later one in a later round).
//
// The states are applied applyChunk at a time (leader moves first, see
// leaderMoves), so what an apply holds besides states is bounded, not a
// copy of them and an item per partition: a broker catching up on a
// 100k-partition create was handed one publish of every partition, and
// the copies were a quarter of its live heap.
func (m *Manager) ApplyAll(states []PartitionState) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	start := time.Now()
	var errs []error
	opened, applied := 0, 0
	chunk := make([]PartitionState, 0, min(applyChunk, len(states)))
	items := make([]applyItem, 0, cap(chunk))
	apply := func() {
		e, n := m.applyRound(chunk, items)
		errs, opened, applied = append(errs, e...), opened+n, applied+len(chunk)
		clear(chunk) // their replica lists are the caller's, not ours to keep
		chunk = chunk[:0]
	}
	for len(states) > 0 {
		round, rest := splitDistinct(states)
		moves := m.leaderMoves(round)
		for _, first := range []bool{true, false} {
			for i, st := range round {
				if moves[i] != first {
					continue
				}
				if chunk = append(chunk, st); len(chunk) == cap(chunk) {
					apply()
				}
			}
			if len(chunk) > 0 {
				apply()
			}
		}
		states = rest
	}
	if opened > 0 { // as Kafka's LogManager logs "Loaded N logs in X ms"
		m.log.Info("opened partition logs", zap.Int("logs", opened), zap.Int("partitions", applied),
			zap.Duration("elapsed", time.Since(start)))
	}
	return errors.Join(errs...)
}

// applyChunk is the most states ApplyAll applies in one round: far more
// than applyWorkers, so the workers rarely wait for a round's slowest.
const applyChunk = 1024

// leaderMoves reports, for each state, whether it moves the leadership of
// a hosted partition (a new leader or leader epoch); ApplyAll applies
// those first, then the rest (ISR and assignment changes, new partitions),
// each in its given order. A controlled shutdown's publish shrinks the ISR
// of every partition the broker hosts besides moving the leadership of
// those it led; applied as one round, the moved partitions' produces
// waiting for acks=-1 (answered NOT_LEADER_OR_FOLLOWER at the old leader's
// become) and their new leaders' followers (pointed at them once the round
// ends) waited for every other partition's change too: 1.2 to 1.7 s for
// 1,004 partitions in a loaded kraftd bench, the steady producer's whole
// gap.
func (m *Manager) leaderMoves(states []PartitionState) []bool {
	hosted := make([]*Partition, len(states))
	m.mu.Lock()
	for i, st := range states {
		hosted[i] = m.parts[st.TopicPartition]
	}
	m.mu.Unlock()
	// Each partition's lock is taken without the manager's: an append may
	// hold it across a write, and produce and fetch look partitions up
	// under the manager's.
	moves := make([]bool, len(states))
	for i, st := range states {
		moves[i] = hosted[i] != nil && hosted[i].leaderMoves(st)
	}
	return moves
}

// splitDistinct returns the longest prefix of states naming each partition
// once, and the rest.
func splitDistinct(states []PartitionState) ([]PartitionState, []PartitionState) {
	seen := make(map[TopicPartition]struct{}, len(states))
	for i, st := range states {
		if _, dup := seen[st.TopicPartition]; dup {
			return states[:i], states[i:]
		}
		seen[st.TopicPartition] = struct{}{}
	}
	return states, nil
}

// applyRound applies states, each naming a different partition, and
// reports how many logs it opened; buf is room for the items, reused.
func (m *Manager) applyRound(states []PartitionState, buf []applyItem) ([]error, int) {
	if len(states) == 0 {
		return nil, 0
	}
	items, err := m.prepareApply(states, buf)
	if err != nil {
		return []error{err}, 0
	}
	work := make(chan *applyItem)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(items)) {
		wg.Go(func() {
			for it := range work {
				m.applyOne(it)
			}
		})
	}
	for i := range items {
		work <- &items[i]
	}
	close(work)
	wg.Wait()
	errs := m.finishApply(items)
	opened := 0
	for i := range items {
		if items[i].opened {
			opened++
		}
	}
	clear(items) // the buffer outlives the round: keep no partition alive
	return errs, opened
}

// prepareApply reads, under mu, what the file work of each item needs, and
// removes a hosted partition whose topic id differs (an older topic of the
// same name).
func (m *Manager) prepareApply(states []PartitionState, buf []applyItem) ([]applyItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	items := slices.Grow(buf[:0], len(states))[:len(states)]
	for i, st := range states {
		it := &items[i]
		it.st = st
		if p, ok := m.parts[st.TopicPartition]; ok {
			if id, _ := p.log.TopicID(); id == st.TopicID {
				it.p = p
				continue
			}
			if err := m.removeLocked(st.TopicPartition, true); err != nil {
				it.err = err
				continue
			}
		}
		dir, err := m.partitionDir(st.TopicPartition)
		if err != nil {
			it.err = err
			continue
		}
		it.dir, it.topicCfg = dir, m.topicConfigLocked(st.Topic)
		it.logCfg = m.cfg.Log
		it.logCfg.Logger = m.log
		it.logCfg.SegmentBytes, it.logCfg.SegmentMs = it.topicCfg.SegmentBytes, it.topicCfg.SegmentMs
		it.logCfg.RecoveryPoint, it.logCfg.CleanShutdown = m.loaded[recoveryPoints][st.TopicPartition], m.cleanShutdown
		it.hw = -1
		if hw, ok := m.loaded[highWatermarks][st.TopicPartition]; ok {
			it.hw = hw
		}
		it.start, it.hasStart = m.loaded[logStartOffsets][st.TopicPartition]
		it.pre = m.takeLoadedLog(st.TopicPartition)
	}
	return items, nil
}

// applyOne does an item's file work without mu: the state change of a
// hosted partition, or the open of a new one's log and the partition on it.
func (m *Manager) applyOne(it *applyItem) {
	if it.err != nil {
		return
	}
	if it.p != nil {
		it.changed = it.p.become(it.st)
		return
	}
	l := it.pre
	if l != nil {
		l.SetRollConfig(it.logCfg.SegmentBytes, it.logCfg.SegmentMs)
	} else {
		var err error
		if l, err = storage.OpenLog(it.dir, it.logCfg); err != nil {
			it.err = fmt.Errorf("%w: open %s: %w", ErrStorage, it.dir, err)
			return
		}
	}
	if id, ok := l.TopicID(); ok && id != it.st.TopicID {
		_ = l.Close()
		it.serial = true
		return
	}
	if err := l.SetTopicID(it.st.TopicID); err != nil {
		_ = l.Close()
		it.err = fmt.Errorf("%w: %w", ErrStorage, err)
		return
	}
	if it.hasStart {
		l.SetStartOffset(it.start)
	}
	it.p, it.err = m.newPartitionOn(it.st, l, it.topicCfg, it.hw)
	it.opened = it.p != nil
}

// flushTopicIDsLater hands logs whose topic id is not on disk yet to the
// background goroutine (a manager not started leaves them to their first
// append, flush or close).
func (m *Manager) flushTopicIDsLater(logs []*storage.Log) {
	if len(logs) == 0 {
		return
	}
	m.unflushedMu.Lock()
	m.unflushed = append(m.unflushed, logs...)
	m.pendingTopicIDs.Add(int64(len(logs)))
	m.unflushedMu.Unlock()
	select {
	case m.flushKick <- struct{}{}:
	default: // already kicked
	}
}

// BackgroundThreads is how many partition.metadata files the background
// writer writes at once (Config.BackgroundThreads, defaults filled in).
func (m *Manager) BackgroundThreads() int { return m.cfg.BackgroundThreads }

// PendingTopicIDWrites is how many new logs' partition.metadata files are
// queued for the background writer and not written yet (a log whose first
// append or flush wrote its own still counts until the writer reaches it).
// A broker that stops with some pending writes them in Close, so a large
// count makes its shutdown slower.
func (m *Manager) PendingTopicIDWrites() int64 { return m.pendingTopicIDs.Load() }

// flushTopicIDs writes the partition.metadata files flushTopicIDsLater
// queued, up to Config.BackgroundThreads at once; a failure fails that log (its appends
// refuse from then on) and is logged. It stops early when ctx ends and
// queues what it did not reach again, for Close (writePendingTopicIDs).
// It returns how many logs it went through.
func (m *Manager) flushTopicIDs(ctx context.Context) int {
	m.unflushedMu.Lock()
	logs := m.unflushed
	m.unflushed = nil
	m.unflushedMu.Unlock()
	work := make(chan *storage.Log)
	var wg sync.WaitGroup
	for range min(m.cfg.BackgroundThreads, len(logs)) {
		wg.Go(func() {
			for l := range work {
				if err := l.FlushTopicID(); err != nil {
					m.log.Error("writing partition.metadata failed", zap.String("dir", l.Dir()), zap.Error(err))
				}
				m.pendingTopicIDs.Add(-1)
			}
		})
	}
	sent := 0
	for _, l := range logs {
		if ctx.Err() != nil {
			break
		}
		work <- l
		sent++
	}
	close(work)
	wg.Wait()
	if left := logs[sent:]; len(left) > 0 {
		m.unflushedMu.Lock()
		m.unflushed = append(left, m.unflushed...)
		m.unflushedMu.Unlock()
	}
	return sent
}

// writePendingTopicIDs writes, at Close, the partition.metadata files the
// background writer did not reach, as one batch with two file system syncs
// (storage.FlushTopicIDs) rather than two fsyncs each, and logs how many
// and how long that took: a broker stopped soon after a large CreateTopics
// spends that time before it exits.
func (m *Manager) writePendingTopicIDs() {
	m.unflushedMu.Lock()
	logs := m.unflushed
	m.unflushed = nil
	m.unflushedMu.Unlock()
	if len(logs) == 0 {
		return
	}
	start := time.Now()
	_, errs := storage.FlushTopicIDs(logs)
	m.pendingTopicIDs.Add(-int64(len(logs)))
	for _, err := range errs {
		m.log.Error("writing partition.metadata failed", zap.Error(err))
	}
	m.log.Info("wrote the pending partition.metadata files at close",
		zap.Int("logs", len(logs)), zap.Int("failed", len(errs)), zap.Duration("took", time.Since(start)))
}

func (m *Manager) newPartitionOn(st PartitionState, l *storage.Log, cfg *TopicConfig, hw int64) (*Partition, error) {
	p, err := newPartition(st, m.cfg.BrokerID, l, cfg, hw, m.hooks)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrStorage, st.TopicPartition, err)
	}
	return p, nil
}

// finishApply hosts the opened partitions and points the fetchers, under mu;
// items whose directory held an older topic's log are opened here.
func (m *Manager) finishApply(items []applyItem) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	var unflushed []*storage.Log
	defer func() {
		if m.stop != nil {
			m.flushTopicIDsLater(unflushed)
		}
	}()
	for i := range items {
		it := &items[i]
		hosted := it.p != nil && m.parts[it.st.TopicPartition] == it.p
		if m.closed && !hosted {
			if it.p != nil && it.opened {
				it.p.stop()
				_ = it.p.close()
			}
			errs = append(errs, ErrClosed)
			continue
		}
		if it.serial && it.err == nil {
			l, err := m.openLog(it.st)
			if err == nil {
				it.p, err = m.newPartitionOn(it.st, l, m.topicConfigLocked(it.st.Topic), -1)
				it.opened = it.p != nil
			}
			it.err = err
		}
		if it.err != nil {
			errs = append(errs, it.err)
			continue
		}
		if hosted {
			if it.changed {
				m.follow(it.p, it.st)
			}
			continue
		}
		delete(m.unrecovered, it.st.TopicPartition) // scanned from its recovery point
		m.parts[it.st.TopicPartition] = it.p
		m.hostedByTopic[it.st.Topic]++
		if !it.p.log.TopicIDFlushed() {
			unflushed = append(unflushed, it.p.log)
		}
		m.follow(it.p, it.st)
		role := "follower"
		if it.st.Leader == m.cfg.BrokerID {
			role = "leader"
		}
		m.log.Info("hosting partition", zap.Stringer("partition", it.st.TopicPartition), zap.String("role", role),
			zap.Int32("leaderEpoch", it.st.LeaderEpoch), zap.Int64("logEndOffset", it.p.log.EndOffset()))
	}
	return errs
}

// openLog opens st's log under mu, deleting an older topic's log found in
// its directory first.
func (m *Manager) openLog(st PartitionState) (*storage.Log, error) {
	dir, err := m.partitionDir(st.TopicPartition)
	if err != nil {
		return nil, err
	}
	cfg := m.cfg.Log
	cfg.Logger = m.log
	tc := m.topicConfigLocked(st.Topic)
	cfg.SegmentBytes, cfg.SegmentMs = tc.SegmentBytes, tc.SegmentMs
	cfg.RecoveryPoint, cfg.CleanShutdown = m.loaded[recoveryPoints][st.TopicPartition], m.cleanShutdown
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStorage, dir, err)
	}
	delete(m.unrecovered, st.TopicPartition) // scanned from its recovery point
	if id, ok := l.TopicID(); ok && id != st.TopicID {
		m.log.Info("deleting the log of an older topic with the same name",
			zap.String("dir", dir), zap.String("topicId", hex.EncodeToString(id[:])))
		if err := m.deleteLog(l); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		m.forgetCheckpoints(st.TopicPartition)
		cfg.RecoveryPoint = 0
		if l, err = storage.OpenLog(dir, cfg); err != nil {
			return nil, fmt.Errorf("%w: open %s: %w", ErrStorage, dir, err)
		}
	}
	if err := l.SetTopicID(st.TopicID); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if start, ok := m.loaded[logStartOffsets][st.TopicPartition]; ok {
		l.SetStartOffset(start)
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
		if tp, ok := parsePartitionDir(e.Name()); ok {
			if l := m.takeLoadedLog(tp); l != nil {
				_ = l.Close() // its files are going away
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if tp, ok := parsePartitionDir(e.Name()); ok {
			delete(m.unrecovered, tp)
		}
		removed = append(removed, dir)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("%w: %w", ErrStorage, errors.Join(errs...))
	}
	return removed, nil
}

// isStray decides for one directory; mu held. A partition directory
// without partition.metadata is a stray, as Kafka's isStrayReplica treats
// a log without a topic id: the file is written durably before any batch
// (storage.Log.SetTopicID), so such a directory is a new partition's log a
// crash caught before its topic id was flushed, holding nothing, and
// keeping it could let a later topic of the same name, with another id,
// adopt it.
func (m *Manager) isStray(name, dir string, keep func(TopicPartition, [16]byte) bool) bool {
	if strings.HasSuffix(name, "-delete") {
		return true
	}
	tp, ok := parsePartitionDir(name)
	if !ok || tp.Topic == "__cluster_metadata" {
		return false
	}
	if _, hosted := m.parts[tp]; hosted {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, storage.PartitionMetadataFile))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
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
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeLocked(tp, deleteLog)
}

func (m *Manager) removeLocked(tp TopicPartition, deleteLog bool) error {
	p, ok := m.parts[tp]
	if !ok {
		return m.removeLoadedLog(tp, deleteLog)
	}
	delete(m.parts, tp)
	if m.hostedByTopic[tp.Topic]--; m.hostedByTopic[tp.Topic] <= 0 {
		delete(m.hostedByTopic, tp.Topic)
	}
	p.stop()
	m.fetchers.remove(tp)
	if !deleteLog {
		err := p.close()
		m.rememberCheckpoints(p)
		if err != nil {
			m.unrecovered[tp] = struct{}{}
		}
		return err
	}
	m.forgetCheckpoints(tp)
	delete(m.unrecovered, tp)
	id, _ := p.log.TopicID()
	m.log.Info("deleting partition log", zap.Stringer("partition", tp), zap.String("topicId", hex.EncodeToString(id[:])))
	return m.deleteLog(p.log)
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

// Close stops replication (StopReplication) and the background goroutine,
// writes the partition.metadata files still pending (PendingTopicIDWrites),
// closes every log (flushing it), writes the checkpoint files and, when all
// of that succeeded and no log of the directory is left unrecovered (a log
// found after a crash and never opened since), the clean-shutdown marker, so
// the next start skips the recovery scan. Later Apply calls fail.
func (m *Manager) Close() error {
	start := time.Now()
	m.StopReplication()
	m.mu.Lock()
	stop := m.stop
	m.closed = true
	m.mu.Unlock()
	if stop != nil {
		stop()
		m.wg.Wait()
	}
	m.writePendingTopicIDs()
	closeStart := time.Now()
	m.mu.Lock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	closeErrs := closeAll(parts)
	var errs []error
	for i, p := range parts {
		if closeErrs[i] != nil {
			errs = append(errs, closeErrs[i])
			m.unrecovered[p.tp] = struct{}{}
		}
		m.rememberCheckpoints(p)
	}
	m.parts = map[TopicPartition]*Partition{}
	m.hostedByTopic = map[string]int{}
	errs = append(errs, m.closeLoadedLogs()...)
	m.mu.Unlock()
	ckptStart := time.Now()
	if err := m.WriteCheckpoints(); err != nil {
		errs = append(errs, err)
	}
	ms := func(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }
	m.log.Info("closed the partition logs", zap.Int("logs", len(parts)),
		zap.Float64("stop_ms", ms(start, closeStart)), zap.Float64("close_ms", ms(closeStart, ckptStart)),
		zap.Float64("checkpoints_ms", ms(ckptStart, time.Now())))
	m.mu.RLock()
	unrecovered := len(m.unrecovered)
	m.mu.RUnlock()
	if unrecovered > 0 {
		m.log.Info("no clean-shutdown marker: logs left unrecovered since the last crash", zap.Int("logs", unrecovered))
	}
	if len(errs) == 0 && unrecovered == 0 {
		if err := m.writeCleanShutdown(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrStorage, err))
		}
	}
	return errors.Join(errs...)
}

// closeAll stops and closes parts, up to applyWorkers at once (as Kafka's
// LogManager.shutdown flushes and closes a directory's logs on
// num.recovery.threads.per.data.dir threads): each close may fsync a
// segment, partition.metadata and the directory, and one after the other
// that was most of a broker's shutdown at thousands of partitions. It
// returns each partition's close error, by index.
func closeAll(parts []*Partition) []error {
	errs := make([]error, len(parts))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(parts)) {
		wg.Go(func() {
			for i := range work {
				parts[i].stop()
				errs[i] = parts[i].close()
			}
		})
	}
	for i := range parts {
		work <- i
	}
	close(work)
	wg.Wait()
	return errs
}

// LogDir describes the log directory for DescribeLogDirs.
type LogDir struct {
	// Path is the directory (log.dirs' first entry, absolute when it can be
	// made so).
	Path string
	// TotalBytes and UsableBytes are its volume's size and free space for
	// this process, -1 when unknown.
	TotalBytes, UsableBytes int64
}

// Dir describes the log directory the partition logs live in.
func (m *Manager) Dir() LogDir {
	path := m.cfg.Dir
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	total, usable := volumeBytes(m.cfg.Dir)
	return LogDir{Path: path, TotalBytes: total, UsableBytes: usable}
}
