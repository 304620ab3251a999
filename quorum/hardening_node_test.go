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

// TestNodeSurvivesForgedSnapshots: voter 2 here is a forged leader that names itself
// with BeginQuorumEpoch, points node 1 at a snapshot, and answers every FetchSnapshot
// with three bytes: of a 2^62-byte file, which made the follower's driver reserve that
// much for the download and panicked the process (makeslice: cap out of range); or of
// a 3-byte file, complete but not a snapshot, which stopped the follower when its
// driver failed to parse it (the core had already moved its log to the snapshot).
// Node 1 keeps running and keeps asking; the 2^62-byte snapshot (above
// Config.MaxSnapshotBytes, which it used to download) and the invalid file are refused
// and counted.
func TestNodeSurvivesForgedSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
	}{{"size 2^62", 1 << 62}, {"complete but invalid", 3}} {
		t.Run(tc.name, func(t *testing.T) { forgedSnapshotLeader(t, tc.size) })
	}
}

func forgedSnapshotLeader(t *testing.T, size int64) {
	defer goleak.VerifyNone(t)
	c := &testCluster{t: t, addrs: map[int32]string{}, nodes: map[int32]*testNode{}, dirs: map[int32]string{},
		tune: func(cfg *Config) { cfg.ElectionTimeoutMs, cfg.FetchTimeoutMs = 10_000, 10_000 }}
	for i, a := range freeAddrs(t, 3) {
		id := int32(i + 1)
		c.addrs[id], c.dirs[id] = a, t.TempDir()
	}
	snap := kmsg.NewFetchSnapshotResponseTopicPartitionSnapshotID()
	snap.EndOffset, snap.Epoch = 10, 1
	var chunks atomic.Int64
	reg := protocol.NewRegistry()
	reg.Register(1, 0, fetchMaxVersion, func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		p := kmsg.NewFetchResponseTopicPartition()
		p.HighWatermark = 10
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 1
		p.SnapshotID.EndOffset, p.SnapshotID.Epoch = snap.EndOffset, snap.Epoch
		tp := kmsg.NewFetchResponseTopic()
		tp.TopicID = MetadataTopicID
		tp.Partitions = []kmsg.FetchResponseTopicPartition{p}
		resp.Topics = []kmsg.FetchResponseTopic{tp}
		return resp, nil
	})
	reg.Register(59, 0, fetchSnapshotMaxVersion, func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		in := req.Body.(*kmsg.FetchSnapshotRequest)
		chunks.Add(1)
		resp := kmsg.NewPtrFetchSnapshotResponse()
		resp.Version = req.Version
		p := kmsg.NewFetchSnapshotResponseTopicPartition()
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 1
		p.SnapshotID = snap
		p.Size, p.Position, p.Bytes = size, in.Topics[0].Partitions[0].Position, []byte{1, 2, 3}
		tp := kmsg.NewFetchSnapshotResponseTopic()
		tp.Topic = MetadataTopic
		tp.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{p}
		resp.Topics = []kmsg.FetchSnapshotResponseTopic{tp}
		return resp, nil
	})
	fake, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: c.addrs[2], Registry: reg}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	n := c.start(1)
	defer c.closeAll()

	cl := protocol.NewClient(protocol.ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Request(ctx, c.addrs[1], encodeBeginEpoch(&BeginQuorumEpochRequest{VoterID: 1, LeaderID: 2, LeaderEpoch: 1},
		"test-cluster-id-AAAAAA", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 1 to download chunks", 5*time.Second, func() bool {
		select {
		case <-n.node.Done():
			t.Fatalf("node 1 stopped: %v", n.node.Err())
		default:
		}
		return chunks.Load() >= 3
	})
	if s, err := n.node.Status(context.Background()); err != nil || s.Role != Follower || s.LeaderID != 2 || s.LogEndOffset != 0 {
		t.Errorf("node 1: %+v %v", s, err)
	}
	if n.node.Metrics().RefusedResponseTotal == 0 {
		t.Errorf("the %d-byte snapshot was not refused", size)
	}
}

// TestObserverLearnedAddressesBounded: an observer of bootstrap addresses remembers
// the leader endpoint each Fetch answer advertises. A peer naming a new leader id with
// an address in every answer grew that map by one entry per answer; it now holds at
// most maxLearnedAddrs.
func TestObserverLearnedAddressesBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	addr := freeAddrs(t, 1)[0]
	var answers atomic.Int32
	reg := protocol.NewRegistry()
	reg.Register(1, 0, fetchMaxVersion, func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		id := 100 + answers.Add(1)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		p := kmsg.NewFetchResponseTopicPartition()
		// An epoch older than the observer's: the core drops the answer and asks again
		// after the retry backoff (1 ms here); the driver has learned the address by then.
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = id, -1
		tp := kmsg.NewFetchResponseTopic()
		tp.TopicID = MetadataTopicID
		tp.Partitions = []kmsg.FetchResponseTopicPartition{p}
		resp.Topics = []kmsg.FetchResponseTopic{tp}
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = id, "127.0.0.1", 1
		resp.Brokers = []kmsg.FetchResponseBroker{b}
		return resp, nil
	})
	fake, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: addr, Registry: reg}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	store, err := raftlog.OpenFileStorage(t.TempDir(), raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNode(NodeConfig{Raft: Config{NodeID: 7, ClusterID: "test-cluster-id-AAAAAA", RetryBackoffMs: 1,
		FetchMaxWaitMs: 10, RequestTimeoutMs: 300}, Storage: store, BootstrapAddrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n.Close(ctx)
	}()
	learned := func() int {
		var l int
		if err := n.do(context.Background(), func() { l = len(n.learned) }); err != nil {
			t.Fatal(err)
		}
		return l
	}
	waitFor(t, "many answers naming new leaders", 10*time.Second, func() bool {
		return answers.Load() >= 4*maxLearnedAddrs && learned() > 0
	})
	if l := learned(); l > maxLearnedAddrs {
		t.Errorf("observer remembers %d leader addresses, want at most %d", l, maxLearnedAddrs)
	}
}
