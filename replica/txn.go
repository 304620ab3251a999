package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/storage"
)

// Transactions on the partition side (KIP-98), as Kafka's
// ProducerStateManager tracks them: a producer's first transactional batch
// opens its transaction at that offset; its COMMIT or ABORT marker closes it.
// The last stable offset (LSO) is the high watermark, or the first offset of
// the earliest transaction that is still open, or whose marker is not yet
// committed (above the high watermark), if lower: read_committed consumers
// read only below it.

// txnSpan is one transaction of one producer on the partition.
type txnSpan struct {
	producerID  int64
	firstOffset int64
	// lastOffset is the marker's offset once completed, -1 while open.
	lastOffset int64
}

// txnTracker holds the partition's open transactions and the completed ones
// whose markers the high watermark has not passed yet. Its spans are
// allocated with the first transaction: every hosted partition has a
// tracker and most never see a transaction, so it costs them a pointer,
// not two slice headers (issue 17's memory per hosted partition). A
// partition that had one keeps them, with their capacity, for the next
// (until reset).
type txnTracker struct {
	s *txnSpans
}

// txnSpans are a txnTracker's transactions.
//
// INVARIANTS: ongoing holds at most one span per producer, sorted by first
// offset, each with lastOffset -1; unreplicated is sorted by first offset,
// each with lastOffset >= firstOffset.
type txnSpans struct {
	ongoing      []txnSpan
	unreplicated []txnSpan
}

func (t *txnTracker) reset() { t.s = nil }

// spans are t's spans, allocated if t has none.
func (t *txnTracker) spans() *txnSpans {
	if t.s == nil {
		t.s = &txnSpans{}
	}
	return t.s
}

// begin opens producerID's transaction at firstOffset.
func (t *txnTracker) begin(producerID, firstOffset int64) {
	t.spans().begin(producerID, firstOffset)
}

func (t *txnSpans) begin(producerID, firstOffset int64) {
	i, _ := slices.BinarySearchFunc(t.ongoing, firstOffset, func(s txnSpan, off int64) int { return cmpInt64(s.firstOffset, off) })
	t.ongoing = slices.Insert(t.ongoing, i, txnSpan{producerID: producerID, firstOffset: firstOffset, lastOffset: -1})
}

// complete closes producerID's transaction opened at firstOffset with a
// marker at markerOffset; it stays unstable until the high watermark passes
// the marker. It returns the last stable offset the aborted-transaction
// index records for it (Kafka's lastStableOffset(completedTxn)): the first
// offset of the earliest other open transaction, else markerOffset + 1.
func (t *txnTracker) complete(producerID, firstOffset, markerOffset int64) int64 {
	return t.spans().complete(producerID, firstOffset, markerOffset)
}

func (t *txnSpans) complete(producerID, firstOffset, markerOffset int64) int64 {
	t.ongoing = slices.DeleteFunc(t.ongoing, func(s txnSpan) bool { return s.producerID == producerID })
	span := txnSpan{producerID: producerID, firstOffset: firstOffset, lastOffset: markerOffset}
	i, _ := slices.BinarySearchFunc(t.unreplicated, firstOffset, func(s txnSpan, off int64) int { return cmpInt64(s.firstOffset, off) })
	t.unreplicated = slices.Insert(t.unreplicated, i, span)
	if len(t.ongoing) > 0 {
		return t.ongoing[0].firstOffset
	}
	return markerOffset + 1
}

// onHighWatermark forgets the completed transactions whose markers are
// below hw.
func (t *txnTracker) onHighWatermark(hw int64) {
	if t.s == nil {
		return
	}
	t.s.unreplicated = slices.DeleteFunc(t.s.unreplicated, func(s txnSpan) bool { return s.lastOffset < hw })
}

// firstUnstable is the first offset of the earliest unstable transaction,
// -1 when there is none.
func (t *txnTracker) firstUnstable() int64 {
	if t.s == nil {
		return -1
	}
	return t.s.firstUnstable()
}

func (t *txnSpans) firstUnstable() int64 {
	first := int64(-1)
	if len(t.ongoing) > 0 {
		first = t.ongoing[0].firstOffset
	}
	if len(t.unreplicated) > 0 && (first < 0 || t.unreplicated[0].firstOffset < first) {
		first = t.unreplicated[0].firstOffset
	}
	return first
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// completeTxnLocked applies a COMMIT or ABORT marker h to producer pid's
// state st: its open transaction (if any) closes, an aborted one is
// recorded in the log's aborted-transaction index, and the coordinator
// epoch is remembered; mu held.
func (p *Partition) completeTxnLocked(pid int64, st *producerState, h storage.BatchInfo) {
	st.coordinatorEpoch = h.CoordinatorEpoch
	if st.txnFirstOffset < 0 {
		return
	}
	lso := p.txns.complete(pid, st.txnFirstOffset, h.LastOffset)
	if h.ControlType == storage.ControlAbort {
		p.recordAbortLocked(storage.AbortedTxn{ProducerID: pid, FirstOffset: st.txnFirstOffset,
			LastOffset: h.LastOffset, LastStableOffset: lso})
	}
	st.txnFirstOffset = -1
}

// checkTxnLocked applies the transaction rules to a producer's data batch
// that passed the sequence checks, as Kafka's ProducerAppendInfo: a
// transactional batch needs the coordinator's word (txnErr nil: VerifyTxn
// said yes before the lock was taken), and a
// non-transactional one may not come from a producer whose transaction is
// open here; mu held.
func (p *Partition) checkTxnLocked(b storage.Batch, txnErr error) error {
	pid, epoch := b.ProducerID(), b.ProducerEpoch()
	if !b.Transactional() {
		if st := p.producers[pid]; st != nil && st.txnFirstOffset >= 0 {
			return fmt.Errorf("%w: producer %d sent a non-transactional batch during its transaction from offset %d",
				ErrInvalidTxnState, pid, st.txnFirstOffset)
		}
		return nil
	}
	if txnErr == errTxnOngoing {
		if st := p.producers[pid]; st != nil && st.txnFirstOffset >= 0 && st.epoch == epoch {
			return nil
		}
		// Its transaction ended (a marker) between the check and now: this
		// batch is late and would open a transaction nobody ends.
		return fmt.Errorf("%w: producer %d epoch %d: its transaction ended", ErrTransactionsUnsupported, pid, epoch)
	}
	if txnErr != nil {
		return fmt.Errorf("producer %d epoch %d: %w", pid, epoch, txnErr)
	}
	return nil
}

// errTxnOngoing marks a transactional batch whose producer had its
// transaction open on the partition when the append began.
var errTxnOngoing = errors.New("replica: transaction ongoing")

// txnOngoing reports whether producer (pid, epoch) has a transaction open
// on the partition.
func (p *Partition) txnOngoing(pid int64, epoch int16) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.producers[pid]
	return st != nil && st.txnFirstOffset >= 0 && st.epoch == epoch
}

// TxnMarker is one WriteTxnMarkers entry for a partition: end producer
// (ProducerID, ProducerEpoch)'s transaction, committed or aborted, on behalf
// of the coordinator at CoordinatorEpoch.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
}

// AppendTxnMarker appends a COMMIT or ABORT marker as the partition's
// leader, as Kafka's appendEndTxnMarker: an epoch older than the producer's
// is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the one that
// wrote the producer's last marker is TRANSACTION_COORDINATOR_FENCED (a
// zombie coordinator). The producer's open transaction, if any, completes
// (an abort enters the aborted-transaction index). It returns the marker's
// offset; the caller waits for the high watermark to pass it.
func (p *Partition) AppendTxnMarker(m TxnMarker) (int64, error) {
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return -1, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidRecord, m.ProducerID, m.ProducerEpoch)
	}
	nowMs := p.hooks.nowMs()
	p.mu.Lock()
	offset, moved, err := p.appendMarkerLocked(m, nowMs)
	p.mu.Unlock()
	if err == nil {
		p.notifyAppend()
	}
	if moved {
		p.notify()
	}
	return offset, err
}

func (p *Partition) appendMarkerLocked(m TxnMarker, nowMs int64) (int64, bool, error) {
	if !p.isLeader() {
		return -1, false, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	if st := p.producers[m.ProducerID]; st != nil {
		if m.ProducerEpoch < st.epoch {
			return -1, false, fmt.Errorf("%w: marker at epoch %d, producer %d at %d", ErrInvalidProducerEpoch, m.ProducerEpoch, m.ProducerID, st.epoch)
		}
		if m.CoordinatorEpoch < st.coordinatorEpoch {
			return -1, false, fmt.Errorf("%w: coordinator epoch %d, last marker's %d", ErrCoordinatorFenced, m.CoordinatorEpoch, st.coordinatorEpoch)
		}
	}
	b := storage.EncodeTxnMarkerBatch(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, nowMs)
	p.followersCaughtUpLocked()
	b.SetBaseOffset(p.log.EndOffset())
	b.SetLeaderEpoch(p.state.LeaderEpoch)
	if err := p.appendBatchLocked(b); err != nil {
		return -1, false, fmt.Errorf("%w: %s: %w", ErrStorage, p.tp, err)
	}
	return b.BaseOffset, p.maybeAdvanceHW(nowMs), nil
}

// LastStableOffset is the offset below which every transaction is decided
// and its marker committed: the high watermark, or the first offset of the
// earliest unstable transaction if lower (read_committed consumers read
// below it).
func (p *Partition) LastStableOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastStableOffsetLocked()
}

func (p *Partition) lastStableOffsetLocked() int64 {
	hw := p.hw.Load()
	p.txns.onHighWatermark(hw)
	if first := p.txns.firstUnstable(); first >= 0 && first < hw {
		return first
	}
	return hw
}

// ProducerInfo is one active producer of a partition (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32 // -1 when the producer has no data batch here
	LastTimestampMs  int64
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the producer's ongoing
	// transaction, -1 when none.
	TxnStartOffset int64
}

// ActiveProducers lists the producers the leader knows (Kafka's
// DescribeProducers, KIP-664), by producer id.
func (p *Partition) ActiveProducers() ([]ProducerInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader() {
		return nil, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	entries := p.snapshotEntriesLocked()
	out := make([]ProducerInfo, len(entries))
	for i, e := range entries {
		out[i] = ProducerInfo{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, LastSequence: e.LastSequence,
			LastTimestampMs: e.TimestampMs, CoordinatorEpoch: e.CoordinatorEpoch, TxnStartOffset: e.CurrentTxnFirstOffset}
	}
	return out, nil
}
