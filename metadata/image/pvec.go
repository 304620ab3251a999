package image

// partVec is a persistent vector of partitions indexed by partition id: a
// 16-way radix trie whose leaves point to immutable Partition values.
// Changing one partition allocates the new Partition and copies one leaf (at
// most 16 pointers) and the O(log16 n) inner nodes above it, so a topic with
// a million partitions is updated in microseconds while the previous image
// keeps its own version. Leaves hold pointers rather than the 80-byte values
// because a leaf of values made every change copy 1.3 KB, the largest cost
// of publishing a one-partition change; the pointer costs 8 bytes per
// partition in the image.
//
// Nodes carry the editToken of the Delta that created them. While that
// Delta is open it writes its own nodes in place (Clojure's "transient"
// trick), so replaying a snapshot of a million PartitionRecords does not
// copy a leaf per record. Delta.Apply retires the token, freezing every node.
//
// INVARIANTS:
//   - a node whose edit is not the writer's live token is never written;
//   - every index stored lies below 1 << (shift + vecBits);
//   - count is the number of present partitions.
type partVec struct {
	root  *vnode
	shift uint
	count int32
}

const (
	vecBits  = 4
	vecWidth = 1 << vecBits
	vecMask  = vecWidth - 1
)

// editToken identifies the open Delta allowed to write a node in place. It
// has a field so that distinct tokens have distinct addresses.
type editToken struct{ _ byte }

// vnode is an inner node (kids) or a leaf (parts, nil for an empty slot);
// slices are only as long as the highest slot used so small topics stay
// small.
type vnode struct {
	edit  *editToken
	kids  []*vnode
	parts []*Partition
}

// Len is the number of partitions.
func (v partVec) Len() int { return int(v.count) }

// Get returns partition id.
func (v partVec) Get(id int32) (Partition, bool) {
	if id < 0 || v.root == nil || uint64(id)>>(v.shift+vecBits) != 0 {
		return Partition{}, false
	}
	n := v.root
	for s := v.shift; s > 0; s -= vecBits {
		i := int(id>>s) & vecMask
		if i >= len(n.kids) || n.kids[i] == nil {
			return Partition{}, false
		}
		n = n.kids[i]
	}
	i := int(id) & vecMask
	if i >= len(n.parts) || n.parts[i] == nil {
		return Partition{}, false
	}
	return *n.parts[i], true
}

// Set stores p under id, writing in place the nodes owned by edit and
// copying the others. p becomes the vector's and must not change again.
func (v *partVec) Set(id int32, p *Partition, edit *editToken) {
	if v.root == nil {
		v.shift = 0
	}
	for uint64(id)>>(v.shift+vecBits) != 0 {
		if v.root != nil {
			v.root = &vnode{edit: edit, kids: []*vnode{v.root}}
		}
		v.shift += vecBits
	}
	var added bool
	v.root, added = setIn(v.root, v.shift, id, p, edit)
	if added {
		v.count++
	}
}

func setIn(n *vnode, shift uint, id int32, p *Partition, edit *editToken) (*vnode, bool) {
	n = n.writable(edit)
	if shift == 0 {
		i := int(id) & vecMask
		n.parts = grow(n.parts, i+1)
		added := n.parts[i] == nil
		n.parts[i] = p
		return n, added
	}
	i := int(id>>shift) & vecMask
	n.kids = grow(n.kids, i+1)
	var added bool
	n.kids[i], added = setIn(n.kids[i], shift-vecBits, id, p, edit)
	return n, added
}

// writable returns n itself if edit owns it, else an owned copy.
func (n *vnode) writable(edit *editToken) *vnode {
	if n == nil {
		return &vnode{edit: edit}
	}
	if n.edit == edit && edit != nil {
		return n
	}
	return &vnode{edit: edit, kids: clone(n.kids), parts: clone(n.parts)}
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// grow extends s to length n. Owned slices were cloned at exact length, so
// growth doubles (bounded by vecWidth) to keep sequential appends linear.
func grow[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		return s[:n]
	}
	c := min(max(n, 2*cap(s)), vecWidth)
	out := make([]T, n, c)
	copy(out, s)
	return out
}

// freeze trims the slack of nodes owned by edit and detaches them from it,
// walking only owned nodes (shared ones are frozen already). After freeze no
// Delta can write any node reachable from v.
func (v *partVec) freeze(edit *editToken) {
	v.root = freezeNode(v.root, edit)
}

func freezeNode(n *vnode, edit *editToken) *vnode {
	if n == nil || n.edit != edit {
		return n
	}
	n.edit = nil
	if cap(n.parts) > len(n.parts) {
		n.parts = clone(n.parts)
	}
	if cap(n.kids) > len(n.kids) {
		n.kids = clone(n.kids)
	}
	for i, k := range n.kids {
		n.kids[i] = freezeNode(k, edit)
	}
	return n
}

// scan calls fn with the image's own pointer to every present partition,
// in id order, until fn returns false. It copies nothing, which matters for
// the million-partition scans of PartitionsLedBy; fn must not write *p.
func (v partVec) scan(fn func(id int32, p *Partition) bool) {
	scanIn(v.root, v.shift, 0, fn)
}

func scanIn(n *vnode, shift uint, base int32, fn func(int32, *Partition) bool) bool {
	if n == nil {
		return true
	}
	if shift == 0 {
		for i := range n.parts {
			if p := n.parts[i]; p != nil && !fn(base+int32(i), p) {
				return false
			}
		}
		return true
	}
	for i, k := range n.kids {
		if !scanIn(k, shift-vecBits, base+int32(i)<<shift, fn) {
			return false
		}
	}
	return true
}

// All yields present partitions in id order.
func (v partVec) All(yield func(int32, Partition) bool) {
	allIn(v.root, v.shift, 0, yield)
}

func allIn(n *vnode, shift uint, base int32, yield func(int32, Partition) bool) bool {
	if n == nil {
		return true
	}
	if shift == 0 {
		for i := range n.parts {
			if p := n.parts[i]; p != nil && !yield(base+int32(i), *p) {
				return false
			}
		}
		return true
	}
	for i, k := range n.kids {
		if !allIn(k, shift-vecBits, base+int32(i)<<shift, yield) {
			return false
		}
	}
	return true
}
