package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// logBatch builds a batch of n records at base, 100 bytes of value each, with
// record timestamps tsMs, tsMs+1, ...
func logBatch(base int64, epoch int32, n int, tsMs int64) Batch {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100), TimestampMs: tsMs + int64(i)}
	}
	return EncodeBatch(base, epoch, tsMs, false, recs)
}

func openLogTest(t *testing.T, dir string, cfg LogConfig) *Log {
	t.Helper()
	l, err := OpenLog(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendN appends count batches of 3 records continuing the log, and returns them.
func appendN(t *testing.T, l *Log, epoch int32, count int) []Batch {
	t.Helper()
	var out []Batch
	for range count {
		end := l.EndOffset()
		b := logBatch(end, epoch, 3, 1000+end)
		if err := l.Append([]Batch{b}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// readAll reads everything from offset below maxOffset in chunks of maxBytes.
func readAll(t *testing.T, l *Log, offset int64, maxBytes int, maxOffset int64) []Batch {
	t.Helper()
	var out []Batch
	for {
		data, err := l.Read(offset, maxBytes, maxOffset)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			return out
		}
		bs, n, err := SplitBatches(data)
		if err != nil || n != len(data) || len(bs) == 0 {
			t.Fatalf("read at %d: %d batches, %d of %d bytes, %v", offset, len(bs), n, len(data), err)
		}
		out = append(out, bs...)
		offset = bs[len(bs)-1].NextOffset()
	}
}

func TestLogAppendRead(t *testing.T) {
	l := openLogTest(t, t.TempDir(), LogConfig{})
	written := appendN(t, l, 1, 10)
	if l.EndOffset() != 30 {
		t.Fatalf("end offset %d", l.EndOffset())
	}
	got := readAll(t, l, 0, 1<<20, l.EndOffset())
	if len(got) != 10 || !bytes.Equal(got[9].Raw, written[9].Raw) {
		t.Fatalf("read back %d batches", len(got))
	}
	// An offset inside a batch returns that whole batch first.
	data, err := l.Read(4, 1<<20, 30)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := ParseBatch(data[:written[1].Size()]); b.BaseOffset != 3 {
		t.Fatalf("read at 4 starts at %d", b.BaseOffset)
	}
	// maxBytes below one batch still returns the first batch whole (KIP-74), and
	// only that one.
	data, _ = l.Read(0, 10, 30)
	if len(data) != written[0].Size() {
		t.Fatalf("tiny maxBytes returned %d bytes, batch is %d", len(data), written[0].Size())
	}
	// Nothing at or after maxOffset (the high watermark).
	if got := readAll(t, l, 0, 1<<20, 9); len(got) != 3 || got[2].LastOffset != 8 {
		t.Fatalf("below hw 9: %d batches", len(got))
	}
	if data, err := l.Read(30, 100, 30); err != nil || data != nil {
		t.Fatalf("read at the end: %d bytes %v", len(data), err)
	}
	if _, err := l.Read(31, 100, 31); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	// Appends must continue the log and not go back in epoch.
	if err := l.Append([]Batch{logBatch(29, 1, 1, 0)}); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("non-contiguous append: %v", err)
	}
	if err := l.Append([]Batch{logBatch(30, 2, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]Batch{logBatch(31, 1, 1, 0)}); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("epoch regression: %v", err)
	}
}

func TestLogRollIndexesAndReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := LogConfig{SegmentBytes: 4000, IndexIntervalBytes: 500}
	l := openLogTest(t, dir, cfg)
	written := appendN(t, l, 1, 20)
	written = append(written, appendN(t, l, 3, 20)...)
	if len(l.segments) < 4 {
		t.Fatalf("%d segments after 40 batches of ~400 bytes with 4000-byte segments", len(l.segments))
	}
	for _, sg := range l.segments {
		checkIndexFiles(t, sg)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ckpt, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	if err != nil || string(ckpt) != "0\n2\n1 0\n3 60\n" {
		t.Fatalf("leader-epoch-checkpoint %q %v", ckpt, err)
	}

	l = openLogTest(t, dir, cfg)
	if l.EndOffset() != 120 || l.StartOffset() != 0 || l.LatestEpoch() != 3 {
		t.Fatalf("reopened: [%d, %d) epoch %d", l.StartOffset(), l.EndOffset(), l.LatestEpoch())
	}
	got := readAll(t, l, 0, 1500, 120)
	if len(got) != len(written) {
		t.Fatalf("read %d batches after reopen, wrote %d", len(got), len(written))
	}
	for i := range got {
		if !bytes.Equal(got[i].Raw, written[i].Raw) {
			t.Fatalf("batch %d differs after reopen", i)
		}
	}
	// Reads starting at every offset land on the batch holding it.
	for off := int64(0); off < 120; off++ {
		data, err := l.Read(off, 1, 120)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseBatch(data)
		if err != nil || b.BaseOffset > off || b.LastOffset < off {
			t.Fatalf("read at %d got [%d, %d] %v", off, b.BaseOffset, b.LastOffset, err)
		}
	}
	appendN(t, l, 3, 1)
	if l.EndOffset() != 123 {
		t.Fatalf("append after reopen: end %d", l.EndOffset())
	}
}

// checkIndexFiles verifies a segment's .index and .timeindex on disk: every
// offset entry points at the start of a batch holding that offset.
func checkIndexFiles(t *testing.T, sg *logSegment) {
	t.Helper()
	data, err := os.ReadFile(sg.idxFile.path(sg))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := decodeOffsetIndex(data, sg.size)
	if err != nil {
		t.Fatal(err)
	}
	if sg.size > 1500 && len(idx) == 0 {
		t.Fatalf("%s: no index entry in %d bytes", sg.path(), sg.size)
	}
	for _, e := range idx {
		h, err := sg.readHeader(int64(e.pos))
		if err != nil || h.BaseOffset > sg.base+int64(e.rel) || h.LastOffset < sg.base+int64(e.rel) {
			t.Fatalf("%s: index entry %+v -> batch [%d, %d] %v", sg.path(), e, h.BaseOffset, h.LastOffset, err)
		}
	}
	tdata, err := os.ReadFile(sg.tidxFile.path(sg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeTimeIndex(tdata); err != nil {
		t.Fatal(err)
	}
}

func TestLogRecoversTornAndCorruptTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(data []byte, lastSize int) []byte
	}{
		{"torn", func(data []byte, lastSize int) []byte { return data[:len(data)-lastSize/2] }},
		{"crc", func(data []byte, lastSize int) []byte {
			data[len(data)-5] ^= 0xff // a record byte of the last batch
			return data
		}},
		{"garbage", func(data []byte, _ int) []byte { return append(data, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLogTest(t, dir, LogConfig{})
			written := appendN(t, l, 1, 5)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, SegmentFileName(0, LogSuffix))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data = tc.damage(data, written[4].Size())
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			l = openLogTest(t, dir, LogConfig{})
			wantEnd := int64(12)
			if tc.name == "garbage" {
				wantEnd = 15
			}
			if l.EndOffset() != wantEnd {
				t.Fatalf("end offset %d after recovery, want %d", l.EndOffset(), wantEnd)
			}
			if st, _ := os.Stat(path); st.Size() != l.active().size {
				t.Fatalf("segment file %d bytes, log says %d", st.Size(), l.active().size)
			}
			appendN(t, l, 2, 1)
			if got := readAll(t, l, 0, 1<<20, l.EndOffset()); len(got) != int(wantEnd/3)+1 {
				t.Fatalf("%d batches after recovery and one append", len(got))
			}
		})
	}
}

func TestLogRebuildsDamagedIndexOfOlderSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := LogConfig{SegmentBytes: 4000, IndexIntervalBytes: 500}
	l := openLogTest(t, dir, cfg)
	appendN(t, l, 1, 30)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idxPath := filepath.Join(dir, SegmentFileName(0, IndexSuffix))
	if err := os.WriteFile(idxPath, []byte{0, 0, 0, 99, 0, 0, 0x7f, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openLogTest(t, dir, cfg)
	if l.EndOffset() != 90 {
		t.Fatalf("end %d", l.EndOffset())
	}
	checkIndexFiles(t, l.segments[0])
	if got := readAll(t, l, 0, 1<<20, 90); len(got) != 30 {
		t.Fatalf("%d batches", len(got))
	}
}

func TestPartitionMetadataFormat(t *testing.T) {
	id := [16]byte{0xf8, 0x4f, 0x2b, 0x70, 0x5b, 0x3a, 0x4c, 0x0d, 0x9a, 0xe1, 0x22, 0x17, 0x2d, 0x5c, 0xf0, 0xff}
	// Kafka's Uuid.toString: URL-safe base64, no padding; no final newline
	// (PartitionMetadataFileFormatter.toFile).
	want := "version: 0\ntopic_id: -E8rcFs6TA2a4SIXLVzw_w"
	if got := string(EncodePartitionMetadata(id)); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	for _, text := range []string{want, want + "\n"} { // a newline-ended file reads too
		back, err := DecodePartitionMetadata([]byte(text))
		if err != nil || back != id {
			t.Fatalf("decode %q: %x %v", text, back, err)
		}
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: -E8rcFs6TA2a4SIXLVzw_w\n", "version: 0\ntopic_id: short\n"} {
		if _, err := DecodePartitionMetadata([]byte(bad)); !errors.Is(err, ErrCorruptPartitionMetadata) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	dir := t.TempDir()
	l := openLogTest(t, dir, LogConfig{})
	if err := l.SetTopicID(id); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogTest(t, dir, LogConfig{})
	if got, ok := l.TopicID(); !ok || got != id {
		t.Fatalf("topic id after reopen %x %v", got, ok)
	}
}

// TestTopicIDFlushedBeforeFirstBatch: SetTopicID writes nothing (no
// fsync on the metadata publisher for a new partition);
// partition.metadata becomes durable at FlushTopicID (the replica
// manager's background flush) or, at the latest, before the first batch
// is written, so a directory a crash leaves without it holds no batch
// (Kafka's UnifiedLog.append flushes it first too).
func TestTopicIDFlushedBeforeFirstBatch(t *testing.T) {
	id := [16]byte{7, 1}
	path := func(dir string) string { return filepath.Join(dir, PartitionMetadataFile) }
	dir := filepath.Join(t.TempDir(), "demo-0")
	l := openLogTest(t, dir, LogConfig{})
	before := fsyncs.Load()
	if err := l.SetTopicID(id); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 0 {
		t.Fatalf("SetTopicID: %d fsyncs, want 0", n)
	}
	if _, err := os.Stat(path(dir)); !errors.Is(err, os.ErrNotExist) || l.TopicIDFlushed() {
		t.Fatalf("partition.metadata before any flush: %v (flushed %v)", err, l.TopicIDFlushed())
	}
	if got, ok := l.TopicID(); !ok || got != id {
		t.Fatalf("recorded topic id %x %v", got, ok)
	}
	if err := l.Append([]Batch{logBatch(0, 1, 2, 1000)}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path(dir))
	if err != nil || string(data) != string(EncodePartitionMetadata(id)) || !l.TopicIDFlushed() {
		t.Fatalf("partition.metadata after the first append: %q %v", data, err)
	}
	// The background flush: file and directory, once.
	dir2 := filepath.Join(t.TempDir(), "demo-1")
	l2 := openLogTest(t, dir2, LogConfig{})
	if err := l2.SetTopicID(id); err != nil {
		t.Fatal(err)
	}
	before = fsyncs.Load()
	for range 2 {
		if err := l2.FlushTopicID(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fsyncs.Load() - before; n != 2 {
		t.Fatalf("FlushTopicID twice: %d fsyncs, want 2", n)
	}
	if data, err := os.ReadFile(path(dir2)); err != nil || string(data) != string(EncodePartitionMetadata(id)) {
		t.Fatalf("partition.metadata after FlushTopicID: %q %v", data, err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l2.FlushTopicID(); err != nil {
		t.Fatalf("FlushTopicID of a closed log: %v", err)
	}
}

// TestNewLogCreatesOnlyItsSegment: a new partition's log creates its
// directory and its first segment's .log file and nothing else (no index
// files until their first entry, as Kafka's LazyIndex; no reads of files a
// new directory cannot hold); the index files appear with their entries, and
// a log whose segments never got one (too little data) reopens cleanly and
// after a crash with the right end.
func TestNewLogCreatesOnlyItsSegment(t *testing.T) {
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	dir := filepath.Join(t.TempDir(), "logs", "demo-0") // parents missing too
	l, err := OpenLog(dir, LogConfig{IndexIntervalBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(dir); !slices.Equal(got, []string{"00000000000000000000.log"}) || !l.Created() {
		t.Fatalf("a new log's directory holds %v (created %v), want only its segment", got, l.Created())
	}
	appendN(t, l, 1, 2) // under an index interval: no entry
	if got := names(dir); !slices.Equal(got, []string{"00000000000000000000.log", LeaderEpochCheckpointFile}) {
		t.Fatalf("after two small batches: %v", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Kafka's layout at close: a segment with batches has both index files.
	if got := names(dir); !slices.Equal(got, []string{"00000000000000000000.index", "00000000000000000000.log",
		"00000000000000000000.timeindex", LeaderEpochCheckpointFile}) {
		t.Fatalf("after the close: %v", got)
	}
	for _, suffix := range []string{IndexSuffix, TimeIndexSuffix} { // lost to a crash, say
		if err := os.Remove(filepath.Join(dir, SegmentFileName(0, suffix))); err != nil {
			t.Fatal(err)
		}
	}
	for _, clean := range []bool{true, false} {
		l = openLogTest(t, dir, LogConfig{IndexIntervalBytes: 1000, CleanShutdown: clean})
		if l.EndOffset() != 6 || l.Created() {
			t.Fatalf("reopen (clean %v): end %d created %v, want 6 false", clean, l.EndOffset(), l.Created())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	l = openLogTest(t, dir, LogConfig{IndexIntervalBytes: 1000, CleanShutdown: true})
	appendN(t, l, 1, 20)
	got := names(dir)
	if !slices.Contains(got, "00000000000000000000.index") || !slices.Contains(got, "00000000000000000000.timeindex") {
		t.Fatalf("index files not created with their entries: %v", got)
	}
	checkIndexFiles(t, l.segments[0])
	// The flush makes the new files' directory entries durable too: the
	// segment's three files and the directory.
	before := fsyncs.Load()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 4 {
		t.Fatalf("flush after the index files were created: %d fsyncs, want 4 (three files and the directory)", n)
	}
}

// TestCleanReopenOfEmptyLog: a partition never written to (no
// leader-epoch-checkpoint) reopens after a clean shutdown without a scan:
// no file created or rewritten, no fsync at the open or at the next close.
// It was rebuilt at every open (the missing checkpoint made every segment
// scanned), which created its index files and cost three fsyncs at close:
// at 5,000 partitions a broker's restart and its next shutdown.
func TestCleanReopenOfEmptyLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-0")
	l, err := OpenLog(dir, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetTopicID([16]byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpochStartOffset(2, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	for range 2 {
		n := fsyncs.Load()
		l, err = OpenLog(dir, LogConfig{CleanShutdown: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := fsyncs.Load() - n; got != 0 {
			t.Fatalf("clean reopen and close of an empty log: %d fsyncs, want 0", got)
		}
		after, _ := os.ReadDir(dir)
		if len(after) != len(before) {
			t.Fatalf("clean reopen changed the directory: %v, was %v", after, before)
		}
	}
}

func TestLogTimestamps(t *testing.T) {
	l := openLogTest(t, t.TempDir(), LogConfig{SegmentBytes: 2000, IndexIntervalBytes: 300})
	for i := range 20 {
		b := logBatch(int64(i*3), 1, 3, int64(1000+i*10))
		if err := l.Append([]Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ ts, base int64 }{{0, 0}, {1000, 0}, {1003, 3}, {1102, 30}, {1192, 57}} {
		b, ok, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || !ok || b.BaseOffset != tc.base {
			t.Errorf("ts %d: batch %d ok=%v err=%v, want %d", tc.ts, b.BaseOffset, ok, err, tc.base)
		}
	}
	if _, ok, _ := l.OffsetForTimestamp(1193); ok {
		t.Error("a timestamp past every record found a batch")
	}
	if ts, off, ok := l.MaxTimestamp(); !ok || ts != 1192 || off != 59 {
		t.Errorf("max timestamp %d at %d", ts, off)
	}
}

func TestLogDelete(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "demo-0")
	l := openLogTest(t, dir, LogConfig{})
	appendN(t, l, 1, 2)
	if err := l.Delete("abc"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
	if err := l.Append([]Batch{logBatch(6, 1, 1, 0)}); err == nil {
		t.Fatal("append after delete")
	}
}

// TestNewEmptyLogFsyncs: creating a partition's log and closing it without
// a record costs one fsync (the directory holding the new segment, at the
// close's flush), two with its partition.metadata, and a reopen finds an
// empty epoch cache. It took six (eight): an empty
// leader-epoch-checkpoint written durably (file and directory) at open, and
// the three never-written segment files fsynced at close; at 10,000
// partitions on a loaded disk that was half a minute of a broker's
// controlled shutdown and of a CreateTopics until served.
func TestNewEmptyLogFsyncs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-0")
	before := fsyncs.Load()
	l, err := OpenLog(dir, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 1 {
		t.Fatalf("open and close of a new empty log: %d fsyncs, want 1", n)
	}
	// A new partition as the replica manager creates it: open, then its
	// topic id, which Close writes to partition.metadata (file and
	// directory), whose directory fsync also covers the new segment: 2
	// fsyncs.
	dir2 := filepath.Join(t.TempDir(), "demo-1")
	before = fsyncs.Load()
	l2, err := OpenLog(dir2, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.SetTopicID([16]byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 2 {
		t.Fatalf("a new partition's log with its topic id: %d fsyncs, want 2", n)
	}
	// Led but never written to: the epoch start costs nothing, at close
	// either (the next open would drop it).
	dir3 := filepath.Join(t.TempDir(), "demo-2")
	before = fsyncs.Load()
	l3, err := OpenLog(dir3, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l3.SetTopicID([16]byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := l3.AssignEpochStartOffset(5, 0); err != nil {
		t.Fatal(err)
	}
	if err := l3.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 2 {
		t.Fatalf("a new partition led and closed without a record: %d fsyncs, want 2", n)
	}
	if _, err := os.Stat(filepath.Join(dir, LeaderEpochCheckpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leader-epoch-checkpoint of a log without epochs: %v, want none", err)
	}
	l = openLogTest(t, dir, LogConfig{CleanShutdown: true})
	if e := l.EpochEntries(); len(e) != 0 {
		t.Fatalf("epochs after reopen: %v", e)
	}
	// A leader's epoch start costs no fsync; the checkpoint gets it at the
	// flush that makes the epoch's first batch durable.
	before = fsyncs.Load()
	if err := l.AssignEpochStartOffset(3, 0); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - before; n != 0 {
		t.Fatalf("AssignEpochStartOffset: %d fsyncs, want 0", n)
	}
	if err := l.Append([]Batch{logBatch(0, 3, 2, 1000)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := DecodeEpochCheckpoint(data); err != nil || len(e) != 1 || e[0].Epoch != 3 || e[0].StartOffset != 0 {
		t.Fatalf("leader-epoch-checkpoint after the flush: %v %v, want epoch 3 at 0", e, err)
	}
}

// TestUnsavedEpochStartRecovered: a leader's epoch start that was never
// written to leader-epoch-checkpoint (no flush before a crash) comes back
// from the scan of the unflushed segment at the next open, with the epochs
// the checkpoint did hold; a roll writes it before moving the recovery
// point past the epoch's batches.
func TestUnsavedEpochStartRecovered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo-0")
	l, err := OpenLog(dir, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 2) // epoch 1 at 0, written by the append
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpochStartOffset(4, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 4, 2)
	want := l.EpochEntries()
	// Crash: no Close, reopen from the recovery point.
	l2 := openLogTest(t, dir, LogConfig{RecoveryPoint: l.RecoveryPoint()})
	if got := l2.EpochEntries(); !slices.Equal(got, want) {
		t.Fatalf("epochs after the crash: %v, want %v", got, want)
	}
	// A roll saves the unsaved entry before the recovery point passes it.
	if err := l2.AssignEpochStartOffset(7, l2.EndOffset()); err != nil {
		t.Fatal(err)
	}
	l2.SetRollConfig(1, DefaultLogSegmentMs) // every append rolls
	appendN(t, l2, 7, 2)
	data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeEpochCheckpoint(data)
	if err != nil || len(e) != 3 || e[2].Epoch != 7 {
		t.Fatalf("checkpoint after the roll: %v %v, want epochs 1, 4, 7", e, err)
	}
}
