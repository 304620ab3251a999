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

// metadataVersions names the metadata.version levels Kafka defined up to 3.9-IV0
// (Kafka's MetadataVersion enum): index level-1 holds the release, the internal
// version and whether the level changed what metadata records look like
// (didMetadataChange), which decides whether a downgrade across it is safe.
var metadataVersions = []struct {
	release, iv string
	changed     bool
}{
	{"3.0", "IV1", true}, {"3.1", "IV0", false}, {"3.2", "IV0", true},
	{"3.3", "IV0", false}, {"3.3", "IV1", true}, {"3.3", "IV2", true}, {"3.3", "IV3", true},
	{"3.4", "IV0", true},
	{"3.5", "IV0", false}, {"3.5", "IV1", false}, {"3.5", "IV2", true},
	{"3.6", "IV0", false}, {"3.6", "IV1", true}, {"3.6", "IV2", true},
	{"3.7", "IV0", true}, {"3.7", "IV1", false}, {"3.7", "IV2", true}, {"3.7", "IV3", false}, {"3.7", "IV4", false},
	{"3.8", "IV0", false},
	{"3.9", "IV0", false},
}

// MetadataVersionName is Kafka's name of a metadata.version level ("3.6-IV2"), or
// the number when the level is not one this table knows.
func MetadataVersionName(level int16) string {
	if level < 1 || int(level) > len(metadataVersions) {
		return fmt.Sprint(level)
	}
	v := metadataVersions[level-1]
	return v.release + "-" + v.iv
}

// ParseMetadataVersion reads a metadata.version as Kafka's
// MetadataVersion.fromVersionString does: "3.6-IV2" is that level, a release alone
// ("3.6") is its latest internal version (3.6-IV2), and a plain number is the level.
func ParseMetadataVersion(s string) (int16, error) {
	var n int16
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		return n, nil
	}
	found := int16(0)
	for i, v := range metadataVersions {
		if s == v.release+"-"+v.iv || s == v.release {
			found = int16(i + 1) // a release alone keeps the last, its latest level
		}
	}
	if found == 0 {
		return 0, fmt.Errorf("%w %q (known: %s to %s)", ErrUnknownMetadataVersion, s,
			MetadataVersionName(1), MetadataVersionName(int16(len(metadataVersions))))
	}
	return found, nil
}

// MetadataChangedBetween reports whether any level in (lo, hi] changed what
// metadata records look like (Kafka's MetadataVersion.checkIfMetadataChanged): a
// downgrade from hi to lo would then drop information, so it is unsafe. Levels this
// table does not know count as changed.
func MetadataChangedBetween(lo, hi int16) bool {
	for l := hi; l > lo; l-- {
		if l < 1 || int(l) > len(metadataVersions) || metadataVersions[l-1].changed {
			return true
		}
	}
	return false
}
