package image

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// brokerIndex finds a broker's partitions without scanning the cluster, as
// Kafka's BrokersToIsrs does for the controller: fencing, unfencing and
// controlled shutdown of one broker then cost in proportion to that broker's
// partitions, not to every partition.
//
// members maps a broker to the partitions it is in the ISR of or leads,
// topic by topic, as persistent bitsets of partition ids; the key NoLeader
// (-1) holds the partitions without a leader. leaders counts each broker's
// leaderships.
//
// Memory: a bit per partition id per (broker, topic) pair, in chunks of
// 4096 ids that are only as long as the highest id set, plus a chunk
// pointer per 4096 ids: about 1 byte per partition replica in a large
// topic, a word or two per pair for small topics.
//
// INVARIANTS (checkBrokerIndex):
//   - p is in members[b][t] iff b is in p's ISR or b == p.Leader, and in
//     members[NoLeader][t] iff p.Leader == NoLeader;
//   - leaders holds, sorted by broker, the number of partitions each
//     broker leads, absent when 0; it is never written once shared;
//   - no empty set or map is stored.
//
// Only images that descend from EmptyIndexed keep members (the
// controller's): a broker's images answer the same questions by scanning,
// and spare the sets' cost on every replayed partition record. Every image
// keeps leaders, which costs a counter update per leader change: a broker
// asks LeaderCount at every publish and heartbeat while one is shutting
// down, and a scan of a million partitions there cost tens of milliseconds.
type brokerIndex struct {
	enabled bool
	members ptree[int32, hamt[*partBits]]
	leaders []leaderCount
}

// leaderCount is how many partitions broker leads. A sorted slice copied on
// change costs one allocation per delta that moves leaders; a tree cost a
// path of nodes per broker changed.
type leaderCount struct{ broker, n int32 }

func emptyBrokerIndex(enabled bool) brokerIndex {
	return brokerIndex{
		enabled: enabled,
		members: newPtree[int32, hamt[*partBits]](compareID),
	}
}

// EmptyIndexed is Empty with the broker index on: every image built on it
// finds a broker's partitions in proportion to their number (see
// PartitionsLedBy). The controller uses it; each replayed partition record
// costs about a microsecond more.
func EmptyIndexed() *Image {
	img := Empty()
	img.topics.index = emptyBrokerIndex(true)
	return img
}

// Indexed reports whether img keeps the broker index.
func (img *Image) Indexed() bool { return img.topics.index.enabled }

// chunkBits is the number of partition ids one chunk covers.
const (
	chunkShift = 12
	chunkBits  = 1 << chunkShift
	chunkWords = chunkBits / 64
)

// partBits is a persistent set of partition ids. Chunks carry the editToken
// of the Delta that made them, which writes them in place while it is open
// (see partVec).
type partBits struct {
	chunks []*bitChunk
	count  int32
}

type bitChunk struct {
	edit  *editToken
	words []uint64 // only as long as the highest word used
}

func (s *partBits) has(id int32) bool {
	c, w := int(id>>chunkShift), int(id&(chunkBits-1))>>6
	if c >= len(s.chunks) || s.chunks[c] == nil || w >= len(s.chunks[c].words) {
		return false
	}
	return s.chunks[c].words[w]&(1<<(uint(id)&63)) != 0
}

// set adds or removes id in s, which must be the delta's own copy; chunks
// not owned by edit are copied first.
func (s *partBits) set(id int32, on bool, edit *editToken) {
	if s.has(id) == on {
		return
	}
	c, w := int(id>>chunkShift), int(id&(chunkBits-1))>>6
	if on {
		s.chunks = growTo(s.chunks, c+1)
	}
	ch := s.chunks[c]
	switch {
	case ch == nil:
		ch = &bitChunk{edit: edit}
	case ch.edit != edit:
		ch = &bitChunk{edit: edit, words: clone(ch.words)}
	}
	if on {
		ch.words = growTo(ch.words, w+1)
		ch.words[w] |= 1 << (uint(id) & 63)
		s.count++
	} else {
		ch.words[w] &^= 1 << (uint(id) & 63)
		s.count--
	}
	s.chunks[c] = ch
}

func (s *partBits) freeze(edit *editToken) {
	for _, ch := range s.chunks {
		if ch != nil && ch.edit == edit {
			ch.edit = nil
		}
	}
}

// all yields the ids in s in increasing order.
func (s *partBits) all(yield func(int32) bool) {
	for c, ch := range s.chunks {
		if ch == nil {
			continue
		}
		for w, word := range ch.words {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << uint(b)
				if !yield(int32(c<<chunkShift | w<<6 | b)) {
					return
				}
			}
		}
	}
}

// growTo extends an owned slice to length n, doubling its capacity.
func growTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		return s[:n]
	}
	out := make([]T, n, max(n, 2*cap(s)))
	copy(out, s)
	return out
}

// brokerTopic names one set of the index.
type brokerTopic struct {
	broker int32
	topic  records.UUID
}

// brokerIndexDelta is the index part of a Delta: working copies of the sets
// it changed and leadership count changes.
type brokerIndexDelta struct {
	base    brokerIndex
	sets    map[brokerTopic]*partBits
	leaders map[int32]int32 // added to the base counts, for ids outside small
	// small holds the changes of brokers 0..len(small)-1, which a snapshot
	// load or a large create touches once per partition.
	small [64]int32
	// curTopic's sets of brokers 0..63 are cached in curSets: a snapshot
	// load or a large create replays a topic's partitions one after
	// another, so the same (broker, topic) pairs come back on every record.
	curTopic records.UUID
	curSets  [64]*partBits
}

func (d *brokerIndexDelta) working(b int32, t records.UUID) *partBits {
	if t != d.curTopic {
		d.curTopic, d.curSets = t, [64]*partBits{}
	}
	if b >= 0 && int(b) < len(d.curSets) {
		if s := d.curSets[b]; s != nil {
			return s
		}
		s := d.lookup(brokerTopic{b, t})
		d.curSets[b] = s
		return s
	}
	return d.lookup(brokerTopic{b, t})
}

func (d *brokerIndexDelta) lookup(k brokerTopic) *partBits {
	b, t := k.broker, k.topic
	if s, ok := d.sets[k]; ok {
		return s
	}
	s := &partBits{}
	if m, ok := d.base.members.Get(b); ok {
		if cur, ok := m.Get(t); ok {
			*s = partBits{chunks: clone(cur.chunks), count: cur.count}
		}
	}
	put(&d.sets, k, s)
	return s
}

// update moves partition (t, id) from prev to next; nil means absent.
func (d *brokerIndexDelta) update(t records.UUID, id int32, prev, next *Partition, edit *editToken) {
	if prev != nil && prev.Leader != NoLeader {
		d.addLeader(prev.Leader, -1)
	}
	if next != nil && next.Leader != NoLeader {
		d.addLeader(next.Leader, 1)
	}
	if !d.base.enabled {
		return
	}
	var before, after []int32
	if prev != nil {
		before = prev.indexKeys()
	}
	if next != nil {
		after = next.indexKeys()
	}
	for _, b := range before {
		if !slices.Contains(after, b) {
			d.working(b, t).set(id, false, edit)
		}
	}
	for _, b := range after {
		if !slices.Contains(before, b) {
			d.working(b, t).set(id, true, edit)
		}
	}
}

func (d *brokerIndexDelta) addLeader(b, n int32) {
	if b >= 0 && int(b) < len(d.small) {
		d.small[b] += n
		return
	}
	if d.leaders == nil {
		d.leaders = map[int32]int32{}
	}
	d.leaders[b] += n
}

// indexKeys are the brokers p is indexed under: its ISR, its leader, or
// NoLeader.
func (p *Partition) indexKeys() []int32 {
	isr := p.list(listISR)
	if p.Leader == NoLeader || slices.Contains(isr, p.Leader) {
		if p.Leader != NoLeader {
			return isr
		}
		return append(slices.Clip(isr), NoLeader)
	}
	return append(slices.Clip(isr), p.Leader)
}

func (d *brokerIndexDelta) apply(edit *editToken) brokerIndex {
	next := d.base
	if len(d.sets) > 0 {
		byBroker := map[int32][]brokerTopic{}
		for k := range d.sets {
			byBroker[k.broker] = append(byBroker[k.broker], k)
		}
		for _, b := range slices.Sorted(maps.Keys(byBroker)) {
			m, ok := next.members.Get(b)
			if !ok {
				m = hamt[*partBits]{}
			}
			keys := byBroker[b]
			for _, k := range keys {
				d.sets[k].freeze(edit)
			}
			if 8*len(keys) > m.Len() {
				m = d.rebuildMembers(m, keys)
			} else {
				slices.SortFunc(keys, func(x, y brokerTopic) int { return compareUUID(x.topic, y.topic) })
				for _, k := range keys {
					if s := d.sets[k]; s.count == 0 {
						m = m.Delete(k.topic)
					} else {
						m = m.Set(k.topic, s)
					}
				}
			}
			if m.Len() == 0 {
				next.members = next.members.Delete(b)
			} else {
				next.members = next.members.Set(b, m)
			}
		}
	}
	next.leaders = d.applyLeaders()
	return next
}

// applyLeaders merges the delta's leadership changes into the base counts.
func (d *brokerIndexDelta) applyLeaders() []leaderCount {
	var changes []leaderCount
	for b, n := range d.small {
		if n != 0 {
			changes = append(changes, leaderCount{int32(b), n})
		}
	}
	for b, n := range d.leaders {
		if n != 0 {
			changes = append(changes, leaderCount{b, n})
		}
	}
	if len(changes) == 0 {
		return d.base.leaders
	}
	slices.SortFunc(changes, func(x, y leaderCount) int { return cmp.Compare(x.broker, y.broker) })
	base := d.base.leaders
	out := make([]leaderCount, 0, len(base)+len(changes))
	for len(base) > 0 || len(changes) > 0 {
		var c leaderCount
		switch {
		case len(changes) == 0 || len(base) > 0 && base[0].broker < changes[0].broker:
			c, base = base[0], base[1:]
		case len(base) == 0 || changes[0].broker < base[0].broker:
			c, changes = changes[0], changes[1:]
		default:
			c = leaderCount{base[0].broker, base[0].n + changes[0].n}
			base, changes = base[1:], changes[1:]
		}
		if c.n != 0 {
			out = append(out, c)
		}
	}
	return out
}

// rebuildMembers builds a broker's topic map in O(n) when the delta changed
// a large share of it (a snapshot load, a large create), instead of
// copying a path per topic.
func (d *brokerIndexDelta) rebuildMembers(m hamt[*partBits], keys []brokerTopic) hamt[*partBits] {
	changed := make(map[records.UUID]*partBits, len(keys))
	for _, k := range keys {
		changed[k.topic] = d.sets[k]
	}
	ids := make([]records.UUID, 0, m.Len()+len(keys))
	vals := make([]*partBits, 0, m.Len()+len(keys))
	for id, s := range m.All {
		if _, ok := changed[id]; !ok {
			ids, vals = append(ids, id), append(vals, s)
		}
	}
	for id, s := range changed {
		if s.count > 0 {
			ids, vals = append(ids, id), append(vals, s)
		}
	}
	return hamtFromEntries(ids, vals)
}

// partitionsOf returns the partitions broker (or NoLeader) is indexed under
// that keep selects, sorted by topic name then partition, as a scan of the
// image would list them. It costs O(k log k) for the broker's k partitions
// (at most a walk of the topics it is in).
func (img *Image) partitionsOf(broker int32, keep func(*Partition) bool) []TopicPartition {
	if !img.topics.index.enabled {
		return img.partitionsWhere(func(p *Partition) bool { return slices.Contains(p.indexKeys(), broker) && keep(p) })
	}
	m, ok := img.topics.index.members.Get(broker)
	if !ok {
		return nil
	}
	topics := make([]*Topic, 0, m.Len())
	total := 0
	for id, s := range m.All {
		if t, ok := img.topics.byID.Get(id); ok {
			topics = append(topics, t)
			total += int(s.count)
		}
	}
	slices.SortFunc(topics, func(a, b *Topic) int { return cmp.Compare(a.name, b.name) })
	out := make([]TopicPartition, 0, total) // keep selects at most these
	for _, t := range topics {
		s, _ := m.Get(t.id)
		if 4*int(s.count) >= t.parts.Len() {
			// Dense: walking the topic's partitions in order beats a
			// lookup per member.
			t.parts.scan(func(pid int32, p *Partition) bool {
				if s.has(pid) && keep(p) {
					out = append(out, TopicPartition{TopicID: t.id, Partition: pid})
				}
				return true
			})
			continue
		}
		for pid := range s.all {
			if p, ok := t.parts.Get(pid); ok && keep(&p) {
				out = append(out, TopicPartition{TopicID: t.id, Partition: pid})
			}
		}
	}
	return out
}

// LeaderCount is the number of partitions broker leads, in O(log brokers)
// on every image.
func (img *Image) LeaderCount(broker int32) int {
	ls := img.topics.index.leaders
	i, ok := slices.BinarySearchFunc(ls, broker, func(c leaderCount, b int32) int { return cmp.Compare(c.broker, b) })
	if !ok {
		return 0
	}
	n := ls[i].n
	return int(n)
}

// PartitionsWithoutLeader returns the partitions whose leader is NoLeader,
// sorted by topic name then partition, without scanning the others.
func (img *Image) PartitionsWithoutLeader() []TopicPartition {
	return img.partitionsOf(NoLeader, func(p *Partition) bool { return p.Leader == NoLeader })
}

// checkBrokerIndex compares the index with a scan of every partition.
func (img *Image) checkBrokerIndex() error {
	enabled := img.topics.index.enabled
	if !enabled && img.topics.index.members.Len() != 0 {
		return fmt.Errorf("%w: a disabled broker index holds member sets", ErrInsane)
	}
	want := map[brokerTopic][]int32{}
	leaders := map[int32]int32{}
	for _, t := range img.topics.byID.All {
		t.parts.scan(func(pid int32, p *Partition) bool {
			for _, b := range p.indexKeys() {
				if !enabled {
					break
				}
				k := brokerTopic{b, t.id}
				want[k] = append(want[k], pid)
			}
			if p.Leader != NoLeader {
				leaders[p.Leader]++
			}
			return true
		})
	}
	got := map[brokerTopic][]int32{}
	for b, m := range img.topics.index.members.All() {
		for t, s := range m.All {
			var n int32
			for pid := range s.all {
				got[brokerTopic{b, t}] = append(got[brokerTopic{b, t}], pid)
				n++
			}
			if n != s.count || n == 0 {
				return fmt.Errorf("%w: broker index set %d/%s counts %d, holds %d", ErrInsane, b, t, s.count, n)
			}
		}
	}
	if !maps.EqualFunc(want, got, slices.Equal[[]int32]) {
		return fmt.Errorf("%w: broker index differs from the partitions", ErrInsane)
	}
	gotLeaders := map[int32]int32{}
	for i, c := range img.topics.index.leaders {
		if c.n <= 0 || i > 0 && img.topics.index.leaders[i-1].broker >= c.broker {
			return fmt.Errorf("%w: leader counts %v not sorted and positive", ErrInsane, img.topics.index.leaders)
		}
		gotLeaders[c.broker] = c.n
	}
	if !maps.Equal(leaders, gotLeaders) {
		return fmt.Errorf("%w: leader counts %v, partitions say %v", ErrInsane, gotLeaders, leaders)
	}
	return nil
}
