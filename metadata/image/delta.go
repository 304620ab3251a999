package image

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// Delta accumulates records replayed on top of a base image; Apply turns
// it into the next image. It is owned by one goroutine (the broker
// publisher or the controller loop) and is not safe for concurrent use.
//
// Typical use, once per committed batch:
//
//	d := image.NewDelta(cur)
//	for each record r at offset o in the batch { if err := d.Replay(o, epoch, r); err != nil { fatal } }
//	next := d.Apply()
//	published.Store(next) // readers never lock
//
// A snapshot is loaded by replaying its records into NewDelta(Empty()) and
// then calling SetProvenance with the snapshot's end.
//
// INVARIANTS:
//   - prov.Offset is the offset of the last record replayed (or the base's);
//   - after Apply, the delta never writes again (applied != nil);
//   - maps hold only entries changed by replayed records; a nil broker or
//     controller, or an empty config map, means removed.
type Delta struct {
	base *Image
	// edit points at token; keeping the token inside the Delta saves an
	// allocation per delta, and nodes still holding it keep the Delta
	// alive, so no later Delta can reuse its address.
	edit    *editToken
	token   editToken
	prov    Provenance
	applied *Image

	features    features // nil until the first FeatureLevelRecord
	brokers     map[int32]*Broker
	controllers map[int32]*Controller
	topics      topicsDelta
	configs     map[ConfigResource]map[string]string
	producerIDs *ProducerIDs
	security    securityDelta
}

// NewDelta starts a delta on base; nil means Empty().
func NewDelta(base *Image) *Delta {
	if base == nil {
		base = Empty()
	}
	d := &Delta{
		base:   base,
		prov:   base.prov,
		topics: newTopicsDelta(base.topics),
	}
	d.edit = &d.token
	return d
}

// Base is the image the delta started from.
func (d *Delta) Base() *Image { return d.base }

// Provenance is the position of the last record replayed.
func (d *Delta) Provenance() Provenance { return d.prov }

// SetProvenance overrides the position the next image will report, e.g.
// the end offset and epoch of a loaded snapshot, or a batch's append time.
func (d *Delta) SetProvenance(p Provenance) { d.prov = p }

// Replay applies one record found at offset in a batch of quorum epoch
// epoch. Offsets must increase. On error the delta is unchanged and the
// error wraps one of this package's sentinels with the offset and record
// type; the log cannot be applied past that record.
//
// Transaction markers (Begin/End/AbortTransactionRecord) only advance the
// offset: holding back an open transaction is the loader's job, as in
// Kafka's MetadataBatchLoader.
func (d *Delta) Replay(offset int64, epoch int32, r records.Record) error {
	if d.applied != nil {
		return ErrDeltaApplied
	}
	if r.Message == nil {
		return fmt.Errorf("image: replay offset %d: %w: nil message", offset, ErrInvalidRecord)
	}
	if offset <= d.prov.Offset {
		return fmt.Errorf("%w: %d after %d", ErrOffsetOrder, offset, d.prov.Offset)
	}
	if err := d.replay(r.Message); err != nil {
		return fmt.Errorf("image: replay %s at offset %d: %w", r.Message.Type(), offset, err)
	}
	d.prov.Offset, d.prov.Epoch = offset, epoch
	return nil
}

// replay dispatches on the record type. Every handler validates before
// writing, so a failing record leaves the delta as it was.
func (d *Delta) replay(m records.Message) error {
	switch r := m.(type) {
	case *records.RegisterBrokerRecord:
		return d.replayRegisterBroker(r)
	case *records.UnregisterBrokerRecord:
		return d.replayUnregisterBroker(r)
	case *records.FenceBrokerRecord:
		return d.setFenced(r.ID, r.Epoch, true)
	case *records.UnfenceBrokerRecord:
		return d.setFenced(r.ID, r.Epoch, false)
	case *records.BrokerRegistrationChangeRecord:
		return d.replayBrokerChange(r)
	case *records.RegisterControllerRecord:
		return d.replayRegisterController(r)
	case *records.TopicRecord:
		return d.topics.replayTopic(r)
	case *records.PartitionRecord:
		return d.topics.replayPartition(r, d.edit)
	case *records.PartitionChangeRecord:
		return d.topics.replayPartitionChange(r, d.edit)
	case *records.RemoveTopicRecord:
		name, err := d.topics.replayRemoveTopic(r, d.edit)
		if err == nil {
			d.removeConfigs(ConfigResource{Type: ConfigTopic, Name: name})
		}
		return err
	case *records.ConfigRecord:
		return d.replayConfig(r)
	case *records.FeatureLevelRecord:
		return d.replayFeatureLevel(r)
	case *records.ProducerIdsRecord:
		return d.replayProducerIDs(r)
	case *records.AccessControlEntryRecord:
		return d.replayACL(r)
	case *records.RemoveAccessControlEntryRecord:
		return d.replayRemoveACL(r)
	case *records.ClientQuotaRecord:
		return d.replayClientQuota(r)
	case *records.UserScramCredentialRecord:
		return d.replayScram(r)
	case *records.RemoveUserScramCredentialRecord:
		return d.replayRemoveScram(r)
	case *records.DelegationTokenRecord:
		return d.replayDelegationToken(r)
	case *records.RemoveDelegationTokenRecord:
		return d.replayRemoveDelegationToken(r)
	case *records.ZkMigrationStateRecord:
		return d.replayZkMigration(r)
	case *records.NoOpRecord, *records.BeginTransactionRecord,
		*records.EndTransactionRecord, *records.AbortTransactionRecord:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsupportedRecord, m.Type())
}

// Apply returns the image the base plus the replayed records describe. It
// costs O(changes * log n): unchanged topics, partitions and brokers are
// shared with the base. Calling it again returns the same image; the delta
// accepts no more records afterwards.
func (d *Delta) Apply() *Image {
	if d.applied != nil {
		return d.applied
	}
	next := &Image{
		prov:        d.prov,
		features:    d.base.features,
		brokers:     applyMap(d.base.brokers, d.brokers),
		controllers: applyMap(d.base.controllers, d.controllers),
		topics:      d.topics.apply(d.edit),
		configs:     d.applyConfigs(),
		producerIDs: d.currentProducerIDs(),
		security:    d.applySecurity(),
	}
	if d.features != nil {
		next.features = d.features
	}
	if invariantsEnabled {
		if err := next.checkStructure(); err != nil {
			panic(err)
		}
	}
	d.applied = next
	return next
}

// TopicChanges lists the topics created, changed or deleted so far, sorted
// by name (a deleted topic before a new one of the same name). A topic
// created and deleted within the delta is not listed.
func (d *Delta) TopicChanges() []TopicChange { return d.topics.changes() }

// BrokerChanges lists the ids of brokers registered, changed or
// unregistered so far, sorted.
func (d *Delta) BrokerChanges() []int32 { return sortedKeys(d.brokers) }

// ControllerChanges lists the ids of controllers registered so far, sorted.
func (d *Delta) ControllerChanges() []int32 { return sortedKeys(d.controllers) }

// ConfigChanges lists the resources whose configuration was touched,
// sorted by type then name.
func (d *Delta) ConfigChanges() []ConfigResource {
	return slices.SortedFunc(maps.Keys(d.configs), compareResource)
}

// FeaturesChanged reports whether a FeatureLevelRecord was replayed.
func (d *Delta) FeaturesChanged() bool { return d.features != nil }

// MetadataVersionChanged reports whether metadata.version differs from the
// base image's.
func (d *Delta) MetadataVersionChanged() bool {
	return d.features != nil && d.features[MetadataVersionFeature] != d.base.MetadataVersion()
}

// ProducerIDsChanged reports whether a ProducerIdsRecord was replayed.
func (d *Delta) ProducerIDsChanged() bool { return d.producerIDs != nil }
