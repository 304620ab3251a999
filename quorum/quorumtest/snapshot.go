package quorumtest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Snapshots in the environment. A node's state machine is the list of committed
// batches it holds (Base from its last loaded snapshot, then Applied), and a snapshot
// file is simply those batches' raw bytes concatenated, so loading one is parsing it
// back. That keeps "snapshot equals replay" checkable byte for byte.

// diskSnapshots is a node's snapshot directory; it serves the core's FetchSnapshot.
type diskSnapshots struct {
	files map[raftlog.SnapshotID][]byte
}

// ReadSnapshot implements quorum.SnapshotSource.
func (d *diskSnapshots) ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error) {
	data, ok := d.files[id]
	if !ok {
		return nil, 0, raftlog.ErrSnapshotNotFound
	}
	size := int64(len(data))
	if position >= size {
		return nil, size, nil
	}
	end := min(size, position+int64(maxBytes))
	return slices.Clone(data[position:end]), size, nil
}

func (d *diskSnapshots) latest() (raftlog.SnapshotID, bool) {
	var best raftlog.SnapshotID
	found := false
	for id := range d.files {
		if !found || id.EndOffset > best.EndOffset {
			best, found = id, true
		}
	}
	return best, found
}

// Snapshots returns the node's snapshot files: id -> the batches inside.
func (n *Node) Snapshots() map[raftlog.SnapshotID][]raftlog.Batch {
	out := make(map[raftlog.SnapshotID][]raftlog.Batch, len(n.snaps.files))
	for id, data := range n.snaps.files {
		out[id], _, _ = raftlog.SplitBatches(data)
	}
	return out
}

// StateMachine is what the node's listeners hold: the snapshot's batches then the
// batches applied since.
func (n *Node) StateMachine() []raftlog.Batch {
	return append(slices.Clone(n.Base), n.Applied...)
}

// TakeSnapshot writes a snapshot of everything n applied and records it with the core.
func (e *Env) TakeSnapshot(n *Node) (raftlog.SnapshotID, error) {
	state := n.StateMachine()
	if len(state) == 0 {
		return raftlog.SnapshotID{}, fmt.Errorf("node %d applied nothing", n.ID)
	}
	last := state[len(state)-1]
	id := raftlog.SnapshotID{EndOffset: last.NextOffset(), Epoch: last.Epoch}
	if err := n.Raft.ValidateSnapshotID(id); err != nil {
		return id, err
	}
	var buf bytes.Buffer
	for _, b := range state {
		buf.Write(b.Raw)
	}
	n.snaps.files[id] = buf.Bytes()
	n.Raft.SnapshotCreated(id)
	return id, nil
}

// Compact moves n's log start to its latest snapshot and drops the batches below.
func (e *Env) Compact(n *Node) int64 {
	start, ok := n.Raft.CompactLog()
	if ok {
		i := slices.IndexFunc(n.Batches, func(b raftlog.Batch) bool { return b.BaseOffset >= start })
		if i < 0 {
			i = len(n.Batches)
		}
		n.Batches = slices.Clone(n.Batches[i:])
		n.StartOffset = start
	}
	return start
}

// applySnapshotReady writes downloaded chunks and installs a completed snapshot.
func (e *Env) applySnapshotReady(n *Node, rd quorum.Ready) error {
	if err := n.writeChunks(rd); err != nil {
		return err
	}
	id := rd.LoadSnapshot
	if id == nil {
		return nil
	}
	if *id != n.partID {
		return fmt.Errorf("node %d: load (%d,%d) but partial is (%d,%d)", n.ID, id.EndOffset, id.Epoch, n.partID.EndOffset, n.partID.Epoch)
	}
	if n.crashAtLoad {
		// The driver commits the snapshot file, then crashes before ResetLog.
		n.crashAtLoad = false
		n.snaps.files[*id] = n.part
		fmt.Fprintf(e.Out, "%d crashed after committing snapshot (%d,%d), before restarting its log\n", n.ID, id.EndOffset, id.Epoch)
		e.Crash(n)
		return nil
	}
	batches, _, err := raftlog.SplitBatches(n.part)
	if err != nil {
		return fmt.Errorf("node %d: snapshot (%d,%d): %w", n.ID, id.EndOffset, id.Epoch, err)
	}
	n.snaps.files[*id] = n.part
	n.part = nil
	n.Batches, n.StartOffset = nil, id.EndOffset
	n.Base, n.Applied = batches, nil
	n.Loads = append(n.Loads, *id)
	fmt.Fprintf(e.Out, "%d loads snapshot (%d,%d): %d batches\n", n.ID, id.EndOffset, id.Epoch, len(batches))
	return nil
}

// writeChunks appends rd's downloaded chunks to the partial snapshot file.
func (n *Node) writeChunks(rd quorum.Ready) error {
	for _, c := range rd.SnapshotChunks {
		if c.Position == 0 {
			n.part, n.partID = nil, c.ID
		}
		if c.ID != n.partID || int64(len(n.part)) != c.Position {
			return fmt.Errorf("node %d: chunk (%d,%d)@%d does not continue partial (%d,%d) of %d bytes",
				n.ID, c.ID.EndOffset, c.ID.Epoch, c.Position, n.partID.EndOffset, n.partID.Epoch, len(n.part))
		}
		n.part = append(n.part, c.Data...)
	}
	return nil
}

// loadLatest restores a restarting node's state machine from its latest snapshot.
func (n *Node) loadLatest() *raftlog.SnapshotID {
	id, ok := n.snaps.latest()
	if !ok {
		n.Base = nil
		return nil
	}
	n.Base, _, _ = raftlog.SplitBatches(n.snaps.files[id])
	return &id
}

// snapshot node=N: write a snapshot of what N applied.
func (e *Env) handleSnapshot(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	for _, n := range ns {
		id, err := e.TakeSnapshot(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.Out, "%d wrote snapshot (%d,%d) of %d bytes\n", n.ID, id.EndOffset, id.Epoch, len(n.snaps.files[id]))
	}
	return nil
}

// compact node=N: move N's log start to its latest snapshot.
func (e *Env) handleCompact(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	for _, n := range ns {
		fmt.Fprintf(e.Out, "%d log starts at %d\n", n.ID, e.Compact(n))
	}
	return nil
}

// state-machine node=N: the batches N's listeners hold (snapshot then applied).
func (e *Env) handleStateMachine(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	for _, n := range ns {
		fmt.Fprintf(e.Out, "%d: base=%s applied=%s\n", n.ID, BatchesString(n.Base), BatchesString(n.Applied))
	}
	return nil
}
