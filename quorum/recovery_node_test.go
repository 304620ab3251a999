package quorum

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestNodeRefusesLostQuorumState (issue 14): a voter whose quorum-state file was
// deleted while its log shows it took part in epoch 3 started Unattached at epoch 3
// with no vote, free to vote a second time in an epoch it may have voted in. NewNode
// now refuses it, naming the directory and `kraftd storage recover`, and so it does
// for a voter with an empty log that started before (its first start writes the
// file); a recovery marker lets it start (without voting), and a fresh voter and an
// observer with the same log start as before.
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
	// lostStateDir holds a log of epoch 3 whose quorum-state was deleted.
	lostStateDir := func() string {
		dir := t.TempDir()
		store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := raftlog.EncodeBatch(0, 3, 1_700_000_000_000, false, []raftlog.Record{{Value: []byte("x")}})
		if err := store.Append([]raftlog.Batch{b}); err != nil {
			t.Fatal(err)
		}
		if err := store.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, raftlog.QuorumStateFile)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := lostStateDir()
	_, err := open(t, dir, 1, true)
	if !errors.Is(err, ErrUnusableQuorumState) || !strings.Contains(err.Error(), "missing") ||
		!strings.Contains(err.Error(), "epoch 3") || !strings.Contains(err.Error(), "kraftd storage recover") ||
		!strings.Contains(err.Error(), dir) {
		t.Fatalf("voter with a log of epoch 3 and no quorum-state: %v", err)
	}
	fresh := t.TempDir()
	if _, err := open(t, fresh, 1, false); err != nil {
		t.Fatalf("fresh voter: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, raftlog.QuorumStateFile)); err != nil {
		t.Fatalf("a fresh voter's first start wrote no quorum-state: %v", err)
	}
	// It may have voted at the first elections with an empty log: a quorum-state
	// lost after its first start is refused too.
	if err := os.Remove(filepath.Join(fresh, raftlog.QuorumStateFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, fresh, 1, false); !errors.Is(err, ErrUnusableQuorumState) {
		t.Fatalf("voter that ran before, empty log, quorum-state deleted: %v", err)
	}
	if _, err := open(t, lostStateDir(), 4, true); err != nil {
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

// TestNodeRefusesCorruptSnapshot (issue 14): a committed snapshot that does not parse
// stops the node with raftlog.ErrCorrupt naming the file and the ways out; Recover,
// checking snapshots with ParseSnapshot, drops it and the log, and the node starts
// recovering (no votes) from an empty log.
func TestNodeRefusesCorruptSnapshot(t *testing.T) {
	addrs := map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
	dir := t.TempDir()
	store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var batches []raftlog.Batch
	for i := range 3 {
		batches = append(batches, raftlog.EncodeBatch(int64(i), 2, 1_700_000_000_000, false, []raftlog.Record{{Value: []byte("x")}}))
	}
	if err := store.Append(batches); err != nil {
		t.Fatal(err)
	}
	if err := store.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveQuorumState(raftlog.QuorumState{LeaderID: 2, LeaderEpoch: 2, VotedID: 2}); err != nil {
		t.Fatal(err)
	}
	id := raftlog.SnapshotID{EndOffset: 2, Epoch: 2}
	w, err := store.CreateSnapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(batches[0]); err != nil { // no header, no footer
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	store.Close()

	newNode := func() (*Node, error) {
		store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		n, err := NewNode(NodeConfig{Raft: Config{NodeID: 1, Voters: []int32{1, 2, 3}}, Storage: store, VoterAddrs: addrs})
		if n != nil {
			t.Cleanup(func() { n.cancel(); _ = n.client.Close() })
		}
		return n, err
	}
	path := filepath.Join(dir, raftlog.SnapshotFileName(id))
	if _, err := newNode(); !errors.Is(err, raftlog.ErrCorrupt) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "kraftd storage recover") {
		t.Fatalf("NewNode on a corrupt snapshot: %v", err)
	}
	check := func(dir string, id raftlog.SnapshotID) error {
		data, err := os.ReadFile(filepath.Join(dir, raftlog.SnapshotFileName(id)))
		if err == nil {
			_, err = ParseSnapshot(id, data)
		}
		return err
	}
	if _, err := raftlog.Recover(dir, raftlog.RecoverOptions{CheckSnapshot: check}); err != nil {
		t.Fatal(err)
	}
	n, err := newNode()
	if err != nil {
		t.Fatalf("NewNode after recover: %v", err)
	}
	if st := n.raft.Status(); !n.raft.Recovering() || st.LogEndOffset != 0 || st.Epoch != 2 {
		t.Fatalf("after recover: recovering %t, %+v", n.raft.Recovering(), st)
	}
}

// TestObserverClearsRecoveryMarker: an observer (a broker-only node) never votes, so a
// recovery marker on its metadata log is removed at its first Ready instead of staying
// forever.
func TestObserverClearsRecoveryMarker(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 4, Voters: []int32{1, 2, 3}},
		raftlog.Loaded{State: raftlog.EmptyQuorumState(), Recovery: &raftlog.Recovery{Epoch: 2}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rd := r.Ready(); !rd.RecoveryDone || r.Recovering() {
		t.Fatalf("observer: RecoveryDone %t, recovering %t", rd.RecoveryDone, r.Recovering())
	}
	v, err := NewRaft(Config{NodeID: 1, Voters: []int32{1, 2, 3}},
		raftlog.Loaded{State: raftlog.EmptyQuorumState(), Recovery: &raftlog.Recovery{Epoch: 2}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rd := v.Ready(); rd.RecoveryDone || !v.Recovering() {
		t.Fatalf("voter: RecoveryDone %t, recovering %t", rd.RecoveryDone, v.Recovering())
	}
}

// voteOverWire sends a Vote (or PreVote) request to addr as Kafka's bytes and
// decodes the answer.
func voteOverWire(t *testing.T, addr string, v *VoteRequest) *VoteResponse {
	t.Helper()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "vote-test"})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, addr, encodeVote(v, v.ClusterID, 2))
	if err != nil {
		t.Fatal(err)
	}
	return decodeVoteResponse(resp.(*kmsg.VoteResponse), v.PreVote)
}

// TestRecoveringNodeGrantsNoVote (issue 14) runs the production Node and its RPC
// handlers: voter 3 restarts on its FileStorage with a recovery marker while voters 1
// and 2 are down. A Vote and a PreVote for voter 2 at a newer epoch, over the wire,
// with a log far ahead of its own, are refused (without the marker both are
// granted), and it does not campaign. Once 1 and 2 are back it follows the leader,
// catches up, removes the marker from disk, and is no longer recovering.
func TestRecoveringNodeGrantsNoVote(t *testing.T) {
	c := newTestCluster(t, 3)
	defer c.closeAll()
	var lead *testNode
	waitFor(t, "a leader", 5*time.Second, func() bool { lead = c.leader(); return lead != nil })
	st, err := lead.node.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		c.crash(id)
	}
	if err := raftlog.WriteRecovery(c.dirs[3], raftlog.Recovery{Epoch: st.Epoch}); err != nil {
		t.Fatal(err)
	}
	n3 := c.start(3)
	for _, pre := range []bool{false, true} {
		resp := voteOverWire(t, c.addrs[3], &VoteRequest{ClusterID: "test-cluster-id-AAAAAA", VoterID: 3,
			CandidateEpoch: st.Epoch + 2, CandidateID: 2, LastOffsetEpoch: st.Epoch, LastOffset: 1 << 20, PreVote: pre})
		if resp.ErrorCode != 0 || resp.VoteGranted {
			t.Fatalf("recovering voter 3 answered a (pre-vote %t) request: %+v", pre, resp)
		}
	}
	if s, _ := n3.node.Status(context.Background()); s.Role != Unattached && s.Role != Follower {
		t.Fatalf("recovering voter 3 is %s", s.Role)
	}
	c.start(1)
	c.start(2)
	waitFor(t, "voter 3 to remove its recovery marker", 5*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[3], raftlog.RecoveryFile))
		return errors.Is(err, os.ErrNotExist)
	})
	recovering := true
	if err := n3.node.do(context.Background(), func() { recovering = n3.node.raft.Recovering() }); err != nil || recovering {
		t.Fatalf("voter 3 still recovering after its marker was removed (%v)", err)
	}
}
