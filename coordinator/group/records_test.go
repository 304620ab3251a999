package group

import (
	"bytes"
	"testing"

	"github.com/kraftd/kraftd/storage"
)

// TestRecordBytesMatchKafkaSchemas spells out, byte by byte from Kafka's
// group-coordinator schemas (OffsetCommitKey v1: int16 version, string
// group, string topic, int32 partition; OffsetCommitValue v3: int16
// version, int64 offset, int32 leaderEpoch, string metadata, int64
// commitTimestamp; GroupMetadataKey v2: int16 version, string group;
// strings as int16 length + bytes), what the coordinator writes, and reads
// it back.
func TestRecordBytesMatchKafkaSchemas(t *testing.T) {
	rec := offsetCommitRecord("g1", TopicPartition{"tp", 3}, &committedOffset{offset: 258, leaderEpoch: 7, metadata: "md", commitMs: 0x0102})
	wantKey := []byte{0, 1, 0, 2, 'g', '1', 0, 2, 't', 'p', 0, 0, 0, 3}
	wantValue := []byte{0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 7, 0, 2, 'm', 'd', 0, 0, 0, 0, 0, 0, 1, 2}
	if !bytes.Equal(rec.Key, wantKey) || !bytes.Equal(rec.Value, wantValue) {
		t.Fatalf("offset commit record\nkey   %x, want %x\nvalue %x, want %x", rec.Key, wantKey, rec.Value, wantValue)
	}
	if tomb := offsetCommitRecord("g1", TopicPartition{"tp", 3}, nil); tomb.Value != nil || !bytes.Equal(tomb.Key, wantKey) {
		t.Fatalf("tombstone %x/%x", tomb.Key, tomb.Value)
	}
	if k := groupTombstone("g1").Key; !bytes.Equal(k, []byte{0, 2, 0, 2, 'g', '1'}) {
		t.Fatalf("group key %x", k)
	}

	g := newGroup("g1", 0, 5)
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 4, "m1"
	g.members["m1"] = &member{id: "m1", clientID: "c", clientHost: "/h", sessionTimeoutMs: 6000, rebalanceTimeoutMs: 9000,
		protocols: []protocol{{"range", []byte{9}}}, assignment: []byte{8}}
	groups := map[string]*group{}
	for _, r := range []storage.Record{groupMetadataRecord(g), rec} {
		lr, err := decodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		replay(groups, 0, lr)
	}
	got := groups["g1"]
	m := got.members["m1"]
	if got.generation != 4 || got.leader != "m1" || got.protocol != "range" || m == nil ||
		m.sessionTimeoutMs != 6000 || m.rebalanceTimeoutMs != 9000 || !bytes.Equal(m.assignment, []byte{8}) ||
		!bytes.Equal(m.metadataFor("range"), []byte{9}) || got.offsets[TopicPartition{"tp", 3}].offset != 258 {
		t.Fatalf("replayed group %+v member %+v", got, m)
	}
	if _, err := decodeRecord(storage.Record{Key: []byte{0, 9, 0, 0}}); err == nil {
		t.Fatal("a key of unknown version decoded")
	}
}
