package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Defaults of Kafka's partition log settings.
const (
	// DefaultLogSegmentBytes is log.segment.bytes' default, 1 GiB.
	DefaultLogSegmentBytes = 1 << 30
	// DefaultLogSegmentMs is log.roll.ms' default, 7 days.
	DefaultLogSegmentMs = 7 * 24 * 60 * 60 * 1000
	// DefaultIndexIntervalBytes is index.interval.bytes' default.
	DefaultIndexIntervalBytes = 4096
)

// Errors of a partition Log.
var (
	// ErrOffsetOutOfRange: the offset is below the log start or above the log end.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrNonContiguous: an appended batch does not start at the log end offset.
	ErrNonContiguous = errors.New("storage: batch does not continue the log")
	// ErrEpochRegression: an appended batch carries an older leader epoch.
	ErrEpochRegression = errors.New("storage: batch epoch older than the log's last epoch")
	// ErrLogFailed: an I/O error happened earlier; the log refuses writes.
	ErrLogFailed = errors.New("storage: log failed")
	// ErrLogClosed: the log was closed or deleted.
	ErrLogClosed = errors.New("storage: log closed")
)

// LogConfig configures a partition Log. Zero values take Kafka's defaults.
type LogConfig struct {
	// SegmentBytes rolls to a new segment when the active one would grow past it
	// (segment.bytes). Zero or negative: DefaultLogSegmentBytes. Capped at
	// math.MaxInt32 because index positions are 32-bit.
	SegmentBytes int64
	// SegmentMs rolls when a batch's max timestamp is more than SegmentMs after
	// the active segment's first batch (segment.ms). Zero or negative:
	// DefaultLogSegmentMs.
	SegmentMs int64
	// IndexIntervalBytes is the log bytes between two index entries
	// (index.interval.bytes). Zero or negative: DefaultIndexIntervalBytes.
	IndexIntervalBytes int64
	// RecoveryPoint is the offset below which the log was flushed when it
	// was last open (recovery-point-offset-checkpoint): at open, segments
	// that end at or below it keep their indexes, and the rest are scanned
	// and their torn tails cut. Zero (no checkpoint) scans every segment,
	// as Kafka does without one.
	RecoveryPoint int64
	// CleanShutdown says the log was flushed and closed cleanly (the log
	// directory's .kafka_cleanshutdown): no segment is scanned at open.
	CleanShutdown bool
	// Logger receives recovery warnings. Nil: zap.NewNop().
	Logger *zap.Logger
	// Files holds the log's open descriptors, bounded (see FileCache).
	// Nil: DefaultFileCache(), the process's.
	Files *FileCache
}

func (c *LogConfig) fillDefaults() {
	c.SegmentBytes, c.SegmentMs = rollDefaults(c.SegmentBytes, c.SegmentMs)
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Files == nil {
		c.Files = DefaultFileCache()
	}
}

// Log is one partition replica's log: a Kafka partition directory
// (<log.dirs>/<topic>-<partition>) of segments (.log, .index, .timeindex), the
// leader-epoch-checkpoint and partition.metadata, byte-compatible with Apache
// Kafka's. Batches are stored exactly as appended (compressed ones stay
// compressed).
//
// Durability, as Kafka's default: appends reach the page cache, not the disk;
// replication is what makes them durable. Segments are fsynced when they roll
// and on Flush and Close. At open the active segment (the only one written since
// the last flush) is scanned and its torn or corrupt tail cut.
//
// Safe for concurrent use: appends are serialized, reads run beside them.
//
// INVARIANTS: segments is non-empty, sorted and contiguous (each base is the
// previous segment's end); only the last one is written to; the epoch cache
// holds the epochs of the batches in the log; every segment's indexes describe
// its own batches.
//
// There is one per hosted replica, a million on each broker of issue 17's
// largest cluster: its fields are ordered to fit the 208-byte size class
// (the small ones share the words after topicID; it was 248, in 256), and
// it keeps of its LogConfig only what outlives OpenLog (logSettings).
type Log struct {
	dir string
	cfg logSettings

	mu       sync.RWMutex
	segments []*logSegment
	// startOffset is the log start offset: the first offset readers may
	// ask for. Invariant: segments[0].base <= startOffset <= end offset.
	startOffset int64
	// recoveryPoint is the offset below which every byte was fsynced.
	// Invariant: recoveryPoint <= end offset.
	recoveryPoint int64
	epochs        EpochCache
	// atOpen is what OpenLog's listing of an existing directory found
	// (nil for a directory it created: most logs, so not inline).
	atOpen *openListing
	failed error
	// cleanedTo is the end of the last segment Compact went over, and
	// tombstonesDueMs when the oldest tombstone it kept may go: Compact
	// does nothing until a closed segment ends past cleanedTo or that time
	// comes.
	cleanedTo, tombstonesDueMs int64
	topicID                    [16]byte
	// heldRegions counts unreleased Regions (ReadRegion).
	heldRegions atomic.Int32
	// indexIntervalBytes is index.interval.bytes (an int in Kafka too:
	// index positions are 32-bit, segments at most math.MaxInt32 bytes).
	indexIntervalBytes int32
	hasTopic           bool
	// created: OpenLog made the directory (a new partition).
	created bool
	// topicUnflushed: topicID was recorded (SetTopicID) and
	// partition.metadata does not hold it durably yet; flushTopicID writes
	// it, at the latest before the first batch is written.
	topicUnflushed bool
	// dirUnsynced: the directory has an entry (a new log's first segment)
	// not fsynced yet; the next flush, or partition.metadata's directory fsync,
	// makes it durable.
	dirUnsynced bool
	// epochsUnsaved: the epoch cache has an entry leader-epoch-checkpoint
	// lacks (AssignEpochStartOffset); written before the recovery point
	// next moves.
	epochsUnsaved bool
}

// rollDefaults fills in the defaults of segment.bytes and segment.ms (and
// caps segment.bytes: index positions are 32-bit).
func rollDefaults(segmentBytes, segmentMs int64) (int64, int64) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultLogSegmentBytes
	}
	if segmentMs <= 0 {
		segmentMs = DefaultLogSegmentMs
	}
	return min(segmentBytes, math.MaxInt32), segmentMs
}

// logSettings is what a Log keeps of its LogConfig, defaults filled in,
// but for IndexIntervalBytes (Log.indexIntervalBytes): RecoveryPoint and
// CleanShutdown matter only to OpenLog's recovery.
type logSettings struct {
	SegmentBytes int64
	SegmentMs    int64
	Logger       *zap.Logger
	Files        *FileCache
}

// openListing is an existing log directory's listing at OpenLog.
type openListing struct {
	// names are the directory's file names while OpenLog runs (nil after);
	// snapshots its producer snapshot offsets then, sorted.
	names     map[string]bool
	snapshots []int64
}

// logSegment is one segment: its .log file, its indexes, and what appends need.
//
// INVARIANTS: end == base when empty, else the last batch's offset + 1; size is
// the end of the last batch; idx and tidx mirror idxFile and tidxFile.
type logSegment struct {
	base int64
	// l is the segment's log: path derives the .log file's path from its
	// directory (immutable) and base, and the files are in its cache (a
	// pointer, not the directory string and the cache: 16 bytes less, the
	// segment in the 208-byte size class).
	l        *Log
	file     *segmentFile // shared with Regions read from this segment; nil once closed
	size     int64
	end      int64
	idx      []offsetEntry
	tidx     []timeEntry
	idxFile  indexFile
	tidxFile indexFile
	// sinceIndex counts bytes appended since the last index entry.
	sinceIndex int64
	// firstTsMs is the max timestamp of the first batch (segment.ms roll), -1 if empty.
	firstTsMs int64
	// maxTsMs is the largest batch max timestamp, maxTsOffset the last offset of
	// that batch; -1 when empty.
	maxTsMs, maxTsOffset int64
	dirty                bool
	// txns mirror the segment's .txnindex (aborted transactions whose
	// markers are in the segment), in marker order.
	txns []AbortedTxn
}

// OpenLog opens (creating if missing) the partition directory dir and recovers it.
func OpenLog(dir string, cfg LogConfig) (*Log, error) {
	cfg.fillDefaults()
	l := &Log{dir: dir, cfg: logSettings{SegmentBytes: cfg.SegmentBytes, SegmentMs: cfg.SegmentMs, Logger: cfg.Logger, Files: cfg.Files},
		indexIntervalBytes: int32(min(cfg.IndexIntervalBytes, math.MaxInt32))}
	created, err := makeDir(dir)
	if err != nil {
		return nil, err
	}
	if created {
		// A new partition: nothing in the directory to list, read or
		// recover, so it costs the directory and its first segment's
		// .log file (index files come with their first entry). Neither
		// needs to be durable before anything is in the log (a crash
		// leaves no directory, or an empty one that the next open
		// fills): the directory fsync waits for the first flush or
		// partition.metadata's (FlushTopicID), which covers both.
		l.created, l.dirUnsynced = true, true
		sg, err := l.createSegment(0)
		if err != nil {
			return nil, err
		}
		l.segments = []*logSegment{sg}
		return l, nil
	}
	bases, err := l.scanDir()
	if err != nil {
		return nil, err
	}
	defer func() { l.atOpen.names = nil }() // only for the open
	if err := l.loadTopicID(); err != nil {
		return nil, err
	}
	ef, err := l.recover(bases, cfg)
	if err != nil {
		l.closeFiles()
		return nil, err
	}
	if len(l.segments) == 0 {
		// A new log: its empty first segment need not be durable before
		// anything is in it (a crash leaves the directory without it,
		// and the next open creates it again). Its directory fsync waits
		// for the first flush or for partition.metadata's (FlushTopicID),
		// which covers both.
		l.dirUnsynced = true
		if err := l.openNewSegment(0); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	l.startOffset = l.segments[0].base
	l.recoveryPoint = min(max(cfg.RecoveryPoint, 0), l.endOffset())
	if cfg.CleanShutdown {
		l.recoveryPoint = l.endOffset()
	}
	// Rewritten only when the cache differs from the file (recovery cut
	// or rebuilt it): a clean open reads it and writes nothing.
	if entries := l.epochs.Entries(); ef.present && string(ef.data) != string(EncodeEpochCheckpoint(entries)) || !ef.present && len(entries) > 0 {
		if err := l.writeEpochs(); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	return l, nil
}

// makeDir creates dir, and its parents when missing; created reports
// whether dir itself is new (it did not exist before).
func makeDir(dir string) (created bool, err error) {
	err = os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return false, err
		}
		err = os.Mkdir(dir, 0o755)
	}
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// createSegment creates the empty segment at base of a new directory: its
// .log file only (no stale file to clear, no transaction index to read).
//
// The file is closed again at once and opened at its first read or write,
// as a segment found at a clean open is: most new partitions stay empty
// for long (every replica of a large create), and a descriptor kept open
// cost each of them an os.File with its path (some 200 heap bytes) and a
// kernel file until the FileCache evicted it. Kafka keeps every segment's
// .log open; kraftd bounds its descriptors instead (see FileCache).
func (l *Log) createSegment(base int64) (*logSegment, error) {
	sg := l.newSegment(base)
	f, err := os.OpenFile(sg.path(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l.initSegment(sg, nil)
	return sg, nil
}

// Created reports whether OpenLog created the log's directory: nothing in
// it predates this Log (no producer snapshot to look for).
func (l *Log) Created() bool { return l.created }

// scanDir lists the segment bases and removes leftovers of interrupted writes.
func (l *Log) scanDir() ([]int64, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	ls := &openListing{names: make(map[string]bool, len(entries))}
	l.atOpen = ls
	for _, e := range entries {
		name := e.Name()
		if base, ok := ParseSegmentFileName(name, LogSuffix); ok {
			bases = append(bases, base)
		} else if off, ok := ParseSegmentFileName(name, ProducerSnapshotSuffix); ok {
			ls.snapshots = append(ls.snapshots, off)
		} else if strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		ls.names[name] = true
	}
	slices.Sort(bases)
	slices.Sort(ls.snapshots)
	return bases, nil
}

// readListed reads the file name of the log's directory; a file the open's
// listing did not show is missing without a lookup (ErrNotExist).
func (l *Log) readListed(name string) ([]byte, error) {
	if l.unlisted(name) {
		return nil, fmt.Errorf("%s: %w", name, os.ErrNotExist)
	}
	return os.ReadFile(filepath.Join(l.dir, name))
}

// ProducerSnapshotsAtOpen lists the producer snapshot offsets the
// directory held when OpenLog listed it, sorted (none for a log whose
// directory it created): what ProducerSnapshotOffsets would list before
// anything writes or deletes one, without listing the directory again.
func (l *Log) ProducerSnapshotsAtOpen() []int64 {
	if l.atOpen == nil {
		return nil
	}
	return slices.Clone(l.atOpen.snapshots)
}

func (l *Log) loadTopicID() error {
	data, err := l.readListed(PartitionMetadataFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	id, err := DecodePartitionMetadata(data)
	if err != nil {
		return fmt.Errorf("%s: %w", l.dir, err)
	}
	l.topicID, l.hasTopic = id, true
	return nil
}

// recover loads the segments. Segments that end at or below the recovery
// point (all of them after a clean shutdown) were fsynced: their indexes are
// trusted when they pass a sanity check and rebuilt by a scan otherwise. The
// others are scanned: their tails may be torn.
// The first invalid batch ends the log (the rest of its segment and any later
// segment are removed), as the metadata log does. The epoch cache comes from
// leader-epoch-checkpoint, checked against the scanned batches, or from a scan of
// every segment when the file is missing or unreadable.
//
// It returns leader-epoch-checkpoint as it read it.
func (l *Log) recover(bases []int64, cfg LogConfig) (epochFile, error) {
	ef, cached, cerr := l.readEpochCheckpoint()
	scanAll := cerr != nil
	if !scanAll {
		for _, e := range cached {
			l.epochs.Assign(e.Epoch, e.StartOffset)
		}
	}
	next, prevEpoch := int64(-1), int32(-1)
	for i, base := range bases {
		if next >= 0 && base != next {
			l.logger().Warn("segment does not continue the log; dropping it and later segments",
				zap.Int64("base", base), zap.Int64("expected_base", next))
			return ef, l.dropSegmentFiles(bases[i:])
		}
		active := i == len(bases)-1
		sg, err := l.openSegment(base)
		if err != nil {
			return epochFile{}, err
		}
		l.segments = append(l.segments, sg)
		flushed := cfg.CleanShutdown || (!active && bases[i+1] <= cfg.RecoveryPoint)
		// An empty segment has no epoch to give the cache: a scan for a
		// missing checkpoint skips it (a partition never written to has
		// no leader-epoch-checkpoint; scanning it rebuilt, and so
		// dirtied and fsynced at close, its segment at every open).
		if flushed && (!scanAll || sg.size == 0) && sg.loadIndexes(l.unlisted) == nil {
			next = sg.end
			continue
		}
		if next < 0 {
			next = base
		}
		res, err := l.rebuildSegment(sg, next, prevEpoch)
		if err != nil {
			return epochFile{}, err
		}
		if res.Valid < res.Total {
			if err := l.repairTail(sg, res); err != nil {
				return epochFile{}, err
			}
			return ef, l.dropSegmentFiles(bases[i+1:])
		}
		next = sg.end
		if n := len(res.Batches); n > 0 {
			prevEpoch = res.Batches[n-1].Epoch
		}
	}
	l.epochs.TruncateFromEnd(l.endOffset())
	return ef, nil
}

// epochFile is leader-epoch-checkpoint as an open read it.
type epochFile struct {
	data    []byte
	present bool // read (data may not decode)
}

func (l *Log) readEpochCheckpoint() (epochFile, []EpochEntry, error) {
	data, err := l.readListed(LeaderEpochCheckpointFile)
	if err != nil {
		return epochFile{}, nil, err
	}
	entries, err := DecodeEpochCheckpoint(data)
	return epochFile{data: data, present: true}, entries, err
}

// rebuildSegment scans sg from scratch, rewriting its indexes and feeding the
// epoch cache.
func (l *Log) rebuildSegment(sg *logSegment, next int64, prevEpoch int32) (ScanResult, error) {
	if err := sg.idxFile.reset(sg); err != nil {
		return ScanResult{}, err
	}
	if err := sg.tidxFile.reset(sg); err != nil {
		return ScanResult{}, err
	}
	sg.idx, sg.tidx, sg.size, sg.end, sg.sinceIndex = nil, nil, 0, sg.base, 0
	var werr error
	res, err := ScanSegment(sg.path(), next, prevEpoch, func(info BatchInfo, _ Batch) {
		l.epochs.Assign(info.Epoch, info.BaseOffset)
		if werr == nil {
			werr = sg.indexBatch(info, int64(l.indexIntervalBytes))
		}
	})
	if err == nil {
		err = werr
	}
	sg.dirty = true
	return res, err
}

func (l *Log) repairTail(sg *logSegment, res ScanResult) error {
	l.logger().Warn("truncating invalid log tail", zap.String("segment", sg.path()),
		zap.Int64("offset", sg.end), zap.Int64("position", res.Valid),
		zap.Int64("dropped_bytes", res.Total-res.Valid), zap.NamedError("reason", res.Reason))
	if err := sg.file.truncate(res.Valid); err != nil {
		return err
	}
	sg.dirty = true
	return sg.cutTxnIndex(sg.end)
}

func (l *Log) dropSegmentFiles(bases []int64) error {
	for _, base := range bases {
		for _, suffix := range segmentSuffixes {
			path := filepath.Join(l.dir, SegmentFileName(base, suffix))
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		l.logger().Warn("deleted log segment after the end of the valid log", zap.Int64("base", base))
	}
	return nil
}

func (l *Log) openSegment(base int64) (*logSegment, error) {
	sg := l.newSegment(base)
	// The file is opened at its first read or write, not here: a clean
	// open of a partition that is never read holds no descriptor.
	st, err := os.Stat(sg.path())
	if err != nil {
		return nil, err
	}
	sg.size = st.Size()
	l.initSegment(sg, nil)
	if !l.unlisted(SegmentFileName(base, TxnIndexSuffix)) {
		if err := sg.loadTxnIndex(); err != nil {
			sg.close()
			return nil, err
		}
	}
	return sg, nil
}

// initSegment gives sg its files in the log's cache: the .log file (f if
// just opened, else opened at first use) and the index files (at their
// first entry).
func (l *Log) initSegment(sg *logSegment, f *os.File) {
	sg.file = &segmentFile{}
	l.cfg.Files.adoptInto(&sg.file.cachedFile, segName{dir: l.dir, base: sg.base, kind: segLogFile}, os.O_RDWR, f)
}

// newSegment is an empty segment of l at base, without files yet.
func (l *Log) newSegment(base int64) *logSegment {
	return &logSegment{base: base, l: l, end: base, firstTsMs: -1, maxTsMs: -1, maxTsOffset: -1,
		idxFile: indexFile{kind: segIndexFile}, tidxFile: indexFile{kind: segTimeIndexFile}}
}

// path is the segment's .log file path (derived: see segName).
func (sg *logSegment) path() string {
	return segName{dir: sg.l.dir, base: sg.base, kind: segLogFile}.path()
}

// withFile runs fn on the segment's .log descriptor, pinned (opened if the
// cache closed it).
func (sg *logSegment) withFile(fn func(f *os.File) error) error {
	if sg.file == nil {
		return fmt.Errorf("%w: %s", ErrLogClosed, sg.path())
	}
	f, err := sg.file.use()
	if err != nil {
		return err
	}
	err = fn(f)
	if uerr := sg.file.unuse(); err == nil {
		err = uerr
	}
	return err
}

// logger is the log's logger, naming its directory (made when something
// is logged: most logs never log).
func (l *Log) logger() *zap.Logger { return l.cfg.Logger.With(zap.String("dir", l.dir)) }

// unlisted reports whether the open's directory listing shows name missing
// (false outside an open: unknown).
func (l *Log) unlisted(name string) bool {
	return l.atOpen != nil && l.atOpen.names != nil && !l.atOpen.names[name]
}

// loadIndexes reads a flushed segment's index files and finds its end by walking
// the batch headers after the last offset index entry. A missing index file
// reads as one without entries (files are created at their first entry): the
// walk then covers the whole segment.
func (sg *logSegment) loadIndexes(unlisted func(name string) bool) error {
	data, err := readIndex(sg.idxFile.path(sg), unlisted)
	if err != nil {
		return err
	}
	if sg.idx, err = decodeOffsetIndex(data, sg.size); err != nil {
		return err
	}
	sg.idxFile.size = int64(len(data))
	if data, err = readIndex(sg.tidxFile.path(sg), unlisted); err != nil {
		return err
	}
	if sg.tidx, err = decodeTimeIndex(data); err != nil {
		return err
	}
	sg.tidxFile.size = int64(len(data))
	if n := len(sg.tidx); n > 0 {
		sg.maxTsMs, sg.maxTsOffset = sg.tidx[n-1].tsMs, sg.base+int64(sg.tidx[n-1].rel)
	}
	if sg.size == 0 {
		return nil
	}
	return sg.withFile(func(f *os.File) error { return sg.walkTail(f) })
}

// walkTail reads the first batch's header and those after the last offset
// index entry (loadIndexes).
func (sg *logSegment) walkTail(f *os.File) error {
	h, err := readHeaderAt(f, sg.path(), 0)
	if err != nil {
		return err
	}
	sg.firstTsMs = h.MaxTimestampMs // segment.ms counts from the first batch
	var pos int64
	if n := len(sg.idx); n > 0 {
		pos = int64(sg.idx[n-1].pos)
	}
	for pos < sg.size {
		h, err := readHeaderAt(f, sg.path(), pos)
		if err != nil {
			return err
		}
		if pos+h.Size > sg.size || h.BaseOffset < sg.base {
			return fmt.Errorf("%w: batch at byte %d of %s", ErrCorruptBatch, pos, sg.path())
		}
		if h.MaxTimestampMs > sg.maxTsMs {
			sg.maxTsMs, sg.maxTsOffset = h.MaxTimestampMs, h.LastOffset
		}
		sg.sinceIndex += h.Size
		sg.end = h.LastOffset + 1
		pos += h.Size
	}
	return nil
}

// readIndex reads an index file; a missing one (unlisted says so without a
// lookup) has no entries.
func readIndex(path string, unlisted func(name string) bool) ([]byte, error) {
	if unlisted(filepath.Base(path)) {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// readHeader reads the header of the batch at pos.
func (sg *logSegment) readHeader(pos int64) (h BatchInfo, err error) {
	err = sg.withFile(func(f *os.File) error {
		h, err = readHeaderAt(f, sg.path(), pos)
		return err
	})
	return h, err
}

// readHeaderAt reads the header of the batch at pos of f, the segment file path.
func readHeaderAt(f *os.File, path string, pos int64) (BatchInfo, error) {
	var h [BatchHeaderSize]byte
	if _, err := f.ReadAt(h[:], pos); err != nil {
		return BatchInfo{}, err
	}
	be := binary.BigEndian
	length := int64(int32(be.Uint32(h[offBatchLength:])))
	if length < BatchHeaderSize-logOverhead {
		return BatchInfo{}, fmt.Errorf("%w: batch length %d at byte %d of %s", ErrCorruptBatch, length, pos, path)
	}
	base := int64(be.Uint64(h[offBaseOffset:]))
	return BatchInfo{
		BaseOffset: base, LastOffset: base + int64(int32(be.Uint32(h[offLastDelta:]))),
		Epoch: int32(be.Uint32(h[offLeaderEpoch:])), MaxTimestampMs: int64(be.Uint64(h[offMaxTimestamp:])),
		Position: pos, Size: length + logOverhead,
		ProducerID: int64(be.Uint64(h[offProducerID:])), ProducerEpoch: int16(be.Uint16(h[offProducerEpoch:])),
		BaseSequence: int32(be.Uint32(h[offBaseSequence:])), Attributes: be.Uint16(h[offAttributes:]),
	}, nil
}

// indexBatch accounts for a batch appended (or found by a scan) at info.Position:
// index entries every intervalBytes, as Kafka's LogSegment.append adds them.
func (sg *logSegment) indexBatch(info BatchInfo, intervalBytes int64) error {
	if sg.firstTsMs < 0 {
		sg.firstTsMs = info.MaxTimestampMs
	}
	if info.MaxTimestampMs > sg.maxTsMs {
		sg.maxTsMs, sg.maxTsOffset = info.MaxTimestampMs, info.LastOffset
	}
	if sg.sinceIndex > intervalBytes {
		e := offsetEntry{rel: int32(info.LastOffset - sg.base), pos: int32(info.Position)}
		if err := sg.idxFile.append(sg, encodeOffsetEntry(e)); err != nil {
			return err
		}
		sg.idx = append(sg.idx, e)
		if err := sg.appendTimeEntry(); err != nil {
			return err
		}
		sg.sinceIndex = 0
	}
	sg.sinceIndex += info.Size
	sg.size = info.Position + info.Size
	sg.end = info.LastOffset + 1
	return nil
}

// appendTimeEntry records the segment's max timestamp so far when it grew.
func (sg *logSegment) appendTimeEntry() error {
	if sg.maxTsMs < 0 {
		return nil
	}
	e := timeEntry{tsMs: sg.maxTsMs, rel: int32(sg.maxTsOffset - sg.base)}
	if n := len(sg.tidx); n > 0 && (e.tsMs <= sg.tidx[n-1].tsMs || e.rel <= sg.tidx[n-1].rel) {
		return nil
	}
	if err := sg.tidxFile.append(sg, encodeTimeEntry(e)); err != nil {
		return err
	}
	sg.tidx = append(sg.tidx, e)
	return nil
}

// ensureIndexFiles gives a segment with batches both index files, in
// Kafka's layout, even when too little was appended for an entry.
func (sg *logSegment) ensureIndexFiles() error {
	if err := sg.idxFile.ensureExists(sg); err != nil {
		return err
	}
	return sg.tidxFile.ensureExists(sg)
}

func (sg *logSegment) sync() error {
	if !sg.dirty {
		return nil
	}
	if err := sg.withFile(fsync); err != nil {
		return err
	}
	if err := sg.idxFile.sync(); err != nil {
		return err
	}
	if err := sg.tidxFile.sync(); err != nil {
		return err
	}
	sg.dirty = false
	return nil
}

func (sg *logSegment) close() error {
	var first error
	if sg.file != nil {
		// Regions read from the segment may still be sending from it: the
		// file closes with the last of them.
		first = sg.file.release()
		sg.file = nil
	}
	if err := sg.idxFile.close(); first == nil {
		first = err
	}
	if err := sg.tidxFile.close(); first == nil {
		first = err
	}
	return first
}

// addSegment creates an empty active segment at base, durably.
func (l *Log) addSegment(base int64) error {
	if err := l.openNewSegment(base); err != nil {
		return err
	}
	return l.syncDir()
}

// syncDir fsyncs the log's directory.
func (l *Log) syncDir() error {
	if err := SyncDir(l.dir); err != nil {
		return err
	}
	l.dirUnsynced = false
	for _, sg := range l.segments { // their index files' entries too
		sg.idxFile.opened, sg.tidxFile.opened = false, false
	}
	return nil
}

// openNewSegment creates an empty active segment at base without fsyncing
// the directory.
func (l *Log) openNewSegment(base int64) error {
	sg := l.newSegment(base)
	// A stale file of that name holds nothing we want.
	f, err := os.OpenFile(sg.path(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	l.initSegment(sg, f)
	for _, x := range []*indexFile{&sg.idxFile, &sg.tidxFile} {
		if err := x.dropStale(sg); err != nil {
			sg.close()
			return err
		}
	}
	if !l.unlisted(SegmentFileName(base, TxnIndexSuffix)) {
		if err := sg.loadTxnIndex(); err != nil {
			sg.close()
			return err
		}
	}
	if len(sg.txns) > 0 { // likewise a stale aborted-transaction index
		sg.txns = nil
		if err := sg.writeTxnIndex(); err != nil {
			sg.close()
			return err
		}
	}
	l.segments = append(l.segments, sg)
	return nil
}

func (l *Log) active() *logSegment { return l.segments[len(l.segments)-1] }

func (l *Log) endOffset() int64 {
	if len(l.segments) == 0 {
		return 0
	}
	return l.active().end
}

// SetRollConfig applies new segment.bytes and segment.ms to the open log
// (a topic config update); zero or negative values take the defaults. The
// next append rolls by them.
func (l *Log) SetRollConfig(segmentBytes, segmentMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.SegmentBytes, l.cfg.SegmentMs = rollDefaults(segmentBytes, segmentMs)
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset is the log start offset: the first segment's base, or above
// it after SetStartOffset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.startOffset
}

// FirstSegmentBase is the base offset of the oldest segment; the log start
// offset may be above it.
func (l *Log) FirstSegmentBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segments[0].base
}

// Size is the bytes of all segment files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, sg := range l.segments {
		n += sg.size
	}
	return n
}

// NumSegments is the number of segments, the active one included.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

// EndOffset is the log end offset: the offset the next batch gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.endOffset()
}

// LatestEpoch is the leader epoch of the last batch, -1 for an empty log.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.LatestEpoch()
}

// EpochEntries returns the leader epoch cache, oldest first.
func (l *Log) EpochEntries() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// TopicID returns the id in partition.metadata, if the file exists.
func (l *Log) TopicID() ([16]byte, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.topicID, l.hasTopic
}

// SetTopicID records the log's topic id (KIP-516) without writing it, as
// Kafka's UnifiedLog.initializeTopicId records it in its
// PartitionMetadataFile and leaves the write to a scheduled flush:
// partition.metadata is written durably (file, then directory) by
// FlushTopicID, which the replica manager calls in the background, or at
// the latest before the log's first batch is written (Append), and at
// Flush and Close. Creating a partition thus costs no fsync on the
// metadata publisher.
//
// A crash before that flush leaves a partition directory without
// partition.metadata, and, because every write of a batch flushes it
// first, without any batch: the broker deletes it as a stray at its next
// start unless the metadata assigns it the partition again (Kafka's
// isStrayReplica treats a log without a topic id so), and a log adopted
// then holds nothing of the older topic's.
func (l *Log) SetTopicID(id [16]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hasTopic && l.topicID == id {
		return nil
	}
	l.topicID, l.hasTopic, l.topicUnflushed = id, true, true
	return nil
}

// FlushTopicID makes partition.metadata hold the id SetTopicID recorded,
// durably, unless it does already (Kafka's PartitionMetadataFile.maybeFlush).
// A closed or deleted log has nothing to flush (Close flushed it).
func (l *Log) FlushTopicID() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.failed, ErrLogClosed) {
		return nil
	}
	if l.failed != nil {
		return l.failed
	}
	return l.flushTopicID()
}

// TopicIDFlushed reports whether partition.metadata holds the log's topic
// id durably (true for a log without one recorded).
func (l *Log) TopicIDFlushed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return !l.topicUnflushed
}

// flushTopicID writes partition.metadata if SetTopicID recorded an id it
// lacks: write and fsync a temporary file, rename it, fsync the directory
// (which also makes a new log's first segment durable); l.mu held.
func (l *Log) flushTopicID() error {
	if !l.topicUnflushed {
		return nil
	}
	if err := WriteFileAtomic(l.dir, PartitionMetadataFile, EncodePartitionMetadata(l.topicID)); err != nil {
		return l.fail(err)
	}
	if err := l.syncDir(); err != nil {
		return l.fail(err)
	}
	l.topicUnflushed = false
	return nil
}

// Append writes batches at the log end. Each must start at the log end offset
// (the caller assigns offsets with Batch.SetBaseOffset) and carry a leader epoch
// no older than the log's latest. The data reaches the page cache, not the disk.
func (l *Log) Append(batches []Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	// As Kafka's UnifiedLog.append: partition.metadata is durable before
	// any batch can reach the disk, so a log found without it after a
	// crash holds nothing (see SetTopicID).
	if err := l.flushTopicID(); err != nil {
		return err
	}
	for _, b := range batches {
		if end := l.endOffset(); b.BaseOffset != end {
			return fmt.Errorf("%w: base offset %d, log end offset %d", ErrNonContiguous, b.BaseOffset, end)
		}
		if last := l.epochs.LatestEpoch(); b.Epoch < last {
			return fmt.Errorf("%w: epoch %d after %d", ErrEpochRegression, b.Epoch, last)
		}
		if l.shouldRoll(b) {
			if err := l.roll(b.BaseOffset); err != nil {
				return l.fail(err)
			}
		}
		if err := l.write(b); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// shouldRoll applies Kafka's roll rules to a non-empty active segment: size,
// time (by record timestamps), and offsets or positions the 32-bit index fields
// cannot hold.
func (l *Log) shouldRoll(b Batch) bool {
	sg := l.active()
	if sg.size == 0 {
		return false
	}
	size := int64(b.Size())
	if sg.size+size > l.cfg.SegmentBytes || b.LastOffset-sg.base > math.MaxInt32 {
		return true
	}
	return sg.firstTsMs >= 0 && b.MaxTimestampMs-sg.firstTsMs > l.cfg.SegmentMs
}

// roll ends the active segment (a last time index entry, fsync of the segment
// and its indexes) and starts a new one at base.
func (l *Log) roll(base int64) error {
	sg := l.active()
	if err := sg.appendTimeEntry(); err != nil {
		return err
	}
	if err := sg.ensureIndexFiles(); err != nil { // made durable by addSegment's directory fsync
		return err
	}
	sg.dirty = true
	if err := sg.sync(); err != nil {
		return err
	}
	if err := l.saveEpochs(); err != nil {
		return err
	}
	l.recoveryPoint = max(l.recoveryPoint, sg.end)
	return l.addSegment(base)
}

func (l *Log) write(b Batch) error {
	sg := l.active()
	pos := sg.size
	if err := sg.withFile(func(f *os.File) error { _, err := f.WriteAt(b.Raw, pos); return err }); err != nil {
		return err
	}
	sg.dirty = true
	info := BatchInfo{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Epoch: b.Epoch,
		MaxTimestampMs: b.MaxTimestampMs, Position: pos, Size: int64(b.Size())}
	if err := sg.indexBatch(info, int64(l.indexIntervalBytes)); err != nil {
		return err
	}
	if l.epochs.Assign(b.Epoch, b.BaseOffset) {
		return l.writeEpochs()
	}
	return nil
}

// saveEpochs writes leader-epoch-checkpoint if the cache has an entry the
// file lacks. Entries no batch follows yet (a leader's epoch start at the
// log end) are left out and stay unsaved: an open drops them (the cache is
// truncated to the log end), so a partition led but never written to costs
// no fsync at close; they are written once a batch follows them.
func (l *Log) saveEpochs() error {
	if !l.epochsUnsaved {
		return nil
	}
	entries, end := l.epochs.Entries(), l.endOffset()
	n := len(entries)
	for n > 0 && entries[n-1].StartOffset >= end {
		n--
	}
	if err := l.writeEpochEntries(entries[:n]); err != nil {
		return err
	}
	l.epochsUnsaved = n < len(entries)
	return nil
}

// writeEpochs rewrites leader-epoch-checkpoint (a new epoch starts rarely: once
// per leader election).
//
// A log without epochs and without the file (a new partition) writes
// nothing: a missing file reads as an empty cache (rebuilt from the
// segments, which hold nothing), and creating it would cost a file and a
// directory fsync per new partition, serially on the metadata publisher.
func (l *Log) writeEpochs() error {
	if err := l.writeEpochEntries(l.epochs.Entries()); err != nil {
		return err
	}
	l.epochsUnsaved = false
	return nil
}

// writeEpochEntries makes leader-epoch-checkpoint hold entries, durably,
// unless it does already (see writeEpochs for a missing file).
func (l *Log) writeEpochEntries(entries []EpochEntry) error {
	data := EncodeEpochCheckpoint(entries)
	old, err := os.ReadFile(filepath.Join(l.dir, LeaderEpochCheckpointFile))
	switch {
	case err == nil && string(old) == string(data):
	case errors.Is(err, os.ErrNotExist) && len(entries) == 0:
	default:
		if err := WriteFileAtomic(l.dir, LeaderEpochCheckpointFile, data); err != nil {
			return err
		}
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	return nil
}

// Read returns whole batches from the one holding offset: at most maxBytes of
// them, except that the first batch is returned whole even when larger (KIP-74),
// and none at or after maxOffset (the high watermark for consumers). An offset
// equal to maxOffset or the log end gives no data; one below the log start or
// above the log end is ErrOffsetOutOfRange. ReadRegion is the same without
// the copy.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	sg, start, stop, err := l.locate(offset, maxBytes, maxOffset)
	if err != nil || sg == nil {
		return nil, err
	}
	buf := make([]byte, stop-start)
	err = sg.withFile(func(f *os.File) error {
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// locate finds the segment and byte range [start, stop) of what Read
// returns; sg is nil when that is nothing. l.mu held (read).
func (l *Log) locate(offset int64, maxBytes int, maxOffset int64) (sg *logSegment, start, stop int64, err error) {
	if errors.Is(l.failed, ErrLogClosed) {
		return nil, 0, 0, ErrLogClosed
	}
	if offset < l.startOffset || offset > l.endOffset() {
		return nil, 0, 0, fmt.Errorf("%w: offset %d, log [%d, %d)", ErrOffsetOutOfRange, offset, l.startOffset, l.endOffset())
	}
	i := segmentFor(l.segments, offset)
	for ; i < len(l.segments) && offset < maxOffset; i++ {
		sg := l.segments[i]
		if offset >= sg.end {
			continue
		}
		start, stop, err := sg.span(offset, maxBytes, maxOffset)
		if err != nil {
			return nil, 0, 0, err
		}
		if stop > start {
			return sg, start, stop, nil
		}
	}
	return nil, 0, 0, nil
}

// segmentFor returns the index of the last segment whose base is <= offset.
func segmentFor(segs []*logSegment, offset int64) int {
	i, _ := slices.BinarySearchFunc(segs, offset, func(sg *logSegment, off int64) int {
		switch {
		case sg.base > off:
			return 1
		case sg.base < off:
			return -1
		}
		return 0
	})
	if i < len(segs) && segs[i].base == offset {
		return i
	}
	return max(i-1, 0)
}

// span finds the byte range of the batches Read returns from this segment.
func (sg *logSegment) span(offset int64, maxBytes int, maxOffset int64) (start, stop int64, err error) {
	pos := floorOffset(sg.idx, int32(offset-sg.base))
	if pos >= sg.size {
		return pos, pos, nil // nothing to read: the file stays closed
	}
	err = sg.withFile(func(f *os.File) error {
		start, stop, err = sg.spanIn(f, pos, offset, maxBytes, maxOffset)
		return err
	})
	return start, stop, err
}

func (sg *logSegment) spanIn(f *os.File, pos, offset int64, maxBytes int, maxOffset int64) (start, stop int64, err error) {
	start = -1
	for pos < sg.size {
		h, err := readHeaderAt(f, sg.path(), pos)
		if err != nil {
			return 0, 0, err
		}
		switch {
		case h.LastOffset < offset:
		case h.BaseOffset >= maxOffset:
			if start < 0 {
				start = pos
			}
			return start, pos, nil
		case start < 0:
			start = pos
		case pos+h.Size-start > int64(maxBytes):
			return start, pos, nil
		}
		pos += h.Size
	}
	if start < 0 {
		return pos, pos, nil
	}
	return start, pos, nil
}

// ActiveSegmentBase is the base offset of the segment appends go to.
func (l *Log) ActiveSegmentBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().base
}

// WalkBatches calls fn with the header of every batch from the one holding
// from to the log end, in order, reading headers only (and a control
// batch's record: its ControlType and CoordinatorEpoch); fn returning false
// stops the walk.
func (l *Log) WalkBatches(from int64, fn func(BatchInfo) bool) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if from < l.segments[0].base || from > l.endOffset() {
		return fmt.Errorf("%w: offset %d, log [%d, %d)", ErrOffsetOutOfRange, from, l.segments[0].base, l.endOffset())
	}
	for i := segmentFor(l.segments, from); i < len(l.segments); i++ {
		sg := l.segments[i]
		pos := floorOffset(sg.idx, int32(max(from-sg.base, 0)))
		if pos >= sg.size {
			continue
		}
		stop := false
		err := sg.withFile(func(f *os.File) error {
			for pos < sg.size {
				h, err := readHeaderAt(f, sg.path(), pos)
				if err != nil {
					return err
				}
				if h.IsControl() {
					h.ControlType, h.CoordinatorEpoch = readControl(f, h)
				}
				if h.LastOffset >= from && !fn(h) {
					stop = true
					return nil
				}
				pos += h.Size
			}
			return nil
		})
		if err != nil || stop {
			return err
		}
	}
	return nil
}

// maxControlBatchBytes bounds what WalkBatches reads of a control batch
// (one small record; Kafka's markers are 78 bytes).
const maxControlBatchBytes = 64 << 10

// readControl decodes the control record of the control batch h; a batch
// that does not decode (or is implausibly large) gives type -1.
func readControl(f *os.File, h BatchInfo) (ControlType, int32) {
	if h.Size > maxControlBatchBytes {
		return -1, -1
	}
	buf := make([]byte, h.Size)
	if _, err := f.ReadAt(buf, h.Position); err != nil {
		return -1, -1
	}
	b, err := ParseBatch(buf)
	if err != nil {
		return -1, -1
	}
	info := b.Info()
	return info.ControlType, info.CoordinatorEpoch
}

// OffsetForTimestamp finds the first batch whose max timestamp is at or after
// tsMs and returns it (ListOffsets by timestamp; the caller picks the record).
// ok is false when no batch qualifies.
func (l *Log) OffsetForTimestamp(tsMs int64) (b Batch, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, sg := range l.segments {
		if sg.maxTsMs < tsMs {
			continue
		}
		pos := floorOffset(sg.idx, floorTime(sg.tidx, tsMs))
		if pos >= sg.size {
			continue
		}
		found := false
		err = sg.withFile(func(f *os.File) error {
			for pos < sg.size {
				h, err := readHeaderAt(f, sg.path(), pos)
				if err != nil {
					return err
				}
				if h.MaxTimestampMs >= tsMs {
					buf := make([]byte, h.Size)
					if _, err := f.ReadAt(buf, pos); err != nil {
						return err
					}
					b, err = ParseBatch(buf)
					found = true
					return err
				}
				pos += h.Size
			}
			return nil
		})
		if err != nil || found {
			return b, err == nil && found, err
		}
	}
	return Batch{}, false, nil
}

// MaxTimestamp returns the largest batch max timestamp in the log and the last
// offset of the batch carrying it (ListOffsets MAX_TIMESTAMP, KIP-734); ok is
// false for an empty log.
func (l *Log) MaxTimestamp() (tsMs, offset int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	tsMs, offset = -1, -1
	for _, sg := range l.segments {
		if sg.maxTsMs > tsMs {
			tsMs, offset = sg.maxTsMs, sg.maxTsOffset
		}
	}
	return tsMs, offset, offset >= 0
}

// Flush fsyncs whatever was written since the last flush.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flush()
}

func (l *Log) flush() error {
	if l.failed != nil {
		return l.failed
	}
	if err := l.flushTopicID(); err != nil {
		return err
	}
	for _, sg := range l.segments {
		if err := sg.sync(); err != nil {
			return l.fail(err)
		}
		// An index file created since (at its first entry) needs its
		// directory entry durable too.
		l.dirUnsynced = l.dirUnsynced || sg.idxFile.opened || sg.tidxFile.opened
	}
	if err := l.saveEpochs(); err != nil {
		return l.fail(err)
	}
	if l.dirUnsynced {
		if err := l.syncDir(); err != nil {
			return l.fail(err)
		}
	}
	l.recoveryPoint = l.endOffset()
	return nil
}

// RecoveryPoint is the offset below which the log is known to be on disk
// (fsynced at a roll, Flush or Close): what recovery-point-offset-checkpoint
// records.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// SetStartOffset raises the log start offset to offset (at most the log
// end), as a log-start-offset-checkpoint or a leader's log start does
// (Kafka's maybeIncrementLogStartOffset); lower values change nothing.
// Segments wholly below it go at the next DeleteOldSegments.
func (l *Log) SetStartOffset(offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startOffset = max(l.startOffset, min(offset, l.endOffset()))
}

// Close flushes the log and closes its files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.failed, ErrLogClosed) {
		return nil
	}
	var err error
	if l.failed == nil {
		// As Kafka's LogSegment.close: the time index ends with the
		// segment's max timestamp, which a clean open reads back.
		// A segment with nothing written since its last fsync (a
		// partition that never got a record) is not fsynced again:
		// Kafka's flush covers only what lies past the recovery point.
		sg := l.active()
		n := len(sg.tidx)
		err = sg.appendTimeEntry()
		if len(sg.tidx) != n {
			sg.dirty = true
		}
		if err == nil && sg.size > 0 {
			err = sg.ensureIndexFiles()
		}
	}
	if ferr := l.flush(); err == nil {
		err = ferr
	}
	if errors.Is(err, ErrLogClosed) {
		return nil
	}
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	l.failed = ErrLogClosed
	return err
}

func (l *Log) closeFiles() error {
	var first error
	for _, sg := range l.segments {
		if err := sg.close(); first == nil {
			first = err
		}
	}
	return first
}

// Delete closes the log and removes its directory (MarkDeleted, then the
// removal).
func (l *Log) Delete(suffix string) error {
	doomed, err := l.MarkDeleted(suffix)
	if err != nil {
		return err
	}
	return os.RemoveAll(doomed)
}

// MarkDeleted closes the log and renames its directory to
// "<dir>.<suffix>-delete", as Kafka marks a deleted log (suffix: a unique
// id), durably (the parent directory is fsynced): a crash from then on
// leaves a directory no reload mistakes for a live log. It returns the new
// path, for the caller to remove, in the background if it likes.
func (l *Log) MarkDeleted(suffix string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.closeFiles() // the files are going away; a close error changes nothing
	l.failed = ErrLogClosed
	doomed := l.dir + "." + suffix + "-delete"
	if err := os.Rename(l.dir, doomed); err != nil {
		return "", err
	}
	return doomed, SyncDir(filepath.Dir(l.dir))
}

// fail records the first I/O failure; every later write returns it.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrLogFailed, err)
		l.logger().Error("partition log failed; refusing writes", zap.Error(err))
	}
	return l.failed
}
