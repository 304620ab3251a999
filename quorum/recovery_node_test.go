package quorum

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestNodeRefusesLostQuorumState (issue 14): a voter whose quorum-state file was
// deleted while its log shows it took part in epoch 3 started Unattached at epoch 3
// with no vote, free to vote a second time in an epoch it may have voted in. NewNode
// now refuses it, naming the directory and `kraftd storage recover`; a recovery
// marker lets it start (without voting), and a fresh voter and an observer with the
// same log start as before.
func TestNodeRefusesLostQuorumState(t *testing.T) {
	addrs := map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
	open := func(t *testing.T, dir string, id int32, withLog bool) (*Node, error) {
		t.Helper()
		store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		if withLog && store.EndOffset() == 0 {
			b := raftlog.EncodeBatch(0, 3, 1_700_000_000_000, false, []raftlog.Record{{Value: []byte("x")}})
			if err := store.Append([]raftlog.Batch{b}); err != nil {
				t.Fatal(err)
			}
			if err := store.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		n, err := NewNode(NodeConfig{Raft: Config{NodeID: id, Voters: []int32{1, 2, 3}}, Storage: store, VoterAddrs: addrs})
		if n != nil {
			t.Cleanup(func() { n.cancel(); _ = n.client.Close() })
		}
		return n, err
	}
	dir := t.TempDir()
	_, err := open(t, dir, 1, true)
	if !errors.Is(err, ErrUnusableQuorumState) || !strings.Contains(err.Error(), "missing") ||
		!strings.Contains(err.Error(), "epoch 3") || !strings.Contains(err.Error(), "kraftd storage recover") ||
		!strings.Contains(err.Error(), dir) {
		t.Fatalf("voter with a log of epoch 3 and no quorum-state: %v", err)
	}
	if _, err := open(t, t.TempDir(), 1, false); err != nil {
		t.Fatalf("fresh voter: %v", err)
	}
	if _, err := open(t, t.TempDir(), 4, true); err != nil {
		t.Fatalf("observer: %v", err)
	}
	if err := raftlog.WriteRecovery(dir, raftlog.Recovery{Epoch: 3, StateLost: true}); err != nil {
		t.Fatal(err)
	}
	n, err := open(t, dir, 1, true)
	if err != nil {
		t.Fatalf("voter with a recovery marker: %v", err)
	}
	if !n.raft.Recovering() {
		t.Fatal("started with a marker but not recovering")
	}
	if _, err := os.Stat(filepath.Join(dir, raftlog.RecoveryFile)); err != nil {
		t.Fatal(err)
	}
}
