package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Zero-copy reads: a Region names whole batches of a segment's .log file by
// position instead of copying them, so that a Fetch response can send them
// with sendfile(2) (Kafka's FileRecords.slice and writeTo).
//
// A Region outlives the log's own use of the file: the segment may be
// deleted by retention, replaced by compaction, or the log closed or
// deleted while the response is still queued. A Region therefore pins the
// descriptor it was read from (segmentFile, FileCache): the cache does not
// close a pinned file, and a segment the log let go of closes with the
// last pin. An unlinked or replaced file keeps its bytes while
// open, so a Region of a deleted or compacted segment still sends the
// batches it was read as.
//
// Truncation is the one change made in place (a follower cutting its
// divergent suffix, Log.TruncateTo): the bytes past the cut are gone, and
// an append may put other batches at the same positions. Kafka's
// FileRecords.writeTo fails the send when the file became shorter than the
// slice ("has been truncated during write") and the connection is closed;
// kraftd does the same and also notices a truncation that was followed by
// appends: every truncation of a file bumps its cut count before the
// ftruncate, and Region.Check compares it with the count at the read. The
// sender checks before and after each transfer (see protocol.FileRegion),
// so a region cut under it is never completed with other bytes, and never
// padded.

// ErrRegionChanged: the segment file was truncated after the Region was
// read, so its bytes may no longer be the batches it was read as.
var ErrRegionChanged = errors.New("storage: segment file truncated since the read")

// segmentFile is a segment's .log file, shared by the log and the Regions
// read from it. Its descriptor is in the log's FileCache: open while used,
// closed by the cache when the file is unpinned and least recently used,
// and reopened at the next use (see FileCache).
//
// INVARIANTS: cuts only grows, and is incremented before each truncation
// of the file.
type segmentFile struct {
	cachedFile
	cuts atomic.Uint64
}

// truncate cuts the file at size, bumping the cut count first (see Region.Check).
func (sf *segmentFile) truncate(size int64) error {
	f, err := sf.use()
	if err != nil {
		return err
	}
	defer sf.unuse()
	sf.cuts.Add(1)
	return f.Truncate(size)
}

// Region is whole batches of one segment file: Len bytes at Pos. The zero
// Region is empty and holds nothing. A non-empty Region holds a reference
// to the file until Release; it must be released exactly once.
type Region struct {
	file *segmentFile
	f    *os.File      // file's descriptor, pinned until Release
	held *atomic.Int32 // the log's count of unreleased Regions
	cuts uint64        // the file's cut count when read
	Pos  int64
	Len  int64
}

// File is the open segment file (nil for an empty Region). It stays open
// until Release; callers read it with ReadAt or sendfile at an explicit
// offset and never move its file offset (it is shared).
func (r Region) File() *os.File {
	return r.f
}

// Section is the file and the byte range, as protocol.FileRegion asks.
func (r Region) Section() (*os.File, int64, int64) { return r.File(), r.Pos, r.Len }

// Check returns ErrRegionChanged when the file was truncated since the read
// (it may be shorter, or hold other batches at Pos now).
func (r Region) Check() error {
	if r.file != nil && r.file.cuts.Load() != r.cuts {
		return fmt.Errorf("%w: %s [%d, %d)", ErrRegionChanged, r.file.name.path(), r.Pos, r.Pos+r.Len)
	}
	return nil
}

// Release drops the Region's reference to its file; the Region must not be
// used after.
func (r Region) Release() {
	if r.file != nil {
		r.held.Add(-1)
		_ = r.file.unuse() // a close error of a read-only use changes nothing
	}
}

// Bytes reads the Region's batches into memory (the copy that sendfile
// avoids), failing with ErrRegionChanged rather than returning bytes that
// are not the ones read.
func (r Region) Bytes() ([]byte, error) {
	if r.Len == 0 {
		return nil, nil
	}
	buf := make([]byte, r.Len)
	if err := r.Check(); err != nil {
		return nil, err
	}
	n, err := r.f.ReadAt(buf, r.Pos)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == r.Len) {
		return nil, fmt.Errorf("%w: %w", ErrRegionChanged, err)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadRegion is Read without the copy: the same batches, as a Region of the
// segment file that holds them (empty when Read would return no data). The
// caller releases it.
func (l *Log) ReadRegion(offset int64, maxBytes int, maxOffset int64) (Region, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	sg, start, stop, err := l.locate(offset, maxBytes, maxOffset)
	if err != nil || sg == nil {
		return Region{}, err
	}
	f, err := sg.file.use()
	if err != nil {
		return Region{}, err
	}
	l.heldRegions.Add(1)
	return Region{file: sg.file, f: f, held: &l.heldRegions, cuts: sg.file.cuts.Load(), Pos: start, Len: stop - start}, nil
}

// HeldRegions is the number of Regions read from the log and not yet
// released (each keeps a segment file open).
func (l *Log) HeldRegions() int64 { return int64(l.heldRegions.Load()) }
