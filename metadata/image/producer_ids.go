package image

import (
	"fmt"

	"github.com/kraftd/kraftd/metadata/records"
)

// ProducerIDs is the producer-id allocation state: the first id of the next
// block the controller will hand out (Kafka's ProducerIdsImage).
type ProducerIDs struct {
	// NextProducerID is -1 until the first block is allocated.
	NextProducerID int64
}

func (d *Delta) replayProducerIDs(r *records.ProducerIdsRecord) error {
	// Ids are handed out once: a block that does not move forward would
	// give two producers the same id (Kafka's ProducerIdControlManager
	// refuses it too).
	if cur := d.currentProducerIDs(); r.NextProducerID <= cur.NextProducerID {
		return fmt.Errorf("%w: next producer id %d not above %d", ErrInvalidRecord,
			r.NextProducerID, cur.NextProducerID)
	}
	d.producerIDs = &ProducerIDs{NextProducerID: r.NextProducerID}
	return nil
}

// records writes broker id and epoch -1, as Kafka does in snapshots: only
// the next id is state, the requesting broker is not.
func (p ProducerIDs) records() []records.Record {
	if p.NextProducerID < 0 {
		return nil
	}
	return []records.Record{{Message: &records.ProducerIdsRecord{
		BrokerID: -1, BrokerEpoch: -1, NextProducerID: p.NextProducerID}}}
}

func (d *Delta) currentProducerIDs() ProducerIDs {
	if d.producerIDs != nil {
		return *d.producerIDs
	}
	return d.base.producerIDs
}
