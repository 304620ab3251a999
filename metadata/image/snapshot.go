package image

import "github.com/kraftd/kraftd/metadata/records"

// FromSnapshot builds the image a snapshot describes: recs replayed into an empty
// image (they are Records() of some image, so no record depends on a log offset),
// reporting prov as its position (the snapshot's end offset - 1 and epoch). It is
// how a listener replaces its state with a snapshot in one step.
func FromSnapshot(recs []records.Record, prov Provenance) (*Image, error) {
	d := NewDelta(Empty())
	for i, r := range recs {
		if err := d.Replay(int64(i), prov.Epoch, r); err != nil {
			return nil, err
		}
	}
	d.SetProvenance(prov)
	return d.Apply(), nil
}
