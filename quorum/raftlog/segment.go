package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/kraftd/kraftd/storage"
)

// Segment files are named like Kafka's: the base offset, zero-padded to 20 digits
// (storage.SegmentFileName).
const (
	logSuffix       = storage.LogSuffix
	indexSuffix     = storage.IndexSuffix
	timeIndexSuffix = storage.TimeIndexSuffix
)

// segmentName is the file name of the segment whose first offset is base.
func segmentName(base int64) string { return storage.SegmentFileName(base, logSuffix) }

// parseSegmentName returns the base offset of a "%020d.log" file name.
func parseSegmentName(name string) (int64, bool) {
	return storage.ParseSegmentFileName(name, logSuffix)
}

// batchPos locates one batch inside a segment file.
type batchPos struct {
	base, last int64
	epoch      int32
	pos        int64 // byte position in the segment file
	maxTsMs    int64
}

// segment is one "%020d.log" file: RecordBatch v2 batches back to back, exactly as
// Kafka's LogSegment stores them. We do not write the .index and .timeindex files:
// they are only lookup accelerators, and Kafka rebuilds missing ones when it loads
// a segment, so a kraftd directory stays readable by Kafka's tools
// (kafka-dump-log.sh reads the .log file alone).
//
// INVARIANTS: batches are contiguous from base (batches[0].base == base when not
// empty); size == end of the last batch; every byte below size has been written.
type segment struct {
	base    int64
	path    string
	f       File
	size    int64
	batches []batchPos
	// dirty means bytes were written or cut since the last fsync.
	dirty bool
}

// endOffset is the offset after the segment's last batch (base when empty).
func (sg *segment) endOffset() int64 {
	if len(sg.batches) == 0 {
		return sg.base
	}
	return sg.batches[len(sg.batches)-1].last + 1
}

// firstTimestampMs is the max timestamp of the segment's first batch: Kafka's
// segment.ms roll compares new batches against it, so rolling by time needs no
// clock.
func (sg *segment) firstTimestampMs() (int64, bool) {
	if len(sg.batches) == 0 {
		return 0, false
	}
	return sg.batches[0].maxTsMs, true
}

// fitsOffsets reports whether b's offsets stay within the 32-bit relative offsets
// Kafka's offset index can hold for this segment; past that Kafka rolls.
func (sg *segment) fitsOffsets(b Batch) bool {
	return b.LastOffset-sg.base <= math.MaxInt32
}

// openSegment opens (creating if needed) the segment file for base in dir.
func openSegment(fsys FS, dir string, base int64) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, ioErr(err)
	}
	return &segment{base: base, path: path, f: f}, nil
}

// scanSegment reads the segment file and returns its longest valid prefix of
// batches (storage.ScanSegment, the recovery scan shared with the partition logs).
func scanSegment(fsys FS, path string, next int64, prevEpoch int32) (storage.ScanResult, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return storage.ScanResult{}, ioErr(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return storage.ScanResult{}, ioErr(err)
	}
	res, err := storage.ScanSegmentFrom(io.NewSectionReader(f, 0, size), size, next, prevEpoch, nil)
	if err != nil {
		return res, ioErr(err)
	}
	return res, nil
}

// index records the positions of scanned batches in the segment.
func (sg *segment) index(batches []storage.BatchInfo) {
	sg.batches = sg.batches[:0]
	var pos int64
	for _, b := range batches {
		sg.batches = append(sg.batches, batchPos{
			base: b.BaseOffset, last: b.LastOffset, epoch: b.Epoch, pos: pos, maxTsMs: b.MaxTimestampMs,
		})
		pos += b.Size
	}
	sg.size = pos
}

// cutFrom returns the byte position of the first batch with an offset at or after
// offset, and how many batches precede it.
func (sg *segment) cutFrom(offset int64) (pos int64, keep int) {
	for i, bp := range sg.batches {
		if bp.last >= offset {
			return bp.pos, i
		}
	}
	return sg.size, len(sg.batches)
}

// remove closes and deletes the segment and the index files Kafka may have left
// next to it (they would describe data that no longer exists).
func (sg *segment) remove(fsys FS) error {
	if sg.f != nil {
		_ = sg.f.Close() // the file is being deleted; a close error changes nothing
		sg.f = nil
	}
	if err := fsys.Remove(sg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ioErr(err)
	}
	return removeIndexFiles(fsys, sg.path)
}

// removeIndexFiles deletes the .index and .timeindex files of a segment path.
func removeIndexFiles(fsys FS, segPath string) error {
	stem := strings.TrimSuffix(segPath, logSuffix)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := fsys.Remove(stem + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return ioErr(err)
		}
	}
	return nil
}

// ioErr wraps an OS error (which names its path) as a storage failure.
func ioErr(err error) error {
	return fmt.Errorf("%w: %w", ErrStorageFailed, err)
}
