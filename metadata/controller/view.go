package controller

import (
	"fmt"
	"iter"
	"maps"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// view is the controller's state after some prefix of the log. Views are
// immutable once built, so committed, pending and every inflight entry may
// share them freely.
//
// INVARIANTS:
//   - img reflects every replayed record, including those of an open
//     transaction (the controller decides on them, as Kafka's does);
//   - txnBase != nil iff a transaction is open; it is the view just before
//     its BeginTransactionRecord and never itself has txnBase set;
//   - regOffsets holds the offset of the latest RegisterBrokerRecord of
//     every broker in img (for a registration loaded from a snapshot, the
//     snapshot's last offset, as in Kafka), and is never written once shared.
type view struct {
	img        *image.Image
	regOffsets map[int32]int64
	txnBase    *view
	txnStart   int64
}

// offsetRecord is a decoded metadata record and where it sits in the log.
type offsetRecord struct {
	offset int64
	rec    records.Record
}

func emptyView() *view {
	return &view{img: image.EmptyIndexed(), regOffsets: map[int32]int64{}, txnStart: -1}
}

// visible is the image a reader holding back open transactions sees (what
// a broker publishes): the committed image without an open transaction.
func (v *view) visible() *image.Image {
	if v.txnBase != nil {
		return v.txnBase.img
	}
	return v.img
}

// replay applies one batch worth of records and returns the next view; v
// is unchanged. An error names the offending offset; the log cannot be
// applied past it. Each record is used only until the next is asked for, so
// the stream may decode into reused memory (records.Decoder).
func (v *view) replay(recs iter.Seq2[offsetRecord, error], quorumEpoch int32) (*view, error) {
	next := *v
	d := image.NewDelta(v.img)
	ownOffsets := false
	for r, err := range recs {
		if err != nil {
			return nil, err
		}
		switch m := r.rec.Message.(type) {
		case *records.BeginTransactionRecord:
			if next.txnBase != nil {
				return nil, fmt.Errorf("%w: begin at offset %d inside transaction from %d", ErrTransactionState, r.offset, next.txnStart)
			}
			next.img = d.Apply()
			base := next
			next.txnBase, next.txnStart = &base, r.offset
			d = image.NewDelta(next.img)
		case *records.EndTransactionRecord:
			if next.txnBase == nil {
				return nil, fmt.Errorf("%w: end at offset %d", ErrTransactionState, r.offset)
			}
			next.txnBase, next.txnStart = nil, -1
		case *records.AbortTransactionRecord:
			if next.txnBase == nil {
				return nil, fmt.Errorf("%w: abort at offset %d", ErrTransactionState, r.offset)
			}
			// Kafka reverts its snapshot registry to the transaction start;
			// the persistent image makes that a pointer swap.
			next = *next.txnBase
			d = image.NewDelta(next.img)
			ownOffsets = false
		case *records.RegisterBrokerRecord:
			if !ownOffsets {
				next.regOffsets, ownOffsets = maps.Clone(next.regOffsets), true
			}
			next.regOffsets[m.BrokerID] = r.offset
		case *records.UnregisterBrokerRecord:
			if !ownOffsets {
				next.regOffsets, ownOffsets = maps.Clone(next.regOffsets), true
			}
			delete(next.regOffsets, m.BrokerID)
		}
		if err := d.Replay(r.offset, quorumEpoch, r.rec); err != nil {
			return nil, &ReplayError{Offset: r.offset, Record: recordText(r.rec), Err: err}
		}
	}
	next.img = d.Apply()
	return &next, nil
}

// recordText prints a record for the log of a replay failure, as
// kafka-dump-log would (SCRAM key material redacted).
func recordText(r records.Record) string {
	b, err := r.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("%s v%d (%v)", r.Message.Type(), r.Version, err)
	}
	return string(b)
}
