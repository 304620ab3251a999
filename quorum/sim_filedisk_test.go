package quorum_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// The real storage under each simulated node (see simDisk): its files live on a
// raftlog.CrashFS. Damage (fileDamage) flips bits in the segment files at batch
// positions parsed from them and in quorum-state, and deletes files, through
// CrashFS.Damage and Delete; the repair is raftlog.Recover on the CrashFS
// (fileRepair).

// simFileDir is the partition directory on each node's CrashFS.
const simFileDir = "/kraftd/__cluster_metadata-0"

// fileDisk is the real storage under a simDisk.
type fileDisk struct {
	fs *raftlog.CrashFS
	st *raftlog.FileStorage
	// segBytes is metadata.log.segment.bytes: small, so that the log rolls.
	segBytes int64
	// damaged: files were damaged since the last Load (DurableKept does not apply).
	damaged bool
	// mustRefuse says why the next open must refuse to start (damage no crash can
	// leave: the first segment lost with no snapshot reaching the next); "" if none.
	mustRefuse string
}

func newFileDisk(s *sim, id int32) *fileDisk {
	fs := raftlog.NewCrashFS(s.seed<<8 | uint64(id))
	// The metadata log directory, made durable as `kraftd storage format` leaves it;
	// the storage creates the partition directory inside.
	if fs.MkdirAll(filepath.Dir(simFileDir), 0o755) != nil || fs.SyncDir("/") != nil {
		panic("sim: format")
	}
	return &fileDisk{fs: fs, segBytes: []int64{1 << 10, 1 << 13, 1 << 20}[s.rng.IntN(3)]}
}

// fileLoad opens the FileStorage on what the CrashFS kept, checks that every batch
// the mirror counted as durable came back, and re-reads the mirror from it.
func (d *simDisk) fileLoad() (raftlog.Loaded, error) {
	f := d.file
	if f.st != nil {
		_ = f.st.Close() // the last life's handles; after a crash they are dead
		f.st = nil
	}
	f.fs.Restart()
	crash, power, k := d.armOpenCrash()
	st, err := raftlog.OpenFileStorage(simFileDir, raftlog.FileOptions{FS: f.fs, SegmentBytes: f.segBytes,
		Logger: zap.New(traceCore{s: d.s, id: d.n.id})})
	if crash && f.fs.Crashed() {
		return raftlog.Loaded{}, d.openCrashed(k, power)
	}
	f.fs.CrashAfter(0, true) // armed past the open's last call: no crash
	if err != nil {
		f.mustRefuse = ""
		return raftlog.Loaded{}, err
	}
	if f.mustRefuse != "" {
		d.s.fail("DamageRefused: node %d started although %s", d.n.id, f.mustRefuse)
		f.mustRefuse = ""
	}
	l, err := st.Load()
	if err != nil {
		_ = st.Close()
		return raftlog.Loaded{}, err
	}
	f.st = st
	for _, b := range d.durable {
		if f.damaged {
			break
		}
		if b.NextOffset() <= l.StartOffset || d.truncSince >= 0 && b.LastOffset >= d.truncSince {
			continue // below the log start (in a snapshot), or cut by an unsynced truncation
		}
		if i := batchAt(l.Batches, b.BaseOffset); i < 0 || !sameBatch(l.Batches[i], b) {
			d.s.fail("DurableKept: node %d lost batch %d..%d epoch %d that a completed fsync made durable (log now [%d, %d))",
				d.n.id, b.BaseOffset, b.LastOffset, b.Epoch, l.StartOffset, max(end(l.Batches), l.StartOffset))
			break
		}
	}
	if !l.StateMissing && !sameState(l.State, d.state) {
		d.saved(l.State) // a save the crash interrupted reached the disk after all
	}
	d.stateLost = l.StateMissing
	batches := slices.Clone(l.Batches)
	d.cur, d.durable = batches[:len(batches):len(batches)], batches[:len(batches):len(batches)]
	d.start, d.truncSince = l.StartOffset, -1
	d.files = map[raftlog.SnapshotID][]byte{}
	for _, id := range st.Snapshots() {
		d.files[id] = nil // content is read from the storage (ReadSnapshot)
	}
	d.recovery = l.Recovery
	f.damaged = false
	return l, nil
}

func sameState(a, b raftlog.QuorumState) bool {
	return a.LeaderID == b.LeaderID && a.LeaderEpoch == b.LeaderEpoch && a.VotedID == b.VotedID &&
		slices.Equal(a.CurrentVoters, b.CurrentVoters)
}

// fileCall runs fn, one call of the real storage, for persist step op. With crash,
// the process dies inside one of fn's first few file system calls (4; 8 for ResetLog
// and cleaning, which remove three files a segment), or right after fn if it made
// fewer: a power loss, or one time in four (in two for ResetLog and cleaning) the
// process alone. With syncFails (the armed EIO), fn's first fsync
// fails; the failure is then sticky for the node.
func (d *simDisk) fileCall(op diskOp, crash, syncFails bool, fn func() error) error {
	f := d.file
	k, power := 0, true
	if crash {
		calls, processPct := 4, 25
		if op == opResetLog || op == opClean {
			// Each segment removed is three calls (.log, .index, .timeindex), and the
			// order of the removals shows only to a crash of the process alone (a
			// power loss keeps all or none of them: one directory fsync).
			calls, processPct = 8, 50
		}
		k, power = 1+d.s.rng.IntN(calls), d.s.rng.IntN(100) >= processPct || d.powerNext
		d.powerNext = false
		f.fs.CrashAfter(k, power)
	}
	if syncFails {
		f.fs.FailNextSync()
	}
	err := fn()
	if syncFails {
		f.fs.ClearFailSync()
	}
	if crash {
		where := fmt.Sprintf("file system call %d of it", k)
		if !f.fs.Crashed() {
			f.fs.CrashAfter(0, true)
			if power {
				f.fs.PowerLoss()
			} else {
				f.fs.ProcessCrash()
			}
			where = fmt.Sprintf("right after it (it made fewer than %d file system calls)", k)
			d.s.stats.afterCall++
		}
		return d.fileCrashed(op, where, power)
	}
	if err == nil {
		d.checkRecordNotAboveDurable(op)
	}
	if err != nil && errors.Is(err, raftlog.ErrCrashIO) {
		d.failSync = false
		d.failed = err
		d.s.stats.fsyncErrors++
		d.s.faultf(d.n.id, "fsync returns EIO inside %s: %v", diskOpNames[op], err)
		return err
	}
	if err != nil {
		d.s.fail("node %d: %s failed on the file storage: %v", d.n.id, diskOpNames[op], err)
	}
	return err
}

// fileCrashed: the process died inside op, and with power the machine lost power;
// the mirror keeps what completed fsyncs made durable until the next Load re-reads it.
func (d *simDisk) fileCrashed(op diskOp, where string, power bool) error {
	d.crashed = true
	d.s.stats.persistCrashes[op]++
	d.s.faultf(d.n.id, "CRASH inside %s (%s): %s", diskOpNames[op], where, crashKind(power))
	if power {
		d.filePowerLost()
	} else {
		d.aimPowerLossAfterStart()
	}
	return errSimCrashed
}

// aimPowerLossAfterStart: after the process alone died, it is started again soon
// (a supervisor restarts it), and half the time the machine loses power inside the
// next life's first persist step (kill -9, restart, power loss): the open must have
// fsynced what the dead process left in the page cache before it recorded that as
// durable.
func (d *simDisk) aimPowerLossAfterStart() {
	if d.s.rng.IntN(2) == 0 {
		d.powerNext, d.crashIn, d.crashOp = true, 1, -1
		d.s.faultf(d.n.id, "CRASH armed with a power loss inside the next life's first persist step")
	}
	d.restartSoon()
}

// restartSoon starts the node that just died again within 300 ms, unless it was
// started meanwhile or the faults are over.
func (d *simDisk) restartSoon() {
	s, n := d.s, d.n
	life := n.life
	s.at(s.nowMs+1+s.rng.Int64N(300), func() {
		if !s.healed && n.life == life {
			s.restart(n)
		}
	})
}

// checkRecordNotAboveDurable (RecordNotAboveDurable, whitebox): after a storage call
// returns, the durable-end record on the disk claims no more than the mirror counts
// as durable (before the call's own fsync, for a Sync: the record must never be
// written ahead of the data it covers).
func (d *simDisk) checkRecordNotAboveDurable(op diskOp) {
	if rec := d.file.syncedEnd(); rec > d.durEnd() {
		d.s.failWB("RecordNotAboveDurable: node %d's durable-end record is at %d after %s, the durable log ends at %d",
			d.n.id, rec, diskOpNames[op], d.durEnd())
	}
}

func crashKind(power bool) string {
	if power {
		return "power loss"
	}
	return "the process alone (the page cache survives)"
}

// openCrashCalls bounds the file system call an open's crash lands in: an open after
// a crash makes about 4 to 12 (leftovers removed, a torn tail cut, segments dropped,
// the log fsynced, leader-epoch-checkpoint rewritten, the directory fsynced, the
// durable end recorded), a first open about 15.
const openCrashCalls = 12

// armOpenCrash arms a crash inside the open about to run: when the schedule tripped
// an armed crash on it, and in a quarter of the opens besides. A start's open repairs
// what the last life left (a torn tail, segments past it, leftovers of interrupted
// writes, a log that does not continue the latest snapshot), and a crash inside that
// repair must leave a disk the next open still recovers, with nothing durable lost.
func (d *simDisk) armOpenCrash() (crash, power bool, k int) {
	s := d.s
	if d.powerNext {
		return false, false, 0 // a power loss is armed for the first step after the open
	}
	if !d.trip(opOpen) && (s.healed || s.calm || s.rng.IntN(4) != 0) {
		return false, false, 0
	}
	k, power = 1+s.rng.IntN(openCrashCalls), s.rng.IntN(2) == 0
	d.file.fs.CrashAfter(k, power)
	return true, power, k
}

// openCrashed: the process died inside the open at its k-th file system call. The
// node stays down; it is started again soon (its next open must recover).
func (d *simDisk) openCrashed(k int, power bool) error {
	s, n := d.s, d.n
	d.crashed = true
	s.stats.persistCrashes[opOpen]++
	s.faultf(n.id, "CRASH inside %s (file system call %d of it): %s", diskOpNames[opOpen], k, crashKind(power))
	if power {
		d.filePowerLost()
		d.restartSoon()
	} else {
		d.aimPowerLossAfterStart()
	}
	return errSimCrashed
}

// aimAtSnapshot arms, for every snapshot download and a third of the snapshots a
// node writes, a crash inside one of the steps that follow: a later Write, the
// writer's fsync, the Commit, and above all the log cleaning (SetLogStart,
// DeleteSnapshotsBefore) after a written snapshot and the ResetLog and Sync after a
// downloaded one, which the random schedule reaches only a few times in 500 seeds.
func (d *simDisk) aimAtSnapshot(id raftlog.SnapshotID) {
	s := d.s
	// A download ends above what the node applied; a snapshot it writes, at it.
	download := id.EndOffset > d.n.appliedNext
	if s.healed || d.crashIn != 0 || !download && s.rng.IntN(3) != 0 {
		return
	}
	what, ops := "snapshot", []diskOp{opSnapChunk, opSnapWrite, opSnapRename, opClean, opClean}
	if download {
		// ResetLog four times in nine (it was two in seven): few downloads are
		// aimed at (most come with another crash armed, or after the heal),
		// and at two in seven the seeds 1-200 of one version crashed in it
		// in none (seeds 1-1000: 21 crashes in it now, 12 before).
		what, ops = "download", []diskOp{opSnapChunk, opSnapRename, opResetLog, opResetLog, opResetLog, opResetLog, opSync, opSync, opClean}
	}
	d.crashOp, d.crashIn = ops[s.rng.IntN(len(ops))], 1
	if d.crashOp == opSnapChunk {
		d.crashIn = 1 + s.rng.IntN(3)
	}
	s.faultf(d.n.id, "CRASH armed inside %s %d from now, after the %s of %+v began", diskOpNames[d.crashOp], d.crashIn, what, id)
}

// filePowerLost updates the mirror after a power loss: only the durable part is
// known to be there. truncSince stays until the next Load's DurableKept check.
func (d *simDisk) filePowerLost() {
	d.noteLoss()
	d.cur = d.durable
}

func (d *simDisk) fileAppend(bs []raftlog.Batch) error {
	crash := false
	for range bs {
		if d.trip(opAppend) {
			crash = true
			break
		}
	}
	if err := d.fileCall(opAppend, crash, false, func() error { return d.file.st.Append(bs) }); err != nil {
		return err
	}
	d.cur = append(d.cur, bs...)
	return nil
}

func (d *simDisk) fileTruncate(offset int64) error {
	i := slices.IndexFunc(d.cur, func(b raftlog.Batch) bool { return b.LastOffset >= offset })
	if offset < d.durEnd() && (d.truncSince < 0 || offset < d.truncSince) {
		d.truncSince = offset // set first: a crash inside may have cut the file
	}
	if err := d.fileCall(opTruncate, d.trip(opTruncate), false, func() error { return d.file.st.TruncateTo(offset) }); err != nil {
		return err
	}
	if i >= 0 {
		d.cur = d.cur[:i:i]
	}
	if c := &d.n.checkedTo; *c > d.curEnd() {
		*c = d.curEnd()
	}
	return nil
}

func (d *simDisk) fileSync() error {
	if err := d.fileCall(opSync, d.trip(opSync), d.failSync, d.file.st.Sync); err != nil {
		return err
	}
	d.durable = d.cur[:len(d.cur):len(d.cur)]
	d.truncSince = -1
	return nil
}

func (d *simDisk) filePrepareSync() (work func() error, finish func(error) error) {
	realWork, realFinish := d.file.st.PrepareSync()
	captured := d.cur[:len(d.cur):len(d.cur)]
	work = func() error {
		if err := d.dead(); err != nil {
			return err
		}
		if err := d.fileCall(opFlush, d.trip(opFlush), d.failSync, realWork); err != nil {
			return err
		}
		if d.truncSince < 0 && len(captured) > len(d.durable) {
			d.durable = captured
		}
		return nil
	}
	return work, realFinish
}

func (d *simDisk) filePrepareRecord() (work func() error, finish func() error) {
	realWork, finish := d.file.st.PrepareRecord()
	if realWork == nil {
		return nil, nil
	}
	work = func() error {
		if err := d.dead(); err != nil {
			return err
		}
		return d.fileCall(opRecord, d.trip(opRecord), d.failSync, realWork)
	}
	return work, finish
}

func (d *simDisk) fileSaveState(st raftlog.QuorumState) error {
	if err := d.fileCall(opSaveState, d.trip(opSaveState), d.failSync, func() error { return d.file.st.SaveQuorumState(st) }); err != nil {
		return err
	}
	d.saved(st)
	return nil
}

func (d *simDisk) fileDeleteSnapshotsBefore(endOffset int64) error {
	if err := d.fileCall(opClean, d.trip(opClean), false, func() error { return d.file.st.DeleteSnapshotsBefore(endOffset) }); err != nil {
		return err
	}
	clear(d.files)
	for _, id := range d.file.st.Snapshots() {
		d.files[id] = nil
	}
	return nil
}

func (d *simDisk) fileSetLogStart(offset int64) error {
	if err := d.fileCall(opClean, d.trip(opClean), false, func() error { return d.file.st.SetLogStart(offset) }); err != nil {
		return err
	}
	d.moveStart(offset)
	return nil
}

func (d *simDisk) fileResetLog(offset int64) error {
	if err := d.fileCall(opResetLog, d.trip(opResetLog), false, func() error { return d.file.st.ResetLog(offset) }); err != nil {
		return err
	}
	d.s.stats.snapshotDownloads++
	d.cur, d.durable, d.start, d.truncSince = nil, nil, offset, -1
	return nil
}

func (d *simDisk) fileCreateSnapshot(id raftlog.SnapshotID) (quorum.SnapshotFile, error) {
	var w *raftlog.SnapshotWriter
	create := func() (err error) {
		w, err = d.file.st.CreateSnapshot(id)
		return err
	}
	if err := d.fileCall(opSnapCreate, d.trip(opSnapCreate), false, create); err != nil {
		return nil, err
	}
	d.aimAtSnapshot(id)
	return &fileSnap{d: d, w: w}, nil
}

// fileSnap is a snapshot being written through the FileStorage's SnapshotWriter,
// with the sim's crash hooks around its Write, Sync and Commit.
type fileSnap struct {
	d *simDisk
	w *raftlog.SnapshotWriter
}

func (f *fileSnap) ID() raftlog.SnapshotID { return f.w.ID() }
func (f *fileSnap) Size() int64            { return f.w.Size() }

func (f *fileSnap) Write(p []byte) (int, error) {
	if err := f.d.dead(); err != nil {
		return 0, err
	}
	n := 0
	err := f.d.fileCall(opSnapChunk, f.d.trip(opSnapChunk), false, func() (err error) {
		n, err = f.w.Write(p)
		return err
	})
	return n, err
}

func (f *fileSnap) WriteBatch(b raftlog.Batch) error {
	_, err := f.Write(b.Raw)
	return err
}

func (f *fileSnap) StartWriteback() error {
	if err := f.d.dead(); err != nil {
		return err
	}
	return f.w.StartWriteback()
}

func (f *fileSnap) Sync() error {
	if err := f.d.dead(); err != nil {
		return err
	}
	return f.d.fileCall(opSnapWrite, f.d.trip(opSnapWrite), false, f.w.Sync)
}

func (f *fileSnap) Commit() error {
	if err := f.d.dead(); err != nil {
		return err
	}
	if err := f.d.fileCall(opSnapRename, f.d.trip(opSnapRename), false, f.w.Commit); err != nil {
		return err
	}
	f.d.files[f.w.ID()] = nil
	f.d.s.stats.snapshotFiles++
	return nil
}

func (f *fileSnap) Abort() error { return f.w.Abort() }

// Damage on a FileStorage disk: the node is down; its files are changed through
// CrashFS.Damage and Delete, at batch positions read from the segment files.

// fileBatch is one batch as it lies in a segment file.
type fileBatch struct {
	path     string
	pos      int
	b        raftlog.Batch
	segIndex int
}

// fileSegments lists the segment files (sorted by base) and the batches they
// hold, up to the first unreadable one.
func (f *fileDisk) fileSegments() (segs []string, batches []fileBatch) {
	names, err := f.fs.ReadDir(simFileDir)
	if err != nil {
		return nil, nil
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		path := simFileDir + "/" + name
		segs = append(segs, path)
		data, _ := f.fs.ReadFile(path)
		for pos := 0; pos+12 <= len(data); {
			size := 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
			if size < 61 || pos+size > len(data) {
				break
			}
			b, err := raftlog.ParseBatch(data[pos : pos+size])
			if err != nil {
				break
			}
			batches = append(batches, fileBatch{path: path, pos: pos, b: b, segIndex: len(segs) - 1})
			pos += size
		}
	}
	return segs, batches
}

// segmentBase is the base offset in a segment file's name.
func segmentBase(path string) int64 {
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("sim: segment name %s: %v", path, err))
	}
	return base
}

// latestSnapshotEnd is the end offset of the newest complete snapshot on the disk
// (-1: none), read from the file names (the mirror misses a Commit a crash cut short).
func (f *fileDisk) latestSnapshotEnd() int64 {
	names, _ := f.fs.ReadDir(simFileDir)
	end := int64(-1)
	for _, name := range names {
		if stem, ok := strings.CutSuffix(name, ".checkpoint"); ok && len(stem) > 20 {
			if off, err := strconv.ParseInt(stem[:20], 10, 64); err == nil {
				end = max(end, off)
			}
		}
	}
	return end
}

// syncedEnd is the durable end kraftd-synced-end records (-1: none).
func (f *fileDisk) syncedEnd() int64 {
	data, _ := f.fs.ReadFile(simFileDir + "/" + raftlog.SyncedEndFile)
	if end, ok := raftlog.DecodeSyncedEnd(data); ok {
		return end
	}
	return -1
}

// fileDamage injects one damage of the kind p selects (as simulated by (*sim).damage).
//
// It never damages the unrecorded window: batches from the durable end record up to
// the end the mirror counts as durable (what the last Sync made durable before the
// record of it was written, off the acknowledgement path: one Sync's batches at
// most). They may have been acknowledged, and damage there is cut as a torn tail:
// recovery cannot tell it from crash damage, which is the accepted cost of that
// design (raftlog's doc.go), not something the open could detect. Batches below the
// record (detected) and past the durable end (never acknowledged: a torn tail) are
// fair game, and so are segments but those that begin inside the window (dropping
// one would lose window batches undetected).
func (s *sim) fileDamage(n *simNode, p int) {
	d, f := n.disk, n.disk.file
	f.fs.Restart() // the dead life's handles die; the files are as the crash left them
	segs, all := f.fileSegments()
	rec, durEnd := f.syncedEnd(), d.durEnd()
	inWindow := func(off int64) bool { return off >= rec && off < durEnd }
	var batches []fileBatch
	for _, fb := range all {
		if !inWindow(fb.b.BaseOffset) {
			batches = append(batches, fb)
		}
	}
	if len(batches) < len(all) {
		s.stats.damage.windowSpared++
	}
	if len(segs) > 1 && s.rng.IntN(3) == 0 {
		p = 8 // a segment dropped, the first one half the time (few disks hold several)
	}
	switch {
	case p < 6 && len(batches) > 0:
		fb := batches[s.rng.IntN(len(batches))]
		// Any byte but the partition leader epoch (12..15), unless -sim.flipepoch.
		var pos int
		if *simFlipEpoch {
			pos = s.rng.IntN(len(fb.b.Raw))
		} else if pos = s.rng.IntN(len(fb.b.Raw) - 4); pos >= 12 {
			pos += 4
		}
		bit := byte(1) << s.rng.IntN(8)
		f.fs.Damage(fb.path, func(data []byte) []byte {
			data[fb.pos+pos] ^= bit
			return data
		})
		kind := dmgFlipTail
		if fb.b.BaseOffset < rec {
			kind = dmgFlipBelowRec
		}
		s.injectf(n, kind, "FLIP bit at byte %d of batch %d..%d epoch %d in %s (durable end record %d)",
			pos, fb.b.BaseOffset, fb.b.LastOffset, fb.b.Epoch, fb.path, rec)
	case p < 7 && !d.stateLost:
		f.fs.Delete(simFileDir + "/" + raftlog.QuorumStateFile)
		d.state, d.stateLost = raftlog.EmptyQuorumState(), true
		delete(s.chk.diskEpoch, n.id) // the next state it writes may be older
		s.injectf(n, dmgDropState, "DROP quorum-state")
	case p < 8 && !d.stateLost:
		// The first byte ('{'): a flip there never leaves valid JSON. (A flip in a
		// digit would: Kafka's quorum-state has no checksum.)
		bit := byte(1) << s.rng.IntN(8)
		if f.fs.Damage(simFileDir+"/"+raftlog.QuorumStateFile, func(data []byte) []byte {
			if len(data) > 0 {
				data[0] ^= bit
			}
			return data
		}) {
			s.injectf(n, dmgFlipState, "FLIP a bit of quorum-state")
		}
	case p < 9 && len(segs) > 0:
		k := s.rng.IntN(len(segs))
		if s.rng.IntN(2) == 0 {
			k = 0
		}
		if inWindow(segmentBase(segs[k])) {
			s.faultf(n.id, "no DROP of segment %s: it begins in the unrecorded window [%d, %d)", segs[k], rec, durEnd)
			break
		}
		kind := dmgDropSegment
		switch {
		case k == 0:
			kind = dmgDropFirst
		case k < len(segs)-1:
			kind = dmgDropMiddle
		}
		if snapEnd := f.latestSnapshotEnd(); k == 0 && len(segs) > 1 && snapEnd < segmentBase(segs[1]) {
			// The log start only moves to a snapshot's end, so a log beginning at the
			// next segment with no snapshot reaching it is damage no crash leaves.
			s.stats.damage.mustRefuse++
			f.mustRefuse = fmt.Sprintf("its first segment %s was deleted and no snapshot reaches the next, %s (latest snapshot end %d)",
				segs[0], segs[1], snapEnd)
		}
		stem := strings.TrimSuffix(segs[k], ".log")
		for _, suffix := range []string{".log", ".index", ".timeindex"} {
			f.fs.Delete(stem + suffix)
		}
		s.injectf(n, kind, "DROP segment %s of %d (durable end record %d)", segs[k], len(segs), rec)
	default:
		if id, ok := d.latest(); ok && id.EndOffset > d.start {
			f.fs.Delete(simFileDir + "/" + raftlog.SnapshotFileName(id))
			s.injectf(n, dmgDropSnapshot, "DROP snapshot %+v (log start %d)", id, d.start)
		}
	}
	f.damaged = f.damaged || n.disk.damaged
}

// fileRepair is `kraftd storage recover`: raftlog.Recover on the node's CrashFS.
func (d *simDisk) fileRepair() {
	f := d.file
	f.fs.Restart()
	rep, err := raftlog.Recover(simFileDir, raftlog.RecoverOptions{
		File: raftlog.FileOptions{FS: f.fs, SegmentBytes: f.segBytes}, Logger: zap.New(traceCore{s: d.s, id: d.n.id})})
	if err != nil {
		d.s.fail("storage recover on node %d: %v", d.n.id, err)
		return
	}
	if rep.Marker != nil && rep.Marker.StateLost {
		d.state, d.stateLost = raftlog.EmptyQuorumState(), true
		delete(d.s.chk.diskEpoch, d.n.id)
	}
	if rep.Marker != nil {
		m := *rep.Marker
		d.recovery = &m
	}
	d.s.stats.damage.repaired++
	d.s.faultf(d.n.id, "STORAGE RECOVER: %s; log end %d", strings.Join(rep.Actions, "; "), rep.EndOffset)
}

// flipFirstDurableBatch crashes voter n and flips a bit in the last record of its
// first batch below the durable end record, which the CRC catches; false if it has
// none.
func (s *sim) flipFirstDurableBatch(n *simNode) bool {
	d := n.disk
	_, batches := d.file.fileSegments()
	if len(batches) == 0 || batches[0].b.BaseOffset >= d.file.syncedEnd() {
		return false
	}
	s.crash(n)
	d.file.fs.Restart()
	_, batches = d.file.fileSegments()
	rec := d.file.syncedEnd()
	if len(batches) == 0 || batches[0].b.BaseOffset >= rec {
		return false
	}
	fb := batches[0]
	d.file.fs.Damage(fb.path, func(data []byte) []byte {
		data[fb.pos+len(fb.b.Raw)-1] ^= 0x10
		return data
	})
	d.file.damaged = true
	s.injectf(n, dmgFlipBelowRec, "pinned FLIP in batch %d..%d in %s (durable end record %d)", fb.b.BaseOffset, fb.b.LastOffset, fb.path, rec)
	return true
}

// aimAtInstall makes a follower install a snapshot while the faults go on: it is
// crashed, the leader writes a snapshot (and, at the seed's small retention, cleans
// the log below it), and the follower restarts behind the new log start, so that it
// must FetchSnapshot, and aimAtSnapshot arms a crash inside that install.
func (s *sim) aimAtInstall() {
	l := s.leader()
	if l == nil || s.retentionBytes < 0 {
		return
	}
	var followers []*simNode
	for _, id := range s.ids {
		if n := s.nodes[id]; n != l && !n.down {
			followers = append(followers, n)
		}
	}
	if len(followers) == 0 {
		return
	}
	f := followers[s.rng.IntN(len(followers))]
	s.faultf(f.id, "INSTALL aimed: down while leader %d snapshots", l.id)
	s.crash(f)
	s.at(s.nowMs+1+s.rng.Int64N(300), func() {
		if !l.down && !s.healed {
			s.snapshot(l)
		}
	})
	s.at(s.nowMs+400+s.rng.Int64N(600), func() {
		if s.healed {
			return
		}
		// One time in two (it was one in four: seeds 1-1000 crashed inside
		// CreateSnapshot 9 times then, 16 now).
		if d := f.disk; d.crashIn == 0 && s.rng.IntN(2) == 0 {
			d.crashIn, d.crashOp = 1, opSnapCreate // the download's first step
			s.faultf(f.id, "CRASH armed inside the next CreateSnapshot")
		}
		s.restart(f)
	})
}
