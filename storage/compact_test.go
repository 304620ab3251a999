package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

type keyed struct {
	key, value string
	null       bool // a tombstone
	keyless    bool
}

// compactLog writes batches of 1-3 records over 8 keys (some tombstones,
// some keyless records, one gzip batch, idempotent producers' batches, one
// transactional batch) into small segments; it returns the model of every
// offset.
func compactLog(t *testing.T, l *Log, rng *rand.Rand, batches int, tsMs int64) map[int64]keyed {
	t.Helper()
	model := map[int64]keyed{}
	for i := range batches {
		n := 1 + rng.IntN(3)
		recs := make([]Record, n)
		base := l.EndOffset()
		for j := range recs {
			k := keyed{key: fmt.Sprintf("k%d", rng.IntN(8)), value: fmt.Sprintf("v%d-%d", i, j)}
			switch rng.IntN(10) {
			case 0:
				k.null = true
			case 1:
				k.keyless = true
			}
			recs[j] = Record{TimestampMs: tsMs}
			if !k.keyless {
				recs[j].Key = []byte(k.key)
			}
			if !k.null {
				recs[j].Value = []byte(k.value)
			}
			model[base+int64(j)] = k
		}
		b := EncodeBatch(base, 1, tsMs, false, recs)
		switch i {
		case 5:
			gz, err := b.Recompress(CompressionGzip)
			if err != nil {
				t.Fatal(err)
			}
			b = gz
		case 9:
			b = withProducer(b, 77, true)
		default:
			if i%3 == 0 {
				b = withProducer(b, 78, false)
			}
		}
		if err := l.Append([]Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
	return model
}

// withProducer stamps an idempotent producer id on b, transactional or not.
func withProducer(b Batch, pid int64, transactional bool) Batch {
	raw := append([]byte(nil), b.Raw...)
	if transactional {
		binary.BigEndian.PutUint16(raw[offAttributes:], binary.BigEndian.Uint16(raw[offAttributes:])|attrTransactional)
	}
	binary.BigEndian.PutUint64(raw[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(raw[offProducerEpoch:], 0)
	binary.BigEndian.PutUint32(raw[offBaseSequence:], 0)
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	b.Raw = raw
	return b
}

// readModel reads the whole log back as offset -> record.
func readModel(t *testing.T, l *Log) map[int64]keyed {
	t.Helper()
	out := map[int64]keyed{}
	next := int64(0)
	for _, b := range readAll(t, l, 0, 1<<20, l.EndOffset()) {
		if b.BaseOffset != next {
			t.Fatalf("batch at %d where %d was next: the log lost its contiguity", b.BaseOffset, next)
		}
		next = b.NextOffset()
		plain, err := b.Recompress(CompressionNone)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := plain.Records()
		if err != nil && len(recs) > 0 {
			t.Fatal(err)
		}
		prev := int64(-1)
		for _, r := range recs {
			if r.Offset <= prev || r.Offset < b.BaseOffset || r.Offset > b.LastOffset {
				t.Fatalf("record offset %d in batch [%d, %d] after %d", r.Offset, b.BaseOffset, b.LastOffset, prev)
			}
			prev = r.Offset
			out[r.Offset] = keyed{key: string(r.Key), value: string(r.Value), null: r.Value == nil, keyless: r.Key == nil}
		}
	}
	return out
}

// expectCompacted is the model after compaction of the offsets below
// cleanEnd: keyless records stay, a key keeps only its latest record there,
// and a tombstone goes when dropTombstones.
func expectCompacted(model map[int64]keyed, cleanEnd int64, dropTombstones bool) map[int64]keyed {
	latest := map[string]int64{}
	for off, k := range model {
		if off < cleanEnd && !k.keyless && off >= latest[k.key] {
			latest[k.key] = off
		}
	}
	out := map[int64]keyed{}
	for off, k := range model {
		switch {
		case off >= cleanEnd, k.keyless:
		case latest[k.key] != off:
			continue
		case k.null && dropTombstones:
			continue
		}
		if k.keyless {
			k.key = ""
		}
		if k.null {
			k.value = ""
		}
		out[off] = k
	}
	return out
}

func sameModel(t *testing.T, what string, got, want map[int64]keyed) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for off, w := range want {
		if g, ok := got[off]; !ok || g != w {
			t.Fatalf("%s: offset %d is %+v (present %v), want %+v", what, off, g, ok, w)
		}
	}
}

// TestCompactKeepsLatestPerKey: after a pass, the closed segments below the
// high watermark hold each key's latest record only (tombstones until
// delete.retention.ms has passed), offsets and the log end do not move, the
// log reads back contiguous, and it recovers the same after a restart.
func TestCompactKeepsLatestPerKey(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			l, err := OpenLog(dir, LogConfig{SegmentBytes: 700})
			if err != nil {
				t.Fatal(err)
			}
			model := compactLog(t, l, rand.New(rand.NewPCG(seed, 9)), 120, 5000)
			end, segments, size := l.EndOffset(), l.NumSegments(), l.Size()
			cleanEnd := l.ActiveSegmentBase()
			const retentionMs = 1000
			stats, err := l.Compact(5500, end, retentionMs) // tombstones are 500 ms old: kept
			if err != nil {
				t.Fatal(err)
			}
			if stats.Segments == 0 || l.Size() >= size || l.EndOffset() != end || l.NumSegments() != segments {
				t.Fatalf("stats %+v, size %d -> %d, end %d -> %d, segments %d -> %d", stats, size, l.Size(), end, l.EndOffset(), segments, l.NumSegments())
			}
			sameModel(t, "after the first pass", readModel(t, l), expectCompacted(model, cleanEnd, false))
			if again, err := l.Compact(5600, end, retentionMs); err != nil || again.Segments != 0 {
				t.Fatalf("a pass with nothing new rewrote %+v (%v)", again, err)
			}
			if _, err := l.Compact(7000, end, retentionMs); err != nil { // the tombstones came due
				t.Fatal(err)
			}
			want := expectCompacted(model, cleanEnd, true)
			sameModel(t, "after the tombstones went", readModel(t, l), want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			reopened := openLogTest(t, dir, LogConfig{SegmentBytes: 700}) // not a clean shutdown: every segment is scanned
			if reopened.EndOffset() != end {
				t.Fatalf("end offset %d after the restart, was %d", reopened.EndOffset(), end)
			}
			sameModel(t, "after the restart", readModel(t, reopened), want)
		})
	}
}
