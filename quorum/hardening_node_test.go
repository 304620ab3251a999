package quorum

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestNodeRejectsForgedQuorumRPCs sends issue 12's packets over TCP to a follower of a
// running 3-voter quorum, encoded as the production transport encodes them: a Vote
// from candidate 99 at epoch 2147483647, BeginQuorumEpoch naming leader 99 at the
// current epoch and at epoch+1, EndQuorumEpoch at 2147483647, and a BeginQuorumEpoch
// naming another voter as leader of the current epoch. Each gets its error code, every
// node keeps running on the old leader and epoch and still commits, the follower's
// counters show the attempts, and it restarts from its files.
func TestNodeRejectsForgedQuorumRPCs(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		// A fetch timeout far above the test's length: no legitimate election may
		// blur whether a forged packet moved the epoch.
		tune: func(cfg *Config) { cfg.FetchTimeoutMs = 5000 }}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	for id := range c.addrs {
		c.start(id)
	}
	defer c.closeAll()
	var lead *testNode
	waitFor(t, "a leader that committed", 10*time.Second, func() bool { lead = c.leader(); return lead != nil })
	st, _ := lead.node.Status(context.Background())
	epoch := st.Epoch
	var follower, other int32 = -1, -1
	for id := range c.nodes {
		switch {
		case id == lead.id:
		case follower < 0:
			follower = id
		default:
			other = id
		}
	}
	waitFor(t, "the follower to follow", 5*time.Second, func() bool {
		fs, err := c.nodes[follower].node.Status(context.Background())
		return err == nil && fs.Role == Follower && fs.LeaderID == lead.id
	})

	cl := protocol.NewClient(protocol.ClientConfig{})
	defer cl.Close()
	const cluster = "test-cluster-id-AAAAAA"
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want int16
	}{
		{"vote from 99 at MaxInt32", encodeVote(&VoteRequest{VoterID: follower, CandidateEpoch: math.MaxInt32,
			CandidateID: 99, LastOffsetEpoch: epoch, LastOffset: 1 << 20}, cluster, 1), kerr.InconsistentVoterSet.Code},
		{"begin epoch naming 99", encodeBeginEpoch(&BeginQuorumEpochRequest{VoterID: follower, LeaderID: 99,
			LeaderEpoch: epoch}, cluster, 1), kerr.InconsistentVoterSet.Code},
		{"begin epoch naming 99 at epoch+1", encodeBeginEpoch(&BeginQuorumEpochRequest{VoterID: follower, LeaderID: 99,
			LeaderEpoch: epoch + 1}, cluster, 0), kerr.InconsistentVoterSet.Code},
		{"end epoch at MaxInt32", encodeEndEpoch(&EndQuorumEpochRequest{LeaderID: 99, LeaderEpoch: math.MaxInt32,
			PreferredSuccessors: []int32{follower}}, cluster, 0), kerr.InconsistentVoterSet.Code},
		{"begin epoch naming another voter", encodeBeginEpoch(&BeginQuorumEpochRequest{VoterID: follower, LeaderID: other,
			LeaderEpoch: epoch}, cluster, 1), kerr.InvalidRequest.Code},
		{"vote from a voter at MaxInt32", encodeVote(&VoteRequest{VoterID: follower, CandidateEpoch: math.MaxInt32,
			CandidateID: other, LastOffsetEpoch: epoch, LastOffset: 1 << 20}, cluster, 2), kerr.InvalidRequest.Code},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Request(ctx, c.addrs[follower], tc.req)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got int16 = -1
		switch r := resp.(type) {
		case *kmsg.VoteResponse:
			got = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.BeginQuorumEpochResponse:
			got = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.EndQuorumEpochResponse:
			got = r.Topics[0].Partitions[0].ErrorCode
		}
		if got != tc.want {
			t.Errorf("%s: error code %d, want %d", tc.name, got, tc.want)
		}
	}

	// The quorum still commits on its old leader, in its old epoch.
	if _, err := lead.node.Propose(context.Background(), epoch, []raftlog.Record{{Value: []byte("after")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every node to apply the record", 10*time.Second, func() bool {
		for _, tn := range c.nodes {
			if v, _ := tn.rec.snapshot(); len(v) != 1 {
				return false
			}
		}
		return true
	})
	for id, tn := range c.nodes {
		s, err := tn.node.Status(context.Background())
		if err != nil || s.Epoch != epoch || s.LeaderID != lead.id {
			t.Errorf("node %d: epoch %d leader %d (%v), want %d and %d", id, s.Epoch, s.LeaderID, err, epoch, lead.id)
		}
	}
	if m := c.nodes[follower].node.Metrics(); m.InconsistentVoterSetTotal != 4 || m.ConflictingLeaderTotal != 1 {
		t.Errorf("follower counters: %d inconsistent voter set, %d conflicting leader; want 4 and 1",
			m.InconsistentVoterSetTotal, m.ConflictingLeaderTotal)
	}
	c.crash(follower)
	restarted := c.start(follower)
	waitFor(t, "the restarted follower to follow", 10*time.Second, func() bool {
		s, err := restarted.node.Status(context.Background())
		return err == nil && s.Role == Follower && s.LeaderID == lead.id && s.Epoch == epoch
	})
}

// TestNodeRefusesUnusableQuorumState: the quorum-state the attack left behind
// (epoch 2147483647) made the panic come back at every restart. NewNode now refuses it
// with what to do.
func TestNodeRefusesUnusableQuorumState(t *testing.T) {
	dir := t.TempDir()
	data, err := raftlog.EncodeQuorumState(raftlog.QuorumState{LeaderID: -1, LeaderEpoch: math.MaxInt32, VotedID: -1,
		CurrentVoters: []int32{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, raftlog.QuorumStateFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = NewNode(NodeConfig{Raft: Config{NodeID: 1, Voters: []int32{1, 2, 3}}, Storage: store,
		VoterAddrs: map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}})
	if !errors.Is(err, ErrUnusableQuorumState) || !strings.Contains(err.Error(), "2147483647") ||
		!strings.Contains(err.Error(), dir) {
		t.Fatalf("NewNode: %v", err)
	}
	t.Log(err)
}

// TestNodeSurvivesInvalidRequestAnswers: voter 3 of a 3-voter quorum is a server that
// answers every quorum RPC (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
// FetchSnapshot) with INVALID_REQUEST, as a forged voter would, or a real one misled
// by a forged packet. Such an answer stopped the node that got it (as in Kafka), so
// voters 1 and 2 stopped at their first election. Now they elect a leader, commit,
// count the refused answers and keep running.
func TestNodeSurvivesInvalidRequestAnswers(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{}}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	reg := protocol.NewRegistry()
	var answered atomic.Int64
	invalid := func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		answered.Add(1)
		resp := req.Body.ResponseKind()
		resp.SetVersion(req.Version)
		switch r := resp.(type) {
		case *kmsg.VoteResponse:
			r.ErrorCode = kerr.InvalidRequest.Code
		case *kmsg.BeginQuorumEpochResponse:
			r.ErrorCode = kerr.InvalidRequest.Code
		case *kmsg.EndQuorumEpochResponse:
			r.ErrorCode = kerr.InvalidRequest.Code
		case *kmsg.FetchResponse:
			r.ErrorCode = kerr.InvalidRequest.Code
		case *kmsg.FetchSnapshotResponse:
			r.ErrorCode = kerr.InvalidRequest.Code
		}
		return resp, nil
	}
	for _, key := range []int16{52, 53, 54, 1, 59} {
		reg.Register(key, 0, map[int16]int16{52: voteMaxVersion, 53: beginEpochMaxVersion, 54: endEpochMaxVersion,
			1: fetchMaxVersion, 59: fetchSnapshotMaxVersion}[key], invalid)
	}
	fake, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: c.addrs[3], Registry: reg}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c.start(1)
	c.start(2)
	defer c.closeAll()

	var lead *testNode
	waitFor(t, "a leader that committed", 10*time.Second, func() bool {
		for _, tn := range c.nodes {
			select {
			case <-tn.node.Done():
				t.Fatalf("node %d stopped: %v", tn.id, tn.node.Err())
			default:
			}
		}
		lead = c.leader()
		return lead != nil
	})
	st, _ := lead.node.Status(context.Background())
	if _, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both nodes to apply the record", 10*time.Second, func() bool {
		for _, tn := range c.nodes {
			if v, _ := tn.rec.snapshot(); len(v) != 1 {
				return false
			}
		}
		return true
	})
	// The leader's BeginQuorumEpoch to voter 3 is answered INVALID_REQUEST each
	// fetch.timeout/2; each answer is refused and counted, never fatal.
	waitFor(t, "the leader to refuse answers from voter 3", 5*time.Second, func() bool {
		return lead.node.Metrics().RefusedResponseTotal >= 2
	})
	for _, tn := range c.nodes {
		select {
		case <-tn.node.Done():
			t.Errorf("node %d stopped: %v", tn.id, tn.node.Err())
		default:
		}
	}
	if answered.Load() == 0 {
		t.Error("voter 3 answered nothing")
	}
}
