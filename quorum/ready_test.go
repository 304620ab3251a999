package quorum

import (
	"math/rand/v2"
	"testing"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

func newTestRaft(t *testing.T, id int32, voters ...int32) *Raft {
	t.Helper()
	r, err := NewRaft(Config{NodeID: id, Voters: voters, AppendLingerMs: AppendLingerMsNone,
		Rand: rand.New(rand.NewPCG(1, uint64(id)))}, raftlog.Loaded{State: raftlog.EmptyQuorumState()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A vote grant must not leave before the vote is durable, and the persisted state
// must name the candidate.
func TestVoteGrantIsSentAfterPersist(t *testing.T) {
	r := newTestRaft(t, 2, 1, 2, 3)
	r.Ready()
	err := r.Step(10, Message{From: 1, To: 2, RequestID: 7, Vote: &VoteRequest{
		VoterID: 2, CandidateEpoch: 1, CandidateID: 1, LastOffsetEpoch: 0, LastOffset: 0}})
	if err != nil {
		t.Fatal(err)
	}
	rd := r.Ready()
	if rd.QuorumState == nil || rd.QuorumState.VotedID != 1 || rd.QuorumState.LeaderEpoch != 1 {
		t.Fatalf("quorum state %+v", rd.QuorumState)
	}
	if len(rd.Messages) != 0 || len(rd.MessagesAfterPersist) != 1 {
		t.Fatalf("messages %v / after %v", rd.Messages, rd.MessagesAfterPersist)
	}
	resp := rd.MessagesAfterPersist[0]
	if resp.VoteResp == nil || !resp.VoteResp.VoteGranted || resp.RequestID != 7 || resp.To != 1 {
		t.Fatalf("response %v", resp)
	}
}

// A leader counts only its flushed end offset: in a single-voter quorum nothing
// commits until Advance confirms the append.
func TestLeaderHWWaitsForOwnFlush(t *testing.T) {
	r := newTestRaft(t, 1, 1)
	if r.Status().Role != Leader {
		t.Fatalf("single voter not leader: %v", r.Status().Role)
	}
	if _, _, err := r.Propose(5, []raftlog.Record{{Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	rd := r.Ready()
	if len(rd.Committed) != 0 || len(rd.Append) != 2 {
		t.Fatalf("committed %d append %d before flush", len(rd.Committed), len(rd.Append))
	}
	if rd.SoftState == nil || rd.SoftState.Role != Leader || rd.SoftState.EpochStartOffset != 0 {
		t.Fatalf("soft state %+v", rd.SoftState)
	}
	r.Advance(rd)
	rd = r.Ready()
	if len(rd.Committed) != 2 || rd.HighWatermark != 2 || r.Status().HighWatermark != 2 {
		t.Fatalf("after flush: committed %d hw %d", len(rd.Committed), rd.HighWatermark)
	}
	recs, err := rd.Committed[0].Records()
	if err != nil || !rd.Committed[0].Control {
		t.Fatalf("first committed batch is not a control batch: %v", err)
	}
	if ct, _ := raftlog.ParseControlKey(recs[0].Key); ct != raftlog.ControlLeaderChange {
		t.Fatalf("control type %v, want LeaderChange (2)", ct)
	}
}

// Proposals within the linger time share one batch; the accumulator drains on Tick.
func TestProposeLingers(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 1, Voters: []int32{1}, AppendLingerMs: 25},
		raftlog.Loaded{State: raftlog.EmptyQuorumState()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Advance(r.Ready())
	b1, _, _ := r.Propose(1, []raftlog.Record{{Value: []byte("a")}})
	b2, _, _ := r.Propose(2, []raftlog.Record{{Value: []byte("b")}})
	if b1 != 1 || b2 != 2 || r.NextDeadlineMs() != 26 {
		t.Fatalf("offsets %d %d deadline %d", b1, b2, r.NextDeadlineMs())
	}
	if rd := r.Ready(); len(rd.Append) != 0 {
		t.Fatalf("appended before linger: %d", len(rd.Append))
	}
	r.Tick(26)
	rd := r.Ready()
	if len(rd.Append) != 1 || rd.Append[0].BaseOffset != 1 || rd.Append[0].LastOffset != 2 {
		t.Fatalf("append %+v", rd.Append)
	}
}
