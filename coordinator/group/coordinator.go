package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// Topic is the internal topic holding committed offsets and group metadata.
const Topic = "__consumer_offsets"

// Defaults of the broker settings (Kafka's GroupCoordinatorConfig and
// OffsetConfig).
const (
	DefaultNumPartitions                   = 50
	DefaultMinSessionTimeoutMs             = 6000
	DefaultMaxSessionTimeoutMs             = 1800000
	DefaultInitialRebalanceDelayMs         = 3000
	DefaultOffsetsRetentionMs              = 7 * 24 * 60 * 60 * 1000
	DefaultOffsetsRetentionCheckIntervalMs = 600000
	DefaultOffsetMetadataMaxBytes          = 4096
	DefaultCommitTimeoutMs                 = 5000
	DefaultTickIntervalMs                  = 100
)

// Config configures a group coordinator.
type Config struct {
	// BrokerID is this broker's id: it coordinates the groups of the
	// __consumer_offsets partitions it leads.
	BrokerID int32
	// Replicas hosts __consumer_offsets; required.
	Replicas *replica.Manager
	// NumPartitions is offsets.topic.num.partitions (default 50): the
	// partition count of __consumer_offsets until the topic exists.
	NumPartitions int32
	// TopicPartitions is __consumer_offsets' partition count in the
	// metadata, 0 while the topic does not exist (nil: always 0). Once it
	// exists its count decides a group's partition, as Kafka's
	// GroupCoordinator reads the topic's partition count, so that a broker
	// whose NumPartitions differs from the one the topic was created with
	// agrees with the others.
	TopicPartitions func() int32
	// MinSessionTimeoutMs and MaxSessionTimeoutMs are
	// group.min.session.timeout.ms (6000) and group.max.session.timeout.ms
	// (1800000): a JoinGroup outside them is INVALID_SESSION_TIMEOUT.
	MinSessionTimeoutMs, MaxSessionTimeoutMs int32
	// InitialRebalanceDelayMs is group.initial.rebalance.delay.ms: the
	// first rebalance of an empty group waits this long (again while new
	// members arrive, up to the rebalance timeout). 0 means the default
	// 3000; negative means no delay.
	InitialRebalanceDelayMs int32
	// OffsetsRetentionMs is offsets.retention.minutes in ms (7 days): the
	// offsets of a group empty that long expire (and then the group).
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckIntervalMs is offsets.retention.check.interval.ms
	// (600000).
	OffsetsRetentionCheckIntervalMs int64
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096).
	OffsetMetadataMaxBytes int
	// GroupMaxSize is group.max.size (default: no bound).
	GroupMaxSize int
	// CommitTimeoutMs is offsets.commit.timeout.ms (5000): how long a write
	// waits for the high watermark.
	CommitTimeoutMs int32
	// MinInsyncReplicas is what coordinator writes (acks=-1) require
	// (default 1).
	MinInsyncReplicas int
	// PartitionExists tells whether a topic partition exists, for
	// OffsetCommit's UNKNOWN_TOPIC_OR_PARTITION; nil accepts every one.
	PartitionExists func(topic string, partition int32) bool
	// TickIntervalMs is how often the driver goroutine runs Tick (100).
	TickIntervalMs int
	// NowMs is the clock (default: wall clock, ms). Tests fake it and call
	// Tick themselves.
	NowMs  func() int64
	Logger *zap.Logger
}

func (c *Config) validate() error {
	if c.Replicas == nil {
		return errors.New("group: coordinator without a replica manager")
	}
	def32 := func(v *int32, d int32) {
		if *v <= 0 {
			*v = d
		}
	}
	def32(&c.NumPartitions, DefaultNumPartitions)
	def32(&c.MinSessionTimeoutMs, DefaultMinSessionTimeoutMs)
	def32(&c.MaxSessionTimeoutMs, DefaultMaxSessionTimeoutMs)
	def32(&c.CommitTimeoutMs, DefaultCommitTimeoutMs)
	switch {
	case c.InitialRebalanceDelayMs == 0:
		c.InitialRebalanceDelayMs = DefaultInitialRebalanceDelayMs
	case c.InitialRebalanceDelayMs < 0:
		c.InitialRebalanceDelayMs = 0
	}
	if c.OffsetsRetentionMs <= 0 {
		c.OffsetsRetentionMs = DefaultOffsetsRetentionMs
	}
	if c.OffsetsRetentionCheckIntervalMs <= 0 {
		c.OffsetsRetentionCheckIntervalMs = DefaultOffsetsRetentionCheckIntervalMs
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	if c.GroupMaxSize <= 0 {
		c.GroupMaxSize = math.MaxInt32
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = 1
	}
	if c.TickIntervalMs <= 0 {
		c.TickIntervalMs = DefaultTickIntervalMs
	}
	if c.NowMs == nil {
		c.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// shard is the coordinator's state for one __consumer_offsets partition it
// leads.
//
// INVARIANTS: groups is nil until loaded; every group's partition is the
// shard's; epoch is the leader epoch the state was loaded in.
type shard struct {
	partition int32
	epoch     int32
	loaded    bool
	cancel    context.CancelFunc // stops the load
	groups    map[string]*group
	// markers are the transaction markers written while loading, applied
	// when the load ends (CompleteTxn).
	markers []txnMarker
}

type txnMarker struct {
	pid    int64
	commit bool
	offset int64
}

// Coordinator is the classic group coordinator of one broker (Kafka's
// GroupCoordinator with its GroupMetadataManager): groups live in memory,
// every change that must survive is written to the group's
// __consumer_offsets partition as its leader and answered once the high
// watermark passes it.
//
// Goroutines: the driver (Start; Tick every TickIntervalMs) and one loader
// per partition being loaded; Close stops and waits for them. Handlers call
// in from their connections' goroutines; mu guards everything.
type Coordinator struct {
	cfg Config
	log *zap.Logger

	mu         sync.Mutex
	shards     map[int32]*shard
	nextExpiry int64 // ms; next offsets retention pass
	closed     bool

	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// New validates cfg and builds a coordinator; Start runs its driver.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, shards: map[int32]*shard{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// NumPartitions is the number of __consumer_offsets partitions groups are
// spread over: the topic's once it exists, offsets.topic.num.partitions
// before.
func (c *Coordinator) NumPartitions() int32 {
	if c.cfg.TopicPartitions != nil {
		if n := c.cfg.TopicPartitions(); n > 0 {
			return n
		}
	}
	return c.cfg.NumPartitions
}

// PartitionFor is the __consumer_offsets partition of groupID over
// NumPartitions.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return PartitionFor(groupID, c.NumPartitions())
}

// Start runs the driver: Tick every TickIntervalMs on the configured clock.
func (c *Coordinator) Start() {
	c.wg.Go(func() {
		t := time.NewTicker(time.Duration(c.cfg.TickIntervalMs) * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				c.Tick(c.cfg.NowMs())
			}
		}
	})
}

// Close stops the driver and the loaders and waits for them; parked
// JoinGroup and SyncGroup requests are answered NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for pid := range c.shards {
		c.unloadLocked(pid)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Tick follows leadership of __consumer_offsets (loads partitions this
// broker came to lead, drops those it lost) and runs the groups' timers:
// session expiry, join and sync deadlines, the initial rebalance delay, and
// offsets retention.
func (c *Coordinator) Tick(nowMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.followLeadershipLocked()
	for _, sh := range c.shards {
		if !sh.loaded {
			continue
		}
		for _, g := range sh.groups {
			c.runTimersLocked(sh, g, nowMs)
		}
	}
	if nowMs >= c.nextExpiry {
		c.nextExpiry = nowMs + c.cfg.OffsetsRetentionCheckIntervalMs
		c.expireOffsetsLocked(nowMs)
	}
}

// followLeadershipLocked starts loading every led partition not loaded in
// its current leader epoch and drops the ones no longer led; mu held. It
// looks up the NumPartitions partitions of __consumer_offsets by name, so a
// tick costs the same whatever else the broker hosts (it listed and sorted
// every hosted partition, ten times a second: at 10,000 partitions about 9%
// of a kraftd bench broker's CPU, issue 17).
func (c *Coordinator) followLeadershipLocked() {
	led := map[int32]bool{}
	for pid := range c.NumPartitions() {
		p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: pid})
		if !ok {
			continue
		}
		st := p.State()
		if st.Leader != c.cfg.BrokerID {
			continue
		}
		led[pid] = true
		if sh := c.shards[pid]; sh == nil || sh.epoch != st.LeaderEpoch {
			c.startLoadLocked(pid, p, st.LeaderEpoch)
		}
	}
	for pid := range c.shards {
		if !led[pid] {
			c.unloadLocked(pid)
		}
	}
}

// resolveLocked finds the loaded shard coordinating groupID, or the error
// code to answer: NOT_COORDINATOR when this broker does not lead the
// group's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads; mu held.
func (c *Coordinator) resolveLocked(groupID string) (*shard, *replica.Partition, int16) {
	if c.closed {
		return nil, nil, kerr.NotCoordinator.Code
	}
	pid := c.PartitionFor(groupID)
	p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: pid})
	if !ok {
		if c.shards[pid] != nil {
			c.unloadLocked(pid)
		}
		return nil, nil, kerr.NotCoordinator.Code
	}
	st := p.State()
	if st.Leader != c.cfg.BrokerID {
		if c.shards[pid] != nil {
			c.unloadLocked(pid)
		}
		return nil, nil, kerr.NotCoordinator.Code
	}
	sh := c.shards[pid]
	if sh == nil || sh.epoch != st.LeaderEpoch {
		c.startLoadLocked(pid, p, st.LeaderEpoch)
		return nil, nil, kerr.CoordinatorLoadInProgress.Code
	}
	if !sh.loaded {
		return nil, nil, kerr.CoordinatorLoadInProgress.Code
	}
	return sh, p, 0
}

// unloadLocked forgets a partition's groups (its leadership moved): parked
// joins and syncs are answered NOT_COORDINATOR, so their members find the
// new coordinator, which loads the same state from the log; mu held.
func (c *Coordinator) unloadLocked(pid int32) {
	sh := c.shards[pid]
	if sh == nil {
		return
	}
	delete(c.shards, pid)
	if sh.cancel != nil {
		sh.cancel()
	}
	for _, g := range sh.groups {
		for _, m := range g.members {
			c.answerJoinError(m, kerr.NotCoordinator.Code)
			c.answerSync(m, kerr.NotCoordinator.Code, nil)
		}
		g.transition(Dead, 0)
	}
	c.log.Info("group coordinator partition unloaded", zap.Int32("partition", pid), zap.Int32("leader_epoch", sh.epoch))
}

// startLoadLocked replaces the partition's state with a loader for
// leaderEpoch; mu held.
func (c *Coordinator) startLoadLocked(pid int32, p *replica.Partition, leaderEpoch int32) {
	if c.closed {
		return
	}
	c.unloadLocked(pid)
	ctx, cancel := context.WithCancel(c.ctx)
	sh := &shard{partition: pid, epoch: leaderEpoch, cancel: cancel}
	c.shards[pid] = sh
	c.wg.Go(func() {
		defer cancel()
		groups, n, err := c.readPartition(ctx, pid, p, leaderEpoch)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.shards[pid] != sh {
			return // unloaded, or replaced by a newer epoch's load
		}
		if err != nil {
			// The next Tick or request starts over.
			delete(c.shards, pid)
			if ctx.Err() == nil {
				c.log.Warn("loading group coordinator partition failed", zap.Int32("partition", pid), zap.Error(err))
			}
			return
		}
		activate(groups, c.cfg.NowMs())
		// Markers that arrived while loading, again: those the load read
		// find nothing pending.
		for _, mk := range sh.markers {
			for _, g := range groups {
				g.completeTxn(mk.pid, mk.commit, mk.offset)
			}
		}
		sh.groups, sh.loaded, sh.cancel, sh.markers = groups, true, nil, nil
		c.log.Info("group coordinator partition loaded", zap.Int32("partition", pid),
			zap.Int32("leader_epoch", leaderEpoch), zap.Int("groups", len(groups)), zap.Int("records", n))
	})
}

// readPartition rebuilds the groups of a __consumer_offsets partition from
// its log. It first waits until the high watermark reaches the log end seen
// at the start, so every write acknowledged by the previous leader (which
// the new leader holds: it was in the ISR) is read.
func (c *Coordinator) readPartition(ctx context.Context, pid int32, p *replica.Partition, leaderEpoch int32) (map[string]*group, int, error) {
	end := p.Log().EndOffset()
	if end > 0 {
		if err := p.WaitCommitted(ctx, end-1); err != nil {
			return nil, 0, err
		}
	}
	groups := map[string]*group{}
	n := 0
	for off := p.Log().StartOffset(); off < end; {
		res, err := p.ReadAsLeader(off, 1<<20, leaderEpoch)
		if err != nil {
			return nil, n, err
		}
		batches, _, err := storage.SplitBatches(res.Records)
		if err != nil {
			return nil, n, err
		}
		if len(batches) == 0 {
			break
		}
		for _, b := range batches {
			off = b.NextOffset()
			if b.Control {
				// A transaction's marker settles its TxnOffsetCommit offsets.
				t, _, err := b.ControlMarker()
				if err == nil && b.ProducerID() >= 0 && (t == storage.ControlCommit || t == storage.ControlAbort) {
					for _, g := range groups {
						g.completeTxn(b.ProducerID(), t == storage.ControlCommit, b.BaseOffset)
					}
				}
				continue
			}
			if b.Compression() != storage.CompressionNone {
				continue // the coordinator never compresses
			}
			recs, err := b.Records()
			if err != nil {
				return nil, n, err
			}
			txnPID := int64(-1)
			if b.Transactional() {
				txnPID = b.ProducerID()
			}
			for _, r := range recs {
				n++
				lr, err := decodeRecord(r)
				if err != nil {
					c.log.Warn("skipping a __consumer_offsets record", zap.Int32("partition", pid), zap.Int64("offset", r.Offset), zap.Error(err))
					continue
				}
				lr.logOffset = r.Offset
				if txnPID >= 0 {
					replayTxn(groups, pid, txnPID, lr)
					continue
				}
				replay(groups, pid, lr)
			}
		}
	}
	return groups, n, nil
}

// activate makes loaded groups live (Kafka's loadGroup): a group with
// members is Stable, each member's session starting now.
func activate(groups map[string]*group, nowMs int64) {
	for _, g := range groups {
		if len(g.members) > 0 {
			g.state = Stable
		}
		for _, m := range g.members {
			m.heartbeatDeadline = nowMs + int64(m.sessionTimeoutMs)
		}
	}
}

// replayTxn applies one record of producer txnPID's transactional batch
// (TxnOffsetCommit's): an offset pending until the transaction's marker.
func replayTxn(groups map[string]*group, pid int32, txnPID int64, lr loadedRecord) {
	if lr.offsetKey == nil || lr.offsetValue == nil {
		return // the coordinator writes only offsets in a transaction
	}
	k, v := lr.offsetKey, lr.offsetValue
	g := groups[k.Group]
	if g == nil {
		g = newGroup(k.Group, pid, 0)
		groups[k.Group] = g
	}
	g.addPending(txnPID, TopicPartition{Topic: k.Topic, Partition: k.Partition},
		committedOffset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp, logOffset: lr.logOffset})
}

// replay applies one record to the groups being loaded: the latest record
// of each key wins, a tombstone deletes it.
func replay(groups map[string]*group, pid int32, lr loadedRecord) {
	get := func(id string) *group {
		g := groups[id]
		if g == nil {
			g = newGroup(id, pid, 0)
			groups[id] = g
		}
		return g
	}
	switch {
	case lr.offsetKey != nil:
		k := lr.offsetKey
		tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if lr.offsetValue == nil {
			if g := groups[k.Group]; g != nil {
				delete(g.offsets, tp)
			}
			return
		}
		v := lr.offsetValue
		get(k.Group).offsets[tp] = committedOffset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp, logOffset: lr.logOffset}
	case lr.groupValue == nil:
		if g := groups[lr.groupKey.Group]; g != nil {
			if len(g.offsets) == 0 && len(g.pendingTxn) == 0 {
				delete(groups, g.id)
			} else {
				offsets, pending := g.offsets, g.pendingTxn
				*g = *newGroup(g.id, pid, 0)
				g.offsets, g.pendingTxn = offsets, pending
			}
		}
	default:
		g := get(lr.groupKey.Group)
		offsets, pending := g.offsets, g.pendingTxn
		*g = *newGroup(g.id, pid, lr.groupValue.CurrentStateTimestamp)
		g.offsets, g.pendingTxn = offsets, pending
		v := lr.groupValue
		g.protocolType, g.generation = v.ProtocolType, v.Generation
		if v.Protocol != nil {
			g.protocol = *v.Protocol
		}
		if v.Leader != nil {
			g.leader = *v.Leader
		}
		for _, vm := range v.Members {
			m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
				sessionTimeoutMs: vm.SessionTimeoutMillis, rebalanceTimeoutMs: vm.RebalanceTimeoutMillis,
				protocolType: v.ProtocolType, protocols: []protocol{{name: g.protocol, metadata: vm.Subscription}},
				assignment: vm.Assignment}
			if m.rebalanceTimeoutMs < 0 {
				m.rebalanceTimeoutMs = m.sessionTimeoutMs
			}
			g.members[m.id] = m
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
		}
		if _, ok := g.members[g.leader]; !ok {
			g.leader = ""
		}
	}
}

// write appends recs to p as the leader of the shard's epoch; the caller
// waits for them with waitWritten outside mu. mu held.
func (c *Coordinator) writeLocked(sh *shard, p *replica.Partition, recs []storage.Record) (int64, error) {
	return c.writeTxnLocked(sh, p, recs, -1, -1)
}

// writeTxnLocked is writeLocked; with producerID >= 0 the records go in
// as a transactional batch of (producerID, producerEpoch), sequence -1
// (TxnOffsetCommit; the caller verified the transaction). mu held.
func (c *Coordinator) writeTxnLocked(sh *shard, p *replica.Partition, recs []storage.Record, producerID int64, producerEpoch int16) (int64, error) {
	if st := p.State(); st.Leader != c.cfg.BrokerID || st.LeaderEpoch != sh.epoch {
		return -1, fmt.Errorf("%w: leader epoch %d, loaded in %d", replica.ErrNotLeader, st.LeaderEpoch, sh.epoch)
	}
	opts := replica.AppendOptions{RequiredAcks: -1, MinInsyncReplicas: c.cfg.MinInsyncReplicas, LogAppendTimeMs: -1}
	b := storage.EncodeBatch(0, 0, c.cfg.NowMs(), false, recs)
	if producerID >= 0 {
		b = storage.EncodeTxnBatch(producerID, producerEpoch, c.cfg.NowMs(), recs)
		opts.Coordinator = true
		opts.VerifyTxn = func(int64, int16) error { return nil } // verified before mu
	}
	res, err := p.AppendAsLeader(b.Raw, opts)
	if err != nil {
		return -1, err
	}
	return res.LastOffset, nil
}

// waitWritten waits for the high watermark to pass lastOffset, at most
// CommitTimeoutMs; then the write is acknowledged (acks=-1). It does not
// end with the client's request: a client that hangs up must not leave a
// committed write out of the cache (the next OffsetFetch would answer the
// older offset until the partition is reloaded).
func (c *Coordinator) waitWritten(p *replica.Partition, lastOffset int64) error {
	wctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.CommitTimeoutMs)*time.Millisecond)
	defer cancel()
	if err := p.WaitCommitted(wctx, lastOffset); err != nil {
		return err
	}
	return p.CheckReplicasAfterCommit(c.cfg.MinInsyncReplicas)
}

// writeErrorCode maps a failed coordinator write to what Kafka answers
// (GroupMetadataManager's storeGroup/storeOffsets error mapping).
func writeErrorCode(err error) int16 {
	switch {
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrStorage), errors.Is(err, replica.ErrClosed):
		return kerr.NotCoordinator.Code
	case errors.Is(err, replica.ErrMessageTooLarge), errors.Is(err, replica.ErrRecordListTooLarge):
		return kerr.InvalidCommitOffsetSize.Code
	}
	// NOT_ENOUGH_REPLICAS(_AFTER_APPEND), timeouts, unknown partition.
	return kerr.CoordinatorNotAvailable.Code
}

// writeBackground appends recs without waiting for them (the empty group's
// metadata after its last member left, retention tombstones): nobody is
// answered from it; mu held.
func (c *Coordinator) writeBackgroundLocked(sh *shard, recs []storage.Record) {
	p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: sh.partition})
	if !ok || len(recs) == 0 {
		return
	}
	if _, err := c.writeLocked(sh, p, recs); err != nil {
		c.log.Info("group coordinator write failed", zap.Int32("partition", sh.partition), zap.Error(err))
	}
}

// newMemberID is Kafka's clientId + "-" + a random UUID.
func newMemberID(clientID string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (c *Coordinator) answerJoinError(m *member, code int16) {
	if m.joinWait == nil {
		return
	}
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = m.joinVersion
	r.ErrorCode, r.Generation, r.MemberID = code, -1, m.id
	m.joinWait <- r
	m.joinWait = nil
}

func (c *Coordinator) answerSync(m *member, code int16, assignment []byte) {
	if m.syncWait == nil {
		return
	}
	m.syncWait <- syncAnswer{code: code, assignment: assignment}
	m.syncWait = nil
}
