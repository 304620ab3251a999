package quorum_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Issue 12, "Quorum RPCs from outside the voter set": every attack is stepped into the
// production core of a 3-voter quorum (leader 1, followers 2 and 3, one record
// committed), and must be answered with an error code while changing nothing.

// committedEnv returns voters 1, 2, 3 (pre-vote on, as in production) with node 1
// leading and a record committed everywhere.
func committedEnv(t *testing.T) *quorumtest.Env {
	t.Helper()
	e := quorumtest.NewEnv(7)
	for _, id := range []int32{1, 2, 3} {
		if err := e.AddNode(quorum.Config{NodeID: id, ClusterID: "c", Voters: []int32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
	}
	e.Tick(2000, []int32{1})
	stabilize(e)
	if _, _, err := e.Nodes[1].Raft.Propose(e.NowMs, []raftlog.Record{{Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	e.Tick(25, []int32{1}) // linger
	stabilize(e)
	for _, id := range e.IDs() {
		st := e.Nodes[id].Raft.Status()
		if st.LeaderID != 1 || st.AppliedOffset < 2 {
			t.Fatalf("setup: node %d: %s", id, quorumtest.StateLine(e.Nodes[id]))
		}
	}
	return e
}

// attack steps m into node m.To and returns the node's answer. It fails the test if
// the core panics or returns an error, if the answer is missing, if anything was
// persisted, or if role, epoch, leader or vote changed.
func attack(t *testing.T, e *quorumtest.Env, m quorum.Message) quorum.Message {
	t.Helper()
	n := e.Nodes[m.To]
	e.ProcessReady(n)
	m.RequestID = 4242
	before, disk := n.Raft.Status(), n.State
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("node %d panicked on %s: %v", m.To, m, p)
			}
		}()
		if err := n.Raft.Step(e.NowMs, m); err != nil {
			t.Fatalf("node %d stopped on %s: %v", m.To, m, err)
		}
	}()
	rd := n.Raft.Ready()
	if rd.QuorumState != nil {
		t.Errorf("%s: node %d persisted quorum-state %+v", m, m.To, *rd.QuorumState)
		n.State = *rd.QuorumState
	}
	var resp *quorum.Message
	for _, out := range append(rd.Messages, rd.MessagesAfterPersist...) {
		if out.To == m.From && out.RequestID == m.RequestID && !out.IsRequest() {
			resp = &out
			continue
		}
		e.Net = append(e.Net, out)
	}
	n.Raft.Advance(rd)
	after := n.Raft.Status()
	if after.Role != before.Role || after.Epoch != before.Epoch || after.LeaderID != before.LeaderID ||
		after.VotedID != before.VotedID || n.State.LeaderEpoch != disk.LeaderEpoch {
		t.Errorf("%s changed node %d: %s epoch %d leader %d voted %d -> %s epoch %d leader %d voted %d",
			m, m.To, before.Role, before.Epoch, before.LeaderID, before.VotedID,
			after.Role, after.Epoch, after.LeaderID, after.VotedID)
	}
	if resp == nil {
		t.Fatalf("%s: node %d sent no answer", m, m.To)
	}
	return *resp
}

func voteReq(from, to, epoch int32, lastEpoch int32, lastOffset int64) quorum.Message {
	return quorum.Message{From: from, To: to, Vote: &quorum.VoteRequest{ClusterID: "c", VoterID: -1,
		CandidateEpoch: epoch, CandidateID: from, LastOffsetEpoch: lastEpoch, LastOffset: lastOffset}}
}

func beginReq(from, to, epoch int32) quorum.Message {
	return quorum.Message{From: from, To: to, BeginEpoch: &quorum.BeginQuorumEpochRequest{ClusterID: "c", VoterID: -1,
		LeaderID: from, LeaderEpoch: epoch}}
}

func endReq(from, to, epoch int32) quorum.Message {
	return quorum.Message{From: from, To: to, EndEpoch: &quorum.EndQuorumEpochRequest{ClusterID: "c",
		LeaderID: from, LeaderEpoch: epoch, PreferredSuccessors: []int32{to}}}
}

// partErr is the partition-level error code of a Vote, BeginQuorumEpoch or
// EndQuorumEpoch answer.
func partErr(t *testing.T, m quorum.Message) int16 {
	t.Helper()
	switch {
	case m.VoteResp != nil:
		if m.VoteResp.VoteGranted {
			t.Errorf("%s: vote granted", m)
		}
		return m.VoteResp.ErrorCode
	case m.BeginEpochResp != nil:
		return m.BeginEpochResp.ErrorCode
	case m.EndEpochResp != nil:
		return m.EndEpochResp.ErrorCode
	}
	t.Fatalf("unexpected answer %s", m)
	return 0
}

// assertQuorumKept runs the cluster for several fetch timeouts and checks that node 1
// still leads epoch and every node follows it.
func assertQuorumKept(t *testing.T, e *quorumtest.Env, epoch int32) {
	t.Helper()
	for range 20 {
		e.Tick(500, nil)
		stabilize(e)
	}
	for _, id := range e.IDs() {
		st := e.Nodes[id].Raft.Status()
		if st.Epoch != epoch || st.LeaderID != 1 {
			t.Errorf("node %d left leader 1 at epoch %d: %s", id, epoch, quorumtest.StateLine(e.Nodes[id]))
		}
	}
	if e.Fatal != nil {
		t.Errorf("a node stopped: %v", e.Fatal)
	}
}

func TestNonVoterRequestsChangeNothing(t *testing.T) {
	const nonVoter = 99
	inconsistent := kerr.InconsistentVoterSet.Code
	for _, tc := range []struct {
		name string
		msg  func(epoch int32) quorum.Message
	}{
		// The first attack: two controllers panicked, the third was stuck.
		{"vote at MaxInt32 to a follower", func(int32) quorum.Message { return voteReq(nonVoter, 2, math.MaxInt32, 1, 2) }},
		{"vote at MaxInt32 to the leader", func(int32) quorum.Message { return voteReq(nonVoter, 1, math.MaxInt32, 1, 2) }},
		{"vote at epoch+1", func(ep int32) quorum.Message { return voteReq(nonVoter, 3, ep+1, ep, 2) }},
		{"pre-vote", func(ep int32) quorum.Message {
			m := voteReq(nonVoter, 2, ep, ep, 2)
			m.Vote.PreVote = true
			return m
		}},
		// Stopped the node ("two leaders in one epoch").
		{"begin epoch naming 99 at the current epoch", func(ep int32) quorum.Message { return beginReq(nonVoter, 2, ep) }},
		// Made the node follow 99 until the next election.
		{"begin epoch naming 99 at epoch+1", func(ep int32) quorum.Message { return beginReq(nonVoter, 2, ep+1) }},
		{"begin epoch naming 99 at MaxInt32", func(int32) quorum.Message { return beginReq(nonVoter, 3, math.MaxInt32) }},
		// Panicked at once.
		{"end epoch at MaxInt32", func(int32) quorum.Message { return endReq(nonVoter, 2, math.MaxInt32) }},
		{"end epoch at the current epoch", func(ep int32) quorum.Message { return endReq(nonVoter, 2, ep) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := committedEnv(t)
			epoch := e.Nodes[1].Raft.Status().Epoch
			m := tc.msg(epoch)
			if got := partErr(t, attack(t, e, m)); got != inconsistent {
				t.Errorf("%s: error %s, want INCONSISTENT_VOTER_SET", m, kerr.ErrorForCode(got))
			}
			if c := e.Nodes[m.To].Raft.Counters(); c.InconsistentVoterSet != 1 {
				t.Errorf("InconsistentVoterSet counter %d, want 1", c.InconsistentVoterSet)
			}
			assertQuorumKept(t, e, epoch)
			// The node restarts from what it persisted.
			if err := e.Start(e.Nodes[m.To]); err != nil {
				t.Fatalf("restart: %v", err)
			}
		})
	}
}

// TestMaxEpochNeverAdopted: even from a voter, epoch 2147483647 is INVALID_REQUEST.
func TestMaxEpochNeverAdopted(t *testing.T) {
	invalid := kerr.InvalidRequest.Code
	for _, tc := range []struct {
		name string
		msg  quorum.Message
	}{
		{"vote", voteReq(3, 2, math.MaxInt32, 1, 2)},
		{"vote to the leader", voteReq(3, 1, math.MaxInt32, 1, 2)},
		{"pre-vote", func() quorum.Message { m := voteReq(3, 2, math.MaxInt32, 1, 2); m.Vote.PreVote = true; return m }()},
		{"begin epoch", beginReq(3, 2, math.MaxInt32)},
		{"end epoch", endReq(1, 2, math.MaxInt32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := committedEnv(t)
			epoch := e.Nodes[1].Raft.Status().Epoch
			if got := partErr(t, attack(t, e, tc.msg)); got != invalid {
				t.Errorf("%s: error %s, want INVALID_REQUEST", tc.msg, kerr.ErrorForCode(got))
			}
			assertQuorumKept(t, e, epoch)
		})
	}
}

// TestEpochCeilingNeverCreated: a voter at the last usable epoch (MaxInt32-1, reached
// here by a Vote from a voter) never campaigns into MaxInt32, whatever its timers do.
func TestEpochCeilingNeverCreated(t *testing.T) {
	e := quorumtest.NewEnv(3)
	for _, id := range []int32{1, 2, 3} {
		if err := e.AddNode(quorum.Config{NodeID: id, Voters: []int32{1, 2, 3}, DisablePreVote: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.Deliver(voteReq(2, 1, math.MaxInt32-1, 0, 0))
	e.Deliver(voteReq(2, 3, math.MaxInt32-1, 0, 0))
	stabilize(e)
	for range 50 { // 50 s: every timer fires many times
		e.Tick(1000, nil)
		stabilize(e)
	}
	for _, id := range e.IDs() {
		st := e.Nodes[id].Raft.Status()
		if st.Epoch != math.MaxInt32-1 {
			t.Errorf("node %d at epoch %d", id, st.Epoch)
		}
		if e.Nodes[id].State.LeaderEpoch == math.MaxInt32 {
			t.Errorf("node %d persisted epoch MaxInt32", id)
		}
	}
	if e.Fatal != nil {
		t.Fatal(e.Fatal)
	}
}

// TestConflictingLeaderRejected: a BeginQuorumEpoch (or EndQuorumEpoch) naming another
// voter as leader of an epoch whose leader is known gets INVALID_REQUEST, is counted,
// and the node keeps its leader and keeps running (it used to stop).
func TestConflictingLeaderRejected(t *testing.T) {
	invalid := kerr.InvalidRequest.Code
	for _, tc := range []struct {
		name string
		msg  func(epoch int32) quorum.Message
	}{
		{"begin epoch to a follower", func(ep int32) quorum.Message { return beginReq(3, 2, ep) }},
		{"begin epoch to the leader", func(ep int32) quorum.Message { return beginReq(3, 1, ep) }},
		{"end epoch to a follower", func(ep int32) quorum.Message { return endReq(3, 2, ep) }},
		{"begin epoch naming the receiver", func(ep int32) quorum.Message { return beginReq(2, 2, ep+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := committedEnv(t)
			epoch := e.Nodes[1].Raft.Status().Epoch
			m := tc.msg(epoch)
			if got := partErr(t, attack(t, e, m)); got != invalid {
				t.Errorf("%s: error %s, want INVALID_REQUEST", m, kerr.ErrorForCode(got))
			}
			if m.From != m.To {
				if c := e.Nodes[m.To].Raft.Counters(); c.ConflictingLeader != 1 {
					t.Errorf("ConflictingLeader counter %d, want 1", c.ConflictingLeader)
				}
			}
			assertQuorumKept(t, e, epoch)
		})
	}
}

// TestLeaderStickiness: a voter that heard from a live leader within the fetch timeout
// neither grants a Vote at a higher epoch nor adopts the epoch; the leader neither.
// After the fetch timeout without a successful fetch, or after the leader resigned, the
// same Vote is honoured; and a crashed leader is still replaced.
func TestLeaderStickiness(t *testing.T) {
	e := committedEnv(t)
	epoch := e.Nodes[1].Raft.Status().Epoch
	for _, to := range []int32{2, 1} {
		resp := attack(t, e, voteReq(3, to, epoch+1, epoch, 2))
		if r := resp.VoteResp; r.VoteGranted || r.ErrorCode != 0 || r.LeaderEpoch != epoch || r.LeaderID != 1 {
			t.Errorf("node %d answered a vote at a higher epoch with %s", to, resp)
		}
	}
	assertQuorumKept(t, e, epoch)

	// The leader resigned: the follower that got its EndQuorumEpoch grants.
	e2 := committedEnv(t)
	e2.Deliver(endReq(1, 2, epoch))
	e2.Deliver(voteReq(3, 2, epoch+1, epoch, 2))
	if st := e2.Nodes[2].Raft.Status(); st.Epoch != epoch+1 || st.VotedID != 3 {
		t.Errorf("after EndQuorumEpoch: %s", quorumtest.StateLine(e2.Nodes[2]))
	}

	// No successful fetch for a whole fetch timeout (2 s): not sticky any more.
	e3 := committedEnv(t)
	e3.NowMs += 2000
	e3.Deliver(voteReq(3, 2, epoch+1, epoch, 2))
	if st := e3.Nodes[2].Raft.Status(); st.Epoch != epoch+1 || st.VotedID != 3 {
		t.Errorf("after the fetch timeout: %s", quorumtest.StateLine(e3.Nodes[2]))
	}

	// A crashed leader is replaced, with and without pre-vote.
	for _, preVote := range []bool{true, false} {
		e4 := committedEnv(t)
		for _, id := range e4.IDs() {
			e4.Nodes[id].Raft.SetPeerSupportsPreVote(id%3+1, preVote)
		}
		e4.Crash(e4.Nodes[1])
		var lead int32 = -1
		for i := 0; i < 40 && lead < 0; i++ {
			e4.Tick(250, nil)
			stabilize(e4)
			for _, id := range []int32{2, 3} {
				if st := e4.Nodes[id].Raft.Status(); st.Role == quorum.Leader && st.Epoch > epoch {
					lead = id
				}
			}
		}
		if lead < 0 {
			t.Errorf("pre-vote %t: no new leader 10 s after the leader crashed: %s / %s", preVote,
				quorumtest.StateLine(e4.Nodes[2]), quorumtest.StateLine(e4.Nodes[3]))
		}
	}
}

// TestUnusableQuorumStateStopsStart: a persisted quorum-state that cannot be used
// fails NewRaft with a message that says what to do, instead of a panic later.
func TestUnusableQuorumStateStopsStart(t *testing.T) {
	for _, st := range []raftlog.QuorumState{
		{LeaderID: -1, LeaderEpoch: math.MaxInt32, VotedID: -1}, // the poisoned file
		{LeaderID: -1, LeaderEpoch: -3, VotedID: -1},
		{LeaderID: 99, LeaderEpoch: 4, VotedID: -1},
		{LeaderID: -1, LeaderEpoch: 4, VotedID: 99},
		{LeaderID: -7, LeaderEpoch: 4, VotedID: -1},
	} {
		_, err := quorum.NewRaft(quorum.Config{NodeID: 1, Voters: []int32{1, 2, 3}}, raftlog.Loaded{State: st}, 0)
		if !errors.Is(err, quorum.ErrUnusableQuorumState) || !strings.Contains(err.Error(), "move the quorum-state file in its __cluster_metadata-0 directory aside") {
			t.Errorf("%+v: %v", st, err)
		}
	}
	ok := raftlog.QuorumState{LeaderID: 2, LeaderEpoch: math.MaxInt32 - 1, VotedID: 3}
	if _, err := quorum.NewRaft(quorum.Config{NodeID: 1, Voters: []int32{1, 2, 3}}, raftlog.Loaded{State: ok}, 0); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}

// inflightFetch runs the quorum until follower id has a Fetch on the network, and
// takes it off: the test answers it in the leader's place.
func inflightFetch(t *testing.T, e *quorumtest.Env, id int32) quorum.Message {
	t.Helper()
	for range 100 {
		for _, n := range e.IDs() {
			e.ProcessReady(e.Nodes[n])
		}
		if got := e.Take(func(m quorum.Message) bool { return m.From == id && m.Fetch != nil }); len(got) > 0 {
			return got[0]
		}
		net := e.Net
		e.Net = nil
		for _, m := range net {
			e.Deliver(m)
		}
		e.Tick(100, nil)
	}
	t.Fatalf("node %d sent no Fetch", id)
	return quorum.Message{}
}

// TestRefusedResponsesKeepTheNodeRunning: answers to this node's quorum RPCs that it
// cannot use stopped it (as in Kafka), so a peer misled by a forged packet, or a forged
// voter, could stop the real leader. Each is now refused: logged at ERROR, counted in
// RefusedResponse and handled as a failed request; the quorum keeps its leader.
func TestRefusedResponsesKeepTheNodeRunning(t *testing.T) {
	invalid := kerr.InvalidRequest.Code
	for _, tc := range []struct {
		name string
		// answer returns the response to step into the quorum.
		answer func(t *testing.T, e *quorumtest.Env, epoch int32) quorum.Message
		// check, when set, checks the answered node afterwards.
		check func(t *testing.T, n *quorumtest.Node, before quorum.Status)
	}{
		{name: "INVALID_REQUEST answer to the leader's BeginQuorumEpoch, naming another leader",
			// A follower that a forged BeginQuorumEpoch made believe in leader 3.
			answer: func(_ *testing.T, _ *quorumtest.Env, epoch int32) quorum.Message {
				return quorum.Message{From: 2, To: 1, RequestID: 1 << 40, BeginEpochResp: &quorum.BeginQuorumEpochResponse{
					ErrorCode: invalid, LeaderID: 3, LeaderEpoch: epoch}}
			}},
		{name: "INVALID_REQUEST answer to the leader's EndQuorumEpoch",
			answer: func(_ *testing.T, _ *quorumtest.Env, epoch int32) quorum.Message {
				return quorum.Message{From: 3, To: 1, RequestID: 1 << 40, EndEpochResp: &quorum.EndQuorumEpochResponse{
					TopLevelErrorCode: invalid, LeaderID: -1, LeaderEpoch: -1}}
			}},
		{name: "INVALID_REQUEST answer to a follower's Fetch",
			answer: func(t *testing.T, e *quorumtest.Env, epoch int32) quorum.Message {
				f := inflightFetch(t, e, 2)
				return quorum.Message{From: 1, To: 2, RequestID: f.RequestID, FetchResp: &quorum.FetchResponse{
					TopLevelErrorCode: invalid, HighWatermark: -1, LeaderID: -1, LeaderEpoch: -1}}
			}},
		{name: "diverging epoch below the high watermark",
			answer: func(t *testing.T, e *quorumtest.Env, epoch int32) quorum.Message {
				f := inflightFetch(t, e, 2)
				return quorum.Message{From: 1, To: 2, RequestID: f.RequestID, FetchResp: &quorum.FetchResponse{
					HighWatermark: 2, LeaderID: 1, LeaderEpoch: epoch, DivergingEpoch: &quorum.EpochEndOffset{Epoch: 0, EndOffset: 0}}}
			},
			check: func(t *testing.T, n *quorumtest.Node, before quorum.Status) {
				if st := n.Raft.Status(); st.LogEndOffset < before.LogEndOffset || st.HighWatermark < before.HighWatermark {
					t.Errorf("log cut: end %d -> %d, hw %d -> %d", before.LogEndOffset, st.LogEndOffset, before.HighWatermark, st.HighWatermark)
				}
			}},
		{name: "snapshot ending below the high watermark",
			answer: func(t *testing.T, e *quorumtest.Env, epoch int32) quorum.Message {
				f := inflightFetch(t, e, 2)
				return quorum.Message{From: 1, To: 2, RequestID: f.RequestID, FetchResp: &quorum.FetchResponse{
					HighWatermark: 2, LeaderID: 1, LeaderEpoch: epoch, SnapshotID: &raftlog.SnapshotID{EndOffset: 1, Epoch: 1}}}
			}},
		{name: "snapshot in a later epoch than the leader's",
			answer: func(t *testing.T, e *quorumtest.Env, epoch int32) quorum.Message {
				f := inflightFetch(t, e, 2)
				return quorum.Message{From: 1, To: 2, RequestID: f.RequestID, FetchResp: &quorum.FetchResponse{
					HighWatermark: 2, LeaderID: 1, LeaderEpoch: epoch, SnapshotID: &raftlog.SnapshotID{EndOffset: 100, Epoch: epoch + 1}}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := committedEnv(t)
			epoch := e.Nodes[1].Raft.Status().Epoch
			m := tc.answer(t, e, epoch)
			n := e.Nodes[m.To]
			before := n.Raft.Status()
			e.Deliver(m)
			e.ProcessReady(n)
			// A snapshot download, if one began, is served in full by "the leader":
			// completing it is what stopped the node.
			for _, req := range e.Take(func(r quorum.Message) bool { return r.From == m.To && r.FetchSnapshot != nil }) {
				data := make([]byte, 64)
				e.Deliver(quorum.Message{From: req.To, To: req.From, RequestID: req.RequestID,
					FetchSnapshotResp: &quorum.FetchSnapshotResponse{LeaderID: 1, LeaderEpoch: epoch,
						SnapshotID: req.FetchSnapshot.SnapshotID, Size: int64(len(data)), Bytes: data}})
				e.ProcessReady(n)
			}
			if e.Fatal != nil {
				t.Fatalf("node %d stopped: %v", m.To, e.Fatal)
			}
			if len(n.Loads) > 0 {
				t.Errorf("node %d loaded snapshot %v", m.To, n.Loads)
			}
			if c := n.Raft.Counters(); c.RefusedResponse != 1 {
				t.Errorf("RefusedResponse counter %d, want 1", c.RefusedResponse)
			}
			if !strings.Contains(e.Out.String(), "ERROR quorum: refused a peer's response") {
				t.Errorf("no ERROR line in:\n%s", e.Out)
			}
			if tc.check != nil {
				tc.check(t, n, before)
			}
			assertQuorumKept(t, e, epoch)
		})
	}
}

// TestPreVoteAtHigherEpochRespectsLiveLeader: KIP-996's rule that a voter which
// fetched from its leader within the fetch timeout rejects pre-votes used to hold only
// at its own epoch; a pre-vote from a higher epoch was granted on the log alone, so a
// single stale or forged prospective collected pre-votes against a healthy leader.
// The follower and the leader now reject it (and stay in their epoch); once the
// follower has not fetched for a fetch timeout it grants it again.
func TestPreVoteAtHigherEpochRespectsLiveLeader(t *testing.T) {
	preVote := func(from, to, epoch int32) quorum.Message {
		m := voteReq(from, to, epoch, epoch-1, 2)
		m.Vote.PreVote = true
		return m
	}
	e := committedEnv(t)
	epoch := e.Nodes[1].Raft.Status().Epoch
	for _, to := range []int32{2, 1} {
		for _, ep := range []int32{epoch + 1, epoch + 5} {
			resp := attack(t, e, preVote(3, to, ep))
			if r := resp.VoteResp; r.VoteGranted || r.ErrorCode != 0 || r.LeaderEpoch != epoch || r.LeaderID != 1 {
				t.Errorf("node %d answered a pre-vote at epoch %d with %s", to, ep, resp)
			}
		}
	}
	assertQuorumKept(t, e, epoch)

	// No successful fetch for a whole fetch timeout (2 s): the pre-vote is granted.
	e2 := committedEnv(t)
	e2.NowMs += 2000
	resp := attack(t, e2, preVote(3, 2, epoch+1))
	if !resp.VoteResp.VoteGranted {
		t.Errorf("after the fetch timeout: %s", resp)
	}
}

// TestObserverTrackingIsCapped: every Fetch with a new replica id added an observer
// entry on the leader, kept 300 s, so forged ids grew the leader (and DescribeQuorum)
// without bound. Past quorum.DefaultMaxTrackedObservers a Fetch from an unknown id is
// still answered but not tracked; the observers already tracked stay; entries that
// expire make room again.
func TestObserverTrackingIsCapped(t *testing.T) {
	e := committedEnv(t)
	leader := e.Nodes[1]
	epoch := leader.Raft.Status().Epoch
	fetch := func(id int32) quorum.Message {
		return quorum.Message{From: id, To: 1, RequestID: uint64(id), Fetch: &quorum.FetchRequest{ClusterID: "c",
			ReplicaID: id, CurrentLeaderEpoch: epoch, FetchOffset: 0, LastFetchedEpoch: 0}}
	}
	const extra = 100
	for id := int32(1000); id < 1000+quorum.DefaultMaxTrackedObservers+extra; id++ {
		if err := leader.Raft.Step(e.NowMs, fetch(id)); err != nil {
			t.Fatal(err)
		}
		rd := leader.Raft.Ready()
		answered := false
		for _, m := range rd.Messages {
			answered = answered || m.FetchResp != nil && m.To == id && m.FetchResp.ErrorCode == 0 && len(m.FetchResp.Batches) > 0
		}
		if !answered {
			t.Fatalf("fetch from %d not answered with records", id)
		}
		leader.Raft.Advance(rd)
	}
	st := leader.Raft.Status()
	if len(st.Observers) != quorum.DefaultMaxTrackedObservers {
		t.Errorf("%d observers tracked, want %d", len(st.Observers), quorum.DefaultMaxTrackedObservers)
	}
	if c := leader.Raft.Counters(); c.ObserversUntracked != extra {
		t.Errorf("ObserversUntracked %d, want %d", c.ObserversUntracked, extra)
	}
	for _, o := range st.Observers {
		if o.ReplicaID >= 1000+quorum.DefaultMaxTrackedObservers {
			t.Errorf("observer %d tracked past the cap", o.ReplicaID)
		}
	}
	// The session timeout frees the entries; a new observer is tracked again.
	for range 301 {
		e.Tick(1000, nil)
		stabilize(e)
	}
	if err := leader.Raft.Step(e.NowMs, fetch(7)); err != nil {
		t.Fatal(err)
	}
	if st := leader.Raft.Status(); len(st.Observers) != 1 || st.Observers[0].ReplicaID != 7 {
		t.Errorf("after the session timeout: observers %v", st.Observers)
	}
}

// TestSnapshotDownloadSizeCapped: a snapshot download had no cap on its total size;
// the follower's driver keeps the download in memory (and in the partial file) as it
// arrives, so a leader (or a forged one) announcing a huge snapshot and streaming it
// grew the follower without bound. A chunk of a snapshot larger than
// quorum.DefaultMaxSnapshotBytes is now refused (ERROR, RefusedResponse) before any
// byte reaches the driver; the download is abandoned and the follower fetches again
// after the retry backoff. A snapshot of exactly the cap is downloaded.
func TestSnapshotDownloadSizeCapped(t *testing.T) {
	const backoffMs = 20 // Config.RetryBackoffMs default
	e := committedEnv(t)
	epoch := e.Nodes[1].Raft.Status().Epoch
	n := e.Nodes[2]
	snap := raftlog.SnapshotID{EndOffset: 100, Epoch: epoch}
	// startDownload answers node 2's next Fetch with snap and returns the first
	// FetchSnapshot it sends.
	startDownload := func() quorum.Message {
		t.Helper()
		f := inflightFetch(t, e, 2)
		e.Deliver(quorum.Message{From: 1, To: 2, RequestID: f.RequestID, FetchResp: &quorum.FetchResponse{
			HighWatermark: 2, LeaderID: 1, LeaderEpoch: epoch, SnapshotID: &snap}})
		e.ProcessReady(n)
		got := e.Take(func(m quorum.Message) bool { return m.From == 2 && m.FetchSnapshot != nil })
		if len(got) != 1 || got[0].FetchSnapshot.Position != 0 {
			t.Fatalf("node 2 sent %v, want one FetchSnapshot from position 0", got)
		}
		return got[0]
	}
	// answer steps a first chunk of 64 bytes of a snapshot of size into node 2 and
	// returns the chunks its next Ready hands to the driver.
	answer := func(req quorum.Message, size int64) []quorum.SnapshotChunk {
		t.Helper()
		e.Deliver(quorum.Message{From: 1, To: 2, RequestID: req.RequestID, FetchSnapshotResp: &quorum.FetchSnapshotResponse{
			LeaderID: 1, LeaderEpoch: epoch, SnapshotID: snap, Size: size, Bytes: make([]byte, 64)}})
		if !n.Raft.HasReady() {
			return nil
		}
		rd := n.Raft.Ready()
		e.Net = append(e.Net, rd.Messages...)
		e.Net = append(e.Net, rd.MessagesAfterPersist...)
		n.Raft.Advance(rd)
		return rd.SnapshotChunks
	}

	req := startDownload()
	if chunks := answer(req, quorum.DefaultMaxSnapshotBytes+1); len(chunks) != 0 {
		t.Fatalf("a chunk of a %d-byte snapshot reached the driver: %d chunks", quorum.DefaultMaxSnapshotBytes+1, len(chunks))
	}
	if c := n.Raft.Counters(); c.RefusedResponse != 1 {
		t.Errorf("RefusedResponse %d, want 1", c.RefusedResponse)
	}
	if !strings.Contains(e.Out.String(), "ERROR quorum: refused a peer's response") ||
		!strings.Contains(e.Out.String(), "snapshot larger than") {
		t.Errorf("no ERROR line for the oversized snapshot in:\n%s", e.Out)
	}
	// Abandoned: nothing is asked before the backoff, then a Fetch, not the next chunk.
	e.Tick(backoffMs-1, []int32{2})
	e.ProcessReady(n)
	if early := e.Take(func(m quorum.Message) bool { return m.From == 2 && (m.Fetch != nil || m.FetchSnapshot != nil) }); len(early) > 0 {
		t.Errorf("node 2 asked again within the retry backoff: %v", early)
	}
	e.Tick(1, []int32{2})
	e.ProcessReady(n)
	if next := e.Take(func(m quorum.Message) bool { return m.From == 2 && (m.Fetch != nil || m.FetchSnapshot != nil) }); len(next) != 1 || next[0].Fetch == nil {
		t.Fatalf("after the backoff node 2 sent %v, want one Fetch", next)
	}

	// A snapshot of exactly the cap is downloaded: its chunk goes to the driver and the
	// next chunk is asked for.
	req = startDownload()
	if chunks := answer(req, quorum.DefaultMaxSnapshotBytes); len(chunks) != 1 || chunks[0].Size != quorum.DefaultMaxSnapshotBytes {
		t.Fatalf("a chunk of a snapshot of the cap: %v", chunks)
	}
	if next := e.Take(func(m quorum.Message) bool { return m.From == 2 && m.FetchSnapshot != nil }); len(next) != 1 || next[0].FetchSnapshot.Position != 64 {
		t.Fatalf("node 2 sent %v, want the FetchSnapshot from position 64", next)
	}
	if c := n.Raft.Counters(); c.RefusedResponse != 1 {
		t.Errorf("RefusedResponse %d, want still 1", c.RefusedResponse)
	}
	assertQuorumKept(t, e, epoch)
}
