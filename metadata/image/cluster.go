package image

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// Broker is one broker's registration (KIP-631). Values returned by an
// Image are copies, but their slices alias the image: do not modify them.
type Broker struct {
	ID int32
	// Epoch is the offset of the RegisterBrokerRecord that created this
	// registration (the broker epoch).
	Epoch         int64
	IncarnationID records.UUID
	Listeners     []records.BrokerEndpoint
	Features      []records.BrokerFeature
	Rack          *string // nil = no rack
	// Fenced brokers may not lead or join ISRs; new registrations start
	// fenced until they catch up.
	Fenced               bool
	InControlledShutdown bool
	IsMigratingZkBroker  bool
	LogDirs              []records.UUID
}

// Listener returns the endpoint named name (e.g. "PLAINTEXT").
func (b Broker) Listener(name string) (records.BrokerEndpoint, bool) {
	for _, e := range b.Listeners {
		if e.Name == name {
			return e, true
		}
	}
	return records.BrokerEndpoint{}, false
}

// Equal reports whether two registrations are the same; nil and empty
// lists are equal, as they are on the wire.
func (b *Broker) Equal(o *Broker) bool {
	return b.ID == o.ID && b.Epoch == o.Epoch && b.IncarnationID == o.IncarnationID &&
		slices.Equal(b.Listeners, o.Listeners) && slices.Equal(b.Features, o.Features) &&
		equalRack(b.Rack, o.Rack) && b.Fenced == o.Fenced &&
		b.InControlledShutdown == o.InControlledShutdown &&
		b.IsMigratingZkBroker == o.IsMigratingZkBroker && slices.Equal(b.LogDirs, o.LogDirs)
}

func equalRack(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Controller is one controller's registration (KIP-919).
type Controller struct {
	ID               int32
	IncarnationID    records.UUID
	ZkMigrationReady bool
	Listeners        []records.BrokerEndpoint
	Features         []records.BrokerFeature
}

// Equal reports whether two registrations are the same.
func (c *Controller) Equal(o *Controller) bool {
	return c.ID == o.ID && c.IncarnationID == o.IncarnationID && c.ZkMigrationReady == o.ZkMigrationReady &&
		slices.Equal(c.Listeners, o.Listeners) && slices.Equal(c.Features, o.Features)
}

func compareID(a, b int32) int { return cmp.Compare(a, b) }

// broker returns the broker id as the Delta sees it so far.
func (d *Delta) broker(id int32) (*Broker, bool) {
	if b, ok := d.brokers[id]; ok {
		return b, b != nil
	}
	b, ok := d.base.brokers.Get(id)
	return b, ok
}

func (d *Delta) replayRegisterBroker(r *records.RegisterBrokerRecord) error {
	put(&d.brokers, r.BrokerID, &Broker{
		ID:                   r.BrokerID,
		Epoch:                r.BrokerEpoch,
		IncarnationID:        r.IncarnationID,
		Listeners:            slices.Clone(r.EndPoints),
		Features:             slices.Clone(r.Features),
		Rack:                 cloneString(r.Rack),
		Fenced:               r.Fenced,
		InControlledShutdown: r.InControlledShutdown,
		IsMigratingZkBroker:  r.IsMigratingZkBroker,
		LogDirs:              slices.Clone(r.LogDirs),
	})
	return nil
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// registered returns the broker id if it is registered with epoch, the
// check Kafka's ClusterDelta.getBrokerOrThrow makes before any change.
func (d *Delta) registered(id int32, epoch int64) (*Broker, error) {
	b, ok := d.broker(id)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d", ErrUnknownBroker, id)
	}
	if b.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d has epoch %d, record has %d", ErrBrokerEpoch, id, b.Epoch, epoch)
	}
	return b, nil
}

func (d *Delta) replayUnregisterBroker(r *records.UnregisterBrokerRecord) error {
	if _, err := d.registered(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	put(&d.brokers, r.BrokerID, nil)
	return nil
}

// setFenced applies FenceBrokerRecord/UnfenceBrokerRecord (MV < 3.3-IV2).
func (d *Delta) setFenced(id int32, epoch int64, fenced bool) error {
	b, err := d.registered(id, epoch)
	if err != nil {
		return err
	}
	next := *b
	next.Fenced = fenced
	put(&d.brokers, id, &next)
	return nil
}

func (d *Delta) replayBrokerChange(r *records.BrokerRegistrationChangeRecord) error {
	b, err := d.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	next := *b
	switch r.Fenced {
	case records.FenceChangeNone:
	case records.FenceChangeFence:
		next.Fenced = true
	case records.FenceChangeUnfence:
		next.Fenced = false
	default:
		return fmt.Errorf("%w: fenced change %d", ErrInvalidRecord, r.Fenced)
	}
	switch r.InControlledShutdown {
	case 0:
	case 1:
		next.InControlledShutdown = true
	default:
		return fmt.Errorf("%w: in-controlled-shutdown change %d", ErrInvalidRecord, r.InControlledShutdown)
	}
	if len(r.LogDirs) > 0 {
		next.LogDirs = slices.Clone(r.LogDirs)
	}
	put(&d.brokers, r.BrokerID, &next)
	return nil
}

func (d *Delta) replayRegisterController(r *records.RegisterControllerRecord) error {
	put(&d.controllers, r.ControllerID, &Controller{
		ID:               r.ControllerID,
		IncarnationID:    r.IncarnationID,
		ZkMigrationReady: r.ZkMigrationReady,
		Listeners:        slices.Clone(r.EndPoints),
		Features:         slices.Clone(r.Features),
	})
	return nil
}

// applyMap folds the changes (nil = removed) into a ptree in key order.
func applyMap[V any](t ptree[int32, *V], changes map[int32]*V) ptree[int32, *V] {
	if len(changes) == 0 {
		return t
	}
	for _, id := range sortedKeys(changes) {
		if v := changes[id]; v == nil {
			t = t.Delete(id)
		} else {
			t = t.Set(id, v)
		}
	}
	return t
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// record is the RegisterBrokerRecord that recreates b, at the version mv
// calls for, raised if a field needs a newer one.
func (b *Broker) record(mv int16) records.Record {
	v := int16(0)
	switch {
	case mv >= MV37IV2:
		v = 3
	case mv >= MV34IV0:
		v = 2
	case mv >= MV33IV3:
		v = 1
	}
	if b.InControlledShutdown {
		v = max(v, 1)
	}
	if b.IsMigratingZkBroker {
		v = max(v, 2)
	}
	if len(b.LogDirs) > 0 {
		v = 3
	}
	return records.Record{Version: v, Message: &records.RegisterBrokerRecord{
		BrokerID:             b.ID,
		IsMigratingZkBroker:  b.IsMigratingZkBroker,
		IncarnationID:        b.IncarnationID,
		BrokerEpoch:          b.Epoch,
		EndPoints:            b.Listeners,
		Features:             b.Features,
		Rack:                 b.Rack,
		Fenced:               b.Fenced,
		InControlledShutdown: b.InControlledShutdown,
		LogDirs:              b.LogDirs,
	}}
}

func (c *Controller) record() records.Record {
	return records.Record{Message: &records.RegisterControllerRecord{
		ControllerID:     c.ID,
		IncarnationID:    c.IncarnationID,
		ZkMigrationReady: c.ZkMigrationReady,
		EndPoints:        c.Listeners,
		Features:         c.Features,
	}}
}
