package image

import (
	"bytes"
	"cmp"
	"fmt"
	"iter"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// Topic is one topic in an image. A *Topic obtained from an Image is
// immutable.
type Topic struct {
	name  string
	id    records.UUID
	parts partVec
}

// Name is the topic name.
func (t *Topic) Name() string { return t.name }

// ID is the topic id.
func (t *Topic) ID() records.UUID { return t.id }

// NumPartitions is the number of partitions.
func (t *Topic) NumPartitions() int { return t.parts.Len() }

// Partition returns partition id.
func (t *Topic) Partition(id int32) (Partition, bool) { return t.parts.Get(id) }

// Partitions yields the partitions in id order.
func (t *Topic) Partitions() iter.Seq2[int32, Partition] { return t.parts.All }

func compareUUID(a, b records.UUID) int { return bytes.Compare(a[:], b[:]) }

// topicsImage indexes the topics of an image by id, and their ids by name.
// Only byID holds *Topic values, so a partition change (a new *Topic for the
// same id) rewrites one tree path; byName changes only when topics come or go.
//
// INVARIANTS:
//   - byName maps exactly the names of the topics in byID to their ids;
//   - numPartitions is the sum of their partition counts.
type topicsImage struct {
	byID          hamt[*Topic]
	byName        ptree[string, records.UUID]
	numPartitions int
	index         brokerIndex
}

func emptyTopics() topicsImage {
	return topicsImage{
		byName: newPtree[string, records.UUID](cmp.Compare[string]),
		index:  emptyBrokerIndex(false)}
}

func (ti topicsImage) byNameGet(name string) (*Topic, bool) {
	id, ok := ti.byName.Get(name)
	if !ok {
		return nil, false
	}
	return ti.byID.Get(id)
}

// TopicChange describes one topic a Delta created, changed or deleted.
type TopicChange struct {
	ID   records.UUID
	Name string
	// Created is set for a topic absent from the base image.
	Created bool
	// Deleted is set for a base-image topic absent from the next image.
	Deleted bool
	// Partitions lists the created or changed partition ids, sorted; it is
	// nil for a deleted topic.
	Partitions []int32
}

// topicsDelta is the topic part of a Delta.
//
// INVARIANTS:
//   - an id is in at most one of changed (live) and deleted, unless a
//     deleted base id was recreated (then created is set on the change);
//   - names maps the name of every topic created in this delta to its id;
//   - every node of a changed topic's partVec is owned by the delta's edit
//     token or shared with the base image.
type topicsDelta struct {
	base    topicsImage
	changed topicChanges
	deleted map[records.UUID]*Topic
	names   map[string]records.UUID
	index   brokerIndexDelta
}

// topicChange is the delta's working copy of one topic; base is nil iff
// created is set.
type topicChange struct {
	topic *Topic
	// base is the base image's version of a changed (not created) topic,
	// kept so that Apply need not look it up again in a large image.
	base    *Topic
	created bool
	parts   []int32 // touched partition ids, in replay order, may repeat
	// buf backs parts for the usual delta that touches one or two
	// partitions of a topic, saving an allocation per changed topic.
	buf [2]int32
}

// smallChanges is how many changed topics topicChanges keeps in its slice
// alone; a linear scan of so few beats hashing, and most deltas (one
// committed batch of a live cluster) stay below it.
const smallChanges = 8

// topicChanges maps topic ids to the delta's working copies. It indexes
// them with a map only once there are more than smallChanges, so that a
// delta touching one topic allocates no map.
type topicChanges struct {
	list  []*topicChange // in no particular order
	index map[records.UUID]*topicChange
}

func (cs *topicChanges) len() int { return len(cs.list) }

func (cs *topicChanges) get(id records.UUID) (*topicChange, bool) {
	if cs.index != nil {
		c, ok := cs.index[id]
		return c, ok
	}
	for _, c := range cs.list {
		if c.topic.id == id {
			return c, true
		}
	}
	return nil, false
}

// add stores c, whose id must not be present yet.
func (cs *topicChanges) add(c *topicChange) {
	cs.list = append(cs.list, c)
	switch {
	case cs.index != nil:
		cs.index[c.topic.id] = c
	case len(cs.list) > smallChanges:
		cs.index = make(map[records.UUID]*topicChange, 2*len(cs.list))
		for _, c := range cs.list {
			cs.index[c.topic.id] = c
		}
	}
}

func (cs *topicChanges) remove(id records.UUID) {
	i := slices.IndexFunc(cs.list, func(c *topicChange) bool { return c.topic.id == id })
	if i < 0 {
		return
	}
	last := len(cs.list) - 1
	cs.list[i] = cs.list[last]
	cs.list[last] = nil
	cs.list = cs.list[:last]
	if cs.index != nil {
		delete(cs.index, id)
	}
}

func newTopicChange(t *Topic, created bool) *topicChange {
	c := &topicChange{topic: t, created: created}
	c.parts = c.buf[:0]
	return c
}

func newTopicsDelta(base topicsImage) topicsDelta {
	return topicsDelta{base: base, index: brokerIndexDelta{base: base.index}}
}

// put stores v under k, creating the map on first use: most deltas touch
// one or two areas, so a Delta allocates only the maps it needs.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// topic returns the live topic id as the delta sees it so far.
func (d *topicsDelta) topic(id records.UUID) (*Topic, bool) {
	if c, ok := d.changed.get(id); ok {
		return c.topic, true
	}
	if _, ok := d.deleted[id]; ok {
		return nil, false
	}
	return d.base.byID.Get(id)
}

func (d *topicsDelta) nameTaken(name string) bool {
	if _, ok := d.names[name]; ok {
		return true
	}
	id, ok := d.base.byName.Get(name)
	if !ok {
		return false
	}
	_, gone := d.deleted[id]
	return !gone
}

func (d *topicsDelta) replayTopic(r *records.TopicRecord) error {
	if _, ok := d.topic(r.TopicID); ok {
		return fmt.Errorf("%w: id %s already exists", ErrDuplicateTopic, r.TopicID)
	}
	if d.nameTaken(r.Name) {
		return fmt.Errorf("%w: name %q already exists", ErrDuplicateTopic, r.Name)
	}
	d.changed.add(newTopicChange(&Topic{name: r.Name, id: r.TopicID}, true))
	put(&d.names, r.Name, r.TopicID)
	return nil
}

// working returns the delta's own copy of t (the live topic with id t.id),
// creating it on first change.
func (d *topicsDelta) working(t *Topic) *topicChange {
	if c, ok := d.changed.get(t.id); ok {
		return c
	}
	cp := *t
	c := newTopicChange(&cp, false)
	c.base = t // not in changed, so t comes from the base image
	d.changed.add(c)
	return c
}

func (d *topicsDelta) replayPartition(r *records.PartitionRecord, edit *editToken) error {
	if r.PartitionID < 0 {
		return fmt.Errorf("%w: partition id %d", ErrInvalidRecord, r.PartitionID)
	}
	t, ok := d.topic(r.TopicID)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	p, err := partitionFromRecord(r)
	if err != nil {
		return err
	}
	c := d.working(t)
	var prevPtr *Partition
	if prev, ok := c.topic.parts.Get(r.PartitionID); ok {
		prevPtr = &prev
	}
	d.index.update(t.id, r.PartitionID, prevPtr, p, edit)
	c.topic.parts.Set(r.PartitionID, p, edit)
	c.parts = append(c.parts, r.PartitionID)
	return nil
}

func (d *topicsDelta) replayPartitionChange(r *records.PartitionChangeRecord, edit *editToken) error {
	t, ok := d.topic(r.TopicID)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	prev, ok := t.parts.Get(r.PartitionID)
	if !ok {
		return fmt.Errorf("%w: %s-%d", ErrUnknownPartition, t.name, r.PartitionID)
	}
	next, err := prev.merge(r)
	if err != nil {
		return err
	}
	c := d.working(t)
	d.index.update(t.id, r.PartitionID, &prev, next, edit)
	c.topic.parts.Set(r.PartitionID, next, edit)
	c.parts = append(c.parts, r.PartitionID)
	return nil
}

// replayRemoveTopic removes the topic and returns its name so the caller
// can drop its configs.
func (d *topicsDelta) replayRemoveTopic(r *records.RemoveTopicRecord, edit *editToken) (string, error) {
	t, ok := d.topic(r.TopicID)
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	// The index forgets the topic's partitions: O(its partitions), in
	// proportion to the change.
	t.parts.scan(func(pid int32, p *Partition) bool {
		d.index.update(t.id, pid, p, nil, edit)
		return true
	})
	if c, ok := d.changed.get(r.TopicID); ok {
		d.changed.remove(r.TopicID)
		if c.created {
			delete(d.names, t.name)
		}
	}
	if base, ok := d.base.byID.Get(r.TopicID); ok {
		put(&d.deleted, r.TopicID, base)
	}
	return t.name, nil
}

// apply builds the next topicsImage, freezing the changed topics. When the
// change touches a large share of the topics (a snapshot load), the trees
// are rebuilt in O(n) instead of updated one path at a time.
func (d *topicsDelta) apply(edit *editToken) topicsImage {
	next := d.base
	for _, t := range d.deleted {
		next.numPartitions -= t.NumPartitions()
	}
	for _, c := range d.changed.list {
		c.topic.parts.freeze(edit)
		next.numPartitions += c.topic.NumPartitions()
		if c.base != nil {
			next.numPartitions -= c.base.NumPartitions()
		}
	}
	if 8*(d.changed.len()+len(d.deleted)) > d.base.byID.Len() {
		next = d.rebuild(next.numPartitions)
		next.index = d.index.apply(edit)
		return next
	}
	next.index = d.index.apply(edit)
	for id, t := range d.deleted {
		next.byID = next.byID.Delete(id)
		next.byName = next.byName.Delete(t.name)
	}
	// Sorting in place keeps the result independent of replay order
	// without allocating; the list's order means nothing otherwise.
	slices.SortFunc(d.changed.list, func(a, b *topicChange) int { return compareUUID(a.topic.id, b.topic.id) })
	for _, c := range d.changed.list {
		next.byID = next.byID.Set(c.topic.id, c.topic)
		if c.base == nil { // created, perhaps after deleting the same id
			next.byName = next.byName.Set(c.topic.name, c.topic.id)
		}
	}
	return next
}

func (d *topicsDelta) rebuild(numPartitions int) topicsImage {
	all := make([]*Topic, 0, d.base.byID.Len()+d.changed.len())
	for id, t := range d.base.byID.All {
		if _, gone := d.deleted[id]; gone {
			continue
		}
		if _, changed := d.changed.get(id); changed {
			continue
		}
		all = append(all, t)
	}
	for _, c := range d.changed.list {
		all = append(all, c.topic)
	}
	ids := make([]records.UUID, len(all))
	for i, t := range all {
		ids[i] = t.id
	}
	next := topicsImage{numPartitions: numPartitions, index: d.base.index}
	next.byID = hamtFromEntries(ids, slices.Clone(all))
	slices.SortFunc(all, func(a, b *Topic) int { return cmp.Compare(a.name, b.name) })
	names := make([]string, len(all))
	for i, t := range all {
		names[i], ids[i] = t.name, t.id
	}
	next.byName = ptreeFromSorted(cmp.Compare[string], names, ids)
	return next
}

// changes lists what the delta did to topics, sorted by name, a deleted
// topic before a created one of the same name.
func (d *topicsDelta) changes() []TopicChange {
	out := make([]TopicChange, 0, d.changed.len()+len(d.deleted))
	for id, t := range d.deleted {
		out = append(out, TopicChange{ID: id, Name: t.name, Deleted: true})
	}
	for _, c := range d.changed.list {
		id := c.topic.id
		parts := slices.Compact(slices.Sorted(slices.Values(c.parts)))
		if parts == nil {
			parts = []int32{}
		}
		_, recreated := d.deleted[id]
		out = append(out, TopicChange{ID: id, Name: c.topic.name,
			Created: c.created || recreated, Partitions: parts})
	}
	slices.SortFunc(out, func(a, b TopicChange) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmpBool(!a.Deleted, !b.Deleted), compareUUID(a.ID, b.ID))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
