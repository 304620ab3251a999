package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// The key and value are Kafka's TransactionLogKey v0 and
// TransactionLogValue v0 byte for byte, and decode back.
func TestRecordFormat(t *testing.T) {
	if got, want := EncodeKey("tx-1"), []byte{0, 0, 0, 4, 't', 'x', '-', '1'}; !bytes.Equal(got, want) {
		t.Fatalf("key %x, want %x", got, want)
	}
	if id, err := DecodeKey(EncodeKey("tx-1")); err != nil || id != "tx-1" {
		t.Fatalf("key decodes to %q %v", id, err)
	}
	m := &Metadata{TransactionalID: "tx-1", ProducerID: 1000, ProducerEpoch: 2, TimeoutMs: 60000, State: Ongoing,
		Partitions: map[TopicPartition]struct{}{{"b", 1}: {}, {"a", 3}: {}, {"a", 0}: {}}, LastUpdateMs: 1700000000500, StartMs: 1700000000000}
	want := []byte{0, 0, // version
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, // producer id 1000
		0, 2, // epoch
		0, 0, 0xea, 0x60, // timeout 60000
		1,          // Ongoing
		0, 0, 0, 2, // two topics, sorted
		0, 1, 'a', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3,
		0, 1, 'b', 0, 0, 0, 1, 0, 0, 0, 1,
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x69, 0xf4, // last update 1700000000500
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // start 1700000000000
	}
	got := EncodeValue(m)
	if !bytes.Equal(got, want) {
		t.Fatalf("value\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeValue("tx-1", got)
	if err != nil || back.ProducerID != 1000 || back.ProducerEpoch != 2 || back.State != Ongoing || len(back.Partitions) != 3 ||
		back.StartMs != m.StartMs || back.LastUpdateMs != m.LastUpdateMs || back.TimeoutMs != 60000 {
		t.Fatalf("decoded %+v %v", back, err)
	}
	empty := &Metadata{TransactionalID: "e", ProducerID: 5, State: Empty, TimeoutMs: 1, StartMs: -1}
	if raw := EncodeValue(empty); !bytes.Equal(raw[17:21], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("an Empty transaction's partitions are not null: %x", raw)
	}
	// Counts beyond the bytes left, unknown versions and states, trailing
	// bytes: refused, never allocated.
	huge := bytes.Clone(got)
	binary.BigEndian.PutUint32(huge[17:], 0x7fffffff)
	bad := map[string][]byte{"huge count": huge, "version 9": append([]byte{0, 9}, got[2:]...),
		"trailing": append(bytes.Clone(got), 0), "short": got[:20], "state 8": func() []byte { b := bytes.Clone(got); b[16] = 8; return b }()}
	for name, b := range bad {
		if _, err := DecodeValue("tx-1", b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeKey([]byte{0, 0, 0, 9, 'x'}); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("short key: %v", err)
	}
}

// A flexible v1 value (transaction.version 2 writes them) decodes its
// common fields, skipping tagged fields.
func TestDecodeValueV1(t *testing.T) {
	b := []byte{0, 1,
		0, 0, 0, 0, 0, 0, 0, 7, // producer id 7
		0, 1, // epoch
		0, 0, 0x27, 0x10, // timeout 10000
		3,         // PrepareAbort
		2,         // one topic (compact)
		2, 'x', 2, // topic "x", one partition
		0, 0, 0, 4, 0, // partition 4, no tags
		0, 0, 0, 0, 0, 0, 0, 9, // last update
		0, 0, 0, 0, 0, 0, 0, 8, // start
		1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 6, // tag 0 PreviousProducerId = 6
	}
	m, err := DecodeValue("t", b)
	if err != nil || m.ProducerID != 7 || m.State != PrepareAbort || len(m.Partitions) != 1 || m.StartMs != 8 {
		t.Fatalf("v1 decoded %+v %v", m, err)
	}
	if _, ok := m.Partitions[TopicPartition{"x", 4}]; !ok {
		t.Fatalf("partitions %v", m.Partitions)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(EncodeValue(&Metadata{ProducerID: 1, State: Ongoing, Partitions: map[TopicPartition]struct{}{{"t", 0}: {}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeValue("f", b)
		if err != nil || len(b) < 2 || b[1] != 0 {
			return
		}
		if m.State == Empty && len(m.Partitions) > 0 {
			return // a v0 value naming partitions for Empty re-encodes them as null
		}
		m2, err := DecodeValue("f", EncodeValue(m))
		if err != nil || m2.ProducerID != m.ProducerID || len(m2.Partitions) != len(m.Partitions) || m2.State != m.State {
			t.Fatalf("%x -> %+v -> %+v %v", b, m, m2, err)
		}
	})
}
