package image

import (
	"encoding/binary"
	"math/bits"

	"github.com/kraftd/kraftd/metadata/records"
)

// hamt is a persistent hash array mapped trie from topic id to topic. It
// replaces an ordered tree for the by-id index because ids need no order
// (name order comes from the byName tree) and a 32-way trie reaches any of
// a million topics in about four node visits: a partition change then
// rewrites four small nodes instead of twenty tree nodes, each a likely
// cache miss.
//
// INVARIANTS:
//   - a node reachable from a published hamt is never written again;
//   - in a node at shift s < 64, entry i is the one whose hash bits
//     [s, s+5) are the i-th set bit of bitmap;
//   - a node at shift >= 64 (full hash collision) has bitmap 0 and a flat
//     list of leaf entries with distinct keys;
//   - n is the number of leaf entries.
type hamt[V any] struct {
	root *hnode[V]
	n    int
}

type hnode[V any] struct {
	bitmap  uint32
	entries []hentry[V]
}

// hentry is a leaf (sub == nil) or a pointer to a deeper node.
type hentry[V any] struct {
	key records.UUID
	val V
	sub *hnode[V]
}

const hamtBits = 5

// hashUUID mixes both halves so that ids with structure (tests, the
// well-known ids) still spread; random v4 ids would spread anyway.
func hashUUID(u records.UUID) uint64 {
	h := binary.LittleEndian.Uint64(u[:8]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(u[8:]), 31)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Len is the number of keys.
func (m hamt[V]) Len() int { return m.n }

// Get returns the value stored under k.
func (m hamt[V]) Get(k records.UUID) (V, bool) {
	h := hashUUID(k)
	n := m.root
	for shift := uint(0); n != nil; shift += hamtBits {
		if shift >= 64 {
			for _, e := range n.entries {
				if e.key == k {
					return e.val, true
				}
			}
			break
		}
		bit := uint32(1) << ((h >> shift) & 31)
		if n.bitmap&bit == 0 {
			break
		}
		e := &n.entries[bits.OnesCount32(n.bitmap&(bit-1))]
		if e.sub == nil {
			if e.key == k {
				return e.val, true
			}
			break
		}
		n = e.sub
	}
	var zero V
	return zero, false
}

// Set returns a map in which k maps to v; m is unchanged.
func (m hamt[V]) Set(k records.UUID, v V) hamt[V] {
	root, added := hamtSet(m.root, 0, hashUUID(k), hentry[V]{key: k, val: v})
	out := hamt[V]{root: root, n: m.n}
	if added {
		out.n++
	}
	return out
}

// Delete returns a map without k; m is unchanged.
func (m hamt[V]) Delete(k records.UUID) hamt[V] {
	root, removed := hamtDelete(m.root, 0, hashUUID(k), k)
	if !removed {
		return m
	}
	return hamt[V]{root: root, n: m.n - 1}
}

// All yields every entry, in hash order (which is arbitrary but fixed).
func (m hamt[V]) All(yield func(records.UUID, V) bool) { hamtAll(m.root, yield) }

func hamtAll[V any](n *hnode[V], yield func(records.UUID, V) bool) bool {
	if n == nil {
		return true
	}
	for _, e := range n.entries {
		if e.sub != nil {
			if !hamtAll(e.sub, yield) {
				return false
			}
		} else if !yield(e.key, e.val) {
			return false
		}
	}
	return true
}

func hamtSet[V any](n *hnode[V], shift uint, h uint64, leaf hentry[V]) (*hnode[V], bool) {
	if n == nil {
		n = &hnode[V]{}
	}
	if shift >= 64 {
		return collisionSet(n, leaf)
	}
	bit := uint32(1) << ((h >> shift) & 31)
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		entries := make([]hentry[V], len(n.entries)+1)
		copy(entries, n.entries[:pos])
		entries[pos] = leaf
		copy(entries[pos+1:], n.entries[pos:])
		return &hnode[V]{bitmap: n.bitmap | bit, entries: entries}, true
	}
	e := n.entries[pos]
	var added bool
	switch {
	case e.sub != nil:
		e.sub, added = hamtSet(e.sub, shift+hamtBits, h, leaf)
	case e.key == leaf.key:
		e = leaf
	default:
		// Two keys share this slot: push both one level down.
		sub, _ := hamtSet(nil, shift+hamtBits, hashUUID(e.key), e)
		sub, _ = hamtSet(sub, shift+hamtBits, h, leaf)
		e, added = hentry[V]{sub: sub}, true
	}
	entries := append([]hentry[V](nil), n.entries...)
	entries[pos] = e
	return &hnode[V]{bitmap: n.bitmap, entries: entries}, added
}

func collisionSet[V any](n *hnode[V], leaf hentry[V]) (*hnode[V], bool) {
	entries := append([]hentry[V](nil), n.entries...)
	for i := range entries {
		if entries[i].key == leaf.key {
			entries[i] = leaf
			return &hnode[V]{entries: entries}, false
		}
	}
	return &hnode[V]{entries: append(entries, leaf)}, true
}

// hamtDelete returns n without k (nil when n becomes empty).
func hamtDelete[V any](n *hnode[V], shift uint, h uint64, k records.UUID) (*hnode[V], bool) {
	if n == nil {
		return nil, false
	}
	var pos int
	if shift >= 64 {
		pos = -1
		for i := range n.entries {
			if n.entries[i].key == k {
				pos = i
			}
		}
		if pos < 0 {
			return n, false
		}
		return withoutEntry(n, pos, 0), true
	}
	bit := uint32(1) << ((h >> shift) & 31)
	if n.bitmap&bit == 0 {
		return n, false
	}
	pos = bits.OnesCount32(n.bitmap & (bit - 1))
	e := n.entries[pos]
	if e.sub == nil {
		if e.key != k {
			return n, false
		}
		return withoutEntry(n, pos, bit), true
	}
	sub, removed := hamtDelete(e.sub, shift+hamtBits, h, k)
	if !removed {
		return n, false
	}
	if sub == nil {
		return withoutEntry(n, pos, bit), true
	}
	entries := append([]hentry[V](nil), n.entries...)
	entries[pos].sub = sub
	return &hnode[V]{bitmap: n.bitmap, entries: entries}, true
}

func withoutEntry[V any](n *hnode[V], pos int, bit uint32) *hnode[V] {
	if len(n.entries) == 1 {
		return nil
	}
	entries := make([]hentry[V], 0, len(n.entries)-1)
	entries = append(entries, n.entries[:pos]...)
	entries = append(entries, n.entries[pos+1:]...)
	return &hnode[V]{bitmap: n.bitmap &^ bit, entries: entries}
}

// hamtFromEntries builds a map from distinct keys in O(n * depth) without
// the per-insert node copies of repeated Set; Apply uses it when a delta
// rewrites most topics (a snapshot load).
func hamtFromEntries[V any](keys []records.UUID, vals []V) hamt[V] {
	items := make([]hamtItem[V], len(keys))
	for i, k := range keys {
		items[i] = hamtItem[V]{h: hashUUID(k), e: hentry[V]{key: k, val: vals[i]}}
	}
	return hamt[V]{root: buildHamt(items, 0), n: len(keys)}
}

type hamtItem[V any] struct {
	h uint64
	e hentry[V]
}

func buildHamt[V any](items []hamtItem[V], shift uint) *hnode[V] {
	if len(items) == 0 {
		return nil
	}
	if shift >= 64 {
		n := &hnode[V]{entries: make([]hentry[V], len(items))}
		for i, it := range items {
			n.entries[i] = it.e
		}
		return n
	}
	var buckets [32][]hamtItem[V]
	for _, it := range items {
		b := (it.h >> shift) & 31
		buckets[b] = append(buckets[b], it)
	}
	n := &hnode[V]{}
	for b, group := range buckets {
		switch len(group) {
		case 0:
			continue
		case 1:
			n.entries = append(n.entries, group[0].e)
		default:
			n.entries = append(n.entries, hentry[V]{sub: buildHamt(group, shift+hamtBits)})
		}
		n.bitmap |= 1 << b
	}
	n.entries = append([]hentry[V](nil), n.entries...) // drop append slack
	return n
}
