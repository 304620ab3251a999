package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionState is what the metadata says about a partition this broker hosts:
// the KRaft image's PartitionRecord/PartitionChangeRecord state, or a
// LeaderAndIsr request in zk-legacy mode.
type PartitionState struct {
	TopicPartition
	TopicID        [16]byte
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// Partition is one hosted replica: its log, its role, its high watermark and
// its producers' state.
//
// A leader appends producer batches and serves consumers below the high
// watermark and followers up to its log end; it tracks each follower's fetch
// position (isr.go) and moves the high watermark to the smallest log end
// offset over the maximal ISR. A follower appends what its fetcher
// (fetcher.go) brings from the leader, offsets as the leader assigned them,
// and truncates where its log diverges from the leader's (follower.go).
//
// INVARIANTS: hw <= log end offset; hw only grows while the leader epoch
// stays (a follower's also drops on truncation); followers, pending and
// epochStart are set only while leading (epochStart is the leader epoch's
// start offset, -1 otherwise); producers, followers, pending and every append
// are guarded by mu.
//
// There is one per hosted replica (a million on each broker of issue 17's
// largest cluster), so its fields are packed into 256 bytes (its size
// class; it was 376, in 384): what few partitions use (waiters,
// transactions) hangs off a pointer allocated at first use.
type Partition struct {
	tp       TopicPartition
	brokerID int32
	// known: state came from metadata (a fresh Partition has none);
	// stopped: removed or closed, no role any more. Guarded by mu (next
	// to brokerID to share its word).
	known   bool
	stopped bool
	log     *storage.Log
	// cfg is the topic's configuration, shared with the topic's other
	// partitions (Manager.topicCfgs) and never written through: an update
	// stores a new one.
	cfg   atomic.Pointer[TopicConfig]
	hooks *hooks

	mu         sync.Mutex
	state      PartitionState
	followers  *followerMap
	pending    *pendingISR // the AlterPartition in flight, if any
	epochStart int64
	producers  map[int64]*producerState
	// snapEnd is the offset of the latest producer snapshot written or
	// loaded (the log's first segment base when there is none).
	snapEnd int64
	txns    txnTracker
	// walkAborts collects the aborted transactions a load's walk finds
	// (non-nil only during the walk).
	walkAborts *[]storage.AbortedTxn

	hw atomic.Int64

	// fetching is the follower fetcher's entry for the partition (nil when
	// no fetcher fetches it): a fetch state change the fetcher does not
	// make itself (the log start moved by retention) marks it
	// (fetchStateMoved).
	fetching atomic.Pointer[fetchEntry]

	// waits are what waits on the partition's events, made when something
	// first waits (most partitions of a large broker never see a fetch or
	// a produce) and kept. Guarded by notifyMu.
	notifyMu sync.Mutex
	waits    *partitionWaits
}

// partitionWaits are the waiters of a partition's two events: the high
// watermark moving or the role changing (changed), and an append or a role
// change (appended; follower fetches read up to the log end).
type partitionWaits struct {
	// changed and appended are closed at their event. Each is made when
	// first waited on and dropped when closed, so that the many
	// partitions nobody waits on cost none.
	changed  chan struct{}
	appended chan struct{}
	// changeWaiters and appendWaiters are the long-polling fetches
	// waiting on the same two events (see Waiter), woken and dropped at
	// the next one.
	changeWaiters []waitRef
	appendWaiters []waitRef
}

// waitsLocked are p's waits, made if none; notifyMu held.
func (p *Partition) waitsLocked() *partitionWaits {
	if p.waits == nil {
		p.waits = &partitionWaits{}
	}
	return p.waits
}

// newPartition hosts log with the manager's replication hooks h; hw >= 0 is
// the high watermark checkpointed at the last shutdown
// (replication-offset-checkpoint), kept within the log. cfg is the topic's
// shared configuration: the partition only reads it.
func newPartition(st PartitionState, brokerID int32, log *storage.Log, cfg *TopicConfig, hw int64, h *hooks) (*Partition, error) {
	p := &Partition{tp: st.TopicPartition, brokerID: brokerID, log: log, hooks: h, epochStart: -1}
	p.cfg.Store(cfg)
	if hw >= 0 {
		p.hw.Store(min(max(hw, log.StartOffset()), log.EndOffset()))
	}
	if log.Created() {
		// A new directory holds no batch and no producer snapshot.
		p.snapEnd = log.FirstSegmentBase()
	} else if err := p.loadProducersFromLocked(h.nowMs(), log.ProducerSnapshotsAtOpen()); err != nil {
		return nil, err
	}
	p.become(st)
	return p, nil
}

// Config is the topic configuration the partition's log follows.
func (p *Partition) Config() TopicConfig { return *p.cfg.Load() }

// setConfig applies a topic config update to the open log; a lower
// min.insync.replicas may let the high watermark move. cfg is shared with
// the topic's other partitions and must not change after.
func (p *Partition) setConfig(cfg *TopicConfig) {
	p.cfg.Store(cfg)
	p.log.SetRollConfig(cfg.SegmentBytes, cfg.SegmentMs)
	p.mu.Lock()
	moved := p.maybeAdvanceHW(p.hooks.nowMs())
	p.mu.Unlock()
	if moved {
		p.notify()
	}
}

// deleteOldSegments applies the topic's retention at nowMs, below the high
// watermark; nothing without cleanup.policy delete.
func (p *Partition) deleteOldSegments(nowMs int64) (int, error) {
	cfg := p.cfg.Load()
	if !cfg.Delete {
		return 0, nil
	}
	start := p.log.StartOffset()
	n, err := p.log.DeleteOldSegments(nowMs, p.hw.Load(), storage.Retention{Ms: cfg.RetentionMs, Bytes: cfg.RetentionBytes})
	if n > 0 {
		p.deleteProducerSnapshotsBelow(p.log.FirstSegmentBase())
	}
	if p.log.StartOffset() != start {
		// Fetch answers carry the log start: the fetch sessions watching
		// this partition read it again (broker/fetch_sessions.go); and a
		// follower's fetches carry it to its leader (LowWatermark).
		p.notify()
		p.notifyAppend()
		p.fetchStateMoved()
	}
	return n, err
}

// fetchStateMoved tells the partition's follower fetcher, if any, that its
// fetch state (log start, end or latest epoch) moved by other means than
// the fetcher's own, so that its next incremental request carries it.
func (p *Partition) fetchStateMoved() {
	if e := p.fetching.Load(); e != nil {
		e.f.markDirty(e)
	}
}

// compact compacts the log's closed segments below the last stable offset
// (the high watermark when no transaction is open) when the topic's
// cleanup.policy includes compact: as Kafka's cleaner stops at the first
// unstable offset, a record of an open transaction, which may yet abort,
// never supersedes a committed one.
func (p *Partition) compact(nowMs int64) (storage.CompactStats, error) {
	cfg := p.cfg.Load()
	if !cfg.Compact {
		return storage.CompactStats{}, nil
	}
	return p.log.Compact(nowMs, p.LastStableOffset(), cfg.DeleteRetentionMs)
}

// TopicPartition is the partition's name.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// Log is the partition's log.
func (p *Partition) Log() *storage.Log { return p.log }

// State returns the partition's metadata state.
func (p *Partition) State() PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// HighWatermark is the offset below which records are committed (visible to
// consumers).
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// Changed returns a channel closed at the next high watermark move or role
// change (long-polling fetches and acks=-1 produces wait on it).
func (p *Partition) Changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	ws := p.waitsLocked()
	if ws.changed == nil {
		ws.changed = make(chan struct{})
	}
	return ws.changed
}

// Appended returns a channel closed at the next append or role change
// (long-polling follower fetches wait on it: they read up to the log end).
func (p *Partition) Appended() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	ws := p.waitsLocked()
	if ws.appended == nil {
		ws.appended = make(chan struct{})
	}
	return ws.appended
}

// WakeOnChange registers w to be woken at the next high watermark move or
// role change (the Changed event).
func (p *Partition) WakeOnChange(w *Waiter) { p.WakeOnChangeKey(w, nil) }

// WakeOnChangeKey is WakeOnChange recording key in w.Woken when it fires
// (nil: not recorded).
func (p *Partition) WakeOnChangeKey(w *Waiter, key any) {
	p.notifyMu.Lock()
	ws := p.waitsLocked()
	ws.changeWaiters = addWaiter(ws.changeWaiters, waitRef{w: w, key: key})
	p.notifyMu.Unlock()
}

// WakeOnAppend registers w to be woken at the next append or role change
// (the Appended event).
func (p *Partition) WakeOnAppend(w *Waiter) { p.WakeOnAppendKey(w, nil) }

// WakeOnAppendKey is WakeOnAppend recording key in w.Woken when it fires
// (nil: not recorded).
func (p *Partition) WakeOnAppendKey(w *Waiter, key any) {
	p.notifyMu.Lock()
	ws := p.waitsLocked()
	ws.appendWaiters = addWaiter(ws.appendWaiters, waitRef{w: w, key: key, append: true})
	p.notifyMu.Unlock()
}

func (p *Partition) notify() {
	p.notifyMu.Lock()
	if ws := p.waits; ws != nil {
		if ws.changed != nil {
			close(ws.changed)
			ws.changed = nil
		}
		ws.changeWaiters = wakeWaiters(ws.changeWaiters)
	}
	p.notifyMu.Unlock()
}

func (p *Partition) notifyAppend() {
	p.notifyMu.Lock()
	if ws := p.waits; ws != nil {
		if ws.appended != nil {
			close(ws.appended)
			ws.appended = nil
		}
		ws.appendWaiters = wakeWaiters(ws.appendWaiters)
	}
	p.notifyMu.Unlock()
}

// become applies a new metadata state (a leader or ISR change), as Kafka's
// Partition.makeLeader / makeFollower: a state older than the partition
// epoch already known (an AlterPartition answer may arrive before the
// metadata) is skipped, as is an older leader epoch; a new leader epoch on the leader records its start
// offset in the epoch cache and resets what it knows of followers. It
// reports whether the state was applied.
func (p *Partition) become(st PartitionState) bool {
	nowMs := p.hooks.nowMs()
	p.mu.Lock()
	if p.stopped || p.known && (st.LeaderEpoch < p.state.LeaderEpoch || st.PartitionEpoch < p.state.PartitionEpoch) {
		p.mu.Unlock()
		return false
	}
	wasLeader := p.known && p.isLeader()
	newEpoch := !p.known || st.LeaderEpoch > p.state.LeaderEpoch
	p.state = st
	p.state.Replicas, p.state.ISR = slices.Clone(st.Replicas), slices.Clone(st.ISR)
	p.known, p.pending = true, nil
	switch {
	case !p.isLeader():
		p.followers, p.epochStart = nil, -1
	case newEpoch || !wasLeader:
		end := p.log.EndOffset()
		if err := p.log.AssignEpochStartOffset(st.LeaderEpoch, end); err != nil {
			p.hooks.log.Error("recording the leader epoch start failed", zap.Stringer("partition", p.tp), zap.Error(err))
		}
		p.epochStart = end
		p.resetFollowersLocked(wasLeader, nowMs)
	default:
		p.syncFollowersLocked(nowMs)
	}
	p.maybeAdvanceHW(nowMs)
	p.mu.Unlock()
	p.notify()
	p.notifyAppend()
	return true
}

// leaderMoves reports whether st names another leader or leader epoch
// than the partition's current state.
func (p *Partition) leaderMoves(st PartitionState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known && (st.Leader != p.state.Leader || st.LeaderEpoch != p.state.LeaderEpoch)
}

// stop ends the partition's role for good (removed or closed): waiters see
// ErrNotLeader.
func (p *Partition) stop() {
	p.mu.Lock()
	p.stopped = true
	p.state.Leader = -1
	p.followers, p.pending, p.epochStart = nil, nil, -1
	p.mu.Unlock()
	p.notify()
	p.notifyAppend()
}

// syncFollowersLocked follows an assignment change within a leader epoch:
// new replicas get a fresh state, removed ones go; mu held.
func (p *Partition) syncFollowersLocked(nowMs int64) {
	if p.followers == nil {
		p.followers = &followerMap{}
	}
	m := p.followers
	m.entries = slices.DeleteFunc(m.entries, func(e followerEntry) bool { return !slices.Contains(p.state.Replicas, e.id) })
	for _, id := range p.state.Replicas {
		if m.get(id) == nil && id != p.brokerID {
			m.entries = append(m.entries, followerEntry{id: id, f: newFollowerState(slices.Contains(p.state.ISR, id), nowMs)})
		}
	}
}

// isLeader reports whether this broker leads the partition; mu held.
func (p *Partition) isLeader() bool { return p.state.Leader == p.brokerID }

// checkLeaderEpoch applies the request's current leader epoch (KIP-320; -1 skips
// the check); mu held.
func (p *Partition) checkLeaderEpoch(current int32) error {
	switch {
	case current < 0 || current == p.state.LeaderEpoch:
		return nil
	case current < p.state.LeaderEpoch:
		return fmt.Errorf("%w: %d, current %d", ErrFencedLeaderEpoch, current, p.state.LeaderEpoch)
	}
	return fmt.Errorf("%w: %d, current %d", ErrUnknownLeaderEpoch, current, p.state.LeaderEpoch)
}

// AppendOptions are the per-request and per-topic settings of a leader append.
type AppendOptions struct {
	// RequiredAcks is the produce request's acks (-1 checks MinInsyncReplicas).
	RequiredAcks int16
	// MinInsyncReplicas is the topic's min.insync.replicas.
	MinInsyncReplicas int
	// LogAppendTimeMs >= 0 stamps the batch with the broker's time
	// (message.timestamp.type=LogAppendTime); -1 keeps the producer's
	// timestamps (CreateTime).
	LogAppendTimeMs int64
	// VerifyTxn admits a transactional batch: it answers whether producer
	// (id, epoch) has an ongoing transaction that includes this partition
	// (the transaction coordinator's word, KIP-890's verification). It is
	// called without the partition's lock held. An error wrapping
	// ErrNotEnoughReplicas is returned as it is (retriable: the coordinator
	// is loading, moving or unreachable), any other refuses the batch. Nil
	// refuses every transactional batch (ErrTransactionsUnsupported): a
	// transaction nobody will end would hold the last stable offset, and so
	// every read_committed consumer, forever.
	VerifyTxn func(producerID int64, producerEpoch int16) error
	// Coordinator marks a write of a coordinator on this broker (the group
	// coordinator's transactional offsets, TxnOffsetCommit): as Kafka's
	// AppendOrigin.COORDINATOR, a batch with a producer id may carry
	// sequence -1 and is not checked against the producer's sequences (it
	// is still fenced by epoch and verified as a transaction).
	Coordinator bool
}

// AppendResult is the outcome of a leader append.
type AppendResult struct {
	// BaseOffset is the offset of the first record appended (or of the original
	// batch, for a duplicate).
	BaseOffset int64
	// LastOffset is the offset the high watermark must pass for acks=-1.
	LastOffset int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// LogAppendTimeMs is the timestamp given to the batch under LogAppendTime,
	// else -1.
	LogAppendTimeMs int64
	// Duplicate is set when an idempotent retry was answered from producer state.
	Duplicate bool
}

// AppendAsLeader validates records (a Produce request's data for this
// partition: exactly one RecordBatch v2), checks idempotent sequences, assigns
// offsets and the leader epoch (and the log append time if asked), and
// appends. RequiredAcks -1 enforces MinInsyncReplicas before the append;
// waiting for the high watermark is WaitCommitted's job.
func (p *Partition) AppendAsLeader(records []byte, opts AppendOptions) (AppendResult, error) {
	b, err := p.validate(records, opts.Coordinator)
	if err != nil {
		return AppendResult{}, err
	}
	// The coordinator is asked before the partition is locked: it may take
	// locks of its own (and of other partitions) that must never wait on
	// this one.
	// A producer whose transaction is already open here at this epoch was
	// verified by its first batch (KIP-890's verification guard); the
	// append checks again under the lock that it still is.
	txnErr := ErrTransactionsUnsupported
	if b.Transactional() && opts.VerifyTxn != nil {
		if p.txnOngoing(b.ProducerID(), b.ProducerEpoch()) {
			txnErr = errTxnOngoing
		} else if verr := opts.VerifyTxn(b.ProducerID(), b.ProducerEpoch()); errors.Is(verr, ErrNotEnoughReplicas) {
			txnErr = verr // the coordinator could not answer yet: the producer retries
		} else if verr != nil {
			txnErr = fmt.Errorf("%w: %w", ErrTransactionsUnsupported, verr)
		} else {
			txnErr = nil
		}
	}
	p.mu.Lock()
	res, moved, err := p.appendLocked(b, opts, txnErr)
	p.mu.Unlock()
	if err == nil && !res.Duplicate {
		p.notifyAppend()
	}
	if moved {
		p.notify()
	}
	return res, err
}

func (p *Partition) appendLocked(b storage.Batch, opts AppendOptions, txnErr error) (AppendResult, bool, error) {
	if !p.isLeader() {
		return AppendResult{}, false, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	if opts.RequiredAcks == -1 && len(p.state.ISR) < p.effectiveMinISRLocked(opts.MinInsyncReplicas) {
		return AppendResult{}, false, fmt.Errorf("%w: %d in sync, min.insync.replicas %d",
			ErrNotEnoughReplicas, len(p.state.ISR), opts.MinInsyncReplicas)
	}
	pid, epoch := b.ProducerID(), b.ProducerEpoch()
	if pid >= 0 {
		firstSeq := b.BaseSequence()
		var dup *producerBatch
		var err error
		if opts.Coordinator && firstSeq < 0 {
			// No sequences to check (Kafka skips them for coordinator
			// writes); an older epoch is still fenced.
			if st := p.producers[pid]; st != nil && epoch < st.epoch {
				err = fmt.Errorf("%w: epoch %d, latest %d", ErrInvalidProducerEpoch, epoch, st.epoch)
			}
		} else {
			dup, err = p.producers[pid].check(epoch, firstSeq, lastSeqOf(firstSeq, b.LastOffset-b.BaseOffset))
		}
		if err != nil {
			return AppendResult{}, false, err
		}
		if dup != nil {
			return AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset,
				LogStartOffset: p.log.StartOffset(), LogAppendTimeMs: -1, Duplicate: true}, false, nil
		}
		if err := p.checkTxnLocked(b, txnErr); err != nil {
			return AppendResult{}, false, err
		}
	}
	nowMs := p.hooks.nowMs()
	p.followersCaughtUpLocked()
	b.SetBaseOffset(p.log.EndOffset())
	b.SetLeaderEpoch(p.state.LeaderEpoch)
	appendTimeMs := int64(-1)
	if opts.LogAppendTimeMs >= 0 {
		b.SetLogAppendTime(opts.LogAppendTimeMs)
		appendTimeMs = opts.LogAppendTimeMs
	}
	if err := p.appendBatchLocked(b); err != nil {
		return AppendResult{}, false, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	moved := p.maybeAdvanceHW(nowMs)
	return AppendResult{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, LogStartOffset: p.log.StartOffset(),
		LogAppendTimeMs: appendTimeMs}, moved, nil
}

// validate parses a Produce request's records for this partition as Kafka's
// ProduceRequest and LogValidator do for magic 2: exactly one batch, a valid CRC,
// no control batch, not larger than max.message.bytes, and records (decompressed
// when compressed) whose count and offset deltas match the header, each with a
// key on a compacted topic. A batch is stored as sent unless the topic's
// compression.type names another codec: then it is recompressed, and checked
// against max.message.bytes again.
//
// A coordinator's write (coordinator set) may carry a producer id with
// sequence -1 (Kafka's AppendOrigin.COORDINATOR); a client's may not.
func (p *Partition) validate(records []byte, coordinator bool) (storage.Batch, error) {
	cfg := p.cfg.Load()
	if int64(len(records)) > cfg.SegmentBytes {
		return storage.Batch{}, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrRecordListTooLarge, len(records), cfg.SegmentBytes)
	}
	batches, n, err := storage.SplitBatches(records)
	switch {
	case err != nil:
		return storage.Batch{}, fmt.Errorf("%w: %w", ErrCorruptRecords, err)
	case n != len(records):
		return storage.Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecords, len(records)-n)
	case len(batches) != 1:
		return storage.Batch{}, fmt.Errorf("%w: %d batches, produce v3+ carries exactly one per partition", ErrInvalidRecord, len(batches))
	}
	b := batches[0]
	switch {
	case b.Size() > cfg.MaxMessageBytes:
		return storage.Batch{}, fmt.Errorf("%w: %d bytes, max %d", ErrMessageTooLarge, b.Size(), cfg.MaxMessageBytes)
	case b.Control:
		return storage.Batch{}, fmt.Errorf("%w: control batches come from brokers, not clients", ErrInvalidRecord)
	case b.Transactional() && b.ProducerID() < 0:
		return storage.Batch{}, fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
	case b.RecordCount() <= 0 || int64(b.RecordCount()) != b.LastOffset-b.BaseOffset+1:
		return storage.Batch{}, fmt.Errorf("%w: %d records, last offset delta %d", ErrInvalidRecord, b.RecordCount(), b.LastOffset-b.BaseOffset)
	case b.ProducerID() >= 0 && (b.ProducerEpoch() < 0 || (b.BaseSequence() < 0 && !coordinator)):
		return storage.Batch{}, fmt.Errorf("%w: producer id %d with epoch %d, sequence %d", ErrInvalidRecord, b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	}
	if err := checkRecords(b, cfg.Compact, p.tp); err != nil {
		return storage.Batch{}, err
	}
	if codec := cfg.targetCodec(); codec >= 0 && codec != b.Compression() {
		if b, err = b.Recompress(codec); err != nil {
			return storage.Batch{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
		if b.Size() > cfg.MaxMessageBytes {
			return storage.Batch{}, fmt.Errorf("%w: %d bytes after recompression to %s, max %d",
				ErrMessageTooLarge, b.Size(), cfg.CompressionType, cfg.MaxMessageBytes)
		}
	}
	return b, nil
}

// checkRecords walks the batch's records: every record must parse, there must
// be as many as the header says, and the offset deltas must run 0, 1, ...
// Kafka's record iterator throws InvalidRecordException for each of these, so
// all are INVALID_RECORD (CORRUPT_MESSAGE stays for a batch whose CRC or framing
// is wrong). On a compacted topic every record needs a key; the error names
// the first keyless record (a per-record error from Produce v8).
func checkRecords(b storage.Batch, compact bool, tp TopicPartition) error {
	err := b.ScanRecords(func(i int, r storage.RecordHeader) error {
		if r.Offset != b.BaseOffset+int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, i, r.Offset-b.BaseOffset)
		}
		if compact && r.NullKey {
			return &RecordError{Index: i, Message: fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s.", tp)}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrInvalidRecord) {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return err
}

// WaitCommitted blocks until the high watermark passes lastOffset (acks=-1),
// the partition stops being led here (ErrNotLeader), or ctx ends.
func (p *Partition) WaitCommitted(ctx context.Context, lastOffset int64) error {
	for {
		ch := p.Changed()
		if p.hw.Load() > lastOffset {
			return nil
		}
		p.mu.Lock()
		leader := p.isLeader()
		p.mu.Unlock()
		if !leader {
			return fmt.Errorf("%w: %s lost leadership before %d committed", ErrNotLeader, p.tp, lastOffset)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// effectiveMinISRLocked is Kafka's effectiveMinIsr: min.insync.replicas,
// but never more than the replicas there are; mu held.
func (p *Partition) effectiveMinISRLocked(minISR int) int {
	return min(minISR, max(len(p.state.Replicas), 1))
}

// CheckReplicasAfterCommit is Kafka's checkEnoughReplicasReachOffset for a
// committed acks=-1 batch: the (maximal) ISR it committed in must still have
// min.insync.replicas members, else ErrNotEnoughReplicasAfterAppend (the
// batch stays in the log; the producer is told its durability was short).
func (p *Partition) CheckReplicasAfterCommit(minISR int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, want := len(p.maximalISRLocked()), p.effectiveMinISRLocked(minISR); n < want {
		return fmt.Errorf("%w: %d in sync, min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, n, want)
	}
	return nil
}

// ReadResult is what a consumer fetch gets from one partition.
type ReadResult struct {
	Records []byte
	// Region is the records without the copy, for ReadRegionAsLeader
	// (Records is then nil); the caller releases it.
	Region           storage.Region
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
	// AbortedTxns are, for read_committed, the aborted transactions that
	// overlap the records returned or may follow them below the last stable
	// offset (Fetch's AbortedTransactions); nil for read_uncommitted.
	AbortedTxns []storage.AbortedTxn
}

// ReadAsLeader reads for a read_uncommitted consumer: whole batches from
// offset below the high watermark, at most maxBytes except that the first
// batch comes whole.
func (p *Partition) ReadAsLeader(offset int64, maxBytes int, currentLeaderEpoch int32) (ReadResult, error) {
	return p.ReadAsLeaderIsolated(offset, maxBytes, currentLeaderEpoch, false)
}

// ReadAsLeaderIsolated is ReadAsLeader with the fetch's isolation level:
// read_committed reads below the last stable offset instead and gets the
// aborted transactions of the range read.
func (p *Partition) ReadAsLeaderIsolated(offset int64, maxBytes int, currentLeaderEpoch int32, readCommitted bool) (ReadResult, error) {
	return p.readAsLeader(offset, maxBytes, currentLeaderEpoch, readCommitted, false)
}

// ReadRegionAsLeader is ReadAsLeaderIsolated without the copy: the records
// are res.Region, a region of the segment file for a sender to transfer
// (sendfile), which the caller must release; Records is nil.
func (p *Partition) ReadRegionAsLeader(offset int64, maxBytes int, currentLeaderEpoch int32, readCommitted bool) (ReadResult, error) {
	return p.readAsLeader(offset, maxBytes, currentLeaderEpoch, readCommitted, true)
}

func (p *Partition) readAsLeader(offset int64, maxBytes int, currentLeaderEpoch int32, readCommitted, region bool) (ReadResult, error) {
	p.mu.Lock()
	err := p.checkLeaderEpoch(currentLeaderEpoch)
	if err == nil && !p.isLeader() {
		err = fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	hw, lso := p.hw.Load(), p.lastStableOffsetLocked()
	p.mu.Unlock()
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{HighWatermark: hw, LastStableOffset: lso, LogStartOffset: p.log.StartOffset(), LogEndOffset: p.log.EndOffset()}
	upTo := hw
	if readCommitted {
		upTo = lso
	}
	var n int64
	if region {
		res.Region, err = p.log.ReadRegion(offset, maxBytes, upTo)
		n = res.Region.Len
	} else {
		res.Records, err = p.log.Read(offset, maxBytes, upTo)
		n = int64(len(res.Records))
	}
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return res, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	case err != nil:
		return res, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	if readCommitted && n > 0 {
		res.AbortedTxns = p.log.AbortedTxns(offset, upTo)
	}
	return res, nil
}

// Special ListOffsets timestamps (Kafka's ListOffsetsRequest).
const (
	LatestTimestamp        = -1
	EarliestTimestamp      = -2
	MaxTimestamp           = -3 // KIP-734
	EarliestLocalTimestamp = -4 // KIP-405: the local log start; no tiered storage here
)

// OffsetForTimestamp answers ListOffsets for a consumer: the earliest offset,
// the latest (the high watermark; read_uncommitted), the record with the
// largest timestamp, or the first record whose timestamp is at or after
// tsMs. found is false when no record
// qualifies (Kafka answers offset -1, timestamp -1). Right after an election,
// while the high watermark is below the leader epoch's start offset, latest
// and a lookup finding nothing below the high watermark are
// ErrOffsetNotAvailable, as Kafka's Partition.fetchOffsetForTimestamp
// (KIP-207): the new leader's high watermark may be behind the one consumers
// saw from the previous leader.
func (p *Partition) OffsetForTimestamp(tsMs int64, currentLeaderEpoch int32) (offset, foundTsMs int64, leaderEpoch int32, found bool, err error) {
	return p.OffsetForTimestampIsolated(tsMs, currentLeaderEpoch, false)
}

// OffsetForTimestampIsolated is OffsetForTimestamp with ListOffsets'
// isolation level: for read_committed the last stable offset takes the high
// watermark's place (latest answers it; nothing at or above it is found),
// as Kafka's fetchOffsetForTimestamp bounds lookups by the last fetchable
// offset.
func (p *Partition) OffsetForTimestampIsolated(tsMs int64, currentLeaderEpoch int32, readCommitted bool) (offset, foundTsMs int64, leaderEpoch int32, found bool, err error) {
	p.mu.Lock()
	err = p.checkLeaderEpoch(currentLeaderEpoch)
	if err == nil && !p.isLeader() {
		err = fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	leaderEpoch, epochStart := p.state.LeaderEpoch, p.epochStart
	hw := p.hw.Load()
	// KIP-207 compares the epoch's start with the high watermark itself,
	// for either isolation level (Kafka's fetchOffsetForTimestamp).
	realHW := hw
	if readCommitted {
		hw = p.lastStableOffsetLocked()
	}
	p.mu.Unlock()
	if err != nil {
		return -1, -1, -1, false, err
	}
	var notFound error // the answer when nothing below hw qualifies
	if epochStart > realHW {
		notFound = fmt.Errorf("%w: %s: high watermark %d below leader epoch %d's start offset %d",
			ErrOffsetNotAvailable, p.tp, realHW, leaderEpoch, epochStart)
	}
	switch tsMs {
	case LatestTimestamp:
		if notFound != nil {
			return -1, -1, -1, false, notFound
		}
		return hw, -1, leaderEpoch, true, nil
	case EarliestTimestamp, EarliestLocalTimestamp:
		return p.log.StartOffset(), -1, leaderEpoch, true, nil
	case MaxTimestamp:
		ts, off, ok := p.log.MaxTimestamp()
		if !ok || off >= hw {
			return -1, -1, -1, false, notFound
		}
		return off, ts, p.epochAt(off), true, nil
	}
	b, ok, err := p.log.OffsetForTimestamp(tsMs)
	if err != nil {
		return -1, -1, -1, false, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	if !ok {
		return -1, -1, -1, false, notFound
	}
	off, ts := b.BaseOffset, b.MaxTimestampMs
	errFound := errors.New("found")
	_ = b.ScanRecords(func(_ int, r storage.RecordHeader) error {
		if r.TimestampMs >= tsMs {
			off, ts = r.Offset, r.TimestampMs
			return errFound
		}
		return nil
	})
	if off >= hw {
		return -1, -1, -1, false, notFound
	}
	return off, ts, b.Epoch, true, nil
}

// epochAt is the leader epoch of the batch holding offset, from the epoch cache.
func (p *Partition) epochAt(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range p.log.EpochEntries() {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}
