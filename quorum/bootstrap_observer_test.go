package quorum

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestBootstrapObserverReturnsToTheLeader: an observer that knows the quorum only by
// its bootstrap servers (a controller formatted --no-initial-controllers, before it
// is added) and that follows leader 1 sends its Fetch to a bootstrap server after an
// error from the leader. When that server is the leader itself, the answer comes
// back from AnyVoter, without an error, naming leader 1 in the epoch: only the leader
// answers a Fetch so, so it is the leader's answer. Before, the observer dropped it
// (not from the leader's id) and stayed rediscovering through the bootstrap server
// forever, never appending again: the Node simulation with dynamic quorums found two
// spares stuck at log end 0 for 30 s after healing.
func TestBootstrapObserverReturnsToTheLeader(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 4, DirectoryID: testDirID(4), AppendLingerMs: AppendLingerMsNone}, raftlogLoadedEmpty(), 0)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(nowMs int64) Message {
		t.Helper()
		r.Tick(nowMs)
		var got []Message
		for _, m := range drain(r) {
			if m.Fetch != nil {
				got = append(got, m)
			}
		}
		if len(got) != 1 {
			t.Fatalf("at %d ms: %d fetches sent, want 1: %v", nowMs, len(got), got)
		}
		return got[0]
	}
	answer := func(nowMs int64, req Message, from int32, resp *FetchResponse) {
		t.Helper()
		if err := r.Step(nowMs, Message{From: from, To: 4, RequestID: req.RequestID, FetchResp: resp}); err != nil {
			t.Fatal(err)
		}
	}
	m := fetch(0)
	if m.To != AnyVoter {
		t.Fatalf("discovery fetch to %d, want a bootstrap server", m.To)
	}
	answer(1, m, AnyVoter, &FetchResponse{LeaderID: 1, LeaderEpoch: 1, HighWatermark: -1})
	if st := r.Status(); st.Role != Follower || st.LeaderID != 1 {
		t.Fatalf("setup: %s of %d", st.Role, st.LeaderID)
	}
	m = fetch(2)
	if m.To != 1 {
		t.Fatalf("fetch to %d, want leader 1", m.To)
	}
	answer(3, m, 1, &FetchResponse{LeaderID: 1, LeaderEpoch: 1, HighWatermark: -1, ErrorCode: kerr.BrokerNotAvailable.Code})
	m = fetch(100)
	if m.To != AnyVoter {
		t.Fatalf("after the leader's error: fetch to %d, want a bootstrap server", m.To)
	}
	b := raftlog.EncodeBatch(0, 1, 1_700_000_000_000, false, []raftlog.Record{{Value: []byte("x")}})
	answer(101, m, AnyVoter, &FetchResponse{LeaderID: 1, LeaderEpoch: 1, HighWatermark: 1, Batches: []raftlog.Batch{b}})
	out := drain(r)
	if st := r.Status(); st.LogEndOffset != 1 || st.LeaderID != 1 {
		t.Fatalf("the leader's answer through the bootstrap server: log end %d, leader %d; want 1, 1", st.LogEndOffset, st.LeaderID)
	}
	if len(out) != 1 || out[0].Fetch == nil || out[0].To != 1 {
		t.Fatalf("next messages %v, want one fetch to leader 1", out)
	}
}

// TestNonVoterVoteArmsNoElectionTimer: at kraft.version 1 a replica outside the voter
// set grants votes (KIP-853: no membership check), but it never campaigns, so the
// vote must not leave an election deadline it never acts on. It did: once that
// deadline passed, NextDeadlineMs stayed in the past and the driver's timer fired
// at once, forever (a busy loop; the Node simulation with dynamic quorums stopped on
// it as a runaway run).
func TestNonVoterVoteArmsNoElectionTimer(t *testing.T) {
	r := dynamicRaft(t, 4, testDirID(4), dynVoters(t, 1, 2, 3))
	drain(r)
	if st := r.Status(); st.IsVoter || st.Role != Unattached {
		t.Fatalf("setup: voter %t, %s", st.IsVoter, st.Role)
	}
	vote := &VoteRequest{VoterID: 4, VoterDirectoryID: testDirID(4), CandidateDirectoryID: testDirID(1),
		CandidateEpoch: 1, CandidateID: 1, LastOffsetEpoch: 0, LastOffset: 0}
	if err := r.Step(10, Message{From: 1, To: 4, RequestID: 1, Vote: vote}); err != nil {
		t.Fatal(err)
	}
	granted := false
	for _, m := range drain(r) {
		if m.VoteResp != nil {
			granted = m.VoteResp.VoteGranted
		}
	}
	if !granted {
		t.Fatalf("setup: the non-voter refused the vote (%s at epoch %d)", r.Status().Role, r.Status().Epoch)
	}
	for now := int64(1000); now <= 20_000; now += 1000 {
		r.Tick(now)
		drain(r)
		if d := r.NextDeadlineMs(); d <= now {
			t.Fatalf("at %d ms the next deadline is %d: a timer that Tick does not move", now, d)
		}
	}
}

// TestObserverWithoutLeaderGrantsPreVote: an observer that fetched from the leader
// once and has heard nothing from it for a whole fetch timeout no longer protects it
// from pre-votes (KIP-996 protects a leader the follower still hears from). At
// kraft.version 1 such a replica may already be a voter in the logs of the others
// (added by a VotersRecord it has not fetched), and its pre-vote can be the one an
// election needs: it refused them forever once the leader died (the Node simulation
// with dynamic quorums found a quorum of {1, 2, 4} with the leader's disk replaced
// that never elected, 4 answering every pre-vote with a dead leader's id).
func TestObserverWithoutLeaderGrantsPreVote(t *testing.T) {
	r := dynamicRaft(t, 4, testDirID(4), dynVoters(t, 1, 2, 3))
	var fetch Message
	take := func() {
		t.Helper()
		fetch = Message{}
		for _, m := range drain(r) {
			if m.Fetch != nil {
				fetch = m
			}
		}
		if fetch.Fetch == nil {
			t.Fatal("no fetch sent")
		}
	}
	take()
	answer := func(nowMs int64, from int32, resp *FetchResponse) {
		t.Helper()
		if err := r.Step(nowMs, Message{From: from, To: 4, RequestID: fetch.RequestID, FetchResp: resp}); err != nil {
			t.Fatal(err)
		}
	}
	answer(1, fetch.To, &FetchResponse{LeaderID: 1, LeaderEpoch: 1, HighWatermark: -1, ErrorCode: kerr.NotLeaderForPartition.Code})
	take()
	if fetch.To != 1 {
		t.Fatalf("setup: fetch to %d, want leader 1", fetch.To)
	}
	answer(2, 1, &FetchResponse{LeaderID: 1, LeaderEpoch: 1, HighWatermark: 0})
	drain(r)
	if st := r.Status(); st.Role != Follower || st.LeaderID != 1 || st.IsVoter {
		t.Fatalf("setup: %s of %d, voter %t", st.Role, st.LeaderID, st.IsVoter)
	}
	preVote := func(nowMs int64) bool {
		t.Helper()
		v := &VoteRequest{VoterID: 4, VoterDirectoryID: testDirID(4), CandidateDirectoryID: testDirID(2),
			CandidateEpoch: 1, CandidateID: 2, PreVote: true}
		if err := r.Step(nowMs, Message{From: 2, To: 4, RequestID: uint64(nowMs), Vote: v}); err != nil {
			t.Fatal(err)
		}
		for _, m := range drain(r) {
			if m.VoteResp != nil {
				return m.VoteResp.VoteGranted
			}
		}
		t.Fatal("no answer to the pre-vote")
		return false
	}
	if preVote(3) {
		t.Fatal("an observer that just fetched from its leader granted a pre-vote")
	}
	for now := int64(500); now <= 6000; now += 500 {
		r.Tick(now) // no answer from leader 1 any more
		drain(r)
	}
	if !preVote(6001) {
		t.Fatalf("an observer that has not heard from its leader for 6 s refused a pre-vote (%s of %d)", r.Status().Role, r.Status().LeaderID)
	}
}

// TestProspectiveReturnsToTheLeaderItKnows: a voter whose fetch timer expired asks for
// pre-votes while it knows the epoch's leader; one voter refuses (the leader is
// alive) and another answers with an error (INVALID_VOTER_KEY: its disk was replaced),
// so the round is neither won nor lost. When its election timer expires it follows
// the leader it knows and fetches again, as Kafka's prospective does, instead of
// pre-voting forever without fetching (the Node simulation with dynamic quorums found
// a controller that never caught up after healing, seed 333 of -sim.dynamic=100).
func TestProspectiveReturnsToTheLeaderItKnows(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 2, Voters: []int32{1, 2, 3}, AppendLingerMs: AppendLingerMsNone}, raftlogLoadedEmpty(), 0)
	if err != nil {
		t.Fatal(err)
	}
	drain(r)
	step := func(nowMs int64, m Message) []Message {
		t.Helper()
		if err := r.Step(nowMs, m); err != nil {
			t.Fatal(err)
		}
		return drain(r)
	}
	step(1, Message{From: 3, To: 2, RequestID: 1, BeginEpoch: &BeginQuorumEpochRequest{VoterID: 2, LeaderID: 3, LeaderEpoch: 1}})
	if st := r.Status(); st.Role != Follower || st.LeaderID != 3 {
		t.Fatalf("setup: %s of %d", st.Role, st.LeaderID)
	}
	var votes []Message
	for now := int64(500); now <= 6000 && r.Status().Role != Prospective; now += 500 {
		r.Tick(now)
		votes = drain(r)
	}
	if r.Status().Role != Prospective {
		t.Fatalf("setup: %s after the fetch timeout", r.Status().Role)
	}
	for _, m := range votes {
		if m.Vote == nil {
			continue
		}
		resp := &VoteResponse{PreVote: true, LeaderID: 3, LeaderEpoch: 1}
		if m.To == 1 {
			resp.ErrorCode = kerr.InvalidVoterKey.Code
		}
		step(6001, Message{From: m.To, To: 2, RequestID: m.RequestID, VoteResp: resp})
	}
	if st := r.Status(); st.Role != Prospective {
		t.Fatalf("setup: the round ended as %s", st.Role)
	}
	var fetchTo int32 = -2
	for now := int64(6500); now <= 12_000 && fetchTo == -2; now += 500 {
		r.Tick(now)
		for _, m := range drain(r) {
			if m.Fetch != nil {
				fetchTo = m.To
			}
		}
	}
	if st := r.Status(); fetchTo != 3 || st.Role != Follower || st.LeaderID != 3 {
		t.Fatalf("after the undecided pre-vote round timed out: %s of %d, fetch to %d; want a follower of 3 fetching from it", st.Role, st.LeaderID, fetchTo)
	}
}
