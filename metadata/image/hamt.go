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
// Each node keeps its leaves and its sub-nodes in two separate compact
// arrays (the CHAMP layout): a change below a node copies only the array
// of 8-byte sub-node pointers, not the wider leaves, which more than halves
// the bytes a single-topic change copies on a large image.
//
// INVARIANTS:
//   - a node reachable from a published hamt is never written again;
//   - in a node at shift s < 64, bitmap and nodemap are disjoint, entries[i]
//     is the leaf in the slot of the i-th set bit of bitmap and subs[i] the
//     node in the slot of the i-th set bit of nodemap, where a key's slot is
//     its hash bits [s, s+5);
//   - a node at shift >= 64 (full hash collision) has both maps 0, no subs
//     and a flat list of leaf entries with distinct keys;
//   - n is the number of leaf entries.
type hamt[V any] struct {
	root *hnode[V]
	n    int
}

type hnode[V any] struct {
	bitmap  uint32 // slots holding a leaf
	nodemap uint32 // slots holding a deeper node
	entries []hentry[V]
	subs    []*hnode[V]
}

// hentry is one key and its value.
type hentry[V any] struct {
	key records.UUID
	val V
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

// slotBit is the bitmap bit of hash h at shift.
func slotBit(h uint64, shift uint) uint32 { return uint32(1) << ((h >> shift) & 31) }

// rank is the index, in the array a bitmap describes, of the slot bit.
func rank(bitmap, bit uint32) int { return bits.OnesCount32(bitmap & (bit - 1)) }

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
		bit := slotBit(h, shift)
		if n.bitmap&bit != 0 {
			if e := &n.entries[rank(n.bitmap, bit)]; e.key == k {
				return e.val, true
			}
			break
		}
		if n.nodemap&bit == 0 {
			break
		}
		n = n.subs[rank(n.nodemap, bit)]
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
	if n.bitmap|n.nodemap == 0 { // collision node
		for _, e := range n.entries {
			if !yield(e.key, e.val) {
				return false
			}
		}
		return true
	}
	for slots := n.bitmap | n.nodemap; slots != 0; slots &= slots - 1 {
		bit := slots & -slots
		if n.bitmap&bit != 0 {
			e := &n.entries[rank(n.bitmap, bit)]
			if !yield(e.key, e.val) {
				return false
			}
		} else if !hamtAll(n.subs[rank(n.nodemap, bit)], yield) {
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
	bit := slotBit(h, shift)
	cp := *n
	switch {
	case n.nodemap&bit != 0:
		i := rank(n.nodemap, bit)
		sub, added := hamtSet(n.subs[i], shift+hamtBits, h, leaf)
		cp.subs = replaceAt(n.subs, i, sub)
		return &cp, added
	case n.bitmap&bit == 0:
		cp.bitmap |= bit
		cp.entries = insertAt(n.entries, rank(cp.bitmap, bit), leaf)
		return &cp, true
	}
	i := rank(n.bitmap, bit)
	e := n.entries[i]
	if e.key == leaf.key {
		cp.entries = replaceAt(n.entries, i, leaf)
		return &cp, false
	}
	// Two keys share this slot: push both one level down.
	sub, _ := hamtSet(nil, shift+hamtBits, hashUUID(e.key), e)
	sub, _ = hamtSet(sub, shift+hamtBits, h, leaf)
	cp.bitmap &^= bit
	cp.entries = removeAt(n.entries, i)
	cp.nodemap |= bit
	cp.subs = insertAt(n.subs, rank(cp.nodemap, bit), sub)
	return &cp, true
}

func collisionSet[V any](n *hnode[V], leaf hentry[V]) (*hnode[V], bool) {
	for i := range n.entries {
		if n.entries[i].key == leaf.key {
			return &hnode[V]{entries: replaceAt(n.entries, i, leaf)}, false
		}
	}
	return &hnode[V]{entries: insertAt(n.entries, len(n.entries), leaf)}, true
}

// replaceAt returns a copy of s with s[i] = v.
func replaceAt[T any](s []T, i int, v T) []T {
	out := make([]T, len(s))
	copy(out, s)
	out[i] = v
	return out
}

// insertAt returns a copy of s with v inserted at i.
func insertAt[T any](s []T, i int, v T) []T {
	out := make([]T, len(s)+1)
	copy(out, s[:i])
	out[i] = v
	copy(out[i+1:], s[i:])
	return out
}

// removeAt returns a copy of s without s[i] (nil when that leaves nothing).
func removeAt[T any](s []T, i int) []T {
	if len(s) == 1 {
		return nil
	}
	out := make([]T, 0, len(s)-1)
	out = append(out, s[:i]...)
	return append(out, s[i+1:]...)
}

// hamtDelete returns n without k (nil when n becomes empty).
func hamtDelete[V any](n *hnode[V], shift uint, h uint64, k records.UUID) (*hnode[V], bool) {
	if n == nil {
		return nil, false
	}
	if shift >= 64 {
		for i := range n.entries {
			if n.entries[i].key == k {
				if len(n.entries) == 1 {
					return nil, true
				}
				return &hnode[V]{entries: removeAt(n.entries, i)}, true
			}
		}
		return n, false
	}
	bit := slotBit(h, shift)
	cp := *n
	switch {
	case n.bitmap&bit != 0:
		i := rank(n.bitmap, bit)
		if n.entries[i].key != k {
			return n, false
		}
		cp.bitmap &^= bit
		cp.entries = removeAt(n.entries, i)
	case n.nodemap&bit != 0:
		i := rank(n.nodemap, bit)
		sub, removed := hamtDelete(n.subs[i], shift+hamtBits, h, k)
		if !removed {
			return n, false
		}
		if sub != nil {
			cp.subs = replaceAt(n.subs, i, sub)
			return &cp, true
		}
		cp.nodemap &^= bit
		cp.subs = removeAt(n.subs, i)
	default:
		return n, false
	}
	if cp.bitmap|cp.nodemap == 0 {
		return nil, true
	}
	return &cp, true
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
		case 1:
			n.entries = append(n.entries, group[0].e)
			n.bitmap |= 1 << b
		default:
			n.subs = append(n.subs, buildHamt(group, shift+hamtBits))
			n.nodemap |= 1 << b
		}
	}
	n.entries = clone(n.entries) // drop append slack
	n.subs = clone(n.subs)
	return n
}
