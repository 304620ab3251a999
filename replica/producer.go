package replica

import (
	"fmt"
	"math"
)

// retainedBatches is how many of a producer's latest batches a partition keeps
// for duplicate detection: Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN, the
// reason an idempotent producer may have at most 5 requests in flight.
const retainedBatches = 5

// producerBatch is one appended batch of an idempotent producer.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerState is one producer's latest epoch and last batches on one
// partition (Kafka's ProducerStateEntry).
//
// INVARIANTS: len(batches) <= retainedBatches, oldest first, all of epoch; each
// batch's firstSeq follows the previous one's lastSeq; txnFirstOffset is -1
// or the first offset of the producer's ongoing transaction on the partition.
type producerState struct {
	epoch   int16
	batches []producerBatch
	// lastTimestampMs is the max timestamp of the producer's last batch
	// (data or marker): producer.id.expiration.ms counts from it.
	lastTimestampMs int64
	// coordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker here, -1 before any.
	coordinatorEpoch int32
	txnFirstOffset   int64
}

func newProducerState(epoch int16) *producerState {
	return &producerState{epoch: epoch, lastTimestampMs: -1, coordinatorEpoch: -1, txnFirstOffset: -1}
}

// firstSeqOf is the first sequence of a batch whose last record has sequence
// lastSeq and which holds delta+1 records (Kafka's decrementSequence).
func firstSeqOf(lastSeq, delta int32) int32 {
	if lastSeq < delta {
		return math.MaxInt32 - (delta - lastSeq) + 1
	}
	return lastSeq - delta
}

// lastSeqOf is the sequence of a batch's last record: sequences wrap from
// math.MaxInt32 to 0 (KIP-98), so a batch may straddle the wrap.
func lastSeqOf(firstSeq int32, lastOffsetDelta int64) int32 {
	if int64(firstSeq)+lastOffsetDelta > math.MaxInt32 {
		return int32(lastOffsetDelta - (math.MaxInt32 - int64(firstSeq)) - 1)
	}
	return firstSeq + int32(lastOffsetDelta)
}

// nextSeq is the sequence that follows seq.
func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// check decides what to do with a batch of producer epoch and sequences
// [firstSeq, lastSeq], as Kafka's ProducerStateManager / ProducerAppendInfo:
//   - a batch equal to one of the retained ones (same epoch) is a duplicate: it
//     is answered with the original's offsets and not appended again;
//   - an older epoch is fenced (INVALID_PRODUCER_EPOCH);
//   - a newer epoch must start at sequence 0;
//   - the same epoch must continue right after the last batch;
//   - a producer without state here (new, or its state was lost) may start at
//     any sequence, as Kafka accepts since KIP-360.
//
// s may be nil (no state).
func (s *producerState) check(epoch int16, firstSeq, lastSeq int32) (dup *producerBatch, err error) {
	if s == nil {
		return nil, nil
	}
	switch {
	case epoch < s.epoch:
		return nil, fmt.Errorf("%w: epoch %d, latest %d", ErrInvalidProducerEpoch, epoch, s.epoch)
	case epoch > s.epoch:
		if firstSeq != 0 {
			return nil, fmt.Errorf("%w: new epoch %d starts at sequence %d", ErrOutOfOrderSequence, epoch, firstSeq)
		}
		return nil, nil
	}
	for i := range s.batches {
		if b := &s.batches[i]; b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b, nil
		}
	}
	if n := len(s.batches); n > 0 && firstSeq != nextSeq(s.batches[n-1].lastSeq) {
		return nil, fmt.Errorf("%w: sequence %d, expected %d", ErrOutOfOrderSequence, firstSeq, nextSeq(s.batches[n-1].lastSeq))
	}
	return nil, nil
}

// update records an appended batch (after check allowed it).
func (s *producerState) update(epoch int16, b producerBatch) {
	s.setEpoch(epoch)
	if len(s.batches) == retainedBatches {
		s.batches = append(s.batches[:0], s.batches[1:]...)
	}
	s.batches = append(s.batches, b)
}

// setEpoch moves the producer to epoch: the batches of an older epoch say
// nothing about the new one's sequences.
func (s *producerState) setEpoch(epoch int16) {
	if epoch != s.epoch {
		s.epoch, s.batches = epoch, s.batches[:0]
	}
}
