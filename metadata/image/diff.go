package image

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// Changes summarises how one image differs from another: what a publisher
// (broker metadata cache, legacy translator) must act on.
type Changes struct {
	// Topics is sorted by name, a deleted topic before a new one of the
	// same name.
	Topics []TopicChange
	// Brokers and Controllers are the ids registered, changed or removed,
	// sorted.
	Brokers     []int32
	Controllers []int32
	// Configs are the resources whose configuration changed, sorted.
	Configs                []ConfigResource
	FeaturesChanged        bool
	MetadataVersionChanged bool
	ProducerIDsChanged     bool
	// SecurityChanged covers ACLs, client quotas, SCRAM credentials,
	// delegation tokens and the ZooKeeper migration state.
	SecurityChanged bool
}

// Changes reports what the replayed records touched. It may list an entry
// whose value ended up equal (a record rewriting the same value); Diff
// reports only real differences.
func (d *Delta) Changes() Changes {
	return Changes{
		Topics:                 d.TopicChanges(),
		Brokers:                d.BrokerChanges(),
		Controllers:            d.ControllerChanges(),
		Configs:                d.ConfigChanges(),
		FeaturesChanged:        d.FeaturesChanged(),
		MetadataVersionChanged: d.MetadataVersionChanged(),
		ProducerIDsChanged:     d.ProducerIDsChanged(),
		SecurityChanged:        d.SecurityChanged(),
	}
}

// Diff compares two images. A publisher uses it after loading a snapshot,
// where the image was rebuilt from scratch and the delta's own report would
// call everything new. It shares no structure with either image and costs
// O(size), except that a topic shared by both images is skipped at once.
func Diff(prev, next *Image) Changes {
	return Changes{
		Topics:                 diffTopics(prev, next),
		Brokers:                diffTree(prev.brokers, next.brokers, (*Broker).Equal),
		Controllers:            diffTree(prev.controllers, next.controllers, (*Controller).Equal),
		Configs:                diffConfigs(prev, next),
		FeaturesChanged:        !maps.Equal(prev.features, next.features),
		MetadataVersionChanged: prev.MetadataVersion() != next.MetadataVersion(),
		ProducerIDsChanged:     prev.producerIDs != next.producerIDs,
		SecurityChanged:        !prev.security.equal(&next.security),
	}
}

// diffTree lists the ids present in one tree only, or in both with
// different values.
func diffTree[V any](a, b ptree[int32, *V], equal func(*V, *V) bool) []int32 {
	var out []int32
	for id, v := range a.All() {
		if w, ok := b.Get(id); !ok || (v != w && !equal(v, w)) {
			out = append(out, id)
		}
	}
	for id := range b.All() {
		if _, ok := a.Get(id); !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func diffConfigs(prev, next *Image) []ConfigResource {
	var out []ConfigResource
	for res, set := range prev.configs.All() {
		if other, ok := next.configs.Get(res); !ok || !slices.Equal(set, other) {
			out = append(out, res)
		}
	}
	for res := range next.configs.All() {
		if _, ok := prev.configs.Get(res); !ok {
			out = append(out, res)
		}
	}
	slices.SortFunc(out, compareResource)
	return out
}

func diffTopics(prev, next *Image) []TopicChange {
	var out []TopicChange
	for t := range prev.Topics() {
		if _, ok := next.TopicByID(t.id); !ok {
			out = append(out, TopicChange{ID: t.id, Name: t.name, Deleted: true})
		}
	}
	for t := range next.Topics() {
		old, ok := prev.TopicByID(t.id)
		switch {
		case !ok:
			out = append(out, TopicChange{ID: t.id, Name: t.name, Created: true, Partitions: partitionIDs(t, nil)})
		case old != t:
			if parts := partitionIDs(t, old); len(parts) > 0 {
				out = append(out, TopicChange{ID: t.id, Name: t.name, Partitions: parts})
			}
		}
	}
	slices.SortFunc(out, func(a, b TopicChange) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmpBool(!a.Deleted, !b.Deleted), compareUUID(a.ID, b.ID))
	})
	return out
}

// partitionIDs lists t's partitions that old lacks or holds differently
// (all of them when old is nil).
func partitionIDs(t, old *Topic) []int32 {
	out := []int32{}
	t.parts.scan(func(id int32, p *Partition) bool {
		if old == nil {
			out = append(out, id)
		} else if q, ok := old.parts.Get(id); !ok || !p.Equal(q) {
			out = append(out, id)
		}
		return true
	})
	return out
}

// Contains reports whether every change c lists is also listed by d, the
// relation between Diff and Delta.Changes (a delta may over-report).
func (d Changes) Contains(c Changes) bool {
	topics := map[records.UUID]TopicChange{}
	for _, t := range d.Topics { // a recreated id is listed twice: merge
		u := topics[t.ID]
		u.Deleted, u.Created = u.Deleted || t.Deleted, u.Created || t.Created
		u.Partitions = append(u.Partitions, t.Partitions...)
		topics[t.ID] = u
	}
	for _, t := range c.Topics {
		u, ok := topics[t.ID]
		if !ok || (t.Deleted && !u.Deleted) || (t.Created && !u.Created && !u.Deleted) {
			return false
		}
		for _, p := range t.Partitions {
			if !slices.Contains(u.Partitions, p) {
				return false
			}
		}
	}
	return subset(c.Brokers, d.Brokers) && subset(c.Controllers, d.Controllers) &&
		subsetFunc(c.Configs, d.Configs) && (!c.FeaturesChanged || d.FeaturesChanged) &&
		(!c.MetadataVersionChanged || d.MetadataVersionChanged) && (!c.ProducerIDsChanged || d.ProducerIDsChanged) &&
		(!c.SecurityChanged || d.SecurityChanged)
}

func subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func subsetFunc(a, b []ConfigResource) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
