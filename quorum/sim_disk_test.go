package quorum_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// simDisk is a node's disk in the simulation: the log as the page cache holds it
// (cur), what an fsync made durable (durable), and the quorum-state file (durable once
// SaveQuorumState returns: tmp, fsync, rename). It is the Storage the production Node
// runs on in the simulator, and it can crash inside any persist step: the process
// dies there, and of what was written since the last fsync, a prefix survives
// (nothing, some whole batches, or some batches and a torn last one that the next
// load cuts), exactly the freedom a real disk has. An fsync may also fail; the node
// must then stop.
type simDisk struct {
	s *sim
	n *simNode
	// cur is the log as written; durable the part that survives a crash. durable
	// shares cur's array: cur is only truncated with a capped reslice and appended
	// to, so nothing ever writes into the prefix durable shows.
	cur, durable []raftlog.Batch
	state        raftlog.QuorumState
	// truncSince is the lowest truncation point since the last fsync, -1 if none: an
	// unsynced truncation may come back after a crash.
	truncSince int64
	// crashIn counts down persist operations: the one that takes it to 0 crashes
	// inside (0: not armed). crashOp restricts it to one kind (-1: any).
	crashIn int
	crashOp diskOp
	// crashed: the process died inside an operation of the current event.
	crashed bool
	// failSync: the next fsync returns an I/O error; failed is then sticky.
	failSync bool
	failed   error
	// slow multiplies this disk's fsync latency (a slow disk on one node).
	slow int64
}

type diskOp int

const (
	opSaveState diskOp = iota
	opAppend
	opTruncate
	opSync
	opFlush
	numDiskOps
)

var diskOpNames = [numDiskOps]string{"SaveQuorumState", "Append", "TruncateTo", "Sync", "flusher fsync"}

var (
	errSimCrashed = errors.New("sim: process crashed inside a persist")
	errSimEIO     = fmt.Errorf("%w: sim: fsync: input/output error", raftlog.ErrStorageFailed)
)

func newSimDisk(s *sim, n *simNode) *simDisk {
	return &simDisk{s: s, n: n, state: raftlog.EmptyQuorumState(), truncSince: -1, crashOp: -1, slow: 1}
}

// Load implements raftlog.Storage: after a crash, cur was cut back to what survived.
func (d *simDisk) Load() (raftlog.Loaded, error) {
	st := d.state
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	return raftlog.Loaded{State: st, Batches: slices.Clone(d.cur)}, nil
}

// trip reports whether op is the one the armed crash lands in.
func (d *simDisk) trip(op diskOp) bool {
	if d.crashIn == 0 || d.s.healed || (d.crashOp >= 0 && d.crashOp != op) {
		return false
	}
	d.crashIn--
	return d.crashIn == 0
}

// dead is the error of any call after the process died or an fsync failed.
func (d *simDisk) dead() error {
	if d.crashed {
		return errSimCrashed
	}
	return d.failed
}

// crashInside kills the process in the middle of op.
func (d *simDisk) crashInside(op diskOp, detail string) error {
	d.crashed = true
	d.s.stats.persistCrashes[op]++
	d.s.faultf(d.n.id, "CRASH inside %s (%s)", diskOpNames[op], detail)
	d.powerLoss()
	return errSimCrashed
}

// powerLoss keeps, of the log written since the last fsync, a random prefix: nothing,
// whole batches, and perhaps a torn last batch, which load drops by its CRC. An
// unsynced truncation is either lost whole (the old tail comes back) or kept with a
// prefix of what was appended after it.
func (d *simDisk) powerLoss() {
	lo := len(d.durable)
	if d.truncSince >= 0 {
		lo = slices.IndexFunc(d.cur, func(b raftlog.Batch) bool { return b.LastOffset >= d.truncSince })
		if lo < 0 {
			lo = len(d.cur)
		}
	}
	keep := d.durable
	if d.truncSince >= 0 || len(d.cur) > len(d.durable) {
		if d.truncSince < 0 || d.s.rng.IntN(2) == 0 {
			k := lo + d.s.rng.IntN(len(d.cur)-lo+1)
			if k > lo && d.s.rng.IntN(3) == 0 {
				k-- // the last batch reached the disk torn: load cuts it
				d.s.stats.tornTails++
			}
			keep = d.cur[:k:k]
		}
	}
	if len(keep) != len(d.cur) {
		d.s.faultf(d.n.id, "power loss keeps log end %d (durable end was %d, written end %d)", end(keep), end(d.durable), end(d.cur))
	}
	d.durable, d.cur = keep, keep
	d.truncSince = -1
}

// fsyncLatency adds one fsync's time to the node's current event.
func (d *simDisk) fsyncLatency() int64 {
	s := d.s
	lat := s.rng.Int64N(s.fsyncMs + 1)
	if s.rng.IntN(1000) < s.stallPct {
		lat += s.rng.Int64N(s.stallMs + 1)
	}
	return lat * d.slow
}

// Append implements raftlog.Storage.
func (d *simDisk) Append(bs []raftlog.Batch) error {
	if err := d.dead(); err != nil {
		return err
	}
	for i, b := range bs {
		if b.BaseOffset != end(d.cur) || b.Epoch < lastEpoch(d.cur) {
			d.s.fail("EpochCacheMonotone: node %d appends batch %d..%d epoch %d after log end %d epoch %d",
				d.n.id, b.BaseOffset, b.LastOffset, b.Epoch, end(d.cur), lastEpoch(d.cur))
			return fmt.Errorf("%w: non-contiguous append", raftlog.ErrStorageFailed)
		}
		if d.trip(opAppend) {
			return d.crashInside(opAppend, fmt.Sprintf("after %d of %d batches", i, len(bs)))
		}
		d.cur = append(d.cur, b)
	}
	return nil
}

// TruncateTo implements raftlog.Storage.
func (d *simDisk) TruncateTo(offset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	d.s.chk.checkTruncate(d.s, d.n, offset)
	d.s.stats.truncations++
	i := slices.IndexFunc(d.cur, func(b raftlog.Batch) bool { return b.LastOffset >= offset })
	if i >= 0 && i < len(d.cur) {
		d.s.stats.truncatedBatches += len(d.cur) - i
		d.s.tracef(d.n.id, "truncate to %d (drops %d batches)", offset, len(d.cur)-i)
	}
	crash := d.trip(opTruncate)
	if crash && d.s.rng.IntN(2) == 0 {
		return d.crashInside(opTruncate, "before the cut")
	}
	if i >= 0 {
		d.cur = d.cur[:i:i]
		if offset < end(d.durable) {
			d.truncSince = offset
			if d.truncSince < 0 {
				d.truncSince = 0
			}
		}
	}
	if c := &d.n.checkedTo; *c > end(d.cur) {
		*c = end(d.cur)
	}
	if crash {
		return d.crashInside(opTruncate, "after the cut, before its fsync")
	}
	return nil
}

// Sync implements raftlog.Storage.
func (d *simDisk) Sync() error {
	if err := d.dead(); err != nil {
		return err
	}
	d.n.lag += d.fsyncLatency()
	if d.trip(opSync) {
		return d.crashInside(opSync, "during the fsync")
	}
	if d.failSync {
		return d.fsyncFails()
	}
	d.durable = d.cur[:len(d.cur):len(d.cur)]
	d.truncSince = -1
	return nil
}

func (d *simDisk) fsyncFails() error {
	d.failSync = false
	d.failed = errSimEIO
	d.s.stats.fsyncErrors++
	d.s.faultf(d.n.id, "fsync returns EIO")
	return d.failed
}

// PrepareSync implements raftlog.AsyncSyncer, as FileStorage does: work makes what
// the log holds now durable; the owner only appends meanwhile.
func (d *simDisk) PrepareSync() (work func() error, finish func(error) error) {
	captured := d.cur[:len(d.cur):len(d.cur)]
	work = func() error {
		if err := d.dead(); err != nil {
			return err
		}
		if d.trip(opFlush) {
			return d.crashInside(opFlush, "during the flusher's fsync")
		}
		if d.failSync {
			return d.fsyncFails()
		}
		if d.truncSince < 0 && len(captured) > len(d.durable) {
			d.durable = captured
		}
		return nil
	}
	return work, func(err error) error { return err }
}

// SaveQuorumState implements raftlog.Storage: write tmp, fsync, rename, fsync the
// directory. A crash before the rename keeps the old file, after it the new one.
func (d *simDisk) SaveQuorumState(st raftlog.QuorumState) error {
	if err := d.dead(); err != nil {
		return err
	}
	d.n.lag += d.fsyncLatency()
	if d.trip(opSaveState) {
		if d.s.rng.IntN(2) == 0 {
			return d.crashInside(opSaveState, "before the rename")
		}
		d.saved(st)
		return d.crashInside(opSaveState, "after the rename")
	}
	if d.failSync {
		return d.fsyncFails()
	}
	d.saved(st)
	return nil
}

func (d *simDisk) saved(st raftlog.QuorumState) {
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	d.s.chk.checkSavedState(d.s, d.n, st)
	d.state = st
}

// Close implements raftlog.Storage.
func (d *simDisk) Close() error { return nil }
