package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
)

// Kafka's segment indexes are sparse: one entry per index.interval.bytes of log
// (4096 by default), so a lookup lands at most that far before the wanted batch.
//
//	.index      8-byte entries: int32 offset relative to the segment base, int32
//	            byte position of a batch in the .log file. As Kafka 3.x's
//	            LogSegment.append does, the offset is the appended batch's last
//	            offset and the position is that batch's start, so reading from
//	            the floor entry's position never skips the wanted offset.
//	.timeindex  12-byte entries: int64 timestamp, int32 relative offset; the
//	            timestamps only grow (an entry is added when the segment's max
//	            timestamp grew since the last one).
//
// Kafka preallocates both files and trims them when the segment stops being the
// active one; kraftd appends entries as it goes, so the files always hold exactly
// their entries, which is what Kafka's loader expects of a trimmed index.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

type offsetEntry struct {
	rel int32 // offset - base
	pos int32
}

type timeEntry struct {
	tsMs int64
	rel  int32
}

// indexFile is one .index or .timeindex file plus its entries in memory.
// As Kafka's LazyIndex, the file is opened (created when missing) at its
// first write, not when its segment opens: a clean open reads the entries
// by path and holds no descriptor, and a new partition's empty segment
// creates no index file until it gets an entry. A missing file reads as
// an empty index for an empty segment (loadIndexes). Once created, its
// descriptor is in the log's FileCache (closed while unused when the cache
// is full, reopened by path). Its name and cache are its segment's, passed
// to the methods that open it, not kept: every hosted partition has two.
type indexFile struct {
	file *cachedFile // nil until the first write
	size int64       // bytes written
	kind segFileKind // segIndexFile or segTimeIndexFile
	// opened: open may have created the file since the directory was
	// last fsynced; the log's next flush fsyncs the directory.
	opened bool
}

// name is the file's name as an index of sg.
func (x *indexFile) name(sg *logSegment) segName {
	return segName{dir: sg.l.dir, base: sg.base, kind: x.kind}
}

// path is the index file's path (derived, not kept: a partition log's
// index files are rarely opened, and many logs have none).
func (x *indexFile) path(sg *logSegment) string { return x.name(sg).path() }

// open creates the file if missing and puts it in sg's cache.
func (x *indexFile) open(sg *logSegment) error {
	if x.file != nil {
		return nil
	}
	f, err := os.OpenFile(x.path(sg), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	x.file, x.opened = sg.l.cfg.Files.adopt(x.name(sg), os.O_RDWR, f), true
	return nil
}

// ensureExists creates the file if missing without marking the directory
// for a fsync (an index file lost by a crash reads as one without
// entries): Kafka's layout has both index files beside every segment with
// batches, and a Kafka broker reading the directory rebuilds a missing
// one with an error in its log.
func (x *indexFile) ensureExists(sg *logSegment) error {
	if x.file != nil {
		return nil
	}
	f, err := os.OpenFile(x.path(sg), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	x.file = sg.l.cfg.Files.adopt(x.name(sg), os.O_RDWR, f)
	return nil
}

// do runs fn on the file's descriptor, pinned.
func (x *indexFile) do(fn func(f *os.File) error) error {
	f, err := x.file.use()
	if err != nil {
		return err
	}
	err = fn(f)
	if uerr := x.file.unuse(); err == nil {
		err = uerr
	}
	return err
}

func (x *indexFile) append(sg *logSegment, entry []byte) error {
	if err := x.open(sg); err != nil {
		return err
	}
	if err := x.do(func(f *os.File) error { _, err := f.WriteAt(entry, x.size); return err }); err != nil {
		return err
	}
	x.size += int64(len(entry))
	return nil
}

// reset empties the file, for a rebuild: it is opened (created), so the
// segment's next sync makes the truncation durable.
func (x *indexFile) reset(sg *logSegment) error {
	x.size = 0
	if err := x.open(sg); err != nil {
		return err
	}
	return x.do(func(f *os.File) error { return f.Truncate(0) })
}

// dropStale empties a file a new segment's name may find left over, without
// creating it when missing (the new segment's file is created at its first
// entry).
func (x *indexFile) dropStale(sg *logSegment) error {
	x.size = 0
	if x.file != nil {
		return x.do(func(f *os.File) error { return f.Truncate(0) })
	}
	if err := os.Truncate(x.path(sg), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sync fsyncs what was written; a file never written by this process was
// fsynced when it was (or is empty and missing).
func (x *indexFile) sync() error {
	if x.file == nil {
		return nil
	}
	return x.do(fsync)
}

func (x *indexFile) close() error {
	if x == nil || x.file == nil {
		return nil
	}
	err := x.file.release()
	x.file = nil
	return err
}

func encodeOffsetEntry(e offsetEntry) []byte {
	var b [offsetEntrySize]byte
	binary.BigEndian.PutUint32(b[0:], uint32(e.rel))
	binary.BigEndian.PutUint32(b[4:], uint32(e.pos))
	return b[:]
}

func encodeTimeEntry(e timeEntry) []byte {
	var b [timeEntrySize]byte
	binary.BigEndian.PutUint64(b[0:], uint64(e.tsMs))
	binary.BigEndian.PutUint32(b[8:], uint32(e.rel))
	return b[:]
}

// decodeOffsetIndex parses a .index file and checks it against the segment
// (Kafka's OffsetIndex.sanityCheck plus ordering): entries strictly increasing
// in offset and position, positions inside the segment's size. A file that fails
// is rebuilt by the caller.
func decodeOffsetIndex(data []byte, segSize int64) ([]offsetEntry, error) {
	if len(data)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("offset index of %d bytes is not a multiple of %d", len(data), offsetEntrySize)
	}
	out := make([]offsetEntry, 0, len(data)/offsetEntrySize)
	for i := 0; i < len(data); i += offsetEntrySize {
		e := offsetEntry{rel: int32(binary.BigEndian.Uint32(data[i:])), pos: int32(binary.BigEndian.Uint32(data[i+4:]))}
		if e.rel < 0 || e.pos < 0 || int64(e.pos) >= segSize {
			return nil, fmt.Errorf("offset index entry %d (%d, %d) outside a segment of %d bytes", i/offsetEntrySize, e.rel, e.pos, segSize)
		}
		if n := len(out); n > 0 && (e.rel <= out[n-1].rel || e.pos <= out[n-1].pos) {
			return nil, fmt.Errorf("offset index entry %d does not follow the previous one", i/offsetEntrySize)
		}
		out = append(out, e)
	}
	return out, nil
}

// decodeTimeIndex parses a .timeindex file: timestamps and offsets non-decreasing.
func decodeTimeIndex(data []byte) ([]timeEntry, error) {
	if len(data)%timeEntrySize != 0 {
		return nil, fmt.Errorf("time index of %d bytes is not a multiple of %d", len(data), timeEntrySize)
	}
	out := make([]timeEntry, 0, len(data)/timeEntrySize)
	for i := 0; i < len(data); i += timeEntrySize {
		e := timeEntry{tsMs: int64(binary.BigEndian.Uint64(data[i:])), rel: int32(binary.BigEndian.Uint32(data[i+8:]))}
		if n := len(out); e.rel < 0 || n > 0 && (e.tsMs < out[n-1].tsMs || e.rel < out[n-1].rel) {
			return nil, fmt.Errorf("time index entry %d out of order", i/timeEntrySize)
		}
		out = append(out, e)
	}
	return out, nil
}

// floorOffset returns the position of the last entry whose offset is <= rel, or 0.
func floorOffset(idx []offsetEntry, rel int32) int64 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(idx[i-1].pos)
}

// floorTime returns the relative offset of the last entry whose timestamp is
// below tsMs (a batch at or after it may hold the first record >= tsMs), or 0.
func floorTime(idx []timeEntry, tsMs int64) int32 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].tsMs >= tsMs })
	if i == 0 {
		return 0
	}
	return idx[i-1].rel
}
