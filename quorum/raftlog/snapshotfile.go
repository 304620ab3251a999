package raftlog

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Snapshot file names (KIP-630, Kafka's Snapshots.java): a complete snapshot is
// "%020d-%010d.checkpoint" (end offset, epoch); one being written is
// "<that stem>-<random>.checkpoint.part"; one queued for deletion is
// "<that stem>.checkpoint.deleted".
const (
	snapshotSuffix        = ".checkpoint"
	snapshotPartSuffix    = ".checkpoint.part"
	snapshotDeletedSuffix = ".checkpoint.deleted"
)

// Snapshot errors.
var (
	ErrSnapshotNotFound = errors.New("raftlog: snapshot not found")
	ErrSnapshotExists   = errors.New("raftlog: snapshot already exists")
	// ErrLogStartBeyondSnapshot: the log start may only move up to a snapshot's end,
	// or the offsets in between would be lost.
	ErrLogStartBeyondSnapshot = errors.New("raftlog: log start beyond the latest snapshot")
	ErrSnapshotWriterDone     = errors.New("raftlog: snapshot writer already committed or aborted")
)

// SnapshotFileName is the file name of the complete snapshot id.
func SnapshotFileName(id SnapshotID) string {
	return snapshotStem(id) + snapshotSuffix
}

func snapshotStem(id SnapshotID) string {
	return fmt.Sprintf("%020d-%010d", id.EndOffset, id.Epoch)
}

// parseSnapshotName parses a complete snapshot's file name.
func parseSnapshotName(name string) (SnapshotID, bool) {
	stem, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || len(stem) != 31 || stem[20] != '-' {
		return SnapshotID{}, false
	}
	end, err1 := strconv.ParseInt(stem[:20], 10, 64)
	epoch, err2 := strconv.ParseInt(stem[21:], 10, 32)
	if err1 != nil || err2 != nil || end < 0 || epoch < 0 {
		return SnapshotID{}, false
	}
	return SnapshotID{EndOffset: end, Epoch: int32(epoch)}, true
}

func compareSnapshotIDs(a, b SnapshotID) int {
	if c := cmp.Compare(a.EndOffset, b.EndOffset); c != 0 {
		return c
	}
	return cmp.Compare(a.Epoch, b.Epoch)
}

// Snapshots lists the complete snapshots, oldest first.
func (s *FileStorage) Snapshots() []SnapshotID { return slices.Clone(s.snapshots) }

func (s *FileStorage) latestSnapshot() (SnapshotID, bool) {
	if len(s.snapshots) == 0 {
		return SnapshotID{}, false
	}
	return s.snapshots[len(s.snapshots)-1], true
}

// SnapshotWriter writes one snapshot to a .part file; Commit publishes it under
// its final name, Abort discards it. A leftover .part file (the node crashed while
// writing) is deleted at the next open, so readers never see a partial snapshot.
//
// INVARIANTS: size is the number of bytes written to f; after Commit or Abort, f
// is nil.
type SnapshotWriter struct {
	s    *FileStorage
	id   SnapshotID
	f    File
	size int64
	// flushed is how much StartWriteback has handed to the kernel so far.
	flushed int64
	// err is the first write or sync failure; Commit reports it to the storage.
	// Write and Sync never touch the storage themselves, so a writer may run on
	// another goroutine than the storage's owner.
	err error
}

// CreateSnapshot starts writing snapshot id.
func (s *FileStorage) CreateSnapshot(id SnapshotID) (*SnapshotWriter, error) {
	if s.failed != nil {
		return nil, s.failedErr()
	}
	if slices.Contains(s.snapshots, id) {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotExists, SnapshotFileName(id))
	}
	f, err := s.fs.CreateTemp(s.dir, snapshotStem(id)+"-*"+snapshotPartSuffix)
	if err != nil {
		return nil, s.fail(ioErr(err))
	}
	return &SnapshotWriter{s: s, id: id, f: f}, nil
}

// ID is the snapshot being written.
func (w *SnapshotWriter) ID() SnapshotID { return w.id }

// Size is the number of bytes written so far: the Position of the next
// FetchSnapshot request when downloading.
func (w *SnapshotWriter) Size() int64 { return w.size }

// Write appends raw bytes, which need not end on a batch boundary (FetchSnapshot
// chunks do not).
func (w *SnapshotWriter) Write(p []byte) (int, error) {
	if w.f == nil {
		return 0, ErrSnapshotWriterDone
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		if w.err == nil {
			w.err = ioErr(err)
		}
		return n, w.err
	}
	return n, nil
}

// WriteBatch appends one batch.
func (w *SnapshotWriter) WriteBatch(b Batch) error {
	_, err := w.Write(b.Raw)
	return err
}

// Sync flushes what was written so far to disk. A writer on its own goroutine
// calls it before handing Commit to the storage's owner, so the slow fsync of a
// large snapshot happens off the owner's loop and Commit's own fsync is cheap.
// It touches only the writer's file, so it may run concurrently with the storage.
func (w *SnapshotWriter) Sync() error {
	if w.f == nil {
		return ErrSnapshotWriterDone
	}
	if err := w.f.Sync(); err != nil {
		if w.err == nil {
			w.err = ioErr(err)
		}
		return w.err
	}
	return nil
}

// StartWriteback begins writing what was written since the last call to disk,
// without waiting and without a file system journal commit (sync_file_range on
// Linux). A large snapshot written this way leaves little for the final fsync, so
// that fsync does not hold up the log's own fsyncs behind a long flush.
func (w *SnapshotWriter) StartWriteback() error {
	if w.f == nil {
		return ErrSnapshotWriterDone
	}
	if err := w.f.StartWriteback(w.flushed, w.size-w.flushed); err != nil {
		if w.err == nil {
			w.err = ioErr(err)
		}
		return w.err
	}
	w.flushed = w.size
	return nil
}

// Commit makes the snapshot durable and visible: fsync the .part file, rename it
// to its final name, fsync the directory.
func (w *SnapshotWriter) Commit() error {
	if w.f == nil {
		return ErrSnapshotWriterDone
	}
	s, f, part := w.s, w.f, w.f.Name()
	w.f = nil
	err := w.err
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(part, filepath.Join(s.dir, SnapshotFileName(w.id)))
	}
	if err != nil {
		_ = s.fs.Remove(part) // best effort; open removes .part leftovers anyway
		return s.fail(ioErr(err))
	}
	if err := syncDirFS(s.fs, s.dir); err != nil {
		return s.fail(err)
	}
	s.snapshots = append(s.snapshots, w.id)
	slices.SortFunc(s.snapshots, compareSnapshotIDs)
	return nil
}

// Abort discards the partial snapshot. It is a no-op after Commit or Abort.
func (w *SnapshotWriter) Abort() error {
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	_ = f.Close() // the file is being deleted
	if err := w.s.fs.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ioErr(err)
	}
	return nil
}

// OpenSnapshot opens a complete snapshot for reading (it is an io.ReaderAt for
// FetchSnapshot positions) and returns its size. The caller closes it.
func (s *FileStorage) OpenSnapshot(id SnapshotID) (File, int64, error) {
	if !slices.Contains(s.snapshots, id) {
		return nil, 0, fmt.Errorf("%w: %s", ErrSnapshotNotFound, SnapshotFileName(id))
	}
	f, err := s.fs.OpenFile(filepath.Join(s.dir, SnapshotFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, ioErr(err)
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, 0, ioErr(err)
	}
	return f, size, nil
}

// ReadSnapshot returns up to maxBytes of snapshot id from position, and the
// snapshot's size (no bytes when position is at or past the end): what FetchSnapshot
// serves. It opens the file per call and touches nothing else of the storage, so a
// snapshot writer or server may call it on another goroutine; a snapshot deleted by
// a concurrent cleaning reads as ErrSnapshotNotFound.
func (s *FileStorage) ReadSnapshot(id SnapshotID, position int64, maxBytes int) ([]byte, int64, error) {
	f, err := s.fs.OpenFile(filepath.Join(s.dir, SnapshotFileName(id)), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrSnapshotNotFound, SnapshotFileName(id))
	}
	if err != nil {
		return nil, 0, ioErr(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, 0, ioErr(err)
	}
	if position >= size || position < 0 {
		return nil, size, nil
	}
	buf := make([]byte, min(int64(maxBytes), size-position))
	if _, err := f.ReadAt(buf, position); err != nil {
		return nil, 0, ioErr(err)
	}
	return buf, size, nil
}

// DeleteSnapshotsBefore deletes the snapshots whose end offset is below endOffset,
// never the latest one. Each is first renamed to .checkpoint.deleted, as Kafka
// does, so that a crash midway leaves nothing that looks like a snapshot.
func (s *FileStorage) DeleteSnapshotsBefore(endOffset int64) error {
	if s.failed != nil {
		return s.failedErr()
	}
	for len(s.snapshots) > 1 && s.snapshots[0].EndOffset < endOffset {
		name := filepath.Join(s.dir, SnapshotFileName(s.snapshots[0]))
		deleted := filepath.Join(s.dir, snapshotStem(s.snapshots[0])+snapshotDeletedSuffix)
		if err := s.fs.Rename(name, deleted); err != nil {
			return s.fail(ioErr(err))
		}
		s.snapshots = s.snapshots[1:]
		s.markDir()
		if err := s.fs.Remove(deleted); err != nil {
			return s.fail(ioErr(err))
		}
	}
	return nil
}

// SetLogStart raises the log start offset to offset, which must not pass the
// latest snapshot's end offset nor the log end offset, and deletes the segments
// that lie wholly below it. The segment holding offset stays, so batches below
// offset may remain on disk; a restart puts the start back on the snapshot
// (restoreLogStart).
// offset should be a batch boundary, as a snapshot's end offset is: the quorum
// core expects the loaded log to begin exactly at StartOffset.
func (s *FileStorage) SetLogStart(offset int64) error {
	if s.failed != nil {
		return s.failedErr()
	}
	if offset <= s.startOffset {
		return nil
	}
	snap, ok := s.latestSnapshot()
	if !ok || offset > snap.EndOffset || offset > s.EndOffset() {
		return fmt.Errorf("%w: log start %d, latest snapshot %+v, log end %d",
			ErrLogStartBeyondSnapshot, offset, snap, s.EndOffset())
	}
	for len(s.segments) > 1 && s.segments[1].base <= offset {
		if err := s.segments[0].remove(s.fs); err != nil {
			return s.fail(err)
		}
		s.segments = s.segments[1:]
		s.markDir()
	}
	s.startOffset = offset
	if s.epochs.TruncateFromStart(offset) {
		s.markEpochs()
	}
	return nil
}

// ResetLog deletes every segment and starts an empty log at offset, as Kafka's
// truncateFullyAndStartAt: a follower does this after downloading a snapshot that
// ends at offset. Durable after Sync.
func (s *FileStorage) ResetLog(offset int64) error {
	if s.failed != nil {
		return s.failedErr()
	}
	if err := s.lowerSyncedEnd(syncedEnd{End: offset, Base: offset}); err != nil {
		return err
	}
	for _, sg := range s.segments {
		if err := sg.remove(s.fs); err != nil {
			return s.fail(err)
		}
	}
	s.segments = nil
	s.startOffset = offset
	s.epochs.Clear()
	s.markEpochs()
	return s.addSegment(offset)
}

// restoreLogStart puts the log start back on a snapshot after a restart. Only
// whole segments are deleted when the start moves (SetLogStart), so the first
// segment may begin below the start it had; the start is not persisted, and the
// segment base alone would break "a snapshot exists exactly at the log start"
// (KIP-630), which a leader relies on to send fetchers below it to that snapshot.
// The start becomes the end of the oldest snapshot at or above the first segment's
// base. A log starting at 0 is complete and stays as it is.
func (s *FileStorage) restoreLogStart() {
	if s.startOffset == 0 || len(s.segments) == 0 {
		return
	}
	for _, id := range s.snapshots {
		if id.EndOffset < s.startOffset {
			continue
		}
		if id.EndOffset > s.startOffset && id.EndOffset <= s.EndOffset() {
			s.startOffset = id.EndOffset
			if s.epochs.TruncateFromStart(id.EndOffset) {
				s.markEpochs()
			}
		}
		return
	}
}

// BootstrapSnapshotID is the id of the snapshot `kraftd storage format` writes
// for a dynamic quorum (Kafka's Snapshots.BOOTSTRAP_SNAPSHOT_ID): end offset 0,
// epoch 0. It is never served over FetchSnapshot.
var BootstrapSnapshotID = SnapshotID{EndOffset: 0, Epoch: 0}

// WriteBootstrapSnapshot writes data as the bootstrap snapshot
// 00000000000000000000-0000000000.checkpoint of the partition directory dir,
// creating dir: through a .checkpoint.part file (which an open of the storage
// deletes if the write did not finish), fsynced, renamed, and the directories
// fsynced. It refuses to replace an existing bootstrap snapshot.
func WriteBootstrapSnapshot(dir string, data []byte) error {
	return writeBootstrapSnapshot(osFS{}, dir, data)
}

func writeBootstrapSnapshot(fsys FS, dir string, data []byte) error {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return ioErr(err)
	}
	final := filepath.Join(dir, SnapshotFileName(BootstrapSnapshotID))
	if _, err := fsys.Stat(final); err == nil {
		return fmt.Errorf("%w: %s", ErrSnapshotExists, final)
	}
	f, err := fsys.CreateTemp(dir, snapshotStem(BootstrapSnapshotID)+"-*"+snapshotPartSuffix)
	if err != nil {
		return ioErr(err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(f.Name(), final)
	}
	if err != nil {
		_ = fsys.Remove(f.Name()) // best effort; open removes .part leftovers anyway
		return ioErr(err)
	}
	if err := syncDirFS(fsys, dir); err != nil {
		return err
	}
	return syncDirFS(fsys, filepath.Dir(dir))
}
