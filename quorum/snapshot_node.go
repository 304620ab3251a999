package quorum

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// SnapshotStorage is the part of a Storage that keeps snapshot files and moves the
// log start; raftlog.FileStorage implements it. A Node whose Storage lacks it
// neither writes nor serves snapshots.
type SnapshotStorage interface {
	Dir() string
	Snapshots() []raftlog.SnapshotID
	CreateSnapshot(id raftlog.SnapshotID) (*raftlog.SnapshotWriter, error)
	ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error)
	DeleteSnapshotsBefore(endOffset int64) error
	SetLogStart(offset int64) error
	ResetLog(offset int64) error
}

// snapshotFile is a snapshot being written: a *raftlog.SnapshotWriter, or the
// simulator's.
type snapshotFile interface {
	ID() raftlog.SnapshotID
	Size() int64
	Write(p []byte) (int, error)
	WriteBatch(b raftlog.Batch) error
	Sync() error
	StartWriteback() error
	Commit() error
	Abort() error
}

// snapshotStore is the Node's view of a storage's snapshots: fileSnapshots over a
// SnapshotStorage (raftlog.FileStorage), or the simulator's disk, which implements
// it directly.
type snapshotStore interface {
	// Where names the snapshots' place in messages (the directory).
	Where() string
	CreateSnapshot(id raftlog.SnapshotID) (snapshotFile, error)
	// ReadSnapshot serves the core's FetchSnapshot (SnapshotSource).
	ReadSnapshot(id raftlog.SnapshotID, position int64, maxBytes int) ([]byte, int64, error)
	DeleteSnapshotsBefore(endOffset int64) error
	SetLogStart(offset int64) error
	ResetLog(offset int64) error
}

// snapshotStoreOf is the snapshot side of a Storage, nil if it keeps none.
func snapshotStoreOf(st raftlog.Storage) snapshotStore {
	switch s := st.(type) {
	case snapshotStore:
		return s
	case SnapshotStorage:
		return fileSnapshots{s}
	}
	return nil
}

// fileSnapshots adapts a SnapshotStorage: snapshot files in its directory.
type fileSnapshots struct{ SnapshotStorage }

func (f fileSnapshots) Where() string { return f.Dir() }

func (f fileSnapshots) CreateSnapshot(id raftlog.SnapshotID) (snapshotFile, error) {
	w, err := f.SnapshotStorage.CreateSnapshot(id)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Snapshot is a snapshot's content as a listener loads it: the batches between the
// SnapshotHeader and SnapshotFooter control batches.
type Snapshot struct {
	ID                       raftlog.SnapshotID
	LastContainedTimestampMs int64
	// KRaft is the kraft.version and voter set of the header batch (KIP-853); the
	// zero value for a kraft.version 0 snapshot.
	KRaft   SnapshotKRaft
	Batches []raftlog.Batch
}

// Values yields the value of every record in the snapshot's data batches, in
// offset order, or the error of a batch that cannot be read.
func (s Snapshot) Values() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for _, b := range s.Batches {
			recs, err := b.Records()
			if err != nil {
				yield(nil, fmt.Errorf("snapshot batch at %d: %w", b.BaseOffset, err))
				return
			}
			for _, r := range recs {
				if !yield(r.Value, nil) {
					return
				}
			}
		}
	}
}

// SnapshotListener is a Listener that can replace its whole state with a snapshot.
// HandleLoadSnapshot is called on the driver goroutine, before any HandleCommit of
// offsets at or above s.ID.EndOffset, and never while the node leads (KAFKA-12958).
// The listener must apply it as one step: nothing may observe a half-loaded state.
type SnapshotListener interface {
	HandleLoadSnapshot(s Snapshot)
}

// Snapshot errors of the driver.
var (
	// ErrNoSnapshotStorage: the Node's Storage does not implement SnapshotStorage.
	ErrNoSnapshotStorage = errors.New("quorum: storage keeps no snapshots")
	// ErrSnapshotInProgress: WriteSnapshot while another snapshot is being written;
	// try again later.
	ErrSnapshotInProgress = errors.New("quorum: a snapshot is already being written")
	// ErrSnapshotNotNewer: WriteSnapshot for an id at or below the latest snapshot;
	// there is nothing new to write.
	ErrSnapshotNotNewer = errors.New("quorum: snapshot not newer than the latest")
	// ErrInvalidSnapshot: a snapshot file (local or downloaded) is not a complete
	// header, batches, footer stream. Fatal for a download.
	ErrInvalidSnapshot = errors.New("quorum: invalid snapshot file")
	// ErrListenerCannotLoad: a snapshot must be loaded into a listener that does not
	// implement SnapshotListener. Fatal: the listener would silently diverge.
	ErrListenerCannotLoad = errors.New("quorum: listener cannot load snapshots")
)

// snapshotBatchBytes caps one data batch in a written snapshot; snapshotSyncBytes is
// how much the writer lets accumulate before flushing it.
const (
	snapshotBatchBytes = 1 << 20
	snapshotSyncBytes  = 1 << 20
	// snapshotBusyWindow: a node that appended or committed this recently is busy.
	snapshotBusyWindow = 100 * time.Millisecond
	// snapshotBusyBytesPerSec caps the write rate of a snapshot while the node is
	// busy: a 1M-partition snapshot (75 MB) then takes about 1.2 s.
	snapshotBusyBytesPerSec = 64 << 20
)

// Default retention of the log below the latest snapshot (metadata.max.retention.*).
const (
	DefaultRetentionBytes = 100 << 20
	DefaultRetentionMs    = 7 * 24 * 60 * 60 * 1000
)

// EncodeSnapshot streams a snapshot to write as RecordBatch v2 batches: a
// SnapshotHeader control batch, data batches of at most maxBatchBytes, and a
// SnapshotFooter control batch. Offsets start at 0 inside the file and every batch
// carries the snapshot's epoch, as Kafka's RecordsSnapshotWriter does. It writes a
// kraft.version 0 snapshot (no KRaftVersion or Voters records); see
// EncodeSnapshotKRaft.
func EncodeSnapshot(id raftlog.SnapshotID, lastContainedTimestampMs int64, records iter.Seq2[raftlog.Record, error],
	maxBatchBytes int, write func(raftlog.Batch) error) error {
	return EncodeSnapshotKRaft(id, lastContainedTimestampMs, SnapshotKRaft{}, records, maxBatchBytes, write)
}

// SnapshotKRaft is what a snapshot says of the quorum itself: at kraft.version >= 1
// its header batch carries a KRaftVersionRecord and a VotersRecord after the
// SnapshotHeader (KIP-853), as Kafka's RecordsSnapshotWriter writes them.
type SnapshotKRaft struct {
	KRaftVersion int16
	// Voters is the voter set in force at the snapshot's end offset; used only at
	// KRaftVersion >= 1 (empty: none known, no VotersRecord).
	Voters VoterSet
}

// EncodeSnapshotKRaft is EncodeSnapshot with the quorum's own control records in
// the header batch when kraft.KRaftVersion >= 1.
func EncodeSnapshotKRaft(id raftlog.SnapshotID, lastContainedTimestampMs int64, kraft SnapshotKRaft,
	records iter.Seq2[raftlog.Record, error], maxBatchBytes int, write func(raftlog.Batch) error) error {
	header := make([]byte, 0, 11)
	header = binary.BigEndian.AppendUint16(header, 0)
	header = binary.BigEndian.AppendUint64(header, uint64(lastContainedTimestampMs))
	header = append(header, 0) // no tagged fields
	ts := lastContainedTimestampMs
	off := int64(0)
	emit := func(control bool, recs []raftlog.Record) error {
		b := raftlog.EncodeBatch(off, id.Epoch, ts, control, recs)
		off = b.NextOffset()
		return write(b)
	}
	headerBatch := append([]raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlSnapshotHeader), Value: header}},
		KRaftControlRecords(kraft.KRaftVersion, kraft.Voters)...)
	if err := emit(true, headerBatch); err != nil {
		return err
	}
	var acc []raftlog.Record
	size := raftlog.BatchHeaderSize
	for rec, err := range records {
		if err != nil {
			return err
		}
		rs := len(rec.Key) + len(rec.Value) + 16
		if len(acc) > 0 && size+rs > maxBatchBytes {
			if err := emit(false, acc); err != nil {
				return err
			}
			acc, size = acc[:0], raftlog.BatchHeaderSize
		}
		acc = append(acc, rec)
		size += rs
	}
	if len(acc) > 0 {
		if err := emit(false, acc); err != nil {
			return err
		}
	}
	footer := []byte{0, 0, 0}
	return emit(true, []raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlSnapshotFooter), Value: footer}})
}

// SnapshotRecords adapts a slice to the record stream WriteSnapshot and
// EncodeSnapshot take.
func SnapshotRecords(recs []raftlog.Record) iter.Seq2[raftlog.Record, error] {
	return func(yield func(raftlog.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// ParseSnapshot validates a whole snapshot file (complete CRC-checked batches, a
// SnapshotHeader first and a SnapshotFooter last) and returns its data batches.
func ParseSnapshot(id raftlog.SnapshotID, data []byte) (Snapshot, error) {
	batches, n, err := raftlog.SplitBatches(data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w %s: %w", ErrInvalidSnapshot, raftlog.SnapshotFileName(id), err)
	}
	if n != len(data) || len(batches) < 2 {
		return Snapshot{}, fmt.Errorf("%w %s: %d batches, %d of %d bytes parsed", ErrInvalidSnapshot,
			raftlog.SnapshotFileName(id), len(batches), n, len(data))
	}
	hdr, err := controlRecord(batches[0], raftlog.ControlSnapshotHeader)
	if err != nil || len(hdr.Value) < 10 {
		return Snapshot{}, fmt.Errorf("%w %s: no snapshot header (%v)", ErrInvalidSnapshot, raftlog.SnapshotFileName(id), err)
	}
	if _, err := controlRecord(batches[len(batches)-1], raftlog.ControlSnapshotFooter); err != nil {
		return Snapshot{}, fmt.Errorf("%w %s: no snapshot footer (%v)", ErrInvalidSnapshot, raftlog.SnapshotFileName(id), err)
	}
	kraft, err := headerKRaft(batches[0])
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w %s: %w", ErrInvalidSnapshot, raftlog.SnapshotFileName(id), err)
	}
	return Snapshot{
		ID:                       id,
		LastContainedTimestampMs: int64(binary.BigEndian.Uint64(hdr.Value[2:10])),
		KRaft:                    kraft,
		Batches:                  batches[1 : len(batches)-1],
	}, nil
}

// headerKRaft reads the KRaftVersion and Voters records that follow the
// SnapshotHeader in a snapshot's header batch. A VotersRecord is only valid after
// a KRaftVersionRecord of level >= 1 (Kafka's RecordsSnapshotWriter writes none at
// kraft.version 0). Kafka's writer may leave the voters out at kraft.version 1 when
// its history has none; Voters is then empty.
func headerKRaft(header raftlog.Batch) (SnapshotKRaft, error) {
	recs, err := header.Records()
	if err != nil {
		return SnapshotKRaft{}, err
	}
	var kraft SnapshotKRaft
	for _, rec := range recs[1:] {
		t, err := raftlog.ParseControlKey(rec.Key)
		if err != nil {
			return SnapshotKRaft{}, err
		}
		switch t {
		case raftlog.ControlKRaftVersion:
			if kraft.KRaftVersion, err = ParseKRaftVersionRecord(rec.Value); err != nil {
				return SnapshotKRaft{}, err
			}
		case raftlog.ControlKRaftVoters:
			if kraft.KRaftVersion == KRaftVersionStatic {
				return SnapshotKRaft{}, fmt.Errorf("%w: VotersRecord in a kraft.version 0 snapshot", ErrInvalidControlRecord)
			}
			if kraft.Voters, err = ParseVotersRecord(rec.Value); err != nil {
				return SnapshotKRaft{}, err
			}
		}
	}
	return kraft, nil
}

func controlRecord(b raftlog.Batch, want raftlog.ControlType) (raftlog.Record, error) {
	if !b.Control {
		return raftlog.Record{}, fmt.Errorf("batch at %d is not a control batch", b.BaseOffset)
	}
	recs, err := b.Records()
	if err != nil {
		return raftlog.Record{}, err
	}
	if len(recs) == 0 {
		return raftlog.Record{}, fmt.Errorf("empty control batch at %d", b.BaseOffset)
	}
	t, err := raftlog.ParseControlKey(recs[0].Key)
	if err != nil {
		return raftlog.Record{}, err
	}
	if t != want {
		return raftlog.Record{}, fmt.Errorf("control record %s, want %s", t, want)
	}
	return recs[0], nil
}

// readSnapshot loads and validates a complete local snapshot. A snapshot that
// does not parse was committed whole (written, fsynced, renamed), so the damage is
// not a crash's: it stops the node (raftlog.ErrCorrupt) with the ways out.
func readSnapshot(store snapshotStore, id raftlog.SnapshotID) (Snapshot, error) {
	data, size, err := store.ReadSnapshot(id, 0, math.MaxInt)
	if err == nil && int64(len(data)) != size {
		err = fmt.Errorf("%w: read %d of %d bytes of %s", raftlog.ErrStorageFailed, len(data), size, raftlog.SnapshotFileName(id))
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s in %s: %w", raftlog.SnapshotFileName(id), store.Where(), err)
	}
	s, err := ParseSnapshot(id, data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %s: %w. Ways out: restore the file from a copy; or run `kraftd storage "+
			"recover` [same flags]: it drops the snapshot and the log, and the node fetches them again from the "+
			"leader without voting until it has caught up", raftlog.ErrCorrupt,
			filepath.Join(store.Where(), raftlog.SnapshotFileName(id)), err)
	}
	return s, nil
}

// WriteSnapshot writes a snapshot of committed state ending at id (EndOffset is
// exclusive; Epoch is the epoch of the last contained record). records must be an
// immutable view (an image): they are read on a goroutine owned by the Node, so the
// caller's loop is never blocked by the encoding or the fsync. An error from records
// abandons the snapshot. The returned channel receives the outcome once the
// snapshot is committed (then it is served and may move the log start) or
// abandoned. The id is refused (ErrInvalidSnapshotID) above what the listeners were
// given or off a batch boundary, and while another snapshot is being written.
func (n *Node) WriteSnapshot(ctx context.Context, id raftlog.SnapshotID, lastContainedTimestampMs int64,
	records iter.Seq2[raftlog.Record, error]) (<-chan error, error) {
	if n.snaps == nil {
		return nil, ErrNoSnapshotStorage
	}
	var done <-chan error
	var werr error
	if err := n.do(ctx, func() { done, werr = n.beginSnapshot(id, lastContainedTimestampMs, records) }); err != nil {
		return nil, err
	}
	return done, werr
}

// beginSnapshot checks id and hands the writing to the host's snapshot writer. Driver
// goroutine only.
func (n *Node) beginSnapshot(id raftlog.SnapshotID, ts int64, records iter.Seq2[raftlog.Record, error]) (<-chan error, error) {
	if n.snaps == nil {
		return nil, ErrNoSnapshotStorage
	}
	if n.writing {
		return nil, ErrSnapshotInProgress
	}
	if latest, ok := n.raft.LatestSnapshot(); ok && latest.EndOffset >= id.EndOffset {
		return nil, fmt.Errorf("%w: (%d,%d), latest (%d,%d)", ErrSnapshotNotNewer, id.EndOffset, id.Epoch, latest.EndOffset, latest.Epoch)
	}
	if err := n.raft.ValidateSnapshotID(id); err != nil {
		return nil, err
	}
	w, err := n.snaps.CreateSnapshot(id)
	if err != nil {
		return nil, err
	}
	kraft := n.raft.snapshotKRaft(id)
	n.writing = true
	done := make(chan error, 1)
	start := n.host.Now()
	work := func(pace func(int) error) error {
		synced := int64(0)
		err := EncodeSnapshotKRaft(w.ID(), ts, kraft, records, snapshotBatchBytes, func(b raftlog.Batch) error {
			if err := w.WriteBatch(b); err != nil {
				return err
			}
			if err := pace(b.Size()); err != nil {
				return err
			}
			if w.Size()-synced < snapshotSyncBytes {
				return nil
			}
			// Flush as we go: one fsync of a whole large file at the end would hold the
			// file system journal long enough to stall the log's own fsyncs, and so
			// every commit behind them.
			synced = w.Size()
			return w.StartWriteback()
		})
		if err == nil {
			err = w.Sync()
		}
		return err
	}
	finish := func(err error) {
		n.writing = false
		if err == nil {
			err = n.commitSnapshot(w)
		} else {
			_ = w.Abort()
		}
		if err == nil {
			n.log.Info("wrote snapshot", zap.Int64("end_offset", w.ID().EndOffset), zap.Int32("epoch", w.ID().Epoch),
				zap.Int64("bytes", w.Size()), zap.Duration("took", n.host.Now().Sub(start)))
		}
		done <- err
	}
	abandoned := func() {
		_ = w.Abort()
		done <- ErrNodeStopped
	}
	n.host.StartSnapshotWrite(work, finish, abandoned)
	return done, nil
}

// commitSnapshot publishes a written snapshot and cleans the log below it. Driver
// goroutine only.
func (n *Node) commitSnapshot(w snapshotFile) error {
	if err := w.Commit(); err != nil {
		n.fail(err)
		return err
	}
	n.raft.SnapshotCreated(w.ID())
	if err := n.maybeClean(); err != nil {
		n.fail(err)
		return err
	}
	return nil
}

// maybeClean moves the log start to the latest snapshot when the log kept below it
// passes metadata.max.retention.bytes or its oldest batch is older than
// metadata.max.retention.ms, then deletes the segments and older snapshots below.
func (n *Node) maybeClean() error {
	bytes, oldestMs := n.raft.RetainedBelowSnapshot()
	if bytes == 0 {
		return nil
	}
	rb, rms := n.cfg.RetentionBytes, n.cfg.RetentionMs
	if !(rb >= 0 && bytes > rb || rms >= 0 && n.nowMs()-oldestMs > rms) {
		return nil
	}
	start, ok := n.raft.CompactLog()
	if !ok {
		return nil
	}
	// The flusher may be fsyncing a segment about to be deleted, and Sync below must
	// not run beside it.
	if err := n.joinFlush(); err != nil {
		return err
	}
	if err := n.snaps.SetLogStart(start); err != nil {
		return err
	}
	if err := n.snaps.DeleteSnapshotsBefore(start); err != nil {
		return err
	}
	n.log.Info("log start moved to snapshot", zap.Int64("log_start_offset", start), zap.Int64("freed_bytes", bytes))
	return n.cfg.Storage.Sync()
}

// cleanIntervalMs is how often the driver checks the log below the latest snapshot
// against the retention limits when no snapshot was written meanwhile (a snapshot
// commit checks at once): metadata.max.retention.ms is an age, which passes
// without any write.
const cleanIntervalMs = 60_000

// periodicClean runs maybeClean when its interval has passed. Driver goroutine only.
func (n *Node) periodicClean() {
	now := n.nowMs()
	if now < n.nextCleanMs || n.snaps == nil {
		return
	}
	n.nextCleanMs = now + cleanIntervalMs
	if err := n.maybeClean(); err != nil {
		n.fail(err)
	}
}

// downloadReserveBytes caps the buffer reserved for a snapshot download before its
// bytes arrive. The announced size is the leader's word (1<<62 made the reservation
// panic the process); a larger snapshot grows the buffer as its chunks come in.
const downloadReserveBytes = 64 << 20

// download is a snapshot being received through FetchSnapshot. Its bytes are written
// to the partial file and kept in buf as they arrive (buf is parsed at completion and
// becomes the listeners' Snapshot), so buf is at most Config.MaxSnapshotBytes
// (DefaultMaxSnapshotBytes, 1 GiB): the core refuses a larger snapshot at its first
// chunk and hands on only chunks that continue the download within its size.
type download struct {
	id  raftlog.SnapshotID
	w   snapshotFile // nil when the file already exists locally
	buf []byte
}

// persistDownload writes downloaded chunks and, when the core completed the
// download, validates and commits the file and restarts the log at its end. The
// parsed snapshot waits in n.toLoad for deliver.
func (n *Node) persistDownload(rd *Ready) error {
	for _, c := range rd.SnapshotChunks {
		if err := n.writeChunk(c); err != nil {
			return err
		}
	}
	id := rd.LoadSnapshot
	if id == nil {
		return nil
	}
	d := n.dl
	n.dl = nil
	if d == nil || d.id != *id {
		return fmt.Errorf("%w: load of (%d,%d) without its download", ErrInvalidSnapshot, id.EndOffset, id.Epoch)
	}
	snap, err := ParseSnapshot(*id, d.buf)
	if err != nil {
		// The bytes are the leader's: not a reason to stop. The core refuses the
		// download at Advance (logged at ERROR, counted) and fetches again.
		if d.w != nil {
			_ = d.w.Abort()
		}
		n.log.Warn("downloaded snapshot is invalid; discarded", zap.Error(err))
		rd.snapshotRejected = true
		return nil
	}
	if d.w != nil {
		if err := d.w.Commit(); err != nil {
			return err
		}
	}
	if err := n.snaps.ResetLog(id.EndOffset); err != nil {
		return err
	}
	rd.TruncateTo = -1 // the reset supersedes any truncation in this Ready
	if err := n.cfg.Storage.Sync(); err != nil {
		return err
	}
	if err := n.snaps.DeleteSnapshotsBefore(id.EndOffset); err != nil {
		return err
	}
	rd.snapshotKRaft = snap.KRaft
	n.toLoad = &snap
	return nil
}

func (n *Node) writeChunk(c SnapshotChunk) error {
	if n.snaps == nil {
		return ErrNoSnapshotStorage
	}
	if c.Position == 0 || n.dl == nil || n.dl.id != c.ID {
		if n.dl != nil && n.dl.w != nil {
			_ = n.dl.w.Abort()
		}
		w, err := n.snaps.CreateSnapshot(c.ID)
		if err != nil && !errors.Is(err, raftlog.ErrSnapshotExists) {
			return err
		}
		// Size comes from the leader's answer: reserve at most downloadReserveBytes
		// up front and let the buffer grow with the bytes that actually arrive.
		n.dl = &download{id: c.ID, w: w, buf: make([]byte, 0, min(max(c.Size, 0), downloadReserveBytes))}
	}
	d := n.dl
	if int64(len(d.buf)) != c.Position {
		return fmt.Errorf("%w: chunk at %d, partial file has %d bytes", ErrInvalidSnapshot, c.Position, len(d.buf))
	}
	d.buf = append(d.buf, c.Data...)
	if d.w != nil {
		if _, err := d.w.Write(c.Data); err != nil {
			return err
		}
	}
	return nil
}

// loadIntoListeners replaces every listener's state with s.
func (n *Node) loadIntoListeners(s Snapshot) error {
	for _, l := range n.listeners {
		sl, ok := l.(SnapshotListener)
		if !ok {
			return fmt.Errorf("%w: %T", ErrListenerCannotLoad, l)
		}
		sl.HandleLoadSnapshot(s)
	}
	n.applied = max(n.applied, s.ID.EndOffset)
	return nil
}

// LatestSnapshot is the newest complete local snapshot.
func (n *Node) LatestSnapshot(ctx context.Context) (raftlog.SnapshotID, bool, error) {
	var id raftlog.SnapshotID
	var ok bool
	err := n.do(ctx, func() { id, ok = n.raft.LatestSnapshot() })
	return id, ok, err
}
