package txn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// Defaults of the coordinator's settings.
const (
	DefaultWriteTimeoutMs = 5000
	// DefaultIDExpirationMs is transactional.id.expiration.ms' default,
	// 7 days.
	DefaultIDExpirationMs = 7 * 24 * 60 * 60 * 1000
)

// MarkerSender writes a transaction's COMMIT or ABORT markers to the
// leaders of its partitions (WriteTxnMarkers; Kafka's
// TransactionMarkerChannelManager). It returns nil once every partition
// has its marker; an error leaves the transaction to be retried.
type MarkerSender interface {
	WriteTxnMarkers(ctx context.Context, m Markers) error
}

// Markers is one transaction's end, for every partition in it.
type Markers struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
}

// Config configures a transaction coordinator.
type Config struct {
	// BrokerID is this broker's id: it coordinates the transactional ids of
	// the __transaction_state partitions it leads.
	BrokerID int32
	// Replicas hosts __transaction_state; required.
	Replicas *replica.Manager
	// NumPartitions is transaction.state.log.num.partitions (50): the
	// partition count of __transaction_state until the topic exists.
	NumPartitions int32
	// TopicPartitions is __transaction_state's partition count in the
	// metadata, 0 while the topic does not exist (nil: always 0). Once it
	// exists, its count decides the partition of a transactional id, as
	// Kafka's TransactionStateManager.partitionFor, so that a broker whose
	// NumPartitions differs from the one the topic was created with agrees
	// with the others and with clients' FindCoordinator answers.
	TopicPartitions func() int32
	// MaxTimeoutMs is transaction.max.timeout.ms (900000).
	MaxTimeoutMs int32
	// MinInsyncReplicas is what coordinator writes (acks=-1) require (1).
	MinInsyncReplicas int
	// WriteTimeoutMs bounds the wait for a state write's commit (5000).
	WriteTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms: a transactional id
	// with no transaction in flight (Empty, CompleteCommit, CompleteAbort)
	// and no update for this long is deleted (a tombstone in
	// __transaction_state). Zero or negative: DefaultIDExpirationMs.
	IDExpirationMs int64
	// ProducerIDs allocates a producer id (from the controller's blocks);
	// required.
	ProducerIDs func(ctx context.Context) (int64, error)
	// Markers sends WriteTxnMarkers; required.
	Markers MarkerSender
	// NowMs is the clock (default: wall clock); tests fake it.
	NowMs  func() int64
	Logger *zap.Logger
}

func (c *Config) validate() error {
	if c.Replicas == nil || c.ProducerIDs == nil || c.Markers == nil {
		return errors.New("txn: coordinator needs a replica manager, a producer id source and a marker sender")
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = 1
	}
	if c.WriteTimeoutMs <= 0 {
		c.WriteTimeoutMs = DefaultWriteTimeoutMs
	}
	if c.IDExpirationMs <= 0 {
		c.IDExpirationMs = DefaultIDExpirationMs
	}
	if c.NowMs == nil {
		c.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// shard is the state of one __transaction_state partition this broker leads.
//
// INVARIANTS: txns is nil until loaded; epoch is the leader epoch the state
// was loaded in, and the coordinator epoch of every marker it sends.
type shard struct {
	partition int32
	epoch     int32
	loaded    bool
	txns      map[string]*entry
}

// entry is one transactional id: its committed metadata, and whether a
// write or a marker send is in flight (requests meanwhile are
// CONCURRENT_TRANSACTIONS).
type entry struct {
	meta    *Metadata
	busy    bool
	sending bool
}

// Coordinator is one broker's transaction coordinator (Kafka's
// TransactionCoordinator with its TransactionStateManager): transactional
// ids live in memory per led __transaction_state partition, every
// transition is written there as its leader and applied once committed;
// markers go out through MarkerSender, then the Complete state is written.
//
// Goroutines: one marker send per ending transaction, owned by the
// coordinator; Close cancels and waits for them. Tick (called by the
// broker's driver, or tests) follows leadership, loads partitions, expires
// timed-out transactions and retries marker sends. mu guards everything
// and is released while a write waits for its commit and while a producer
// id is fetched.
type Coordinator struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	shards map[int32]*shard
	closed bool

	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// New validates cfg and builds a coordinator.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger.Named("txn-coordinator"), shards: map[int32]*shard{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops marker sends and waits for them; later requests are
// NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// PartitionFor is the __transaction_state partition of transactionalID
// over the topic's partition count once it exists, NumPartitions before.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return PartitionFor(transactionalID, c.partitionCount())
}

func (c *Coordinator) partitionCount() int32 {
	if c.cfg.TopicPartitions != nil {
		if n := c.cfg.TopicPartitions(); n > 0 {
			return n
		}
	}
	return c.cfg.NumPartitions
}

// PartitionFor is the __transaction_state partition of transactionalID:
// Utils.abs(id.hashCode()) % numPartitions, as Kafka's
// TransactionStateManager.partitionFor (the same hash as group ids).
func PartitionFor(transactionalID string, numPartitions int32) int32 {
	var h int32
	for _, r := range transactionalID {
		if r >= 0x10000 { // two UTF-16 code units
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % numPartitions
}

// Tick follows leadership (loading newly led partitions, dropping lost
// ones), aborts transactions past their timeout and retries marker sends
// at nowMs.
func (c *Coordinator) Tick(nowMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	led := map[int32]bool{}
	// The partitions of __transaction_state by name: a tick costs the same
	// whatever else the broker hosts (see the group coordinator's
	// followLeadershipLocked).
	for pid := range c.partitionCount() {
		p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: pid})
		if !ok || p.State().Leader != c.cfg.BrokerID {
			continue
		}
		led[pid] = true
		if sh := c.shards[pid]; sh == nil || sh.epoch != p.State().LeaderEpoch || !sh.loaded {
			c.loadLocked(pid, p) // again while its high watermark trails its log end
		}
	}
	for pid, sh := range c.shards {
		if !led[pid] {
			delete(c.shards, pid)
			continue
		}
		if !sh.loaded {
			continue
		}
		for _, e := range sh.txns {
			c.advanceLocked(sh, e, nowMs)
		}
	}
}

// advanceLocked moves one transactional id along on a tick: a timed-out
// transaction is aborted, a prepared one's markers are (re)sent; mu held.
func (c *Coordinator) advanceLocked(sh *shard, e *entry, nowMs int64) {
	if e.busy || e.sending || e.meta == nil {
		return
	}
	switch e.meta.State {
	case Empty, CompleteCommit, CompleteAbort:
		if nowMs-e.meta.LastUpdateMs >= c.cfg.IDExpirationMs {
			c.expireIDLocked(sh, e)
			return
		}
	}
	if tr := Expire(e.meta, nowMs); tr.Next != nil {
		c.log.Info("aborting a timed-out transaction", zap.String("transactionalId", e.meta.TransactionalID),
			zap.Int64("producerId", e.meta.ProducerID))
		c.writeBackgroundLocked(sh, e, tr)
		return
	}
	if e.meta.State == PrepareCommit || e.meta.State == PrepareAbort {
		c.sendMarkersLocked(sh, e)
	}
}

// loadLocked rebuilds a partition's transactional ids from its log (the
// last record of each id wins, a tombstone deletes it); mu held. The read
// is synchronous: __transaction_state records are small and few per id.
func (c *Coordinator) loadLocked(pid int32, p *replica.Partition) {
	st := p.State()
	sh := &shard{partition: pid, epoch: st.LeaderEpoch, txns: map[string]*entry{}}
	end := p.Log().EndOffset()
	if p.HighWatermark() < end {
		c.shards[pid] = sh // not loaded: requests are COORDINATOR_LOAD_IN_PROGRESS until a later tick
		return
	}
	for off := p.Log().StartOffset(); off < end; {
		res, err := p.ReadAsLeader(off, 1<<20, st.LeaderEpoch)
		if err != nil {
			c.log.Warn("loading __transaction_state failed", zap.Int32("partition", pid), zap.Error(err))
			delete(c.shards, pid)
			return
		}
		batches, _, _ := storage.SplitBatches(res.Records)
		if len(batches) == 0 {
			break
		}
		for _, b := range batches {
			off = b.NextOffset()
			c.replayBatch(sh, b)
		}
	}
	sh.loaded = true
	c.shards[pid] = sh
	c.log.Info("transaction coordinator partition loaded", zap.Int32("partition", pid),
		zap.Int32("leaderEpoch", st.LeaderEpoch), zap.Int("transactionalIds", len(sh.txns)))
}

func (c *Coordinator) replayBatch(sh *shard, b storage.Batch) {
	if b.Control || b.Compression() != storage.CompressionNone {
		return
	}
	recs, err := b.Records()
	if err != nil {
		return
	}
	for _, r := range recs {
		id, err := DecodeKey(r.Key)
		if err != nil {
			continue
		}
		if r.Value == nil {
			delete(sh.txns, id)
			continue
		}
		m, err := DecodeValue(id, r.Value)
		if err != nil {
			c.log.Warn("skipping a __transaction_state record", zap.Int64("offset", r.Offset), zap.Error(err))
			continue
		}
		sh.txns[id] = &entry{meta: m}
	}
}

// resolveLocked finds the loaded shard of transactionalID and its
// partition, or the error to answer; mu held.
func (c *Coordinator) resolveLocked(transactionalID string) (*shard, *replica.Partition, *kerr.Error) {
	if c.closed {
		return nil, nil, kerr.NotCoordinator
	}
	pid := c.PartitionFor(transactionalID)
	p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: pid})
	if !ok || p.State().Leader != c.cfg.BrokerID {
		delete(c.shards, pid)
		return nil, nil, kerr.NotCoordinator
	}
	sh := c.shards[pid]
	if sh == nil || sh.epoch != p.State().LeaderEpoch || !sh.loaded {
		c.loadLocked(pid, p)
		if sh = c.shards[pid]; sh == nil || !sh.loaded {
			return nil, nil, kerr.CoordinatorLoadInProgress
		}
	}
	return sh, p, nil
}

// writeLocked appends tr's record for e and waits (without mu) for its
// commit, then applies it; mu held on entry and on return. The wait is on
// the coordinator's context, bounded by WriteTimeoutMs, never on a client's:
// a record appended is committed whether or not its client is still there,
// so memory must follow it (Kafka's appendTransactionToLog callback runs
// regardless of the request).
func (c *Coordinator) writeLocked(sh *shard, p *replica.Partition, e *entry, tr Transition) *kerr.Error {
	if tr.Next == nil {
		return nil
	}
	b := storage.EncodeBatch(0, 0, c.cfg.NowMs(), false, []storage.Record{{Key: EncodeKey(tr.Next.TransactionalID), Value: EncodeValue(tr.Next)}})
	res, err := p.AppendAsLeader(b.Raw, replica.AppendOptions{RequiredAcks: -1, MinInsyncReplicas: c.cfg.MinInsyncReplicas, LogAppendTimeMs: -1})
	if err != nil {
		return writeError(err)
	}
	e.busy = true
	sh.txns[tr.Next.TransactionalID] = e // a new id is busy too while its first record is written
	c.mu.Unlock()
	wctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
	err = p.WaitCommitted(wctx, res.LastOffset)
	cancel()
	c.mu.Lock()
	e.busy = false
	if err != nil {
		if e.meta == nil && sh.txns[tr.Next.TransactionalID] == e {
			delete(sh.txns, tr.Next.TransactionalID)
		}
		return writeError(err)
	}
	if c.shards[sh.partition] != sh {
		return kerr.NotCoordinator // leadership moved while the write waited
	}
	e.meta = tr.Next
	sh.txns[tr.Next.TransactionalID] = e
	if tr.Markers {
		c.sendMarkersLocked(sh, e)
	}
	return nil
}

// expireIDLocked deletes an idle transactional id: a tombstone, then (once
// committed) the id leaves memory, unless it was used meanwhile; mu held.
func (c *Coordinator) expireIDLocked(sh *shard, e *entry) {
	p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: sh.partition})
	if !ok {
		return
	}
	id := e.meta.TransactionalID
	b := storage.EncodeBatch(0, 0, c.cfg.NowMs(), false, []storage.Record{{Key: EncodeKey(id)}})
	res, err := p.AppendAsLeader(b.Raw, replica.AppendOptions{RequiredAcks: -1, MinInsyncReplicas: c.cfg.MinInsyncReplicas, LogAppendTimeMs: -1})
	if err != nil {
		return
	}
	e.busy = true
	c.wg.Go(func() {
		wctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
		err := p.WaitCommitted(wctx, res.LastOffset)
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		e.busy = false
		if err == nil && c.shards[sh.partition] == sh && sh.txns[id] == e {
			delete(sh.txns, id)
			c.log.Info("expired transactional id", zap.String("transactionalId", id))
		}
	})
}

// writeBackgroundLocked is writeLocked for a tick's transition, waited for
// on a goroutine of the coordinator's; mu held.
func (c *Coordinator) writeBackgroundLocked(sh *shard, e *entry, tr Transition) {
	p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: sh.partition})
	if !ok {
		return
	}
	e.busy = true
	c.wg.Go(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		e.busy = false
		if err := c.writeLocked(sh, p, e, tr); err != nil {
			c.log.Info("transaction state write failed", zap.String("transactionalId", tr.Next.TransactionalID), zap.Error(err))
		}
	})
}

func writeError(err error) *kerr.Error {
	switch {
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrStorage), errors.Is(err, replica.ErrClosed):
		return kerr.NotCoordinator
	}
	return kerr.CoordinatorNotAvailable
}

// sendMarkersLocked starts the marker send of a prepared transaction; once
// every partition has its marker the Complete state is written. A failed
// send is retried at a later tick; mu held.
func (c *Coordinator) sendMarkersLocked(sh *shard, e *entry) {
	if e.sending || c.closed {
		return
	}
	m := e.meta
	mk := Markers{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: sh.epoch,
		Commit: m.State == PrepareCommit}
	for _, t := range m.topics() {
		for _, part := range t.Partitions {
			mk.Partitions = append(mk.Partitions, TopicPartition{Topic: t.Topic, Partition: part})
		}
	}
	e.sending = true
	c.wg.Go(func() {
		err := c.cfg.Markers.WriteTxnMarkers(c.ctx, mk)
		c.mu.Lock()
		defer c.mu.Unlock()
		e.sending = false
		if err != nil {
			c.log.Info("writing transaction markers failed; retrying at the next tick",
				zap.String("transactionalId", m.TransactionalID), zap.Error(err))
			return
		}
		next, cerr := CompleteMarkers(e.meta, c.cfg.NowMs())
		if cerr != nil || c.shards[sh.partition] != sh {
			return
		}
		p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: Topic, Partition: sh.partition})
		if !ok {
			return
		}
		if werr := c.writeLocked(sh, p, e, Transition{Next: next}); werr != nil {
			c.log.Info("writing the completed transaction state failed", zap.String("transactionalId", m.TransactionalID),
				zap.Error(werr))
		}
	})
}

// InitProducerID answers InitProducerId for a transactional id: the
// producer id and epoch, or the error. A producer id to allocate (a new id,
// or an exhausted epoch) is fetched without mu, since that may be a round
// trip to the controller and every other transactional id of the broker
// would wait for it (Kafka too generates it outside the state lock); the
// state is then looked at again, and an id fetched but no longer needed is
// left unused, as Kafka leaves it.
func (c *Coordinator) InitProducerID(ctx context.Context, req InitRequest) (int64, int16, *kerr.Error) {
	fetched := int64(-1)
	for {
		pid, epoch, needID, kerrv := c.initProducerID(req, fetched)
		if !needID {
			return pid, epoch, kerrv
		}
		id, err := c.cfg.ProducerIDs(ctx)
		if err != nil {
			c.log.Info("allocating a producer id failed", zap.String("transactionalId", req.TransactionalID), zap.Error(err))
			return -1, -1, kerr.CoordinatorLoadInProgress
		}
		fetched = id
	}
}

// initProducerID is one try of InitProducerID with fetched (-1: none yet)
// as the producer id to allocate; needID when it needs one and has none.
func (c *Coordinator) initProducerID(req InitRequest, fetched int64) (pid int64, epoch int16, needID bool, kerrv *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, kerrv := c.resolveLocked(req.TransactionalID)
	if kerrv != nil {
		return -1, -1, false, kerrv
	}
	e := sh.txns[req.TransactionalID]
	var cur *Metadata
	if e != nil {
		if e.busy || e.sending || e.meta == nil {
			return -1, -1, false, kerr.ConcurrentTransactions
		}
		cur = e.meta
	} else {
		e = &entry{}
	}
	tr, code := Init(cur, req, c.cfg.MaxTimeoutMs, c.cfg.NowMs(), func() (int64, error) {
		if fetched < 0 {
			needID = true
			return -1, errNeedProducerID
		}
		return fetched, nil
	})
	if needID {
		return -1, -1, true, nil
	}
	if werr := c.writeLocked(sh, p, e, tr); werr != nil {
		return -1, -1, false, werr
	}
	if code != nil {
		return -1, -1, false, code
	}
	return e.meta.ProducerID, e.meta.ProducerEpoch, false, nil
}

var errNeedProducerID = errors.New("txn: a producer id is to be fetched")

// AddPartitions answers AddPartitionsToTxn (and AddOffsetsToTxn with the
// group's __consumer_offsets partition).
func (c *Coordinator) AddPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, parts []TopicPartition) *kerr.Error {
	return c.update(ctx, transactionalID, func(cur *Metadata, nowMs int64) (Transition, *kerr.Error) {
		return AddPartitions(cur, producerID, producerEpoch, parts, nowMs)
	})
}

// EndTxn answers EndTxn: once the prepare record is committed the
// producer is answered, and the markers follow (transaction.version 1).
func (c *Coordinator) EndTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit bool) *kerr.Error {
	return c.update(ctx, transactionalID, func(cur *Metadata, nowMs int64) (Transition, *kerr.Error) {
		return End(cur, producerID, producerEpoch, commit, nowMs)
	})
}

func (c *Coordinator) update(ctx context.Context, transactionalID string, step func(*Metadata, int64) (Transition, *kerr.Error)) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, kerrv := c.resolveLocked(transactionalID)
	if kerrv != nil {
		return kerrv
	}
	e := sh.txns[transactionalID]
	if e == nil {
		_, code := step(nil, c.cfg.NowMs())
		return code
	}
	if e.busy || e.meta == nil {
		return kerr.ConcurrentTransactions
	}
	tr, code := step(e.meta, c.cfg.NowMs())
	if code != nil {
		return code
	}
	return c.writeLocked(sh, p, e, tr)
}

// Verify answers whether the partitions are in producer (producerID,
// producerEpoch)'s ongoing transaction (AddPartitionsToTxn v4 verifyOnly,
// KIP-890: a partition leader asks before it admits the first transactional
// batch of a transaction): nil, or the error for every partition
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS
// while its state is being written), or, per partition, INVALID_TXN_STATE
// for one not in the transaction.
func (c *Coordinator) Verify(transactionalID string, producerID int64, producerEpoch int16, parts []TopicPartition) (map[TopicPartition]*kerr.Error, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, _, kerrv := c.resolveLocked(transactionalID)
	if kerrv != nil {
		return nil, kerrv
	}
	e := sh.txns[transactionalID]
	if e == nil || e.meta == nil {
		return nil, kerr.InvalidProducerIDMapping
	}
	if err := checkProducer(e.meta, producerID, producerEpoch); err != nil {
		return nil, err
	}
	if e.busy {
		return nil, kerr.ConcurrentTransactions
	}
	out := map[TopicPartition]*kerr.Error{}
	for _, tp := range parts {
		if _, in := e.meta.Partitions[tp]; !in || e.meta.State != Ongoing {
			out[tp] = kerr.InvalidTxnState
		}
	}
	return out, nil
}

// Describe returns a copy of transactionalID's committed state, for
// DescribeTransactions and tests.
func (c *Coordinator) Describe(transactionalID string) (*Metadata, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, _, kerrv := c.resolveLocked(transactionalID)
	if kerrv != nil {
		return nil, kerrv
	}
	e := sh.txns[transactionalID]
	if e == nil || e.meta == nil {
		return nil, kerr.TransactionalIDNotFound
	}
	return e.meta.Clone(), nil
}

// Listed is one transactional id in ListTransactions.
type Listed struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// ListFilter narrows List: by states and producer ids (empty: any), by
// transactions running at least MinDurationMs (negative: any; KIP-994), by
// a transactional id pattern (nil: any).
type ListFilter struct {
	States        map[State]bool
	ProducerIDs   map[int64]bool
	MinDurationMs int64
	Match         func(string) bool
}

// List answers ListTransactions over the partitions this broker leads:
// COORDINATOR_LOAD_IN_PROGRESS while one of them loads.
func (c *Coordinator) List(f ListFilter, nowMs int64) ([]Listed, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Listed
	for _, sh := range c.shards {
		if !sh.loaded {
			return nil, kerr.CoordinatorLoadInProgress
		}
		for id, e := range sh.txns {
			m := e.meta
			switch {
			case m == nil,
				len(f.States) > 0 && !f.States[m.State],
				len(f.ProducerIDs) > 0 && !f.ProducerIDs[m.ProducerID],
				f.MinDurationMs >= 0 && (m.StartMs < 0 || nowMs-m.StartMs < f.MinDurationMs),
				f.Match != nil && !f.Match(id):
				continue
			}
			out = append(out, Listed{TransactionalID: id, ProducerID: m.ProducerID, State: m.State})
		}
	}
	return out, nil
}

// StateNamed is the state with Kafka's name (ListTransactions' filters).
func StateNamed(name string) (State, bool) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}
