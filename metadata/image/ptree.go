package image

import "iter"

// ptree is a persistent (immutable) ordered map: an AVL tree whose updates
// copy only the O(log n) nodes on the path to the changed key and share
// everything else with the previous version. Images keep topics, brokers and
// configs in ptrees so that publishing a new image after a small change costs
// O(log n) allocations instead of copying a map of every topic.
//
// INVARIANTS:
//   - a node reachable from a published ptree is never written again;
//   - keys are strictly increasing in order under cmp;
//   - for every node, |height(left) - height(right)| <= 1;
//   - n equals the number of nodes.
type ptree[K, V any] struct {
	root *tnode[K, V]
	cmp  func(a, b K) int
	n    int
}

type tnode[K, V any] struct {
	key         K
	val         V
	left, right *tnode[K, V]
	height      int32
}

func newPtree[K, V any](cmp func(a, b K) int) ptree[K, V] {
	return ptree[K, V]{cmp: cmp}
}

// Len is the number of keys.
func (t ptree[K, V]) Len() int { return t.n }

// Get returns the value stored under k.
func (t ptree[K, V]) Get(k K) (V, bool) {
	n := t.root
	for n != nil {
		switch c := t.cmp(k, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n.val, true
		}
	}
	var zero V
	return zero, false
}

// Set returns a tree in which k maps to v; t is unchanged.
func (t ptree[K, V]) Set(k K, v V) ptree[K, V] {
	root, added := t.insert(t.root, k, v)
	out := ptree[K, V]{root: root, cmp: t.cmp, n: t.n}
	if added {
		out.n++
	}
	return out
}

// Delete returns a tree without k; t is unchanged.
func (t ptree[K, V]) Delete(k K) ptree[K, V] {
	root, removed := t.remove(t.root, k)
	if !removed {
		return t
	}
	return ptree[K, V]{root: root, cmp: t.cmp, n: t.n - 1}
}

// All yields every entry in key order.
func (t ptree[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { walk(t.root, yield) }
}

func walk[K, V any](n *tnode[K, V], yield func(K, V) bool) bool {
	for n != nil {
		if !walk(n.left, yield) || !yield(n.key, n.val) {
			return false
		}
		n = n.right // iterate the right spine instead of recursing
	}
	return true
}

// ptreeFromSorted builds a perfectly balanced tree from strictly increasing
// keys in O(n); Apply uses it when most of a tree changes at once (snapshot
// loads), where n single Sets would copy O(n log n) nodes.
func ptreeFromSorted[K, V any](cmp func(a, b K) int, keys []K, vals []V) ptree[K, V] {
	return ptree[K, V]{root: buildSorted(keys, vals), cmp: cmp, n: len(keys)}
}

func buildSorted[K, V any](keys []K, vals []V) *tnode[K, V] {
	if len(keys) == 0 {
		return nil
	}
	mid := len(keys) / 2
	n := &tnode[K, V]{key: keys[mid], val: vals[mid]}
	n.left = buildSorted(keys[:mid], vals[:mid])
	n.right = buildSorted(keys[mid+1:], vals[mid+1:])
	n.fix()
	return n
}

func (t ptree[K, V]) insert(n *tnode[K, V], k K, v V) (*tnode[K, V], bool) {
	if n == nil {
		return &tnode[K, V]{key: k, val: v, height: 1}, true
	}
	c := t.cmp(k, n.key)
	cp := *n
	if c == 0 {
		cp.val = v
		return &cp, false
	}
	var added bool
	if c < 0 {
		cp.left, added = t.insert(n.left, k, v)
	} else {
		cp.right, added = t.insert(n.right, k, v)
	}
	return rebalance(&cp), added
}

func (t ptree[K, V]) remove(n *tnode[K, V], k K) (*tnode[K, V], bool) {
	if n == nil {
		return nil, false
	}
	c := t.cmp(k, n.key)
	if c == 0 {
		return removeNode(n), true
	}
	cp := *n
	var removed bool
	if c < 0 {
		cp.left, removed = t.remove(n.left, k)
	} else {
		cp.right, removed = t.remove(n.right, k)
	}
	if !removed {
		return n, false
	}
	return rebalance(&cp), true
}

// removeNode returns the subtree n without its own entry.
func removeNode[K, V any](n *tnode[K, V]) *tnode[K, V] {
	switch {
	case n.left == nil:
		return n.right
	case n.right == nil:
		return n.left
	}
	succ := n.right
	for succ.left != nil {
		succ = succ.left
	}
	cp := &tnode[K, V]{key: succ.key, val: succ.val, left: n.left, right: removeMin(n.right)}
	return rebalance(cp)
}

func removeMin[K, V any](n *tnode[K, V]) *tnode[K, V] {
	if n.left == nil {
		return n.right
	}
	cp := *n
	cp.left = removeMin(n.left)
	return rebalance(&cp)
}

func (n *tnode[K, V]) h() int32 {
	if n == nil {
		return 0
	}
	return n.height
}

func (n *tnode[K, V]) fix() { n.height = max(n.left.h(), n.right.h()) + 1 }

// rebalance restores the AVL balance of n, which must be a fresh (unshared)
// copy; the children it rotates are copied before being written.
func rebalance[K, V any](n *tnode[K, V]) *tnode[K, V] {
	n.fix()
	switch bf := n.left.h() - n.right.h(); {
	case bf > 1:
		if n.left.left.h() < n.left.right.h() {
			n.left = rotateLeft(n.left)
		}
		return rotateRight(n)
	case bf < -1:
		if n.right.right.h() < n.right.left.h() {
			n.right = rotateRight(n.right)
		}
		return rotateLeft(n)
	}
	return n
}

func rotateRight[K, V any](n *tnode[K, V]) *tnode[K, V] {
	l := *n.left
	top := *n
	top.left = l.right
	top.fix()
	l.right = &top
	l.fix()
	return &l
}

func rotateLeft[K, V any](n *tnode[K, V]) *tnode[K, V] {
	r := *n.right
	top := *n
	top.right = r.left
	top.fix()
	r.left = &top
	r.fix()
	return &r
}
