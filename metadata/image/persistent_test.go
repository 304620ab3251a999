package image

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

// checkAVL verifies order, balance and heights, returning the node count.
func checkAVL[K, V any](t *testing.T, n *tnode[K, V], cmpf func(a, b K) int, lo, hi *K) int {
	t.Helper()
	if n == nil {
		return 0
	}
	if (lo != nil && cmpf(n.key, *lo) <= 0) || (hi != nil && cmpf(n.key, *hi) >= 0) {
		t.Fatalf("key out of order")
	}
	if d := n.left.h() - n.right.h(); d < -1 || d > 1 {
		t.Fatalf("unbalanced node: %d", d)
	}
	if n.height != max(n.left.h(), n.right.h())+1 {
		t.Fatalf("bad height")
	}
	return 1 + checkAVL(t, n.left, cmpf, lo, &n.key) + checkAVL(t, n.right, cmpf, &n.key, hi)
}

// TestPtreeAgainstMap compares random Set/Delete sequences with a Go map
// and checks that every earlier version is unchanged by later operations.
func TestPtreeAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tree := newPtree[int32, int](cmp.Compare[int32])
	model := map[int32]int{}
	type version struct {
		tree  ptree[int32, int]
		model map[int32]int
	}
	var versions []version
	for i := range 5000 {
		k := int32(rng.IntN(600))
		if rng.IntN(3) == 0 {
			tree = tree.Delete(k)
			delete(model, k)
		} else {
			tree = tree.Set(k, i)
			model[k] = i
		}
		if i%250 == 0 {
			versions = append(versions, version{tree, maps.Clone(model)})
		}
	}
	versions = append(versions, version{tree, model})
	for _, v := range versions {
		if n := checkAVL(t, v.tree.root, cmp.Compare[int32], nil, nil); n != v.tree.Len() || n != len(v.model) {
			t.Fatalf("len %d/%d, model %d", n, v.tree.Len(), len(v.model))
		}
		var keys []int32
		for k, val := range v.tree.All() {
			if v.model[k] != val {
				t.Fatalf("key %d: %d, model %d", k, val, v.model[k])
			}
			keys = append(keys, k)
		}
		if !slices.Equal(keys, slices.Sorted(maps.Keys(v.model))) {
			t.Fatalf("iteration order differs from sorted keys")
		}
	}
	keys := slices.Sorted(maps.Keys(model))
	vals := make([]int, len(keys))
	for i, k := range keys {
		vals[i] = model[k]
	}
	built := ptreeFromSorted(cmp.Compare[int32], keys, vals)
	checkAVL(t, built.root, cmp.Compare[int32], nil, nil)
	for k, v := range model {
		if got, ok := built.Get(k); !ok || got != v {
			t.Fatalf("fromSorted: key %d", k)
		}
	}
}

// TestPartVecAgainstMap sets random ids through several edit tokens (each
// one a "delta", frozen afterwards) and checks every frozen version stays
// as it was.
func TestPartVecAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var v partVec
	model := map[int32]int32{}
	type version struct {
		vec   partVec
		model map[int32]int32
	}
	var versions []version
	for round := range 40 {
		edit := &editToken{}
		for range rng.IntN(200) {
			id := int32(rng.IntN(300))
			if rng.IntN(10) == 0 {
				id = int32(rng.IntN(1 << 20))
			}
			p := Partition{Leader: int32(round*1000 + rng.IntN(1000))}
			if rng.IntN(4) == 0 {
				v.Set(id, &p, nil) // a write without a token always copies
			} else {
				v.Set(id, &p, edit)
			}
			model[id] = p.Leader
		}
		v.freeze(edit)
		versions = append(versions, version{v, maps.Clone(model)})
	}
	for i, ver := range versions {
		if ver.vec.Len() != len(ver.model) {
			t.Fatalf("version %d: len %d, model %d", i, ver.vec.Len(), len(ver.model))
		}
		var ids []int32
		for id, p := range ver.vec.All {
			if ver.model[id] != p.Leader {
				t.Fatalf("version %d id %d: leader %d, model %d", i, id, p.Leader, ver.model[id])
			}
			ids = append(ids, id)
		}
		if !slices.Equal(ids, slices.Sorted(maps.Keys(ver.model))) {
			t.Fatalf("version %d: ids not in order or missing", i)
		}
		for id, l := range ver.model {
			if p, ok := ver.vec.Get(id); !ok || p.Leader != l {
				t.Fatalf("version %d: Get(%d)", i, id)
			}
		}
		if _, ok := ver.vec.Get(1 << 21); ok {
			t.Fatalf("absent id found")
		}
	}
}

// TestHamtAgainstMap compares random Set/Delete sequences on random and on
// structured ids with a Go map, checking earlier versions stay unchanged
// and that the bulk builder agrees.
func TestHamtAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := make([]records.UUID, 3000)
	for i := range pool {
		if i%2 == 0 {
			pool[i] = records.UUID{15: byte(i), 14: byte(i >> 8)} // structured
		} else {
			for j := range pool[i] {
				pool[i][j] = byte(rng.IntN(256))
			}
		}
	}
	var m hamt[int]
	model := map[records.UUID]int{}
	type version struct {
		m     hamt[int]
		model map[records.UUID]int
	}
	var versions []version
	for i := range 20000 {
		k := pool[rng.IntN(len(pool))]
		if rng.IntN(3) == 0 {
			m = m.Delete(k)
			delete(model, k)
		} else {
			m = m.Set(k, i)
			model[k] = i
		}
		if i%1000 == 0 {
			versions = append(versions, version{m, maps.Clone(model)})
		}
	}
	keys := slices.Collect(maps.Keys(model))
	vals := make([]int, len(keys))
	for i, k := range keys {
		vals[i] = model[k]
	}
	versions = append(versions, version{m, model}, version{hamtFromEntries(keys, vals), model})
	for i, v := range versions {
		got := map[records.UUID]int{}
		for k, val := range v.m.All {
			got[k] = val
		}
		if !maps.Equal(got, v.model) || v.m.Len() != len(v.model) {
			t.Fatalf("version %d: %d entries (Len %d), model %d", i, len(got), v.m.Len(), len(v.model))
		}
		for _, k := range pool[:200] {
			want, inModel := v.model[k]
			if val, ok := v.m.Get(k); ok != inModel || val != want {
				t.Fatalf("version %d: Get mismatch", i)
			}
		}
	}
}

// TestHamtCollisionNode drives the full-hash-collision level directly,
// since no two known ids share a 64-bit hash.
func TestHamtCollisionNode(t *testing.T) {
	a, b := records.UUID{1}, records.UUID{2}
	n, added := hamtSet[int](nil, 64, 0, hentry[int]{key: a, val: 1})
	n2, added2 := hamtSet(n, 64, 0, hentry[int]{key: b, val: 2})
	n3, added3 := hamtSet(n2, 64, 0, hentry[int]{key: a, val: 3})
	if !added || !added2 || added3 || len(n.entries) != 1 || len(n3.entries) != 2 || n2.entries[0].val != 1 {
		t.Fatalf("collision set: %v %v %v", added, added2, added3)
	}
	n4, removed := hamtDelete(n3, 64, 0, a)
	if !removed || len(n4.entries) != 1 || n4.entries[0].key != b || len(n3.entries) != 2 {
		t.Fatalf("collision delete")
	}
	if _, removed := hamtDelete(n4, 64, 0, a); removed {
		t.Fatalf("deleted an absent key")
	}
}

// TestTopicChangesAgainstMap adds and removes changes across the point
// where topicChanges starts indexing with a map, comparing with a Go map.
func TestTopicChangesAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var cs topicChanges
	model := map[records.UUID]*topicChange{}
	for i := range 2000 {
		id := records.UUID{15: byte(rng.IntN(3 * smallChanges))}
		if _, ok := model[id]; ok && rng.IntN(2) == 0 {
			cs.remove(id)
			delete(model, id)
		} else if !ok {
			c := newTopicChange(&Topic{id: id}, true)
			cs.add(c)
			model[id] = c
		}
		if cs.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", i, cs.len(), len(model))
		}
		for b := range 3 * smallChanges {
			id := records.UUID{15: byte(b)}
			got, ok := cs.get(id)
			if want, inModel := model[id]; ok != inModel || got != want {
				t.Fatalf("step %d: get %v: %v %v, want %v", i, id, got, ok, want)
			}
		}
	}
}
