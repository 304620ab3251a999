package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The aborted-transaction index, Kafka's TransactionIndex: one
// <base>.txnindex per segment, holding an entry for every transaction
// whose ABORT marker is in that segment, in marker order. An entry is 34
// bytes, big-endian: int16 version (0), int64 producer id, int64 first
// offset, int64 last offset (the marker's), int64 last stable offset (the
// partition's LSO once the transaction completed). read_committed fetches
// return the entries that overlap the fetched range (AbortedTransactions),
// so consumers drop the aborted batches.

// TxnIndexSuffix is the file name suffix of the aborted-transaction index.
const TxnIndexSuffix = ".txnindex"

const txnIndexEntrySize = 34

// segmentSuffixes are the files of one segment.
var segmentSuffixes = []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix}

// AbortedTxn is one entry of the aborted-transaction index.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// EncodeTxnIndexEntry renders one entry.
func EncodeTxnIndexEntry(e AbortedTxn) []byte {
	be := binary.BigEndian
	b := make([]byte, 2, txnIndexEntrySize) // version 0
	b = be.AppendUint64(b, uint64(e.ProducerID))
	b = be.AppendUint64(b, uint64(e.FirstOffset))
	b = be.AppendUint64(b, uint64(e.LastOffset))
	return be.AppendUint64(b, uint64(e.LastStableOffset))
}

// DecodeTxnIndex parses an index file's bytes: the entries up to the first
// that is torn (a partial trailing entry), of an unknown version, or out of
// order, and the byte length of that valid prefix.
func DecodeTxnIndex(data []byte) ([]AbortedTxn, int) {
	be := binary.BigEndian
	var out []AbortedTxn
	n := 0
	for len(data)-n >= txnIndexEntrySize {
		p := data[n:]
		if be.Uint16(p) != 0 {
			break
		}
		e := AbortedTxn{ProducerID: int64(be.Uint64(p[2:])), FirstOffset: int64(be.Uint64(p[10:])),
			LastOffset: int64(be.Uint64(p[18:])), LastStableOffset: int64(be.Uint64(p[26:]))}
		if e.FirstOffset < 0 || e.LastOffset < e.FirstOffset || len(out) > 0 && e.LastOffset <= out[len(out)-1].LastOffset {
			break
		}
		out = append(out, e)
		n += txnIndexEntrySize
	}
	return out, n
}

func (sg *logSegment) txnIndexPath() string {
	return filepath.Join(sg.l.dir, SegmentFileName(sg.base, TxnIndexSuffix))
}

// loadTxnIndex reads the segment's aborted-transaction index, if any; a torn
// or invalid tail is cut off the file.
func (sg *logSegment) loadTxnIndex() error {
	data, err := os.ReadFile(sg.txnIndexPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var n int
	sg.txns, n = DecodeTxnIndex(data)
	if n < len(data) {
		return os.Truncate(sg.txnIndexPath(), int64(n))
	}
	return nil
}

// writeTxnIndex rewrites the segment's index from sg.txns (after a cut),
// removing the file when it has no entry left.
func (sg *logSegment) writeTxnIndex() error {
	if len(sg.txns) == 0 {
		if err := os.Remove(sg.txnIndexPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	var data []byte
	for _, e := range sg.txns {
		data = append(data, EncodeTxnIndexEntry(e)...)
	}
	dir := sg.l.dir
	return WriteFileAtomic(dir, filepath.Base(sg.txnIndexPath()), data)
}

// cutTxnIndex drops the entries whose markers are at or after offset.
func (sg *logSegment) cutTxnIndex(offset int64) error {
	keep := len(sg.txns)
	for keep > 0 && sg.txns[keep-1].LastOffset >= offset {
		keep--
	}
	if keep == len(sg.txns) {
		return nil
	}
	sg.txns = sg.txns[:keep]
	return sg.writeTxnIndex()
}

// AppendAbortedTxn records an aborted transaction in the index of the
// segment holding its marker (e.LastOffset), durably: aborts are rare, and a
// lost entry would show aborted records to read_committed consumers. An
// entry whose marker is not after the segment's last entry is already there
// (the producer state is rebuilt over a log tail at open) and is skipped.
func (l *Log) AppendAbortedTxn(e AbortedTxn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	if e.FirstOffset < 0 || e.LastOffset < e.FirstOffset || e.LastOffset >= l.endOffset() || e.LastOffset < l.segments[0].base {
		return fmt.Errorf("%w: aborted transaction [%d, %d] in log [%d, %d)", ErrOffsetOutOfRange,
			e.FirstOffset, e.LastOffset, l.segments[0].base, l.endOffset())
	}
	sg := l.segments[segmentFor(l.segments, e.LastOffset)]
	if n := len(sg.txns); n > 0 && sg.txns[n-1].LastOffset >= e.LastOffset {
		return nil
	}
	f, err := os.OpenFile(sg.txnIndexPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return l.fail(err)
	}
	_, err = f.Write(EncodeTxnIndexEntry(e))
	if err == nil {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.fail(err)
	}
	sg.txns = append(sg.txns, e)
	return nil
}

// AbortedTxns answers a read_committed fetch of [from, upTo), as Kafka's
// UnifiedLog.collectAbortedTransactions: the aborted transactions whose
// marker is at or after from and whose first offset is below upTo, from the
// segment holding from onwards, stopping at the first entry whose last
// stable offset reaches upTo (no later entry can overlap the range).
func (l *Log) AbortedTxns(from, upTo int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for i := segmentFor(l.segments, from); i < len(l.segments); i++ {
		for _, e := range l.segments[i].txns {
			if e.LastOffset >= from && e.FirstOffset < upTo {
				out = append(out, e)
			}
			if e.LastStableOffset >= upTo {
				return out
			}
		}
	}
	return out
}
