package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// Defaults of Kafka's metadata log settings.
const (
	// DefaultSegmentBytes is metadata.log.segment.bytes' default, 1 GiB.
	DefaultSegmentBytes = 1 << 30
	// DefaultSegmentMs is metadata.log.segment.ms' default, 7 days.
	DefaultSegmentMs = 7 * 24 * 60 * 60 * 1000
)

// Errors of FileStorage (and MemStorage) that are not I/O failures. They mean the
// caller broke the Storage contract; nothing was written.
var (
	ErrNonContiguous   = errors.New("raftlog: batch does not continue the log")
	ErrEpochRegression = errors.New("raftlog: batch epoch older than the log's last epoch")
	ErrBelowLogStart   = errors.New("raftlog: offset below the log start")
	ErrClosed          = errors.New("raftlog: storage closed")
	// ErrDirLocked: another process has the metadata log directory open (its
	// .lock file is locked).
	ErrDirLocked = errors.New("raftlog: metadata log directory in use")
)

// LockFile is the lock file, in the metadata log directory (the partition
// directory's parent), that a FileStorage holds while open: Kafka's log directory
// lock, which Kafka itself takes on the same file.
const LockFile = ".lock"

// FileOptions configures a FileStorage. The zero value is usable.
type FileOptions struct {
	// SegmentBytes rolls to a new segment when the active one would grow past it
	// (metadata.log.segment.bytes). Zero or negative means DefaultSegmentBytes.
	SegmentBytes int64
	// SegmentMs rolls to a new segment when a batch's max timestamp is more than
	// SegmentMs after the active segment's first batch (metadata.log.segment.ms;
	// Kafka measures with record timestamps, so no clock is needed). Zero or
	// negative means DefaultSegmentMs.
	SegmentMs int64
	// Logger receives recovery warnings. Nil means zap.NewNop().
	Logger *zap.Logger
	// FS is the file system the storage runs on. Nil means the operating
	// system's (OSFS); the simulation passes a crashable in-memory one.
	FS FS

	// repair is set by Recover: damage at or below the durable end is cut like a
	// torn tail (and reported through repair) instead of stopping the open.
	repair func(what string)
	// locked is set by Recover, which holds the directory's lock itself.
	locked bool
}

func (o *FileOptions) fillDefaults() {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentMs <= 0 {
		o.SegmentMs = DefaultSegmentMs
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.FS == nil {
		o.FS = osFS{}
	}
}

// FileStorage is the Storage of a real node: a Kafka partition directory
// (<metadata.log.dir>/__cluster_metadata-0) holding log segments, the
// leader-epoch-checkpoint, the quorum-state file and snapshots, byte-compatible
// with Apache Kafka. Like every Storage it is used by one goroutine.
//
// Durability: Append and TruncateTo change the files at once but are durable only
// after Sync; SaveQuorumState and snapshot Commit are durable when they return.
// Any I/O error is sticky: the storage refuses every later write, because after a
// failed fsync the kernel may have dropped the dirty pages and a retry that
// "succeeds" would lie (the fsyncgate lesson).
//
// Torn tail or bit rot: SyncedEndFile records how far the log is durable, and
// recovery stops the node on damage at or below it instead of cutting it as a torn
// tail. Each Sync (and PrepareSync's work) fsyncs the segments, the rewritten
// leader-epoch-checkpoint and the directory, and that alone makes the log durable:
// the caller may acknowledge what it covered at once. The end it made durable
// (durable) is recorded afterwards, off the acknowledgement path: PrepareRecord's
// work writes it into the record and fdatasyncs it (a fixed-size file overwritten in
// place, two slots), on the caller's flusher or after the caller sent its
// acknowledgement. One record write at a time, and the next Sync (or PrepareSync's
// finish) waits for the one in flight, or does it itself if nobody started it, before
// it counts as done. A crash before the record is written leaves the previous, lower
// record: the bytes between it and the durable end were acknowledged (one Sync's at
// most), and damage to them after the crash is cut as a torn tail; recovery cannot
// tell it from crash damage there (see doc.go). The record never claims bytes that
// may not be durable: it records only ends a completed Sync made durable, the open
// fsyncs the recovered log before recording its end (synchronously, as Close records
// the last durable end), and cutting the log below the record (TruncateTo, ResetLog)
// first waits for a record write in flight and then lowers the record, synchronously.
// The price of the record is one fdatasync per Sync that moved the end, off the
// acknowledgement path (see BenchmarkAppendSyncRecordShare).
//
// INVARIANTS: segments is non-empty, sorted by base and contiguous (each base is
// the previous segment's end offset); only the last (active) segment is appended
// to; startOffset lies in [segments[0].base, endOffset]; epochs mirrors the batch
// epochs from startOffset.
type FileStorage struct {
	dir  string
	opts FileOptions
	log  *zap.Logger
	fs   FS

	segments    []*segment
	startOffset int64
	epochs      EpochCache
	snapshots   []SnapshotID // complete snapshots, sorted by EndOffset

	state        QuorumState
	stateCorrupt bool
	stateMissing bool
	// ranBefore: SyncedEndFile existed at open, so this node has started on the
	// directory before and wrote quorum-state then (see OpenFileStorage).
	ranBefore bool
	// recovery is the RecoveryFile read at open (nil: none).
	recovery *Recovery
	// lock holds LockFile (nil when the opener holds it).
	lock io.Closer

	epochsDirty bool // leader-epoch-checkpoint must be rewritten at the next Sync
	dirDirty    bool // files were created, renamed or removed since the last dir fsync
	// mut counts changes that make a Sync necessary, so that a PrepareSync finishing
	// after further changes leaves their dirty marks for the next Sync.
	mut    uint64
	failed error

	// synced records the durable end of the log (SyncedEndFile); hadSynced: it holds
	// a valid record (at open: recovery can tell a torn tail from damage below it).
	synced    *syncedEndFile
	hadSynced bool
	// durable is the end the last completed Sync made durable (lowered by a cut
	// below it), unrecorded: it is not yet what the record says and must be
	// recorded, by rec or by the owner itself. rec is the record write in flight
	// (PrepareRecord), nil if none.
	//
	// INVARIANTS: synced.last.End <= durable.End when unrecorded (the record never
	// claims more than a completed Sync made durable); rec, when set, writes an end
	// <= durable.End; every Sync, before it moves durable, and every PrepareSync
	// finish bring the record to durable (waitRecord, recordDurable), so the
	// acknowledged bytes the record does not cover are at most those of the last Sync.
	durable    syncedEnd
	unrecorded bool
	rec        *recordJob
}

var _ Storage = (*FileStorage)(nil)

// OpenFileStorage opens (creating if missing) the partition directory dir, repairs
// a torn or corrupt log tail, removes leftovers of interrupted writes, and makes
// the repaired state durable before returning.
func OpenFileStorage(dir string, opts FileOptions) (*FileStorage, error) {
	opts.fillDefaults()
	s := &FileStorage{dir: dir, opts: opts, log: opts.Logger, fs: opts.FS, state: EmptyQuorumState()}
	if err := s.makeDir(); err != nil {
		return nil, err
	}
	if !opts.locked {
		lock, err := lockDir(s.fs, dir)
		if err != nil {
			return nil, err
		}
		s.lock = lock
	}
	opened, err := s.openLocked()
	if err != nil && s.lock != nil {
		_ = s.lock.Close()
	}
	return opened, err
}

// lockDir takes the lock of the metadata log directory holding partition directory dir.
func lockDir(fsys FS, dir string) (io.Closer, error) {
	return fsys.Lock(filepath.Join(filepath.Dir(dir), LockFile))
}

func (s *FileStorage) openLocked() (*FileStorage, error) {
	dir := s.dir
	bases, err := s.scanDir()
	if err != nil {
		return nil, err
	}
	if err := s.loadQuorumState(); err != nil {
		return nil, err
	}
	if s.recovery, err = readRecovery(s.fs, dir); err != nil {
		return nil, err
	}
	if s.ranBefore, err = existsFS(s.fs, filepath.Join(dir, SyncedEndFile)); err != nil {
		return nil, err
	}
	if mutFreshState {
		if s.synced, s.hadSynced, err = openSyncedEnd(s.fs, dir); err != nil {
			return nil, err
		}
	}
	if s.stateMissing && !s.ranBefore && len(bases) == 0 && onlyBootstrapSnapshot(s.snapshots) {
		// A fresh directory (at most the bootstrap snapshot `storage format` writes
		// for a dynamic quorum): write the initial quorum-state (as Kafka does at its
		// first start) before SyncedEndFile exists, so that from then on a missing
		// quorum-state next to SyncedEndFile means a lost one.
		if err := s.SaveQuorumState(EmptyQuorumState()); err != nil {
			return nil, err
		}
	}
	if !mutFreshState {
		if s.synced, s.hadSynced, err = openSyncedEnd(s.fs, dir); err != nil {
			return nil, err
		}
	}
	if err := s.open(bases); err != nil {
		_ = s.closeFiles() // leaves the files as they are
		return nil, err
	}
	return s, nil
}

// open loads the segments and brings the directory to a consistent, durable state.
func (s *FileStorage) open(bases []int64) error {
	if err := s.recoverLog(bases); err != nil {
		return err
	}
	if err := s.truncateToLatestSnapshot(); err != nil {
		return err
	}
	s.restoreLogStart()
	if len(s.segments) == 0 {
		if err := s.addSegment(s.startOffset); err != nil {
			return err
		}
	}
	if err := s.checkEpochCheckpoint(); err != nil {
		return err
	}
	// What the last run wrote after its last completed Sync may still be only in the
	// page cache (the process died, the machine did not): fsync it before the Sync
	// records the recovered end, so that the record claims nothing a later power loss
	// could take.
	for _, sg := range s.segments {
		if !s.hadSynced || sg.base >= s.synced.last.Base {
			sg.dirty = true
		}
	}
	s.dirDirty = true
	if err := s.Sync(); err != nil {
		return err
	}
	return s.recordDurable()
}

// makeDir creates the partition directory if missing and fsyncs its parent, the
// metadata log directory, at every open, not only when it created it: a crash
// between an earlier open's mkdir and that fsync leaves a directory that exists in
// the page cache only, and a later power loss would take it with every file the node
// wrote into it since (its votes and acknowledged log included). A metadata log
// directory it creates too gets its own entry fsynced, once (`kraftd storage format`
// creates and fsyncs it before the first start).
func (s *FileStorage) makeDir() error {
	parent := filepath.Dir(s.dir)
	if _, err := s.fs.Stat(s.dir); err != nil {
		_, perr := s.fs.Stat(parent)
		if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
			return ioErr(err)
		}
		if perr != nil {
			if err := syncDirFS(s.fs, filepath.Dir(parent)); err != nil {
				return err
			}
		}
	}
	return syncDirFS(s.fs, parent)
}

// onlyBootstrapSnapshot: ids is empty or holds just BootstrapSnapshotID.
func onlyBootstrapSnapshot(ids []SnapshotID) bool {
	return len(ids) == 0 || len(ids) == 1 && ids[0] == BootstrapSnapshotID
}

// scanDir lists segment bases and snapshots and deletes what interrupted writes
// left behind: *.tmp files, snapshot .part files, snapshots queued for deletion,
// and Kafka index files (we keep no indexes; stale ones would mislead Kafka).
func (s *FileStorage) scanDir() ([]int64, error) {
	names, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, ioErr(err)
	}
	var bases []int64
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base)
			continue
		}
		if id, ok := parseSnapshotName(name); ok {
			s.snapshots = append(s.snapshots, id)
			continue
		}
		if isLeftover(name) {
			if err := s.fs.Remove(filepath.Join(s.dir, name)); err != nil {
				return nil, ioErr(err)
			}
			s.markDir()
		}
	}
	slices.Sort(bases)
	slices.SortFunc(s.snapshots, compareSnapshotIDs)
	return bases, nil
}

func isLeftover(name string) bool {
	for _, suffix := range []string{".tmp", snapshotPartSuffix, snapshotDeletedSuffix, indexSuffix, timeIndexSuffix} {
		if len(name) > len(suffix) && name[len(name)-len(suffix):] == suffix {
			return true
		}
	}
	return false
}

// loadQuorumState reads quorum-state. A missing file is a fresh node. An unreadable
// one stops the node (ErrCorrupt): it is only ever replaced atomically (tmp, fsync,
// rename), so no crash leaves it torn, and starting without it (Kafka starts
// Unattached at the log's epoch) could grant a second vote in an epoch this node
// already voted in.
func (s *FileStorage) loadQuorumState() error {
	path := filepath.Join(s.dir, QuorumStateFile)
	data, err := readFile(s.fs, path)
	if errors.Is(err, fs.ErrNotExist) {
		s.stateMissing = true
		return nil
	}
	if err == nil {
		var st QuorumState
		st, err = DecodeQuorumState(data)
		if err == nil {
			s.state = st
			return nil
		}
		if errors.Is(err, ErrUnsupportedQuorumState) {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return fmt.Errorf("%w: %s is unreadable (it is replaced atomically, so no crash tears it): the votes "+
		"this node granted are lost. Ways out: restore the file from a copy; or run `kraftd storage recover` "+
		"[same flags]: the node then rejoins without voting until it has caught up with a leader: %v",
		ErrCorrupt, path, err)
}

// recoverLog scans the segments in order and keeps the longest valid prefix of the
// log. The first invalid byte ends the log, even in a non-final segment: nothing
// after a corrupt batch can be trusted to be contiguous with what precedes it, the
// offsets it held will be fetched again from the leader, and anything committed
// survives on a majority of voters (we only acknowledged what we had fsynced, and
// a corrupt fsynced batch is a disk fault the quorum tolerates like a lost node).
func (s *FileStorage) recoverLog(bases []int64) error {
	if len(bases) > 0 {
		s.startOffset = bases[0]
	}
	if uncovered, snap := s.startUncovered(); uncovered {
		return s.missingStart(bases, snap)
	}
	next, prevEpoch := s.startOffset, int32(-1)
	for i, base := range bases {
		if base != next && s.durableAt(next, base, 0) && s.opts.repair == nil {
			return corruptErr(filepath.Join(s.dir, segmentName(base)), next, 0, "segment does not continue the log",
				fmt.Errorf("expected a segment starting at %d", next))
		}
		if base != next {
			s.log.Warn("segment does not continue the log; dropping it and later segments",
				zap.String("segment", segmentName(base)), zap.Int64("expected_base", next))
			return s.dropSegmentFiles(bases[i:])
		}
		sg, err := openSegment(s.fs, s.dir, base)
		if err != nil {
			return err
		}
		s.segments = append(s.segments, sg)
		res, err := scanSegment(s.fs, sg.path, base, prevEpoch)
		if err != nil {
			return err
		}
		s.indexScanned(sg, res.Batches)
		if res.Valid < res.Total && s.durableAt(sg.endOffset(), base, res.Valid) && s.opts.repair == nil {
			return corruptErr(sg.path, sg.endOffset(), res.Valid, "invalid batch", res.Reason)
		}
		if res.Valid < res.Total {
			// Beyond the durable end: a tail torn by a crash, never acknowledged.
			if err := s.repairTail(sg, res); err != nil {
				return err
			}
			return s.dropSegmentFiles(bases[i+1:])
		}
		next = sg.endOffset()
		if n := len(res.Batches); n > 0 {
			prevEpoch = res.Batches[n-1].Epoch
		}
	}
	if m := s.synced.last; s.hadSynced && next < m.End && s.opts.repair == nil {
		if snap, ok := s.latestSnapshot(); !ok || snap.EndOffset < m.End {
			return corruptErr(filepath.Join(s.dir, segmentName(m.Base)), next, 0, "log ends early",
				fmt.Errorf("the log ends at %d, below the durable end %d, and no snapshot covers it", next, m.End))
		}
	}
	return nil
}

// startUncovered reports whether the log starts above 0 with no snapshot reaching
// its first offset, and returns the latest snapshot (EndOffset -1: none). The log
// start only ever moves to a committed snapshot's end (SetLogStart deletes whole
// segments below it, ResetLog restarts the log at it; neither removes that
// snapshot, and both commit it durably first), so no crash leaves such a log: the
// segments that held the offsets below were lost.
func (s *FileStorage) startUncovered() (bool, SnapshotID) {
	snap, ok := s.latestSnapshot()
	if !ok {
		snap = SnapshotID{EndOffset: -1}
	}
	return s.startOffset > 0 && snap.EndOffset < s.startOffset, snap
}

// missingStart refuses a log whose first segments are gone (startUncovered); under
// Recover it deletes every segment instead, so that the log restarts at the latest
// snapshot (or at 0) and is fetched again from the leader.
func (s *FileStorage) missingStart(bases []int64, snap SnapshotID) error {
	from, below := int64(0), "there is no snapshot"
	if snap.EndOffset >= 0 {
		from, below = snap.EndOffset, "the latest snapshot "+SnapshotFileName(snap)+" ends at "+fmt.Sprint(snap.EndOffset)
	}
	first := filepath.Join(s.dir, segmentName(bases[0]))
	if s.opts.repair == nil {
		return fmt.Errorf("%w: %s: the log starts at %s (offset %d) and %s: offsets %d to %d, held by the "+
			"segment files before it, are missing, and this node may have acknowledged the records lost there. "+
			"Ways out: restore the missing segment files from a copy; or run `kraftd storage recover` [same flags]: "+
			"it deletes the log, and the node fetches it again from the leader without voting until it has caught up",
			ErrCorrupt, s.dir, first, bases[0], below, from, bases[0]-1)
	}
	s.log.Warn("the log's first segments are missing; deleting the log",
		zap.Int64("missing_from", from), zap.Int64("log_start_offset", bases[0]))
	s.report("offsets %d to %d missing (the log started at %s, %s): deleted the log", from, bases[0]-1, first, below)
	s.startOffset = 0
	return s.dropSegmentFiles(bases)
}

// report tells Recover (only) what recovery cut.
func (s *FileStorage) report(format string, args ...any) {
	if s.opts.repair != nil {
		s.opts.repair(fmt.Sprintf(format, args...))
	}
}

// durableAt reports whether byte position pos of the segment starting at base (that
// is, offset off) lies below the durable end recorded in SyncedEndFile: damage
// there is not a torn tail.
func (s *FileStorage) durableAt(off, base, pos int64) bool {
	m := s.synced.last
	if !s.hadSynced || off >= m.End {
		return false
	}
	return base < m.Base || base == m.Base && pos < m.Pos
}

// currentEnd is the durable-end record for the log as it is now.
func (s *FileStorage) currentEnd() syncedEnd {
	sg := s.active()
	return syncedEnd{End: s.EndOffset(), Base: sg.base, Pos: sg.size}
}

// sameEnd: the record would not change.
func sameEnd(a, b syncedEnd) bool { return a.End == b.End && a.Base == b.Base && a.Pos == b.Pos }

// setDurable notes that a Sync made end durable: the record must follow.
func (s *FileStorage) setDurable(end syncedEnd) {
	s.durable = end
	s.unrecorded = !s.hadSynced || !sameEnd(end, s.synced.last)
}

// waitRecord waits for the record write in flight, or does it now if nobody
// started it, and applies its outcome.
func (s *FileStorage) waitRecord() error {
	j := s.rec
	if j == nil {
		return nil
	}
	s.rec = nil
	if s.failed != nil {
		// A failed storage writes nothing: a write not started is dropped; one
		// another goroutine runs is waited for (it must be done with the file).
		j.once.Do(func() { j.err = s.failed })
		return s.failedErr()
	}
	if err := j.run(); err != nil {
		return s.fail(err)
	}
	s.synced.last, s.hadSynced = j.m, true
	if sameEnd(j.m, s.durable) {
		s.unrecorded = false
	}
	return nil
}

// recordDurable brings the record to the durable end, synchronously: after the
// write in flight, the durable end if it is still unrecorded.
func (s *FileStorage) recordDurable() error {
	if err := s.waitRecord(); err != nil {
		return err
	}
	if !s.unrecorded {
		return nil
	}
	if err := s.synced.write(s.durable); err != nil {
		return s.fail(err)
	}
	s.hadSynced, s.unrecorded = true, false
	return nil
}

// PrepareRecord implements EndRecorder: the write of the record for the durable end,
// unless it is recorded already or a write is in flight.
func (s *FileStorage) PrepareRecord() (work func() error, finish func() error) {
	if s.failed != nil || s.rec != nil || !s.unrecorded {
		return nil, nil
	}
	j := &recordJob{sf: s.synced, m: s.synced.next(s.durable)}
	s.rec = j
	finish = func() error {
		if s.rec != j {
			return nil // the owner waited for it already (waitRecord)
		}
		return s.waitRecord()
	}
	return j.run, finish
}

// lowerSyncedEnd makes the record and the durable end at most m before the log is
// cut below them, so that no record, written or in flight, is above the log after a
// crash during the cut: it waits for the write in flight, then writes m
// synchronously if the record is above it.
func (s *FileStorage) lowerSyncedEnd(m syncedEnd) error {
	if err := s.waitRecord(); err != nil {
		return err
	}
	if s.durable.End > m.End {
		s.durable = m
		s.unrecorded = !s.hadSynced || !sameEnd(m, s.synced.last)
	}
	if m.End >= s.synced.last.End && s.hadSynced {
		return nil // the record is not above m
	}
	if err := s.synced.write(m); err != nil {
		return s.fail(err)
	}
	s.hadSynced, s.unrecorded = true, false // durable is at most m now
	return nil
}

func (s *FileStorage) indexScanned(sg *segment, batches []storage.BatchInfo) {
	sg.index(batches)
	for _, b := range batches {
		s.epochs.Assign(b.Epoch, b.BaseOffset)
	}
}

// repairTail cuts a segment back to its valid prefix.
func (s *FileStorage) repairTail(sg *segment, res storage.ScanResult) error {
	s.log.Warn("truncating invalid log tail",
		zap.String("segment", sg.path),
		zap.Int64("offset", sg.endOffset()),
		zap.Int64("position", res.Valid),
		zap.Int64("dropped_bytes", res.Total-res.Valid),
		zap.NamedError("reason", res.Reason))
	if err := sg.f.Truncate(res.Valid); err != nil {
		return s.fail(ioErr(err))
	}
	sg.dirty = true
	s.report("cut %s at offset %d (byte %d; %d bytes dropped): %v",
		sg.path, sg.endOffset(), res.Valid, res.Total-res.Valid, res.Reason)
	return nil
}

// dropSegmentFiles deletes segments that recovery found unusable.
func (s *FileStorage) dropSegmentFiles(bases []int64) error {
	for _, base := range bases {
		path := filepath.Join(s.dir, segmentName(base))
		if size, err := s.fs.Stat(path); err == nil {
			s.log.Warn("deleting log segment after the end of the valid log",
				zap.String("segment", path), zap.Int64("dropped_bytes", size))
			s.report("deleted %s (%d bytes), after the end of the valid log", path, size)
		}
		sg := &segment{base: base, path: path}
		if err := sg.remove(s.fs); err != nil {
			return s.fail(err)
		}
		s.markDir()
	}
	return nil
}

// truncateToLatestSnapshot empties the log when it does not continue the newest
// snapshot (LogContinuesSnapshot), as Kafka's KafkaMetadataLog.truncateToLatestSnapshot
// does at start-up for a log that is shorter or older than the snapshot: a follower
// may have committed a downloaded snapshot and crashed before resetting its log.
// Kafka keeps a log whose last epoch is newer than the snapshot's; such a log holds
// another leader's uncommitted entries below the snapshot's end, and the core, which
// restarts with the high watermark at the snapshot's end, could not truncate them.
func (s *FileStorage) truncateToLatestSnapshot() error {
	snap, ok := s.latestSnapshot()
	if !ok {
		return nil
	}
	if len(s.segments) > 0 && LogContinuesSnapshot(snap, s.startOffset, s.batchEndingAt) {
		return nil
	}
	if len(s.segments) > 0 {
		s.log.Warn("log does not continue the latest snapshot; restarting it at the snapshot",
			zap.Int64("snapshot_end_offset", snap.EndOffset), zap.Int32("snapshot_epoch", snap.Epoch),
			zap.Int64("log_end_offset", s.EndOffset()), zap.Int32("log_last_epoch", s.epochs.LatestEpoch()))
	}
	return s.ResetLog(snap.EndOffset)
}

// batchEndingAt returns the epoch of the batch whose next offset is end.
func (s *FileStorage) batchEndingAt(end int64) (int32, bool) {
	for _, sg := range s.segments {
		if end <= sg.base || end > sg.endOffset() {
			continue
		}
		i, found := slices.BinarySearchFunc(sg.batches, end-1, func(b batchPos, last int64) int {
			return cmp.Compare(b.last, last)
		})
		if found {
			return sg.batches[i].epoch, true
		}
	}
	return 0, false
}

// checkEpochCheckpoint schedules a rewrite of leader-epoch-checkpoint when it does
// not match the cache rebuilt from the batches. The batches are the truth; the file
// exists for Kafka's benefit.
func (s *FileStorage) checkEpochCheckpoint() error {
	data, err := readFile(s.fs, filepath.Join(s.dir, LeaderEpochCheckpointFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.fail(ioErr(err))
	}
	entries, derr := DecodeEpochCheckpoint(data)
	if err != nil || derr != nil || !slices.Equal(entries, s.epochs.Entries()) {
		s.markEpochs()
	}
	return nil
}

// Load implements Storage. It reads the batches back from the segment files.
func (s *FileStorage) Load() (Loaded, error) {
	if errors.Is(s.failed, ErrClosed) {
		return Loaded{}, ErrClosed
	}
	l := Loaded{State: s.state, StartOffset: s.startOffset, StateCorrupt: s.stateCorrupt,
		StateMissing: s.stateMissing, RanBefore: s.ranBefore}
	if s.recovery != nil {
		r := *s.recovery
		l.Recovery = &r
	}
	l.State.CurrentVoters = slices.Clone(s.state.CurrentVoters)
	if snap, ok := s.latestSnapshot(); ok {
		l.Snapshot = &snap
	}
	for _, id := range s.snapshots {
		if id.EndOffset == s.startOffset {
			l.StartSnapshot = &id
		}
	}
	for _, sg := range s.segments {
		batches, err := s.readSegment(sg)
		if err != nil {
			return Loaded{}, err
		}
		for _, b := range batches {
			if b.LastOffset >= s.startOffset {
				l.Batches = append(l.Batches, b)
			}
		}
	}
	return l, nil
}

// readSegment reads the indexed part of a segment. It must parse completely: the
// bytes were validated when written or recovered.
func (s *FileStorage) readSegment(sg *segment) ([]Batch, error) {
	buf := make([]byte, sg.size)
	if _, err := sg.f.ReadAt(buf, 0); err != nil {
		return nil, ioErr(err)
	}
	batches, n, err := SplitBatches(buf)
	if err != nil || int64(n) != sg.size || len(batches) != len(sg.batches) {
		return nil, fmt.Errorf("%w: %s changed under us (%d of %d bytes parse): %v",
			ErrStorageFailed, sg.path, n, sg.size, err)
	}
	return batches, nil
}

// Append implements Storage. Each batch must start at the log end offset, carry an
// epoch no older than the last batch's, and have a valid CRC (not rechecked here:
// the batch codec and the fetch path already verify it).
func (s *FileStorage) Append(batches []Batch) error {
	if s.failed != nil {
		return s.failedErr()
	}
	for _, b := range batches {
		if err := s.checkAppend(b); err != nil {
			return err
		}
		if s.shouldRoll(b) {
			if err := s.addSegment(b.BaseOffset); err != nil {
				return err
			}
		}
		if err := s.write(b); err != nil {
			return err
		}
	}
	return nil
}

func (s *FileStorage) checkAppend(b Batch) error {
	if len(b.Raw) < BatchHeaderSize || int64(binary.BigEndian.Uint64(b.Raw)) != b.BaseOffset {
		return fmt.Errorf("%w: batch header does not match offset %d", ErrCorruptBatch, b.BaseOffset)
	}
	if end := s.EndOffset(); b.BaseOffset != end {
		return fmt.Errorf("%w: base offset %d, log end offset %d", ErrNonContiguous, b.BaseOffset, end)
	}
	if last := s.epochs.LatestEpoch(); b.Epoch < last {
		return fmt.Errorf("%w: epoch %d after %d", ErrEpochRegression, b.Epoch, last)
	}
	return nil
}

// shouldRoll applies Kafka's roll rules (LogSegment.shouldRoll) minus the index
// size check: a non-empty active segment rolls on size, on time, or when relative
// offsets would overflow.
func (s *FileStorage) shouldRoll(b Batch) bool {
	sg := s.active()
	if len(sg.batches) == 0 {
		return false
	}
	if sg.size+int64(b.Size()) > s.opts.SegmentBytes || !sg.fitsOffsets(b) {
		return true
	}
	first, _ := sg.firstTimestampMs()
	return b.MaxTimestampMs-first > s.opts.SegmentMs
}

func (s *FileStorage) write(b Batch) error {
	sg := s.active()
	if _, err := sg.f.WriteAt(b.Raw, sg.size); err != nil {
		return s.fail(ioErr(err))
	}
	sg.batches = append(sg.batches, batchPos{
		base: b.BaseOffset, last: b.LastOffset, epoch: b.Epoch, pos: sg.size, maxTsMs: b.MaxTimestampMs,
	})
	sg.size += int64(b.Size())
	sg.dirty = true
	s.mut++
	if s.epochs.Assign(b.Epoch, b.BaseOffset) {
		s.markEpochs()
	}
	return nil
}

// addSegment creates an empty active segment starting at base.
func (s *FileStorage) addSegment(base int64) error {
	sg, err := openSegment(s.fs, s.dir, base)
	if err != nil {
		return s.fail(err)
	}
	if err := sg.f.Truncate(0); err != nil { // a stale file of that name holds nothing we want
		_ = sg.f.Close()
		return s.fail(ioErr(err))
	}
	s.segments = append(s.segments, sg)
	s.markDir()
	return nil
}

// TruncateTo implements Storage. Every batch holding an offset at or above offset
// is removed (Kafka's truncateTo cuts whole batches); later segments are deleted
// and the one containing offset is cut.
func (s *FileStorage) TruncateTo(offset int64) error {
	if s.failed != nil {
		return s.failedErr()
	}
	if offset >= s.EndOffset() {
		return nil
	}
	if offset < s.startOffset {
		return fmt.Errorf("%w: truncate to %d, log start %d", ErrBelowLogStart, offset, s.startOffset)
	}
	if err := s.lowerSyncedEnd(s.endAfterCut(offset)); err != nil {
		return err
	}
	for len(s.segments) > 1 && s.active().base > offset {
		if err := s.active().remove(s.fs); err != nil {
			return s.fail(err)
		}
		s.segments = s.segments[:len(s.segments)-1]
		s.markDir()
	}
	sg := s.active()
	pos, keep := sg.cutFrom(offset)
	if err := sg.f.Truncate(pos); err != nil {
		return s.fail(ioErr(err))
	}
	sg.batches, sg.size, sg.dirty = sg.batches[:keep], pos, true
	s.mut++
	if s.epochs.TruncateFromEnd(s.EndOffset()) {
		s.markEpochs()
	}
	return nil
}

// endAfterCut is the durable-end record of the log cut at offset (TruncateTo).
func (s *FileStorage) endAfterCut(offset int64) syncedEnd {
	i := len(s.segments) - 1
	for i > 0 && s.segments[i].base > offset {
		i--
	}
	sg := s.segments[i]
	pos, keep := sg.cutFrom(offset)
	end := sg.base
	if keep > 0 {
		end = sg.batches[keep-1].last + 1
	}
	return syncedEnd{End: end, Base: sg.base, Pos: pos}
}

// Sync implements Storage: fsync every segment written or cut since the last Sync,
// rewrite leader-epoch-checkpoint if an epoch started or was truncated away, and
// fsync the directory if files were created, renamed or removed. The end it made
// durable is recorded later (PrepareRecord); before it returns, it brings the record
// to the end the Sync before made durable (waiting for the write in flight, or
// writing it now if nobody started one), so that the record never trails by more
// than one Sync. That wait comes after its own fsyncs, not before: the record write
// the driver started after the previous acknowledgement then overlaps this Sync's
// data fsync, as it overlaps a leader's flush (PrepareSync), instead of adding its
// fdatasync to a follower's next acknowledgement (a batch fetched right after
// another waited for two flushes of the disk in sequence). The record still only
// names an end that a completed Sync made durable.
func (s *FileStorage) Sync() error {
	if s.failed != nil {
		return s.failedErr()
	}
	end := s.currentEnd()
	if mutSyncedAhead {
		// The mutation: the end recorded before the data's fsync.
		s.setDurable(end)
		if err := s.recordDurable(); err != nil {
			return err
		}
	}
	for _, sg := range s.segments {
		if !sg.dirty {
			continue
		}
		if err := sg.f.Sync(); err != nil {
			return s.fail(ioErr(err))
		}
		sg.dirty = false
	}
	if s.epochsDirty {
		data := EncodeEpochCheckpoint(s.epochs.Entries())
		if err := writeFileAtomicFS(s.fs, s.dir, LeaderEpochCheckpointFile, data); err != nil {
			return s.fail(err)
		}
		s.epochsDirty, s.dirDirty = false, true
	}
	if s.dirDirty {
		if err := syncDirFS(s.fs, s.dir); err != nil {
			return s.fail(err)
		}
		s.dirDirty = false
	}
	if err := s.recordDurable(); err != nil { // the end of the Sync before
		return err
	}
	s.setDurable(end)
	return nil
}

// PrepareSync implements AsyncSyncer: work fsyncs what Sync would (the dirty segments,
// a rewritten leader-epoch-checkpoint, the directory), touching nothing but the files
// captured now, so it may run on another goroutine while the owner goes on appending
// (and a record write, PrepareRecord's work, runs on yet another); finish, on the
// owner's goroutine, records the outcome: an error fails the storage as a failed Sync
// does; success first brings the record to the end the Sync before made durable
// (as Sync does, so that it trails by one Sync at most), then notes the end captured
// now as durable (to be recorded by PrepareRecord), and clears the dirty marks unless
// something changed since PrepareSync. Between the two the owner may only Append.
func (s *FileStorage) PrepareSync() (work func() error, finish func(error) error) {
	if s.failed != nil {
		err := s.failedErr()
		return func() error { return nil }, func(error) error { return err }
	}
	var files []File
	var segs []*segment
	for _, sg := range s.segments {
		if sg.dirty {
			files, segs = append(files, sg.f), append(segs, sg)
		}
	}
	var epochs []byte
	if s.epochsDirty {
		epochs = EncodeEpochCheckpoint(s.epochs.Entries())
	}
	fsys, dir, syncD, mut := s.fs, s.dir, s.dirDirty || epochs != nil, s.mut
	end := s.currentEnd()
	if mutSyncedAhead {
		// The mutation: the end recorded before the data's fsync.
		s.setDurable(end)
		if err := s.recordDurable(); err != nil {
			return func() error { return nil }, func(error) error { return err }
		}
	}
	work = func() error {
		for _, f := range files {
			if err := f.Sync(); err != nil {
				return ioErr(err)
			}
		}
		if epochs != nil {
			if err := writeFileAtomicFS(fsys, dir, LeaderEpochCheckpointFile, epochs); err != nil {
				return err
			}
		}
		if syncD {
			if err := syncDirFS(fsys, dir); err != nil {
				return err
			}
		}
		return nil
	}
	finish = func(err error) error {
		if err != nil {
			return s.fail(err)
		}
		if err := s.recordDurable(); err != nil {
			return err
		}
		s.setDurable(end)
		if s.mut == mut {
			for _, sg := range segs {
				sg.dirty = false
			}
			s.epochsDirty, s.dirDirty = false, false
		}
		return nil
	}
	return work, finish
}

func (s *FileStorage) markDir()    { s.dirDirty = true; s.mut++ }
func (s *FileStorage) markEpochs() { s.epochsDirty = true; s.mut++ }

// SaveQuorumState implements Storage: quorum-state.tmp is written and fsynced,
// renamed over quorum-state, and the directory fsynced, so a crash leaves either
// the old or the new state, never a mix.
func (s *FileStorage) SaveQuorumState(st QuorumState) error {
	if s.failed != nil {
		return s.failedErr()
	}
	data, err := EncodeQuorumState(st)
	if err != nil {
		return err
	}
	if err := writeFileAtomicFS(s.fs, s.dir, QuorumStateFile, data); err != nil {
		return s.fail(err)
	}
	if err := syncDirFS(s.fs, s.dir); err != nil {
		return s.fail(err)
	}
	s.state = st
	s.state.CurrentVoters = slices.Clone(st.CurrentVoters)
	s.stateCorrupt, s.stateMissing = false, false
	return nil
}

// Close implements Storage. It does not sync the log; it waits for the record write
// in flight and records the end the last completed Sync made durable
// (synchronously), so that a clean stop leaves no acknowledged bytes unprotected.
// Later calls fail with ErrClosed.
func (s *FileStorage) Close() error {
	var first error
	if s.failed == nil {
		first = s.recordDurable()
	} else {
		_ = s.waitRecord() // a write another goroutine runs must be done with the file
	}
	if err := s.closeFiles(); first == nil {
		first = err
	}
	return first
}

// closeFiles closes every file, writing nothing: what a crash right after the last
// write would leave.
func (s *FileStorage) closeFiles() error {
	first := s.synced.close()
	if s.lock != nil {
		_ = s.lock.Close() // the lock goes with the descriptor
		s.lock = nil
	}
	for _, sg := range s.segments {
		if sg.f == nil {
			continue
		}
		if err := sg.f.Close(); err != nil && first == nil {
			first = ioErr(err)
		}
		sg.f = nil
	}
	s.failed = ErrClosed
	return first
}

// Dir is the partition directory.
func (s *FileStorage) Dir() string { return s.dir }

// StartOffset is the log start offset: the first offset the log can serve. After
// a restart it is the first segment's base offset, which can be below the offset
// last given to SetLogStart because segments are deleted whole.
func (s *FileStorage) StartOffset() int64 { return s.startOffset }

// EndOffset is the log end offset: the offset the next appended batch must have.
func (s *FileStorage) EndOffset() int64 {
	if len(s.segments) == 0 {
		return s.startOffset
	}
	return s.active().endOffset()
}

// EpochEntries returns the leader epoch cache, oldest epoch first.
func (s *FileStorage) EpochEntries() []EpochEntry { return s.epochs.Entries() }

// EndOffsetForEpoch answers a divergence check from the epoch cache; see
// EpochCache.EndOffsetFor.
func (s *FileStorage) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return s.epochs.EndOffsetFor(epoch, s.EndOffset())
}

func (s *FileStorage) active() *segment { return s.segments[len(s.segments)-1] }

// fail records the first I/O failure; every later write returns it.
func (s *FileStorage) fail(err error) error {
	if s.failed == nil {
		s.failed = err
	}
	return err
}

func (s *FileStorage) failedErr() error {
	if errors.Is(s.failed, ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("%w: refusing writes after an earlier failure: %w", ErrStorageFailed, s.failed)
}

// syncDirFS fsyncs a directory.
func syncDirFS(fsys FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return ioErr(err)
	}
	return nil
}
