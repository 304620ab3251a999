package image

import (
	"iter"

	"github.com/kraftd/kraftd/metadata/records"
)

// FromSnapshot builds the image a snapshot describes: recs replayed into an empty
// image (they are Records() of some image, so no record depends on a log offset),
// reporting prov as its position (the snapshot's end offset - 1 and epoch). It is
// how a listener replaces its state with a snapshot in one step.
func FromSnapshot(recs []records.Record, prov Provenance) (*Image, error) {
	return FromRecords(func(yield func(records.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, prov)
}

// FromRecords is FromSnapshot for a stream of records, such as
// records.DecodeAll of a snapshot's values: nothing but the image is kept, so
// each record may be overwritten once the next is asked for. The first error of
// the stream is returned.
func FromRecords(recs iter.Seq2[records.Record, error], prov Provenance) (*Image, error) {
	return fromRecords(Empty(), recs, prov)
}

// FromRecordsIndexed is FromRecords building on EmptyIndexed: the image keeps
// the broker index.
func FromRecordsIndexed(recs iter.Seq2[records.Record, error], prov Provenance) (*Image, error) {
	return fromRecords(EmptyIndexed(), recs, prov)
}

func fromRecords(base *Image, recs iter.Seq2[records.Record, error], prov Provenance) (*Image, error) {
	d := NewDelta(base)
	i := int64(0)
	for r, err := range recs {
		if err != nil {
			return nil, err
		}
		if err := d.Replay(i, prov.Epoch, r); err != nil {
			return nil, err
		}
		i++
	}
	d.SetProvenance(prov)
	return d.Apply(), nil
}
