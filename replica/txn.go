package replica

import (
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
// whose markers the high watermark has not passed yet.
//
// INVARIANTS: ongoing holds at most one span per producer, sorted by first
// offset, each with lastOffset -1; unreplicated is sorted by first offset,
// each with lastOffset >= firstOffset.
type txnTracker struct {
	ongoing      []txnSpan
	unreplicated []txnSpan
}

func (t *txnTracker) reset() { t.ongoing, t.unreplicated = nil, nil }

// begin opens producerID's transaction at firstOffset.
func (t *txnTracker) begin(producerID, firstOffset int64) {
	i, _ := slices.BinarySearchFunc(t.ongoing, firstOffset, func(s txnSpan, off int64) int { return cmpInt64(s.firstOffset, off) })
	t.ongoing = slices.Insert(t.ongoing, i, txnSpan{producerID: producerID, firstOffset: firstOffset, lastOffset: -1})
}

// complete closes producerID's transaction opened at firstOffset with a
// marker at markerOffset; it stays unstable until the high watermark passes
// the marker. It returns the last stable offset the aborted-transaction
// index records for it (Kafka's lastStableOffset(completedTxn)): the first
// offset of the earliest other open transaction, else markerOffset + 1.
func (t *txnTracker) complete(producerID, firstOffset, markerOffset int64) int64 {
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
	t.unreplicated = slices.DeleteFunc(t.unreplicated, func(s txnSpan) bool { return s.lastOffset < hw })
}

// firstUnstable is the first offset of the earliest unstable transaction,
// -1 when there is none.
func (t *txnTracker) firstUnstable() int64 {
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
