package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Fixed timestamps keep the golden output stable.
const (
	dumpTs0 = int64(1_700_000_000_000)
	dumpTs1 = dumpTs0 + 1000
)

func dataRecord(t *testing.T, version int16, m records.Message) raftlog.Record {
	t.Helper()
	v, err := records.Record{Version: version, Message: m}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return raftlog.Record{Value: v}
}

func controlRecord(v records.ControlValue) raftlog.Record {
	return raftlog.Record{Key: records.EncodeControlKey(v.ControlType()), Value: v.AppendTo(nil)}
}

var dumpTopicID = records.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// writeDumpLog writes a small __cluster_metadata log as a node would: a
// LeaderChange, kraft.version and voters, then metadata records, rolled
// over two segments, plus one snapshot. It returns the partition directory.
func writeDumpLog(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	s, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{SegmentBytes: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	voters := []records.Voter{{VoterID: 1}, {VoterID: 2}, {VoterID: 3}}
	part := records.NewPartitionRecord()
	part.PartitionID, part.TopicID = 0, dumpTopicID
	part.Replicas, part.ISR, part.Leader, part.LeaderEpoch, part.PartitionEpoch = []int32{1, 2}, []int32{1, 2}, 1, 0, 0
	batches := []raftlog.Batch{
		raftlog.EncodeBatch(0, 1, dumpTs0, true, []raftlog.Record{controlRecord(&records.LeaderChangeMessage{
			LeaderID: 1, Voters: voters, GrantingVoters: voters[:2]})}),
		raftlog.EncodeBatch(1, 1, dumpTs0, true, []raftlog.Record{
			controlRecord(&records.KRaftVersionRecord{KRaftVersion: 1}),
			controlRecord(&records.VotersRecord{Voters: []records.VotersRecordVoter{{
				VoterID: 1, VoterDirectoryID: dumpTopicID,
				Endpoints:           []records.VotersRecordEndpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}},
				KRaftVersionFeature: records.KRaftVersionFeature{MaxSupportedVersion: 1}}}}),
		}),
		raftlog.EncodeBatch(3, 1, dumpTs1, false, []raftlog.Record{
			dataRecord(t, 0, &records.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 14}),
			dataRecord(t, 0, &records.TopicRecord{Name: "orders<&>", TopicID: dumpTopicID}),
			dataRecord(t, 0, part),
		}),
		raftlog.EncodeBatch(6, 2, dumpTs1, false, []raftlog.Record{dataRecord(t, 0, &records.NoOpRecord{})}),
	}
	for _, b := range batches {
		if err := s.Append([]raftlog.Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	w, err := s.CreateSnapshot(raftlog.SnapshotID{EndOffset: 6, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []raftlog.Batch{
		raftlog.EncodeBatch(0, 1, dumpTs1, true, []raftlog.Record{controlRecord(&records.SnapshotHeaderRecord{LastContainedLogTimestamp: dumpTs1})}),
		raftlog.EncodeBatch(1, 1, dumpTs1, false, []raftlog.Record{
			dataRecord(t, 0, &records.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 14}),
			dataRecord(t, 0, &records.TopicRecord{Name: "orders<&>", TopicID: dumpTopicID}),
		}),
		raftlog.EncodeBatch(3, 1, dumpTs1, true, []raftlog.Record{controlRecord(&records.SnapshotFooterRecord{})}),
	} {
		if err := w.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runDump runs `kraftd metadata dump args...` in-process.
func runDump(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	var out bytes.Buffer
	status = run(append([]string{"metadata", "dump"}, args...), &out, errFile)
	errText, err := os.ReadFile(errFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), string(errText), status
}

func TestMetadataDumpGolden(t *testing.T) {
	dir := writeDumpLog(t)
	out, errText, status := runDump(t, dir)
	if status != exitOK || errText != "" {
		t.Fatalf("status %d, stderr:\n%s", status, errText)
	}
	got := strings.ReplaceAll(out, dir, "DIR")
	golden := filepath.Join("testdata", "metadata_dump.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("dump differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

// TestMetadataDumpBatchFieldsMatchKmsg checks every printed batch field
// against franz-go's independent RecordBatch decoder, so the golden file is
// not only self-consistent.
func TestMetadataDumpBatchFieldsMatchKmsg(t *testing.T) {
	dir := writeDumpLog(t)
	seg := filepath.Join(dir, "00000000000000000000.log")
	out, _, status := runDump(t, seg)
	if status != exitOK {
		t.Fatalf("status %d", status)
	}
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lines := batchLines(out)
	pos := 0
	for i := 0; pos < len(raw); i++ {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[pos:]); err != nil {
			t.Fatal(err)
		}
		size := int(b.Length) + 12
		want := fmt.Sprintf("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: -1 "+
			"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: false isControl: %t "+
			"deleteHorizonMs: OptionalLong.empty position: %d CreateTime: %d size: %d magic: %d compresscodec: none crc: %d isvalid: true",
			b.FirstOffset, b.FirstOffset+int64(b.LastOffsetDelta), b.NumRecords, b.FirstSequence,
			b.ProducerID, b.ProducerEpoch, b.PartitionLeaderEpoch, b.Attributes&0x20 != 0,
			pos, b.MaxTimestamp, size, b.Magic, uint32(b.CRC))
		if i >= len(lines) || lines[i] != want {
			t.Fatalf("batch %d:\n got %q\nwant %q", i, lineAt(lines, i), want)
		}
		pos += size
	}
	if len(lines) == 0 {
		t.Fatal("no batches printed")
	}
}

func batchLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "baseOffset: ") {
			ls = append(ls, l)
		}
	}
	return ls
}

func lineAt(ls []string, i int) string {
	if i < len(ls) {
		return ls[i]
	}
	return "<missing>"
}

func TestMetadataDumpCorruptBatchStops(t *testing.T) {
	dir := writeDumpLog(t)
	seg := filepath.Join(dir, "00000000000000000000.log")
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := raftlog.SplitBatches(raw)
	if err != nil || len(first) < 2 {
		t.Fatalf("segment has %d batches: %v", len(first), err)
	}
	at := first[0].Size()
	raw[at+raftlog.BatchHeaderSize] ^= 0xff // a record byte of the second batch: its CRC fails
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errText, status := runDump(t, dir)
	if status != exitError {
		t.Fatalf("status %d, want %d", status, exitError)
	}
	if !strings.Contains(out, "baseOffset: 0 lastOffset: 0 ") || strings.Contains(out, "baseOffset: 1 ") {
		t.Errorf("want the first batch and nothing after the corrupt one:\n%s", out)
	}
	wantTail := fmt.Sprintf("Found %d invalid bytes at the end of 00000000000000000000.log\n", len(raw)-at)
	if !strings.HasSuffix(out, wantTail) {
		t.Errorf("output should end with %q:\n%s", wantTail, out)
	}
	if strings.Contains(out, "Snapshot end offset") {
		t.Error("the dump went on to the next file after a corrupt one")
	}
	if !strings.Contains(errText, "corrupt batch at position "+strconv.Itoa(at)) || !strings.Contains(errText, "crc") {
		t.Errorf("stderr should name the position and cause: %q", errText)
	}
}

func TestMetadataDumpTornTail(t *testing.T) {
	dir := writeDumpLog(t)
	seg := filepath.Join(dir, "00000000000000000003.log")
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 200, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errText, status := runDump(t, seg)
	if status != exitError || !strings.Contains(errText, "incomplete batch") {
		t.Fatalf("status %d stderr %q", status, errText)
	}
	if !strings.Contains(out, "| offset: 6 ") || !strings.HasSuffix(out, "Found 15 invalid bytes at the end of 00000000000000000003.log\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestMetadataDumpUnknownRecordTypeIsReported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	s, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unknown := raftlog.Record{Value: []byte{1, 0xe7, 0x07, 0, 0}} // frame 1, type 999, version 0
	b := raftlog.EncodeBatch(0, 1, dumpTs0, false, []raftlog.Record{
		unknown, dataRecord(t, 0, &records.NoOpRecord{}),
	})
	ctrl := raftlog.EncodeBatch(2, 1, dumpTs0, true, []raftlog.Record{{Key: records.EncodeControlKey(42), Value: []byte{0, 0}}})
	if err := s.Append([]raftlog.Batch{b, ctrl}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, errText, status := runDump(t, dir)
	if status != exitError {
		t.Fatalf("status %d", status)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\| offset: 0 .* payload: Error at offset 0, skipping\. records: unknown record type: 999$`),
		regexp.MustCompile(`(?m)^\| offset: 1 .* payload: \{"type":"NO_OP_RECORD","version":0,"data":\{\}\}$`),
		regexp.MustCompile(`(?m)^\| offset: 2 .* keySize: 4 valueSize: 2 sequence: -1 headerKeys: \[\] controlType: UNKNOWN\(42\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output does not match %s:\n%s", want, out)
		}
	}
	if !strings.Contains(errText, "records could not be decoded: 2 (the first at offset 0)") {
		t.Errorf("stderr: %q", errText)
	}
}

func TestMetadataDumpDirectoryOrder(t *testing.T) {
	root := t.TempDir()
	part := filepath.Join(root, "__cluster_metadata-0")
	if err := os.Mkdir(part, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{
		"__cluster_metadata-0/00000000000000000100.log",
		"__cluster_metadata-0/00000000000000000100-0000000003.checkpoint",
		"__cluster_metadata-0/00000000000000000000.log",
		"__cluster_metadata-0/00000000000000000020-0000000001.checkpoint",
		"__cluster_metadata-0/00000000000000000000.index",
		"__cluster_metadata-0/quorum-state",
		"__cluster_metadata-0/leader-epoch-checkpoint",
		"__cluster_metadata-0/00000000000000000030-0000000001-abc.checkpoint.part",
		"bootstrap.checkpoint",
		"meta.properties",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(root, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	targets, err := dumpTargets([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range targets {
		rel, _ := filepath.Rel(root, tg.path)
		got = append(got, rel)
	}
	want := []string{
		"bootstrap.checkpoint",
		"__cluster_metadata-0/00000000000000000000.log",
		"__cluster_metadata-0/00000000000000000020-0000000001.checkpoint",
		"__cluster_metadata-0/00000000000000000100-0000000003.checkpoint",
		"__cluster_metadata-0/00000000000000000100.log",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out, _, status := runDump(t, root)
	if status != exitOK || !strings.HasPrefix(out, "Dumping "+filepath.Join(root, "bootstrap.checkpoint")+"\nKRaft bootstrap snapshot\n") {
		t.Errorf("status %d output:\n%s", status, out)
	}
}

func TestMetadataDumpUsage(t *testing.T) {
	for _, args := range [][]string{{"metadata"}, {"metadata", "dump"}, {"metadata", "list"}} {
		errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		if status := run(args, &bytes.Buffer{}, errFile); status != exitUsage {
			t.Errorf("%v: status %d, want %d", args, status, exitUsage)
		}
		errFile.Close()
	}
	if _, errText, status := runDump(t, filepath.Join(t.TempDir(), "notes.txt")); status != exitError {
		t.Errorf("missing file: status %d %q", status, errText)
	}
	bad := filepath.Join(t.TempDir(), "quorum-state")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText, status := runDump(t, bad); status != exitError || !strings.Contains(errText, "not a segment") {
		t.Errorf("non-log file: status %d %q", status, errText)
	}
}

// TestMetadataDumpSecurityRecords: a log with the records Kafka writes for
// ACLs, quotas, SCRAM, delegation tokens and the migration state dumps every
// one of them, and no SCRAM key material appears in the output.
func TestMetadataDumpSecurityRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	s, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice := "alice"
	salt, stored, server := []byte("salt-SECRET-1"), []byte("stored-SECRET-2"), []byte("server-SECRET-3")
	msgs := []records.Message{
		&records.ZkMigrationStateRecord{},
		&records.AccessControlEntryRecord{ID: dumpTopicID, ResourceType: 2, ResourceName: "t", PatternType: 3,
			Principal: "User:alice", Host: "*", Operation: 3, PermissionType: 3},
		&records.RemoveAccessControlEntryRecord{ID: dumpTopicID},
		&records.ClientQuotaRecord{Entity: []records.ClientQuotaEntity{{EntityType: "user", EntityName: &alice}},
			Key: "producer_byte_rate", Value: 1024},
		&records.UserScramCredentialRecord{Name: "alice", Mechanism: 1, Salt: salt, StoredKey: stored,
			ServerKey: server, Iterations: 4096},
		&records.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
		&records.DelegationTokenRecord{Owner: "User:alice", Requester: "User:alice", TokenID: "tok"},
		&records.RemoveDelegationTokenRecord{TokenID: "tok"},
	}
	var recs []raftlog.Record
	for _, m := range msgs {
		recs = append(recs, dataRecord(t, 0, m))
	}
	if err := s.Append([]raftlog.Batch{raftlog.EncodeBatch(0, 1, dumpTs0, false, recs)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, errText, status := runDump(t, dir)
	if status != exitOK || errText != "" {
		t.Fatalf("status %d, stderr:\n%s", status, errText)
	}
	for i, m := range msgs {
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^\| offset: %d .* payload: \{"type":"%s","version":0,"data":\{`, i, m.Type()))
		if !want.MatchString(out) {
			t.Errorf("no payload line for %s:\n%s", m.Type(), out)
		}
	}
	if !strings.Contains(out, `"salt":"(redacted)","storedKey":"(redacted)","serverKey":"(redacted)","iterations":4096`) {
		t.Errorf("SCRAM record not printed redacted:\n%s", out)
	}
	for _, secret := range [][]byte{salt, stored, server} {
		for _, form := range []string{string(secret), base64.StdEncoding.EncodeToString(secret), hex.EncodeToString(secret)} {
			if strings.Contains(out, form) {
				t.Errorf("dump shows key material %q:\n%s", form, out)
			}
		}
	}
}
