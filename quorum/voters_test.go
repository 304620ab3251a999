package quorum

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

func testDirID(b byte) [16]byte {
	var u [16]byte
	for i := range u {
		u[i] = b + byte(i)
	}
	return u
}

func mustVoterSet(t testing.TB, voters ...VoterNode) VoterSet {
	t.Helper()
	vs, err := NewVoterSet(voters)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestVotersRecordBytes pins the VotersRecord and KRaftVersionRecord encodings to
// Kafka's schemas (VotersRecord.json, KRaftVersionRecord.json: version 0, flexible
// from 0), written out field by field, and checks them against the independent
// codec of metadata/records that `kraftd metadata dump` uses.
func TestVotersRecordBytes(t *testing.T) {
	vs := mustVoterSet(t, VoterNode{
		Key:             ReplicaKey{ID: 3, DirectoryID: testDirID(0x10)},
		Endpoints:       []Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}},
		KRaftVersionMin: 0, KRaftVersionMax: 1,
	})
	dir10 := testDirID(0x10)
	want := "0000" + // Version
		"02" + // Voters: compact array, 1 element
		"00000003" + // VoterId
		hex.EncodeToString(slices.Clone(dir10[:])) + // VoterDirectoryId
		"02" + // Endpoints: 1 element
		"0b" + hex.EncodeToString([]byte("CONTROLLER")) + // Name
		"0a" + hex.EncodeToString([]byte("localhost")) + // Host
		"2385" + // Port 9093
		"00" + // endpoint tags
		"0000" + "0001" + // KRaftVersionFeature min, max
		"00" + // feature tags
		"00" + // voter tags
		"00" // record tags
	got := AppendVotersRecord(nil, vs)
	if hex.EncodeToString(got) != want {
		t.Fatalf("VotersRecord\n got %x\nwant %s", got, want)
	}
	other := records.VotersRecord{Voters: []records.VotersRecordVoter{{
		VoterID: 3, VoterDirectoryID: records.UUID(testDirID(0x10)),
		Endpoints:           []records.VotersRecordEndpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}},
		KRaftVersionFeature: records.KRaftVersionFeature{MinSupportedVersion: 0, MaxSupportedVersion: 1},
	}}}
	if o := other.AppendTo(nil); !bytes.Equal(o, got) {
		t.Fatalf("metadata/records encodes\n%x\nquorum encodes\n%x", o, got)
	}
	back, err := ParseVotersRecord(got)
	if err != nil || !back.Equal(vs) {
		t.Fatalf("ParseVotersRecord = %v, %v; want %v", back, err, vs)
	}
	if kv := AppendKRaftVersionRecord(nil, 1); hex.EncodeToString(kv) != "0000000100" {
		t.Fatalf("KRaftVersionRecord = %x", kv)
	}
	if lvl, err := ParseKRaftVersionRecord((&records.KRaftVersionRecord{KRaftVersion: 1}).AppendTo(nil)); err != nil || lvl != 1 {
		t.Fatalf("ParseKRaftVersionRecord = %d, %v", lvl, err)
	}
}

// TestVotersRecordRefused: a record from the network or a damaged file that no
// voter set can have is refused before anything is allocated for it.
func TestVotersRecordRefused(t *testing.T) {
	one := VoterNode{Key: ReplicaKey{ID: 1, DirectoryID: testDirID(1)}, KRaftVersionMax: 1}
	good := AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{one}})
	dup := AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{one, one}})
	neg := AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{{Key: ReplicaKey{ID: -1}}}})
	badRange := AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{{Key: ReplicaKey{ID: 1}, KRaftVersionMin: 1}}})
	twoNames := AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{{Key: ReplicaKey{ID: 1},
		Endpoints: []Endpoint{{Name: "C", Host: "a", Port: 1}, {Name: "C", Host: "b", Port: 2}}}}})
	for name, b := range map[string][]byte{
		"empty set":         AppendVotersRecord(nil, VoterSet{}),
		"null voters":       {0, 0, 0, 0},
		"huge voter count":  {0, 0, 0xff, 0xff, 0xff, 0x7f, 0},
		"huge endpoints":    append(append([]byte{0, 0, 2, 0, 0, 0, 1}, make([]byte, 16)...), 0xff, 0xff, 0x7f),
		"truncated":         good[:len(good)-3],
		"trailing bytes":    append(slices.Clone(good), 0),
		"duplicate id":      dup,
		"negative id":       neg,
		"min above max":     badRange,
		"repeated listener": twoNames,
	} {
		if _, err := ParseVotersRecord(b); !errors.Is(err, ErrInvalidControlRecord) {
			t.Errorf("%s: ParseVotersRecord(%x) = %v, want ErrInvalidControlRecord", name, b, err)
		}
	}
	for _, b := range [][]byte{{0, 0, 0, 2, 0}, {0, 0, 0xff, 0xff, 0}, {0, 0, 0}, {0, 0, 0, 1, 0, 9}} {
		if _, err := ParseKRaftVersionRecord(b); !errors.Is(err, ErrInvalidControlRecord) {
			t.Errorf("ParseKRaftVersionRecord(%x) = %v, want ErrInvalidControlRecord", b, err)
		}
	}
}

func drawVoterSet(t *rapid.T) VoterSet {
	ids := rapid.SliceOfNDistinct(rapid.Int32Range(0, 1000), 1, 7, rapid.ID).Draw(t, "ids")
	var voters []VoterNode
	for _, id := range ids {
		v := VoterNode{Key: ReplicaKey{ID: id}, KRaftVersionMin: rapid.Int16Range(0, 1).Draw(t, "min")}
		v.KRaftVersionMax = v.KRaftVersionMin + rapid.Int16Range(0, 1).Draw(t, "span")
		copy(v.Key.DirectoryID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dir"))
		for i, name := range rapid.SliceOfNDistinct(rapid.StringMatching(`[A-Z_]{1,12}`), 0, 3, rapid.ID).Draw(t, "names") {
			v.Endpoints = append(v.Endpoints, Endpoint{Name: name, Host: rapid.StringMatching(`[a-z0-9.]{0,20}`).Draw(t, "host"),
				Port: uint16(rapid.IntRange(0, 65535).Draw(t, "port") + i)})
		}
		voters = append(voters, v)
	}
	vs, err := NewVoterSet(voters)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestVotersRecordRoundTrip: every valid voter set decodes to itself, and
// metadata/records reads the same fields.
func TestVotersRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vs := drawVoterSet(t)
		b := AppendVotersRecord(nil, vs)
		back, err := ParseVotersRecord(b)
		if err != nil || !back.Equal(vs) {
			t.Fatalf("round trip of %v: %v, %v", vs, back, err)
		}
		var other records.VotersRecord
		if err := other.ReadFrom(b); err != nil || len(other.Voters) != len(vs.Voters) {
			t.Fatalf("metadata/records reads %d voters, %v", len(other.Voters), err)
		}
		if re := other.AppendTo(nil); !bytes.Equal(re, b) {
			t.Fatalf("metadata/records re-encodes %x, want %x", re, b)
		}
	})
}

func FuzzParseVotersRecord(f *testing.F) {
	f.Add(AppendVotersRecord(nil, VoterSet{Voters: []VoterNode{{Key: ReplicaKey{ID: 1, DirectoryID: testDirID(1)},
		Endpoints: []Endpoint{{Name: "CONTROLLER", Host: "h", Port: 1}}, KRaftVersionMax: 1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := ParseVotersRecord(b)
		if err != nil {
			return
		}
		back, err := ParseVotersRecord(AppendVotersRecord(nil, vs))
		if err != nil || !back.Equal(vs) {
			t.Fatalf("re-encoding %v: %v, %v", vs, back, err)
		}
	})
}

// TestBootstrapSnapshotLayout: the snapshot `storage format --standalone` writes
// is Kafka's: a header control batch at offset 0 holding SnapshotHeader,
// KRaftVersion(1) and Voters, then the footer batch at offset 3, all at epoch 0;
// ParseSnapshot gives the voter set back, and a kraft.version 0 snapshot has none.
func TestBootstrapSnapshotLayout(t *testing.T) {
	vs := mustVoterSet(t, VoterNode{Key: ReplicaKey{ID: 1, DirectoryID: testDirID(7)},
		Endpoints: []Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}, KRaftVersionMax: 1})
	data, err := BootstrapSnapshot(KRaftVersionDynamic, vs, 1234)
	if err != nil {
		t.Fatal(err)
	}
	batches, n, err := raftlog.SplitBatches(data)
	if err != nil || n != len(data) || len(batches) != 2 {
		t.Fatalf("%d batches, %d of %d bytes, %v", len(batches), n, len(data), err)
	}
	var types []string
	for _, b := range batches {
		if !b.Control || b.Epoch != 0 {
			t.Fatalf("batch at %d: control %t epoch %d", b.BaseOffset, b.Control, b.Epoch)
		}
		recs, _ := b.Records()
		for _, r := range recs {
			ct, _ := records.DecodeControlKey(r.Key)
			if _, err := records.DecodeControlValue(ct, r.Value); err != nil {
				t.Fatalf("metadata/records cannot decode %s: %v", ct, err)
			}
			types = append(types, ct.String())
		}
	}
	if batches[1].BaseOffset != 3 || !slices.Equal(types, []string{"SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS", "SNAPSHOT_FOOTER"}) {
		t.Fatalf("footer at %d, records %v", batches[1].BaseOffset, types)
	}
	s, err := ParseSnapshot(raftlog.BootstrapSnapshotID, data)
	if err != nil || s.KRaft.KRaftVersion != 1 || !s.KRaft.Voters.Equal(vs) || len(s.Batches) != 0 || s.LastContainedTimestampMs != 1234 {
		t.Fatalf("ParseSnapshot = %+v, %v", s, err)
	}
	if _, err := BootstrapSnapshot(KRaftVersionStatic, vs, 0); err == nil {
		t.Fatal("a kraft.version 0 bootstrap snapshot was encoded")
	}
	var static []byte
	_ = EncodeSnapshot(raftlog.SnapshotID{EndOffset: 5, Epoch: 2}, 0, SnapshotRecords(nil), 1<<10, func(b raftlog.Batch) error {
		static = append(static, b.Raw...)
		return nil
	})
	if s, err := ParseSnapshot(raftlog.SnapshotID{EndOffset: 5, Epoch: 2}, static); err != nil || s.KRaft.KRaftVersion != 0 || len(s.KRaft.Voters.Voters) != 0 {
		t.Fatalf("static snapshot: %+v, %v", s.KRaft, err)
	}
}
