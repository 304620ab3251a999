package main

// kraftd metadata dump: what `kafka-dump-log.sh --cluster-metadata-decoder
// --files ...` prints (Kafka's DumpLogSegments tool), for __cluster_metadata
// segments and snapshots, so that output can be diffed against a real Kafka
// dump of the same files. Where Kafka's Scala and Java versions of the tool
// differ, this follows the newer Java one: a LEADER_CHANGE control record
// prints its JSON body ("LeaderChange: {...}") instead of only its type.

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

const metadataUsage = `usage: kraftd metadata dump <segment.log|snapshot.checkpoint|dir>...

Prints each batch and record of __cluster_metadata segments and snapshots as
kafka-dump-log.sh --cluster-metadata-decoder does. A directory is dumped file by
file in offset order (its __cluster_metadata-0 subdirectory too, if present).
Exit status 1 if a batch is corrupt (the dump stops there) or a record could not
be decoded (it is reported in place and the dump goes on).`

// Errors of the dump. They end the command with status 1.
var (
	errDumpCorrupt     = errors.New("metadata dump: corrupt batch")
	errDumpTorn        = errors.New("metadata dump: incomplete batch at the end of the file")
	errDumpUndecodable = errors.New("metadata dump: records could not be decoded")
	errDumpFileName    = errors.New("metadata dump: not a segment (.log) or snapshot (.checkpoint) file name")
	errDumpEmptyDir    = errors.New("metadata dump: no .log or .checkpoint files")
)

// bootstrapCheckpoint is the snapshot-format file `storage format` writes at
// the root of a metadata directory; Kafka's tool labels it specially.
const bootstrapCheckpoint = "bootstrap.checkpoint"

func runMetadata(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(stderr, metadataUsage)
		return exitUsage
	}
	fs := pflag.NewFlagSet("metadata dump", pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), metadataUsage) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, metadataUsage)
		return exitUsage
	}
	targets, err := dumpTargets(fs.Args())
	if err != nil {
		return report(stderr, exitError, err)
	}
	out := bufio.NewWriter(stdout)
	err = dumpFiles(out, stderr, targets)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return report(stderr, exitError, err)
}

// dumpTarget is one file to dump, with what its name says about it.
type dumpTarget struct {
	path   string
	kind   targetKind
	offset int64 // segment base offset, or snapshot end offset
	epoch  int32 // snapshot epoch
}

type targetKind int

const (
	kindBootstrap targetKind = iota // sorts first: it precedes every offset
	kindSnapshot                    // before a segment at the same offset: it holds the offsets below
	kindSegment
)

// classify reads a file's role from its name, as Kafka's tool does (it picks
// the decoder by suffix and takes offsets from the name).
func classify(path string) (dumpTarget, error) {
	name := filepath.Base(path)
	t := dumpTarget{path: path}
	if name == bootstrapCheckpoint {
		t.kind = kindBootstrap
		return t, nil
	}
	if stem, ok := strings.CutSuffix(name, ".log"); ok {
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || base < 0 {
			return t, fmt.Errorf("%w: %s", errDumpFileName, path)
		}
		t.kind, t.offset = kindSegment, base
		return t, nil
	}
	stem, ok := strings.CutSuffix(name, ".checkpoint")
	end, epoch, found := strings.Cut(stem, "-")
	if !ok || !found {
		return t, fmt.Errorf("%w: %s", errDumpFileName, path)
	}
	endOffset, err1 := strconv.ParseInt(end, 10, 64)
	epochNum, err2 := strconv.ParseInt(epoch, 10, 32)
	if err1 != nil || err2 != nil || endOffset < 0 || epochNum < 0 {
		return t, fmt.Errorf("%w: %s", errDumpFileName, path)
	}
	t.kind, t.offset, t.epoch = kindSnapshot, endOffset, int32(epochNum)
	return t, nil
}

// dumpTargets expands the arguments: files are taken as given, directories
// become their segment and snapshot files in offset order.
func dumpTargets(args []string) ([]dumpTarget, error) {
	var out []dumpTarget
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, fmt.Errorf("metadata dump: %w", err)
		}
		if !st.IsDir() {
			t, err := classify(arg)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			continue
		}
		ts, err := dirTargets(arg)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// dirTargets lists dir, and its __cluster_metadata-0 subdirectory when dir is
// a metadata.log.dir, so either directory can be named.
func dirTargets(dir string) ([]dumpTarget, error) {
	dirs := []string{dir}
	if st, err := os.Stat(filepath.Join(dir, metadataTopic+"-0")); err == nil && st.IsDir() {
		dirs = append(dirs, filepath.Join(dir, metadataTopic+"-0"))
	}
	var out []dumpTarget
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, fmt.Errorf("metadata dump: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			// Other files (indexes, quorum-state, *.checkpoint.part) are
			// not record files; Kafka's tool would ignore them too.
			if t, err := classify(filepath.Join(d, e.Name())); err == nil {
				out = append(out, t)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %s", errDumpEmptyDir, dir)
	}
	slices.SortStableFunc(out, func(a, b dumpTarget) int {
		if a.kind == kindBootstrap || b.kind == kindBootstrap {
			return cmp.Compare(a.kind, b.kind)
		}
		if c := cmp.Compare(a.offset, b.offset); c != 0 {
			return c
		}
		return cmp.Compare(a.kind, b.kind)
	})
	return out, nil
}

// dumpStats carries what the whole dump must report at the end.
type dumpStats struct {
	undecodable int
	firstBad    int64 // offset of the first undecodable record
}

// dumpFiles prints every target to w. It stops at the first corrupt file;
// undecodable records are printed in place and reported once at the end.
func dumpFiles(w *bufio.Writer, stderr io.Writer, targets []dumpTarget) error {
	var st dumpStats
	for _, t := range targets {
		gaps, err := dumpFile(w, t, &st)
		if len(gaps) > 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			printGaps(stderr, t.path, gaps)
		}
		if err != nil {
			return err
		}
	}
	if st.undecodable > 0 {
		return fmt.Errorf("%w: %d (the first at offset %d)", errDumpUndecodable, st.undecodable, st.firstBad)
	}
	return nil
}

// printGaps reports non-consecutive record offsets inside one file, as
// Kafka's tool does after the dump.
func printGaps(w io.Writer, path string, gaps [][2]int64) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Fprintf(w, "Non-consecutive offsets in %s\n", path)
	for _, g := range gaps {
		fmt.Fprintf(w, "  %d is followed by %d\n", g[0], g[1])
	}
}

// dumpFile prints one file. It returns the offset gaps it saw and, for a
// corrupt or torn file, an error naming the byte position where the valid
// part ends (everything before it has been printed).
func dumpFile(w *bufio.Writer, t dumpTarget, st *dumpStats) (gaps [][2]int64, err error) {
	fmt.Fprintf(w, "Dumping %s\n", t.path)
	switch t.kind {
	case kindSegment:
		fmt.Fprintf(w, "Log starting offset: %d\n", t.offset)
	case kindSnapshot:
		fmt.Fprintf(w, "Snapshot end offset: %d, epoch: %d\n", t.offset, t.epoch)
	case kindBootstrap:
		fmt.Fprintln(w, "KRaft bootstrap snapshot")
	}
	f, err := os.Open(t.path)
	if err != nil {
		return nil, fmt.Errorf("metadata dump: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("metadata dump: %w", err)
	}
	sc := batchScanner{r: bufio.NewReaderSize(f, 1<<16), size: info.Size()}
	last := int64(-1)
	for {
		b, err := sc.next()
		if errors.Is(err, io.EOF) {
			return gaps, nil
		}
		if err != nil {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s\n", sc.size-sc.pos, filepath.Base(t.path))
			return gaps, fmt.Errorf("%s: %w", t.path, err)
		}
		printBatchLine(w, b, sc.pos)
		recs, err := b.Records()
		if err != nil {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s\n", sc.size-sc.pos, filepath.Base(t.path))
			return gaps, fmt.Errorf("%s: %w at position %d: %w", t.path, errDumpCorrupt, sc.pos, err)
		}
		hdr := readBatchHeader(b)
		for _, rec := range recs {
			if last >= 0 && rec.Offset != last+1 {
				gaps = append(gaps, [2]int64{last, rec.Offset})
			}
			last = rec.Offset
			printRecordLine(w, hdr, rec, st)
		}
		sc.pos += int64(b.Size())
	}
}

// batchScanner reads one batch at a time, so a 1 GiB segment is never held
// in memory whole.
//
// INVARIANTS: pos is the byte position of the next unread batch, and every
// byte before it belonged to a valid batch.
type batchScanner struct {
	r    *bufio.Reader
	size int64
	pos  int64
	buf  []byte
}

// batchLogOverhead is the batch prefix that batchLength does not count: the
// baseOffset and batchLength fields themselves.
const batchLogOverhead = 12

// next returns the batch at pos; io.EOF at a clean end of file. A batch
// that runs past the end of the file is a torn tail (errDumpTorn); one
// whose header or checksum is wrong is corrupt (errDumpCorrupt).
func (s *batchScanner) next() (raftlog.Batch, error) {
	left := s.size - s.pos
	if left == 0 {
		return raftlog.Batch{}, io.EOF
	}
	if left < batchLogOverhead {
		return raftlog.Batch{}, fmt.Errorf("%w: %d bytes at position %d", errDumpTorn, left, s.pos)
	}
	head, err := s.r.Peek(batchLogOverhead)
	if err != nil {
		return raftlog.Batch{}, fmt.Errorf("metadata dump: read at position %d: %w", s.pos, err)
	}
	length := int64(int32(binary.BigEndian.Uint32(head[8:])))
	if length < raftlog.BatchHeaderSize-batchLogOverhead {
		return raftlog.Batch{}, fmt.Errorf("%w at position %d: batch length %d", errDumpCorrupt, s.pos, length)
	}
	size := length + batchLogOverhead
	if size > left {
		return raftlog.Batch{}, fmt.Errorf("%w: a batch of %d bytes at position %d, %d bytes left",
			errDumpTorn, size, s.pos, left)
	}
	s.buf = slices.Grow(s.buf[:0], int(size))[:size]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return raftlog.Batch{}, fmt.Errorf("metadata dump: read at position %d: %w", s.pos, err)
	}
	b, err := raftlog.ParseBatch(s.buf)
	if err != nil {
		return raftlog.Batch{}, fmt.Errorf("%w at position %d: %w", errDumpCorrupt, s.pos, err)
	}
	return b, nil
}

// batchHeader holds the RecordBatch v2 header fields that the dump prints
// and raftlog.Batch does not carry.
type batchHeader struct {
	baseOffset    int64
	crc           uint32
	attributes    uint16
	lastDelta     int32
	baseTimestamp int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	count         int32
	maxTimestamp  int64
}

// Attribute bits of a RecordBatch v2 (Kafka's DefaultRecordBatch).
const (
	batchAttrLogAppendTime = 0x08
	batchAttrTransactional = 0x10
	batchAttrControl       = 0x20
	batchAttrDeleteHorizon = 0x40
	noSequence             = -1
	maxSequence            = 1<<31 - 1
)

// readBatchHeader decodes the fixed header of a batch that ParseBatch has
// validated, so every offset below is in range.
func readBatchHeader(b raftlog.Batch) batchHeader {
	be, raw := binary.BigEndian, b.Raw
	return batchHeader{
		baseOffset:    b.BaseOffset,
		crc:           be.Uint32(raw[17:]),
		attributes:    be.Uint16(raw[21:]),
		lastDelta:     int32(be.Uint32(raw[23:])),
		baseTimestamp: int64(be.Uint64(raw[27:])),
		maxTimestamp:  int64(be.Uint64(raw[35:])),
		producerID:    int64(be.Uint64(raw[43:])),
		producerEpoch: int16(be.Uint16(raw[51:])),
		baseSequence:  int32(be.Uint32(raw[53:])),
		count:         int32(be.Uint32(raw[57:])),
	}
}

func (h batchHeader) timestampType() string {
	if h.attributes&batchAttrLogAppendTime != 0 {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// sequenceAt is the producer sequence of the record delta places after the
// base, wrapping at MaxInt32 as Kafka's DefaultRecordBatch.incrementSequence.
func (h batchHeader) sequenceAt(delta int32) int32 {
	if h.baseSequence == noSequence {
		return noSequence
	}
	if h.baseSequence > maxSequence-delta {
		return delta - (maxSequence - h.baseSequence) - 1
	}
	return h.baseSequence + delta
}

// deleteHorizonMs prints as Kafka's tool does: the value is a Java
// OptionalLong, so real dumps show "OptionalLong.empty" or "OptionalLong[ms]".
func (h batchHeader) deleteHorizonMs() string {
	if h.attributes&batchAttrDeleteHorizon != 0 {
		return "OptionalLong[" + strconv.FormatInt(h.baseTimestamp, 10) + "]"
	}
	return "OptionalLong.empty"
}

// printBatchLine prints Kafka's per-batch line.
func printBatchLine(w io.Writer, b raftlog.Batch, pos int64) {
	h := readBatchHeader(b)
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d"+
		" producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t"+
		" isControl: %t deleteHorizonMs: %s",
		b.BaseOffset, b.LastOffset, h.count, h.baseSequence, h.sequenceAt(h.lastDelta),
		h.producerID, h.producerEpoch, b.Epoch, h.attributes&batchAttrTransactional != 0,
		h.attributes&batchAttrControl != 0, h.deleteHorizonMs())
	// ParseBatch refuses compressed batches and bad checksums, so a batch
	// that reaches here is uncompressed and valid.
	fmt.Fprintf(w, " position: %d %s: %d size: %d magic: 2 compresscodec: none crc: %d isvalid: true\n",
		pos, h.timestampType(), h.maxTimestamp, b.Size(), h.crc)
}

// printRecordLine prints Kafka's per-record line: the record's metadata,
// then the decoded control body or metadata payload. A record that cannot
// be decoded is reported in place, with its offset, and counted.
func printRecordLine(w io.Writer, h batchHeader, rec raftlog.Record, st *dumpStats) {
	ts := rec.TimestampMs
	if h.attributes&batchAttrLogAppendTime != 0 {
		ts = h.maxTimestamp // Kafka reports the batch's append time for every record
	}
	// raftlog.Record does not keep record headers; KRaft never writes any.
	fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: []",
		rec.Offset, h.timestampType(), ts, nullableLen(rec.Key), nullableLen(rec.Value),
		h.sequenceAt(int32(rec.Offset-h.baseOffset)))
	render, prefix := payloadText, " payload: "
	if h.attributes&batchAttrControl != 0 {
		render, prefix = controlText, " "
	}
	text, err := render(rec)
	if err != nil {
		if text == "" {
			text = fmt.Sprintf("%sError at offset %d, skipping. %v", prefix, rec.Offset, err)
		}
		if st.undecodable == 0 {
			st.firstBad = rec.Offset
		}
		st.undecodable++
	}
	fmt.Fprintf(w, "%s\n", text)
}

// nullableLen is Kafka's keySize/valueSize: -1 for null.
func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// payloadText renders a metadata record as --cluster-metadata-decoder does.
func payloadText(rec raftlog.Record) (string, error) {
	if rec.Value == nil {
		return "", nil // Kafka prints no payload for a null value
	}
	r, err := records.Decode(rec.Value)
	if err != nil {
		return "", err
	}
	// MarshalJSON is called directly: json.Marshal would re-escape <, > and &.
	js, err := r.MarshalJSON()
	if err != nil {
		return "", err
	}
	return " payload: " + string(js), nil
}

// controlLabels are the words Kafka's tool puts before each control body.
var controlLabels = map[records.ControlType]string{
	records.ControlLeaderChange:   " LeaderChange: ",
	records.ControlSnapshotHeader: " SnapshotHeader ",
	records.ControlSnapshotFooter: " SnapshotFooter ",
	records.ControlKRaftVersion:   " KRaftVersion ",
	records.ControlKRaftVoters:    " KRaftVoters ",
}

// controlText renders a control record as Kafka's tool does.
func controlText(rec raftlog.Record) (string, error) {
	t, err := records.DecodeControlKey(rec.Key)
	if err != nil {
		return "", err
	}
	switch t {
	case records.ControlAbort, records.ControlCommit:
		return endTxnMarkerText(t, rec.Value)
	}
	label, ok := controlLabels[t]
	if !ok {
		// Kafka prints an unknown control type by name and id and moves on;
		// so does this, but it also counts as undecodable.
		return fmt.Sprintf(" controlType: %s", t), fmt.Errorf("%w: control type %s at offset %d",
			records.ErrUnknownType, t, rec.Offset)
	}
	v, err := records.DecodeControlValue(t, rec.Value)
	if err != nil {
		return "", err
	}
	m, ok := v.(json.Marshaler)
	if !ok {
		return "", fmt.Errorf("%w: %s has no JSON form", records.ErrUnknownType, t)
	}
	js, err := m.MarshalJSON()
	if err != nil {
		return "", err
	}
	return label + string(js), nil
}

// endTxnMarkerText decodes a transaction marker (int16 version, int32
// coordinator epoch). The metadata log never holds one, but Kafka's tool
// prints them, so a stray one is shown rather than hidden.
func endTxnMarkerText(t records.ControlType, value []byte) (string, error) {
	if len(value) < 6 {
		return "", fmt.Errorf("%w: transaction marker of %d bytes", records.ErrTruncated, len(value))
	}
	epoch := int32(binary.BigEndian.Uint32(value[2:]))
	return fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", t, epoch), nil
}
