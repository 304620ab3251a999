package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEncodeQuorumStateGolden(t *testing.T) {
	dir := [16]byte{0x27, 0xc6, 0x80, 0x3d, 0xc7, 0xcb, 0x42, 0xdd, 0x9b, 0xaa, 0xcd, 0x49, 0x4f, 0xfa, 0xcc, 0x81}
	tests := []struct {
		name string
		st   QuorumState
		want string
	}{
		{
			// The example in Kafka's FileQuorumStateStore javadoc, with voters.
			name: "v0 leader",
			st:   QuorumState{LeaderID: 1, LeaderEpoch: 2, VotedID: -1, CurrentVoters: []int32{1, 2, 3}},
			want: `{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}`,
		},
		{
			name: "v0 no voters",
			st:   EmptyQuorumState(),
			want: `{"clusterId":"","leaderId":-1,"leaderEpoch":0,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}`,
		},
		{
			// Kafka's javadoc v1 example: "J8aAPcfLQt2bqs1JT_rMgQ" is dir above.
			name: "v1 voted",
			st:   QuorumState{LeaderID: -1, LeaderEpoch: 2, VotedID: 1, VotedDirectoryID: dir, DataVersion: 1},
			want: `{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}`,
		},
		{
			name: "v1 zero directory",
			st:   QuorumState{LeaderID: 3, LeaderEpoch: 7, VotedID: -1, DataVersion: 1},
			want: `{"leaderId":3,"leaderEpoch":7,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeQuorumState(tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			back, err := DecodeQuorumState(got)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.st
			if want.DataVersion == 0 && want.CurrentVoters == nil {
				want.CurrentVoters = []int32{}
			}
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip: got %+v want %+v", back, want)
			}
		})
	}
}

func TestDecodeQuorumStateErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"", ErrCorruptQuorumState},
		{"{", ErrCorruptQuorumState},
		{"[]", ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":2,"votedId":-1}`, ErrCorruptQuorumState},
		{`{"leaderEpoch":2,"votedId":-1,"data_version":1}`, ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":2.5,"votedId":-1,"data_version":1}`, ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":4294967296,"votedId":-1,"data_version":1}`, ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"short","data_version":1}`, ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":2,"votedId":-1,"currentVoters":[{}],"data_version":0}`, ErrCorruptQuorumState},
		{`{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":2}`, ErrUnsupportedQuorumState},
	}
	for _, tc := range tests {
		if _, err := DecodeQuorumState([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, err, tc.want)
		}
	}
	// Kafka reads the first line only; what follows is ignored.
	st, err := DecodeQuorumState([]byte(`{"leaderId":4,"leaderEpoch":9,"votedId":-1,"data_version":1}` + "\ngarbage"))
	if err != nil || st.LeaderID != 4 || st.LeaderEpoch != 9 {
		t.Fatalf("first line: %+v %v", st, err)
	}
}

func TestSaveQuorumStateAtomicAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, FileOptions{})
	st := QuorumState{LeaderID: 2, LeaderEpoch: 5, VotedID: 2, CurrentVoters: []int32{1, 2, 3}}
	if err := s.SaveQuorumState(st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, QuorumStateFile))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clusterId":"","leaderId":2,"leaderEpoch":5,"votedId":2,"appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}`
	if string(data) != want {
		t.Fatalf("file: %s", data)
	}
	if _, err := os.Stat(filepath.Join(dir, QuorumStateFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("tmp file left behind: %v", err)
	}
	closeTest(t, s)

	// A crash between writing the tmp file and renaming it leaves a .tmp that
	// must neither win nor survive.
	if err := os.WriteFile(filepath.Join(dir, QuorumStateFile+".tmp"), []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, FileOptions{})
	l := load(t, s)
	if l.StateCorrupt || !reflect.DeepEqual(l.State, st) {
		t.Fatalf("reloaded %+v corrupt=%v", l.State, l.StateCorrupt)
	}
	if _, err := os.Stat(filepath.Join(dir, QuorumStateFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("tmp leftover not removed: %v", err)
	}
}

// TestCorruptQuorumStateRefused (issue 14): an unreadable quorum-state was reported
// as StateCorrupt and the node started Unattached at its log's epoch without its
// vote (Kafka's rule), free to vote again in an epoch it had voted in. It is written
// atomically, so no crash tears it: the storage now refuses to open, naming it.
func TestCorruptQuorumStateRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, QuorumStateFile)
	if err := os.WriteFile(path, []byte(`{"leaderId":`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenFileStorage(dir, FileOptions{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "Ways out") {
		t.Fatalf("open: %v", err)
	}
}

func TestUnsupportedQuorumStateRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	data := `{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":9}`
	if err := os.WriteFile(filepath.Join(dir, QuorumStateFile), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStorage(dir, FileOptions{}); !errors.Is(err, ErrUnsupportedQuorumState) {
		t.Fatalf("got %v", err)
	}
}

func FuzzQuorumState(f *testing.F) {
	f.Add([]byte(`{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}`))
	f.Add([]byte(`{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}`))
	f.Add([]byte(`{"data_version":1}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := DecodeQuorumState(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptQuorumState) && !errors.Is(err, ErrUnsupportedQuorumState) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		// Whatever decodes must survive our own encoder unchanged.
		enc, err := EncodeQuorumState(st)
		if err != nil {
			t.Fatalf("encode of decoded state: %v", err)
		}
		back, err := DecodeQuorumState(enc)
		if err != nil {
			t.Fatalf("decode of %s: %v", enc, err)
		}
		if !reflect.DeepEqual(back, st) {
			t.Fatalf("round trip: %+v != %+v", back, st)
		}
	})
}
