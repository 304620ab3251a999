package quorum_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// simDisk is a node's disk in the simulation: the production raftlog.FileStorage
// over a raftlog.CrashFS (issue 14; sim_filedisk_test.go). Every Storage call goes
// to the FileStorage; simDisk adds the simulator's hooks and checks around it and
// keeps the checker's mirror of the log (cur: as written; durable: what a completed
// fsync made durable), the quorum-state and the snapshots, updated only when a call
// succeeds and re-read from the storage's Load at every start.
//
// A crash armed for a persist step (trip) becomes CrashAfter(k) on the CrashFS: the
// machine loses power (or, one time in four, the process alone dies and the page
// cache survives) inside one of that call's first k file system calls (a write,
// truncate, fsync, create, rename or remove), or right after the call when it made
// fewer. The persist steps include the open at a start (its recovery and repairs),
// CreateSnapshot and each snapshot Write; a quarter of the opens and a third of the
// snapshot writes and downloads get a crash of their own aimed at them and at the
// cleaning or ResetLog that follows (sim_filedisk_test.go). An armed fsync failure is FailNextSync for the call's fsyncs; the node must
// then stop. A crash between events is CrashFS.PowerLoss. What survives is decided
// by CrashFS (of each file's unsynced writes a seeded prefix, the last one possibly
// torn; names only once their directory was fsynced), not by the simulator, and at
// each start every batch the mirror counted as durable must be back (DurableKept).
type simDisk struct {
	s    *sim
	n    *simNode
	file *fileDisk
	// cur is the log as written; durable the part completed fsyncs made durable.
	// durable shares cur's array: cur is only truncated with a capped reslice and
	// appended to, so nothing ever writes into the prefix durable shows.
	cur, durable []raftlog.Batch
	state        raftlog.QuorumState
	// start is the log start offset; files the complete snapshots (their content is
	// read from the storage).
	start int64
	files map[raftlog.SnapshotID][]byte
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
	// stateLost: the quorum-state file is gone (dropped while the node was down, or
	// moved aside by the repair) until the node writes one.
	stateLost bool
	// recovery is the recovery marker the repair wrote (nil: none).
	recovery *raftlog.Recovery
	// damaged: damage was injected since the node last started.
	damaged bool
	// repairedUnsafe: the node removed its marker at start, without catching up.
	repairedUnsafe bool
	// powerNext: the process alone died last time; the next life's first persist
	// step crashes with a power loss (what the page cache held and the open took
	// for durable must have been fsynced by the open).
	powerNext bool
	// votersMemo speeds up the checker's logVoters (dynamic seeds); lostVoters is the
	// voter set of the log as written when power was last lost, which unsynced
	// writes that survived may bring back at the next start (valid until then).
	votersMemo votersMemo
	lostVoters *keysAt
}

type diskOp int

const (
	opSaveState diskOp = iota
	opAppend
	opTruncate
	opSync
	opFlush
	opSnapCreate // CreateSnapshot: the .part file created
	opSnapChunk  // the snapshot writer's Write (a batch written, or a FetchSnapshot chunk)
	opSnapWrite  // the snapshot writer's fsync (Sync)
	opSnapRename // its Commit: fsync, rename, directory fsync
	opClean      // log cleaning: SetLogStart, DeleteSnapshotsBefore
	opResetLog
	opOpen   // OpenFileStorage at a start: recovery and its repairs
	opRecord // the durable-end record written after the acknowledgement (PrepareRecord's work)
	numDiskOps
)

var diskOpNames = [numDiskOps]string{"SaveQuorumState", "Append", "TruncateTo", "Sync", "flusher fsync",
	"CreateSnapshot", "snapshot Write", "snapshot fsync", "snapshot rename", "log cleaning", "ResetLog", "open/recovery", "durable-end record"}

var errSimCrashed = errors.New("sim: process crashed inside a persist")

func newSimDisk(s *sim, n *simNode) *simDisk {
	return &simDisk{s: s, n: n, state: raftlog.EmptyQuorumState(), truncSince: -1, crashOp: -1, slow: 1,
		files: map[raftlog.SnapshotID][]byte{}, file: newFileDisk(s, n.id)}
}

// Load implements raftlog.Storage: FileStorage's open on what the CrashFS kept.
func (d *simDisk) Load() (raftlog.Loaded, error) { return d.fileLoad() }

func (d *simDisk) latest() (raftlog.SnapshotID, bool) {
	var best raftlog.SnapshotID
	found := false
	for id := range d.files {
		if !found || id.EndOffset > best.EndOffset || id.EndOffset == best.EndOffset && id.Epoch > best.Epoch {
			best, found = id, true
		}
	}
	return best, found
}

func (d *simDisk) snapshotEndingAt(off int64) (raftlog.SnapshotID, bool) {
	var best raftlog.SnapshotID
	found := false
	for id := range d.files {
		if id.EndOffset == off && (!found || id.Epoch > best.Epoch) {
			best, found = id, true
		}
	}
	return best, found
}

// curEnd and durEnd are the log end offsets as written and as durable.
func (d *simDisk) curEnd() int64 { return max(end(d.cur), d.start) }
func (d *simDisk) durEnd() int64 { return max(end(d.durable), d.start) }

// curLastEpoch is the epoch of the last entry: the log's, or the snapshot's at its start.
func (d *simDisk) curLastEpoch() int32 {
	if len(d.cur) > 0 {
		return d.cur[len(d.cur)-1].Epoch
	}
	if id, ok := d.snapshotEndingAt(d.start); ok {
		return id.Epoch
	}
	return 0
}

// holds reports whether the disk holds batch b durably: in its log, or below its
// log start (in the snapshot there).
func (d *simDisk) holds(b raftlog.Batch) bool {
	if b.NextOffset() <= d.start {
		return true
	}
	i := batchAt(d.durable, b.BaseOffset)
	return i >= 0 && d.durable[i].Epoch == b.Epoch && d.durable[i].LastOffset == b.LastOffset
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

// powerLoss: the machine loses power (between events, or as the process exits after
// a failed fsync); CrashFS keeps what it keeps, the next Load reads it.
func (d *simDisk) powerLoss() {
	if !d.file.fs.Crashed() {
		d.file.fs.PowerLoss()
	}
	d.filePowerLost()
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
	next, lastEpoch := d.curEnd(), d.curLastEpoch()
	for _, b := range bs {
		if b.BaseOffset != next || b.Epoch < lastEpoch {
			d.s.fail("EpochCacheMonotone: node %d appends batch %d..%d epoch %d after log end %d epoch %d",
				d.n.id, b.BaseOffset, b.LastOffset, b.Epoch, next, lastEpoch)
			return fmt.Errorf("%w: non-contiguous append", raftlog.ErrStorageFailed)
		}
		next, lastEpoch = b.NextOffset(), b.Epoch
	}
	return d.fileAppend(bs)
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
	return d.fileTruncate(offset)
}

// Sync implements raftlog.Storage.
func (d *simDisk) Sync() error {
	if err := d.dead(); err != nil {
		return err
	}
	d.n.lag += d.fsyncLatency()
	return d.fileSync()
}

// PrepareSync implements raftlog.AsyncSyncer, as FileStorage does: work makes what
// the log holds now durable; the owner only appends meanwhile.
func (d *simDisk) PrepareSync() (work func() error, finish func(error) error) {
	return d.filePrepareSync()
}

// PrepareRecord implements raftlog.EndRecorder, as FileStorage does: work writes the
// durable-end record after the acknowledgement; a crash may land inside it.
func (d *simDisk) PrepareRecord() (work func() error, finish func() error) {
	return d.filePrepareRecord()
}

// SaveQuorumState implements raftlog.Storage.
func (d *simDisk) SaveQuorumState(st raftlog.QuorumState) error {
	if err := d.dead(); err != nil {
		return err
	}
	d.n.lag += d.fsyncLatency()
	return d.fileSaveState(st)
}

func (d *simDisk) saved(st raftlog.QuorumState) {
	d.stateLost = false
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	d.s.chk.checkSavedState(d.s, d.n, st)
	d.state = st
}

// Close implements raftlog.Storage.
func (d *simDisk) Close() error {
	if d.file.st != nil && !d.crashed {
		_ = d.file.st.Close()
	}
	return nil
}

// The snapshot side (quorum's snapshotStore): the Node takes, serves, downloads and
// loads snapshots on the simulated disk, and cleans the log below them.

func (d *simDisk) Where() string { return fmt.Sprintf("sim node %d", d.n.id) }

func (d *simDisk) CreateSnapshot(id raftlog.SnapshotID) (quorum.SnapshotFile, error) {
	if err := d.dead(); err != nil {
		return nil, err
	}
	if _, ok := d.files[id]; ok {
		return nil, fmt.Errorf("%w: %+v", raftlog.ErrSnapshotExists, id)
	}
	return d.fileCreateSnapshot(id)
}

func (d *simDisk) ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error) {
	return d.file.st.ReadSnapshot(id, position, maxBytes)
}

// DeleteSnapshotsBefore deletes the snapshots ending below endOffset, never the latest.
func (d *simDisk) DeleteSnapshotsBefore(endOffset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	return d.fileDeleteSnapshotsBefore(endOffset)
}

// SetLogStart drops the segments below offset (a snapshot's end).
func (d *simDisk) SetLogStart(offset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	if _, ok := d.snapshotEndingAt(offset); !ok {
		d.s.fail("SnapshotAtLogStart: node %d moves its log start to %d without a snapshot there", d.n.id, offset)
	}
	return d.fileSetLogStart(offset)
}

// moveStart drops the batches below offset and moves the log start there.
func (d *simDisk) moveStart(offset int64) {
	i := slices.IndexFunc(d.cur, func(b raftlog.Batch) bool { return b.BaseOffset >= offset })
	if i < 0 {
		i = len(d.cur)
	}
	if i < len(d.durable) {
		d.durable = d.durable[i:]
	} else {
		d.durable = nil
	}
	d.cur = d.cur[i:]
	d.start = max(d.start, offset)
}

// ResetLog empties the log to restart it at offset (a downloaded snapshot's end).
func (d *simDisk) ResetLog(offset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	return d.fileResetLog(offset)
}
