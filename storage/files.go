package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// File name suffixes of a Kafka partition directory. A segment's files share its
// base offset, zero-padded to 20 digits: 00000000000000000000.log, .index, .timeindex.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
)

// SegmentFileName is the file name of the segment whose first offset is base,
// with suffix (LogSuffix, IndexSuffix or TimeIndexSuffix).
func SegmentFileName(base int64, suffix string) string { return fmt.Sprintf("%020d%s", base, suffix) }

// ParseSegmentFileName returns the base offset of a "%020d<suffix>" file name.
func ParseSegmentFileName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// BatchInfo locates one batch of a segment file: its header fields and where
// its bytes are.
type BatchInfo struct {
	BaseOffset, LastOffset int64
	Epoch                  int32
	MaxTimestampMs         int64
	Position               int64 // byte position in the segment file
	Size                   int64 // bytes
	// ProducerID, ProducerEpoch and BaseSequence are the idempotent producer
	// fields (-1 for other batches).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Attributes are the batch's attributes (compression, timestamp type,
	// transactional, control bits).
	Attributes uint16
	// ControlType and CoordinatorEpoch describe a control batch's record as
	// WalkBatches decodes it (a transaction marker's type and coordinator
	// epoch; -1 for other control records); zero for data batches and in
	// ScanSegment's results.
	ControlType      ControlType
	CoordinatorEpoch int32
}

// Transactional reports the batch's transactional attribute.
func (b BatchInfo) Transactional() bool { return b.Attributes&attrTransactional != 0 }

// IsControl reports the batch's control attribute.
func (b BatchInfo) IsControl() bool { return b.Attributes&attrControl != 0 }

// NextOffset is the offset following the batch.
func (b BatchInfo) NextOffset() int64 { return b.LastOffset + 1 }

// ScanResult is what ScanSegment found in one segment file.
type ScanResult struct {
	Batches []BatchInfo
	Valid   int64 // bytes of valid batches from the start of the file
	Total   int64 // bytes in the file
	Reason  error // why scanning stopped before Total, if it did
}

// maxScanBatchBytes caps the size a batch header may claim during a scan before
// its bytes are read: a torn length field must not make recovery allocate
// gigabytes. No batch kraftd writes comes near it (message.max.bytes is 1 MiB by
// default, and the request size cap is 100 MiB).
const maxScanBatchBytes = 256 << 20

// ScanSegment reads the segment file at path in one pass, batch by batch, and
// returns its longest valid prefix, where valid means: a complete batch with magic
// 2 and a correct CRC-32C, offsets that continue from next, and a leader epoch no
// older than prevEpoch. This is the recovery scan of both the metadata log and
// the partition logs (Kafka's LogSegment.recover): whatever follows the prefix is
// a torn or corrupt tail for the caller to truncate. visit, if not nil, sees
// every valid batch with its bytes (valid only during the call).
func ScanSegment(path string, next int64, prevEpoch int32, visit func(BatchInfo, Batch)) (ScanResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return ScanResult{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ScanResult{}, err
	}
	return ScanSegmentFrom(f, st.Size(), next, prevEpoch, visit)
}

// ScanSegmentFrom is ScanSegment on the size bytes of a segment read from r (a
// file of another file system: the metadata log's, which its simulation replaces).
func ScanSegmentFrom(r io.Reader, size, next int64, prevEpoch int32, visit func(BatchInfo, Batch)) (ScanResult, error) {
	res := ScanResult{Total: size}
	br := bufio.NewReaderSize(r, 1<<16)
	var buf []byte
	for res.Valid < res.Total {
		var head [logOverhead]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			res.Reason = scanEOF(err, res.Valid)
			break
		}
		length := int64(int32(binary.BigEndian.Uint32(head[offBatchLength:])))
		size := length + logOverhead
		if length < BatchHeaderSize-logOverhead || size > maxScanBatchBytes {
			res.Reason = fmt.Errorf("%w at byte %d: batch length %d", ErrCorruptBatch, res.Valid, length)
			break
		}
		if size > res.Total-res.Valid {
			res.Reason = fmt.Errorf("incomplete batch at byte %d", res.Valid)
			break
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, head[:])
		if _, err := io.ReadFull(br, buf[logOverhead:]); err != nil {
			res.Reason = scanEOF(err, res.Valid)
			break
		}
		b, err := ParseBatch(buf)
		if err != nil {
			res.Reason = fmt.Errorf("at byte %d: %w", res.Valid, err)
			break
		}
		if b.BaseOffset != next {
			res.Reason = fmt.Errorf("batch at offset %d where %d was expected", b.BaseOffset, next)
			break
		}
		if b.Epoch < prevEpoch {
			res.Reason = fmt.Errorf("batch at offset %d has epoch %d after epoch %d", b.BaseOffset, b.Epoch, prevEpoch)
			break
		}
		info := BatchInfo{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Epoch: b.Epoch,
			MaxTimestampMs: b.MaxTimestampMs, Position: res.Valid, Size: size,
			ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
			Attributes: b.Attributes()}
		if visit != nil {
			visit(info, b)
		}
		res.Batches = append(res.Batches, info)
		res.Valid += size
		next, prevEpoch = b.NextOffset(), b.Epoch
	}
	return res, nil
}

func scanEOF(err error, pos int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("incomplete batch at byte %d", pos)
	}
	return fmt.Errorf("read at byte %d: %w", pos, err)
}

// WriteFileAtomic replaces dir/name with data through dir/name.tmp: write, fsync,
// rename. The caller fsyncs dir (SyncDir) to make the rename durable. Errors are
// the os package's, naming the path.
func WriteFileAtomic(dir, name string, data []byte) error {
	return writeFileAtomicFunc(dir, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomicFunc is WriteFileAtomic with the content written by write.
func writeFileAtomicFunc(dir, name string, write func(w io.Writer) error) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	werr := write(f)
	if werr == nil {
		werr = fsync(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp) // best effort: a leftover .tmp is removed at the next open
		return werr
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = fsync(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fsyncs counts fsync calls made by this package (files and directories):
// on a shared disk each one costs milliseconds, and a partition's creation or
// close must not need more of them than its durability requires.
var fsyncs atomic.Int64

// Fsyncs is how many fsyncs this package made so far (tests count what an
// operation costs with it).
func Fsyncs() int64 { return fsyncs.Load() }

// fsync is f.Sync, counted.
func fsync(f *os.File) error {
	fsyncs.Add(1)
	return f.Sync()
}
