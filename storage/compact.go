package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// Log compaction (cleanup.policy=compact), a simplified form of Kafka's
// LogCleaner: every closed segment wholly below the high watermark is
// rewritten keeping, for each key, only its latest record; a tombstone (a
// null value) stays delete.retention.ms past its batch's timestamp, so
// consumers reading the topic from the start see the deletion, and then
// goes too. Records without a key are kept.
//
// Offsets never move, and a segment keeps its exact offset range, so the
// log stays contiguous for recovery and followers: each batch keeps its base
// and last offset, holding fewer records (possibly none). Runs of adjacent
// batches that are not transactional, not control, CreateTime and of the
// same leader epoch are merged into one batch covering the whole run
// (producer id -1), so a log of many small writes to few keys
// (__consumer_offsets, or an idempotent producer's table) shrinks to about
// one record per key. Merging drops idempotent producers' ids from closed
// segments: producer state is rebuilt from the latest producer snapshot
// (taken at every roll, so at the active segment's base) and the batches
// after it, and Kafka's cleaner keeps no more than each producer's last
// batch either.
// Transactional batches are rewritten in place (their markers and the
// aborted-transaction index need them), control batches kept whole, and a
// swapped segment keeps its .txnindex (file and entries). Records of aborted
// transactions never count as a key's latest (they supersede nothing, and
// go themselves); the caller bounds the pass by the last stable offset, so
// no open transaction is cleaned. Not done:
// min.cleanable.dirty.ratio and min.compaction.lag.ms (every closed segment
// below the high watermark is cleanable at once), and an offset map bounded
// in memory (it holds every key of the cleanable segments).

// mergedBatchMaxBytes bounds a batch made by merging a run.
const mergedBatchMaxBytes = 1 << 20

// CompactStats is what one Compact pass did.
type CompactStats struct {
	Segments       int   // segments rewritten
	RecordsRemoved int64 // superseded records and expired tombstones dropped
	BytesBefore    int64 // size of the rewritten segments before
	BytesAfter     int64 // and after
}

// rawRecord is one record of a batch with the bytes after its offset delta
// (key, value, headers) kept as they are.
type rawRecord struct {
	attrs        byte
	offset, tsMs int64
	key, value   []byte
	tail         []byte
}

// Compact cleans the closed segments below highWatermark at nowMs; see the
// comment above. A pass with no new closed segment since the last one and
// no tombstone come due does nothing. deleteRetentionMs is the topic's
// delete.retention.ms.
func (l *Log) Compact(nowMs, highWatermark, deleteRetentionMs int64) (CompactStats, error) {
	l.mu.RLock()
	if l.failed != nil {
		l.mu.RUnlock()
		return CompactStats{}, l.failed
	}
	var segs []*logSegment
	for _, sg := range l.segments[:len(l.segments)-1] {
		if sg.end > highWatermark {
			break
		}
		segs = append(segs, sg)
	}
	due := len(segs) > 0 && (segs[len(segs)-1].end > l.cleanedTo || nowMs >= l.tombstonesDueMs)
	var aborted []AbortedTxn
	if due {
		for _, sg := range l.segments {
			aborted = append(aborted, sg.txns...)
		}
	}
	l.mu.RUnlock()
	if !due {
		return CompactStats{}, nil
	}
	latest := map[string]int64{}
	for _, sg := range segs {
		err := scanRecords(sg, func(b Batch, r rawRecord) {
			if r.key != nil && !abortedBatch(b, aborted) {
				latest[string(r.key)] = r.offset
			}
		})
		if err != nil {
			return CompactStats{}, err
		}
	}
	var stats CompactStats
	c := cleaner{latest: latest, horizonMs: nowMs - deleteRetentionMs, retentionMs: deleteRetentionMs, nextDueMs: math.MaxInt64}
	for _, sg := range segs {
		if err := l.cleanSegment(sg, &c, &stats); err != nil {
			return stats, err
		}
	}
	l.mu.Lock()
	l.cleanedTo, l.tombstonesDueMs = segs[len(segs)-1].end, c.nextDueMs
	l.mu.Unlock()
	return stats, nil
}

// abortedBatch: b is a transactional batch of a transaction that was
// aborted (its range is in the aborted-transaction index). Its records never
// supersede a key's committed record, as Kafka's cleaner leaves aborted
// batches out of its offset map: read_committed consumers never saw them.
func abortedBatch(b Batch, aborted []AbortedTxn) bool {
	if !b.Transactional() {
		return false
	}
	pid := b.ProducerID()
	for _, e := range aborted {
		if e.ProducerID == pid && e.FirstOffset <= b.BaseOffset && b.BaseOffset <= e.LastOffset {
			return true
		}
	}
	return false
}

// scanRecords visits every record of a closed segment's data batches.
func scanRecords(sg *logSegment, visit func(Batch, rawRecord)) error {
	var ferr error
	res, err := ScanSegment(sg.path(), sg.base, -1, func(_ BatchInfo, b Batch) {
		if ferr != nil || b.Control {
			return
		}
		ferr = eachRawRecord(b, func(r rawRecord) { visit(b, r) })
	})
	switch {
	case err != nil:
		return err
	case ferr != nil:
		return ferr
	case res.Valid != res.Total:
		return fmt.Errorf("%w: compacting %s: %v", ErrCorruptBatch, sg.path(), res.Reason)
	}
	return nil
}

// eachRawRecord decodes b's records (decompressing it if needed).
func eachRawRecord(b Batch, fn func(rawRecord)) error {
	if b.Compression() != CompressionNone {
		plain, err := b.Recompress(CompressionNone)
		if err != nil {
			return err
		}
		b = plain
	}
	be := binary.BigEndian
	count := int32(be.Uint32(b.Raw[offRecordCount:]))
	baseTs := int64(be.Uint64(b.Raw[offBaseTimestamp:]))
	r := reader{b: b.Raw[BatchHeaderSize:]}
	for i := int32(0); i < count; i++ {
		before := r.b
		rec, err := r.record(b.BaseOffset, baseTs)
		if err != nil {
			return fmt.Errorf("batch at offset %d, record %d: %w", b.BaseOffset, i, err)
		}
		// The record's raw bytes: length varint, attributes, timestamp
		// delta, offset delta, then the tail kept as is.
		raw := before[:len(before)-len(r.b)]
		body := reader{b: raw}
		_, _ = body.varint()
		attrs := body.b[0]
		body.b = body.b[1:]
		_, _ = body.varint()
		_, _ = body.varint()
		fn(rawRecord{attrs: attrs, offset: rec.Offset, tsMs: rec.TimestampMs, key: rec.Key, value: rec.Value, tail: body.b})
	}
	return nil
}

// cleaner carries one Compact pass's decisions.
type cleaner struct {
	latest      map[string]int64
	horizonMs   int64 // tombstones of batches older than this go
	retentionMs int64
	nextDueMs   int64 // when the oldest kept tombstone comes due
}

func (c *cleaner) keep(b Batch, r rawRecord) bool {
	if r.key == nil {
		return true
	}
	if c.latest[string(r.key)] != r.offset {
		return false
	}
	if r.value == nil {
		if b.MaxTimestampMs < c.horizonMs {
			return false
		}
		c.nextDueMs = min(c.nextDueMs, b.MaxTimestampMs+c.retentionMs+1)
	}
	return true
}

// mergeable: a batch a run may absorb (see the file comment).
func mergeable(b Batch) bool {
	attrs := binary.BigEndian.Uint16(b.Raw[offAttributes:])
	return !b.Control && attrs&(attrTransactional|attrLogAppendTime) == 0
}

// run is the batches being merged: their range, epoch and kept records.
type run struct {
	base, last   int64
	epoch        int32
	baseTs       int64
	maxTs        int64
	records      []rawRecord
	bytes        int
	originals    int
	batches      []Batch // kept whole when the run is one unchanged batch
	removedCount int64
}

// cleanSegment rewrites sg if anything in it goes; the new file replaces it
// under the log's lock.
func (l *Log) cleanSegment(sg *logSegment, c *cleaner, stats *CompactStats) error {
	l.mu.RLock()
	size, end := sg.size, sg.end
	l.mu.RUnlock()
	tmp := filepath.Join(l.dir, SegmentFileName(sg.base, LogSuffix)+".cleaned.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // gone after the rename; a leftover of a failure otherwise
	w := bufio.NewWriterSize(f, 1<<16)
	var removed int64
	var pending *run
	var werr error
	write := func(raw []byte) {
		if werr == nil {
			_, werr = w.Write(raw)
		}
	}
	flush := func() {
		if pending == nil {
			return
		}
		write(encodeRun(pending))
		pending = nil
	}
	res, err := ScanSegment(sg.path(), sg.base, -1, func(_ BatchInfo, b Batch) {
		if werr != nil {
			return
		}
		if b.Control {
			flush()
			write(b.Raw)
			return
		}
		var kept []rawRecord
		total := 0
		if err := eachRawRecord(b, func(r rawRecord) {
			total++
			if c.keep(b, r) {
				r.key, r.value = append([]byte(nil), r.key...), append([]byte(nil), r.value...)
				r.tail = append([]byte(nil), r.tail...)
				kept = append(kept, r)
			}
		}); err != nil {
			werr = err
			return
		}
		removed += int64(total - len(kept))
		if !mergeable(b) {
			flush()
			if len(kept) == total {
				write(b.Raw)
			} else {
				raw, err := rewriteInPlace(b, kept)
				if err != nil {
					werr = err
					return
				}
				write(raw)
			}
			return
		}
		size := 0
		for _, r := range kept {
			size += len(r.tail) + 32
		}
		if pending != nil && (pending.epoch != b.Epoch || pending.bytes+size > mergedBatchMaxBytes) {
			flush()
		}
		if pending == nil {
			pending = &run{base: b.BaseOffset, epoch: b.Epoch, baseTs: int64(binary.BigEndian.Uint64(b.Raw[offBaseTimestamp:])), maxTs: b.MaxTimestampMs}
		}
		pending.last = b.LastOffset
		pending.maxTs = max(pending.maxTs, b.MaxTimestampMs)
		pending.records = append(pending.records, kept...)
		pending.bytes += size
		pending.originals++
		pending.removedCount += int64(total - len(kept))
		pending.batches = append(pending.batches, Batch{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Raw: append([]byte(nil), b.Raw...)})
	})
	flush()
	if err == nil {
		err = werr
	}
	if err == nil && res.Valid != res.Total {
		err = fmt.Errorf("%w: compacting %s: %v", ErrCorruptBatch, sg.path(), res.Reason)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || removed == 0 {
		return err
	}
	return l.swapSegment(sg, size, end, tmp, removed, stats)
}

// encodeRun is a run as one batch: its first batch whole if it is alone and
// lost nothing, else a merged batch over [base, last] with the kept records.
func encodeRun(r *run) []byte {
	if r.originals == 1 && r.removedCount == 0 {
		return r.batches[0].Raw
	}
	baseTs := r.baseTs
	for _, rec := range r.records {
		baseTs = min(baseTs, rec.tsMs)
	}
	raw := make([]byte, BatchHeaderSize, BatchHeaderSize+r.bytes)
	for _, rec := range r.records {
		raw = appendRawRecord(raw, rec, r.base, baseTs)
	}
	be := binary.BigEndian
	be.PutUint64(raw[offBaseOffset:], uint64(r.base))
	be.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	be.PutUint32(raw[offLeaderEpoch:], uint32(r.epoch))
	raw[offMagic] = 2
	be.PutUint16(raw[offAttributes:], 0)
	be.PutUint32(raw[offLastDelta:], uint32(r.last-r.base))
	be.PutUint64(raw[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(raw[offMaxTimestamp:], uint64(r.maxTs))
	be.PutUint64(raw[offProducerID:], ^uint64(0))
	be.PutUint16(raw[offProducerEpoch:], ^uint16(0))
	be.PutUint32(raw[offBaseSequence:], ^uint32(0))
	be.PutUint32(raw[offRecordCount:], uint32(len(r.records)))
	be.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return raw
}

// rewriteInPlace keeps b's header (offsets, epoch, producer fields,
// attributes) with only the kept records, compressed as b was.
func rewriteInPlace(b Batch, kept []rawRecord) ([]byte, error) {
	be := binary.BigEndian
	baseTs := int64(be.Uint64(b.Raw[offBaseTimestamp:]))
	raw := make([]byte, BatchHeaderSize, BatchHeaderSize+len(b.Raw))
	copy(raw, b.Raw[:BatchHeaderSize])
	for _, rec := range kept {
		raw = appendRawRecord(raw, rec, b.BaseOffset, baseTs)
	}
	codec := b.Compression()
	be.PutUint16(raw[offAttributes:], be.Uint16(raw[offAttributes:])&^attrCompressionMask)
	be.PutUint32(raw[offRecordCount:], uint32(len(kept)))
	be.PutUint32(raw[offBatchLength:], uint32(len(raw)-logOverhead))
	be.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	out := b
	out.Raw = raw
	if codec == CompressionNone {
		return raw, nil
	}
	re, err := out.Recompress(codec)
	if err != nil {
		return nil, err
	}
	return re.Raw, nil
}

// appendRawRecord re-frames a record at deltas from base and baseTs.
func appendRawRecord(dst []byte, r rawRecord, base, baseTs int64) []byte {
	body := make([]byte, 0, len(r.tail)+21)
	body = append(body, r.attrs)
	body = binary.AppendVarint(body, r.tsMs-baseTs)
	body = binary.AppendVarint(body, r.offset-base)
	body = append(body, r.tail...)
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// swapSegment replaces sg's file with the cleaned one at tmp: the old
// indexes go first (a crash then leaves the old segment, whose indexes are
// rebuilt), the rename is atomic, the indexes are rebuilt from the new file.
//
// A follower's truncation may have cut into sg meanwhile (it runs beside
// the background goroutine): the cleaned file would bring back what it cut,
// so the swap is skipped unless sg still has the size and end it was
// cleaned at.
func (l *Log) swapSegment(sg *logSegment, size, end int64, tmp string, removed int64, stats *CompactStats) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := -1
	for j, s := range l.segments {
		if s == sg {
			i = j
		}
	}
	if i < 0 || i == len(l.segments)-1 || l.failed != nil || sg.size != size || sg.end != end {
		return nil // removed, truncated into or failed meanwhile: skip this pass
	}
	before := sg.size
	if err := sg.close(); err != nil {
		return l.fail(err)
	}
	for _, suffix := range []string{IndexSuffix, TimeIndexSuffix} {
		if err := os.Remove(filepath.Join(l.dir, SegmentFileName(sg.base, suffix))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return l.fail(err)
		}
	}
	if err := os.Rename(tmp, sg.path()); err != nil {
		return l.fail(err)
	}
	if err := SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	fresh, err := l.openSegment(sg.base)
	if err != nil {
		return l.fail(err)
	}
	if _, err := l.rebuildSegment(fresh, sg.base, -1); err != nil {
		return l.fail(err)
	}
	if fresh.end != sg.end {
		return l.fail(fmt.Errorf("compacted segment %s ends at %d, was %d", sg.path(), fresh.end, sg.end))
	}
	l.segments[i] = fresh
	stats.Segments++
	stats.RecordsRemoved += removed
	stats.BytesBefore += before
	stats.BytesAfter += fresh.size
	l.logger().Info("compacted log segment", zap.Int64("base", sg.base), zap.Int64("end", sg.end),
		zap.Int64("bytes_before", before), zap.Int64("bytes_after", fresh.size), zap.Int64("records_removed", removed))
	return nil
}
