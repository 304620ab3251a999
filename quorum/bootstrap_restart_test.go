package quorum

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestFormattedVoterRestartsBeforeItsFirstVote: a controller formatted with
// --standalone or --initial-controllers (only the bootstrap snapshot 0-0 in its
// directory) that stops before it wrote a quorum-state of its own starts again. Its
// first start writes the initial quorum-state, as a fresh directory's does, before
// the file that marks a directory as started. Before, the bootstrap snapshot kept
// that write from happening, and a power loss before the first election's state
// save left a voter that refused to start (quorum-state missing, ran before) until
// `kraftd storage recover`: the Node simulation with dynamic quorums found it.
func TestFormattedVoterRestartsBeforeItsFirstVote(t *testing.T) {
	dir := t.TempDir()
	vs := dynVoters(t, 1, 2, 3)
	data, err := BootstrapSnapshot(KRaftVersionDynamic, vs, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := raftlog.WriteBootstrapSnapshot(dir, data); err != nil {
		t.Fatal(err)
	}
	start := func() error {
		t.Helper()
		store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(NodeConfig{Raft: Config{NodeID: 1, DirectoryID: testDirID(1)}, Storage: store,
			BootstrapAddrs: []string{"127.0.0.1:1"}})
		if n != nil {
			n.cancel()
			_ = n.client.Close()
		}
		_ = store.Close()
		return err
	}
	if err := start(); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, raftlog.QuorumStateFile)); err != nil {
		t.Fatalf("the first start of a formatted voter wrote no quorum-state: %v", err)
	}
	if err := start(); err != nil {
		t.Fatalf("restart before the first vote: %v", err)
	}
}
