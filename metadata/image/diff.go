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

// Diff compares two images. The broker's replica sync runs it after every
// publish, and after loading a snapshot, where the image was rebuilt from
// scratch and the delta's own report would call everything new. It shares
// no structure with either image. Whatever the two images share (a sub-trie
// of topics, a run of a topic's partitions, a whole broker or config tree)
// is skipped at once, so comparing an image with one derived from it by a
// small delta costs in proportion to the change, not to the image; images
// that share nothing cost O(size).
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
	if a.root == b.root {
		return nil
	}
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
	if prev.configs.root == next.configs.root {
		return nil
	}
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
	hamtDiff(prev.topics.byID.root, next.topics.byID.root, 0, func(old, t *Topic) {
		switch {
		case t == nil:
			out = append(out, TopicChange{ID: old.id, Name: old.name, Deleted: true})
		case old == nil:
			out = append(out, TopicChange{ID: t.id, Name: t.name, Created: true, Partitions: partitionIDs(t, nil)})
		default:
			if parts := partitionIDs(t, old); len(parts) > 0 {
				out = append(out, TopicChange{ID: t.id, Name: t.name, Partitions: parts})
			}
		}
	})
	slices.SortFunc(out, func(a, b TopicChange) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmpBool(!a.Deleted, !b.Deleted), compareUUID(a.ID, b.ID))
	})
	return out
}

// hamtDiff calls fn(old, new) for every key whose value differs between the
// tries a and b, by ==: with the zero value for a side that lacks the key.
// Sub-tries the two share are skipped without a visit.
func hamtDiff[V comparable](a, b *hnode[V], shift uint, fn func(old, new V)) {
	if a == b {
		return
	}
	if a == nil || b == nil || shift >= 64 || a.bitmap|a.nodemap == 0 || b.bitmap|b.nodemap == 0 {
		hamtDiffFlat(a, nil, b, nil, fn)
		return
	}
	for slots := a.bitmap | a.nodemap | b.bitmap | b.nodemap; slots != 0; slots &= slots - 1 {
		bit := slots & -slots
		ae, as := hamtSlot(a, bit)
		be, bs := hamtSlot(b, bit)
		switch {
		case ae == nil && be == nil:
			hamtDiff(as, bs, shift+hamtBits, fn)
		case as == nil && bs == nil:
			var zero V
			switch {
			case be == nil:
				fn(ae.val, zero)
			case ae == nil:
				fn(zero, be.val)
			case ae.key != be.key:
				fn(ae.val, zero)
				fn(zero, be.val)
			case ae.val != be.val:
				fn(ae.val, be.val)
			}
		default: // a leaf on one side, a sub-trie on the other
			hamtDiffFlat(as, ae, bs, be, fn)
		}
	}
}

// hamtSlot is n's leaf or sub-trie in the slot of bit (both nil if empty).
func hamtSlot[V any](n *hnode[V], bit uint32) (*hentry[V], *hnode[V]) {
	switch {
	case n.bitmap&bit != 0:
		return &n.entries[rank(n.bitmap, bit)], nil
	case n.nodemap&bit != 0:
		return nil, n.subs[rank(n.nodemap, bit)]
	}
	return nil, nil
}

// hamtDiffFlat compares the entries of sub-trie a plus leaf ae with those of
// b plus be, key by key: where the two tries' shapes differ.
func hamtDiffFlat[V comparable](a *hnode[V], ae *hentry[V], b *hnode[V], be *hentry[V], fn func(old, new V)) {
	olds := map[records.UUID]V{}
	if ae != nil {
		olds[ae.key] = ae.val
	}
	hamtAll(a, func(k records.UUID, v V) bool { olds[k] = v; return true })
	var zero V
	visit := func(k records.UUID, v V) bool {
		old, ok := olds[k]
		delete(olds, k)
		switch {
		case !ok:
			fn(zero, v)
		case old != v:
			fn(old, v)
		}
		return true
	}
	if be != nil {
		visit(be.key, be.val)
	}
	hamtAll(b, visit)
	for _, old := range olds {
		fn(old, zero)
	}
}

// partitionIDs lists t's partitions that old lacks or holds differently
// (all of them when old is nil), in id order. Runs of partitions the two
// topics share are skipped.
func partitionIDs(t, old *Topic) []int32 {
	out := []int32{}
	if old != nil && old.parts.root != nil && old.parts.shift == t.parts.shift {
		diffParts(old.parts.root, t.parts.root, t.parts.shift, 0, func(id int32) { out = append(out, id) })
		return out
	}
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

// diffParts calls fn, in id order, for every partition present under b
// that a (a node at the same place and shift) lacks or holds differently;
// nodes the two share are skipped.
func diffParts(a, b *vnode, shift uint, base int32, fn func(int32)) {
	if a == b || b == nil {
		return
	}
	if a == nil {
		scanIn(b, shift, base, func(id int32, _ *Partition) bool { fn(id); return true })
		return
	}
	if shift == 0 {
		for i, p := range b.parts {
			if p == nil {
				continue
			}
			if i >= len(a.parts) || a.parts[i] == nil || a.parts[i] != p && !p.Equal(*a.parts[i]) {
				fn(base + int32(i))
			}
		}
		return
	}
	for i, k := range b.kids {
		var ak *vnode
		if i < len(a.kids) {
			ak = a.kids[i]
		}
		diffParts(ak, k, shift-vecBits, base+int32(i)<<shift, fn)
	}
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
