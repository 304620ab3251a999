package quorum_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum"
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
	// start is the log start offset; files the complete snapshots (durable: written,
	// fsynced, renamed and the directory fsynced).
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
	// file: the production FileStorage over a CrashFS that this disk runs on
	// (-sim.filestorage; see sim_filedisk_test.go), nil for the model disk.
	file *fileDisk

	// The durable end record (FileStorage's kraftd-synced-end), durable before
	// anything is acknowledged: each fsync records the end it made durable. In the
	// mutant_syncedlag build (simSyncedLag) it lags one Sync, as FileStorage once
	// wrote it: a Sync records the end of the Sync before it (syncedTo), so after a
	// crash rec is one Sync behind the durable end, and damage to the last Sync's
	// acknowledged batches reads as a torn tail. Either way a cut below it lowers it
	// first and a start records the whole log. Damage to a batch below rec stops the
	// node; beyond it, it is a torn tail.
	rec, syncedTo int64
	// ranBefore: a node started on this disk (the record exists).
	ranBefore bool
	// stateLost: the quorum-state file is gone (dropped while the node was down, or
	// moved aside by the repair) until the node writes one.
	stateLost bool
	// stateCorrupt: the quorum-state file's bytes were damaged.
	stateCorrupt bool
	// recovery is the recovery marker the repair wrote (nil: none).
	recovery *raftlog.Recovery
	// damaged: damage was injected since the node last started.
	damaged bool
	// repairedUnsafe: the node removed its marker at start, without catching up.
	repairedUnsafe bool
}

type diskOp int

const (
	opSaveState diskOp = iota
	opAppend
	opTruncate
	opSync
	opFlush
	opSnapWrite
	opSnapRename
	opClean
	opResetLog
	numDiskOps
)

var diskOpNames = [numDiskOps]string{"SaveQuorumState", "Append", "TruncateTo", "Sync", "flusher fsync",
	"snapshot write", "snapshot rename", "log cleaning", "ResetLog"}

var (
	errSimCrashed = errors.New("sim: process crashed inside a persist")
	errSimEIO     = fmt.Errorf("%w: sim: fsync: input/output error", raftlog.ErrStorageFailed)
)

func newSimDisk(s *sim, n *simNode) *simDisk {
	d := &simDisk{s: s, n: n, state: raftlog.EmptyQuorumState(), truncSince: -1, crashOp: -1, slow: 1,
		files: map[raftlog.SnapshotID][]byte{}}
	if *simFileStorage {
		d.file = newFileDisk(s, n.id)
	}
	return d
}

// Load implements raftlog.Storage: after a crash, cur was cut back to what survived.
// As FileStorage does, a log that does not continue the latest snapshot restarts at
// its end (Kafka's truncateToLatestSnapshot).
func (d *simDisk) Load() (raftlog.Loaded, error) {
	if d.file != nil {
		return d.fileLoad()
	}
	if err := d.openLog(); err != nil {
		return raftlog.Loaded{}, err
	}
	st := d.state
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	l := raftlog.Loaded{State: st, Batches: slices.Clone(d.cur), StartOffset: d.start,
		StateMissing: d.stateLost, RanBefore: d.ranBefore}
	if d.recovery != nil {
		r := *d.recovery
		l.Recovery = &r
	}
	if id, ok := d.latest(); ok {
		l.Snapshot = &id
		if !l.LogContinuesSnapshot() {
			d.s.faultf(d.n.id, "load: log [%d, %d) does not continue snapshot %+v: restarts at its end", d.start, d.curEnd(), id)
			d.cur, d.durable, d.start, d.truncSince = nil, nil, id.EndOffset, -1
			l.Batches, l.StartOffset = nil, id.EndOffset
		}
	}
	if id, ok := d.snapshotEndingAt(l.StartOffset); ok {
		l.StartSnapshot = &id
	}
	// The open's Sync and recordDurableEnd: the whole log is recorded as durable.
	d.ranBefore = true
	d.rec, d.syncedTo = d.curEnd(), d.curEnd()
	return l, nil
}

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
	if d.file != nil {
		if !d.file.fs.Crashed() {
			d.file.fs.PowerLoss()
		}
		d.filePowerLost()
		return
	}
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
	next, lastEpoch := d.curEnd(), d.curLastEpoch()
	for i, b := range bs {
		if b.BaseOffset != next || b.Epoch < lastEpoch {
			d.s.fail("EpochCacheMonotone: node %d appends batch %d..%d epoch %d after log end %d epoch %d",
				d.n.id, b.BaseOffset, b.LastOffset, b.Epoch, next, lastEpoch)
			return fmt.Errorf("%w: non-contiguous append", raftlog.ErrStorageFailed)
		}
		next, lastEpoch = b.NextOffset(), b.Epoch
		if d.file != nil {
			continue
		}
		if d.trip(opAppend) {
			return d.crashInside(opAppend, fmt.Sprintf("after %d of %d batches", i, len(bs)))
		}
		d.cur = append(d.cur, b)
	}
	if d.file != nil {
		return d.fileAppend(bs)
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
	// lowerSyncedEnd: the record never claims more than the log will hold.
	d.rec, d.syncedTo = min(d.rec, offset), min(d.syncedTo, offset)
	if d.file != nil {
		return d.fileTruncate(offset)
	}
	crash := d.trip(opTruncate)
	if crash && d.s.rng.IntN(2) == 0 {
		return d.crashInside(opTruncate, "before the cut")
	}
	if i >= 0 {
		d.cur = d.cur[:i:i]
		if offset < d.durEnd() && (d.truncSince < 0 || offset < d.truncSince) {
			d.truncSince = offset
		}
	}
	if c := &d.n.checkedTo; *c > d.curEnd() {
		*c = d.curEnd()
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
	if d.file != nil {
		return d.fileSync()
	}
	if d.trip(opSync) {
		return d.crashInside(opSync, "during the fsync")
	}
	if d.failSync {
		return d.fsyncFails()
	}
	d.durable = d.cur[:len(d.cur):len(d.cur)]
	d.truncSince = -1
	d.synced(d.curEnd())
	return nil
}

// synced is a completed fsync that made the log durable to end: the record written
// behind it (the previous Sync's end) is durable now.
func (d *simDisk) synced(end int64) {
	if simSyncedLag {
		d.rec, d.syncedTo = d.syncedTo, end
		return
	}
	d.rec, d.syncedTo = end, end
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
	if d.file != nil {
		return d.filePrepareSync()
	}
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
			d.synced(max(end(captured), d.start))
		}
		return nil
	}
	return work, func(err error) error { return err }
}

// SaveQuorumState implements raftlog.Storage: write tmp, fsync, rename, fsync the
// directory. A crash before the rename keeps the old file; between the rename and
// the directory fsync the new name may or may not have reached the disk; after it,
// the new file is there.
func (d *simDisk) SaveQuorumState(st raftlog.QuorumState) error {
	if err := d.dead(); err != nil {
		return err
	}
	d.n.lag += d.fsyncLatency()
	if d.file != nil {
		return d.fileSaveState(st)
	}
	if d.trip(opSaveState) {
		switch d.s.rng.IntN(3) {
		case 0:
			return d.crashInside(opSaveState, "before the rename")
		case 1:
			if d.s.rng.IntN(2) == 0 {
				return d.crashInside(opSaveState, "after the rename, before the directory fsync: the old file is back")
			}
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
	d.stateLost = false
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	d.s.chk.checkSavedState(d.s, d.n, st)
	d.state = st
}

// Close implements raftlog.Storage.
func (d *simDisk) Close() error {
	if d.file != nil && d.file.st != nil && !d.crashed {
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
	if d.file != nil {
		w, err := d.file.st.CreateSnapshot(id)
		if err != nil {
			return nil, err
		}
		return &fileSnap{d: d, w: w}, nil
	}
	return &simSnapFile{d: d, id: id}, nil
}

func (d *simDisk) ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error) {
	if d.file != nil {
		return d.file.st.ReadSnapshot(id, position, maxBytes)
	}
	data, ok := d.files[id]
	if !ok {
		return nil, 0, raftlog.ErrSnapshotNotFound
	}
	size := int64(len(data))
	if position >= size || position < 0 {
		return nil, size, nil
	}
	return slices.Clone(data[position:min(size, position+int64(maxBytes))]), size, nil
}

// DeleteSnapshotsBefore deletes the snapshots ending below endOffset, never the latest.
func (d *simDisk) DeleteSnapshotsBefore(endOffset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	if d.file != nil {
		return d.fileDeleteSnapshotsBefore(endOffset)
	}
	if d.trip(opClean) {
		return d.crashInside(opClean, "before deleting old snapshots")
	}
	latest, _ := d.latest()
	for id := range d.files {
		if id.EndOffset < endOffset && id != latest {
			delete(d.files, id)
		}
	}
	return nil
}

// SetLogStart drops the segments below offset (a snapshot's end).
func (d *simDisk) SetLogStart(offset int64) error {
	if err := d.dead(); err != nil {
		return err
	}
	if _, ok := d.snapshotEndingAt(offset); !ok {
		d.s.fail("SnapshotAtLogStart: node %d moves its log start to %d without a snapshot there", d.n.id, offset)
	}
	if d.file != nil {
		return d.fileSetLogStart(offset)
	}
	crash := d.trip(opClean)
	if crash && d.s.rng.IntN(2) == 0 {
		return d.crashInside(opClean, "before moving the log start")
	}
	d.moveStart(offset)
	if crash {
		return d.crashInside(opClean, "after moving the log start")
	}
	return nil
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
	if d.file != nil {
		return d.fileResetLog(offset)
	}
	if d.trip(opResetLog) {
		return d.crashInside(opResetLog, "before the reset")
	}
	d.s.stats.snapshotDownloads++
	d.cur, d.durable, d.start, d.truncSince = nil, nil, offset, -1
	d.rec, d.syncedTo = min(d.rec, offset), offset
	return nil
}

// simSnapFile is a snapshot being written (a .part file until Commit).
type simSnapFile struct {
	d    *simDisk
	id   raftlog.SnapshotID
	buf  []byte
	done bool
}

func (w *simSnapFile) ID() raftlog.SnapshotID { return w.id }
func (w *simSnapFile) Size() int64            { return int64(len(w.buf)) }

func (w *simSnapFile) Write(p []byte) (int, error) {
	if err := w.d.dead(); err != nil {
		return 0, err
	}
	if w.done {
		return 0, raftlog.ErrSnapshotWriterDone
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *simSnapFile) WriteBatch(b raftlog.Batch) error {
	_, err := w.Write(b.Raw)
	return err
}

func (w *simSnapFile) StartWriteback() error { return w.d.dead() }

func (w *simSnapFile) Sync() error {
	if err := w.d.dead(); err != nil {
		return err
	}
	if w.d.trip(opSnapWrite) {
		return w.d.crashInside(opSnapWrite, fmt.Sprintf("writing snapshot %+v", w.id))
	}
	return nil
}

// Commit: fsync the .part file, rename it, fsync the directory. A crash between the
// rename and the directory fsync may keep the new name or lose it.
func (w *simSnapFile) Commit() error {
	if err := w.d.dead(); err != nil {
		return err
	}
	if w.done {
		return raftlog.ErrSnapshotWriterDone
	}
	w.done = true
	if w.d.trip(opSnapRename) {
		switch w.d.s.rng.IntN(3) {
		case 0:
			return w.d.crashInside(opSnapRename, "before the rename")
		case 1:
			if w.d.s.rng.IntN(2) == 0 {
				w.d.files[w.id] = w.buf
				return w.d.crashInside(opSnapRename, "after the rename, before the directory fsync: the name survived")
			}
			return w.d.crashInside(opSnapRename, "after the rename, before the directory fsync: the name was lost")
		default:
			w.d.files[w.id] = w.buf
			return w.d.crashInside(opSnapRename, "after the directory fsync")
		}
	}
	w.d.files[w.id] = w.buf
	w.d.s.stats.snapshotFiles++
	return nil
}

func (w *simSnapFile) Abort() error {
	w.done = true
	return nil
}
