package image

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// MetadataVersionFeature is the feature whose level is metadata.version.
const MetadataVersionFeature = "metadata.version"

// Metadata versions (feature levels) that change what records look like.
const (
	MV33IV3 int16 = 7  // RegisterBrokerRecord v1 (InControlledShutdown)
	MV34IV0 int16 = 8  // RegisterBrokerRecord v2 (IsMigratingZkBroker)
	MV37IV2 int16 = 17 // KIP-858 directories: RegisterBroker v3, Partition v1
)

// Feature is one finalized feature level.
type Feature struct {
	Name  string
	Level int16
}

// features is the finalized feature levels. The map is never written once
// it belongs to an image; a Delta copies it on its first FeatureLevelRecord.
type features map[string]int16

func (f features) sorted() []Feature {
	out := make([]Feature, 0, len(f))
	for _, name := range slices.Sorted(maps.Keys(f)) {
		out = append(out, Feature{Name: name, Level: f[name]})
	}
	return out
}

// replayFeatureLevel applies a FeatureLevelRecord: level 0 removes the
// feature. metadata.version can never be removed (Kafka has no level 0).
func (d *Delta) replayFeatureLevel(r *records.FeatureLevelRecord) error {
	if r.FeatureLevel < 0 || (r.Name == MetadataVersionFeature && r.FeatureLevel == 0) {
		return fmt.Errorf("%w: %s level %d", ErrInvalidRecord, r.Name, r.FeatureLevel)
	}
	if d.features == nil {
		d.features = maps.Clone(d.base.features)
		if d.features == nil {
			d.features = features{}
		}
	}
	if r.FeatureLevel == 0 {
		delete(d.features, r.Name)
	} else {
		d.features[r.Name] = r.FeatureLevel
	}
	return nil
}

// featureRecords writes metadata.version first, as Kafka's FeaturesImage
// does, so a loader knows the version before it reads anything else.
func (f features) records() []records.Record {
	var out []records.Record
	if mv, ok := f[MetadataVersionFeature]; ok {
		out = append(out, records.Record{Message: &records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: mv}})
	}
	for _, ft := range f.sorted() {
		if ft.Name != MetadataVersionFeature {
			out = append(out, records.Record{Message: &records.FeatureLevelRecord{Name: ft.Name, FeatureLevel: ft.Level}})
		}
	}
	return out
}
