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

// Group commit: a proposal on an idle log is appended at once, even with a 25 ms
// linger; proposals arriving while that append's fsync runs wait and go out as one
// batch the moment its Advance reports it durable.
func TestProposeGroupCommit(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 1, Voters: []int32{1}, AppendLingerMs: 25},
		raftlog.Loaded{State: raftlog.EmptyQuorumState()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Advance(r.Ready()) // elected, LeaderChange at 0 durable: the log is idle
	b1, _, _ := r.Propose(1, []raftlog.Record{{Value: []byte("a")}})
	rd1 := r.Ready()
	if b1 != 1 || len(rd1.Append) != 1 || rd1.Append[0].BaseOffset != 1 || rd1.Append[0].LastOffset != 1 {
		t.Fatalf("idle log: offset %d, append %+v; want offset 1 appended at once", b1, rd1.Append)
	}
	// rd1's fsync is in flight (a leader's append-only Ready, Node.appendAsync).
	b2, _, _ := r.Propose(2, []raftlog.Record{{Value: []byte("b")}})
	b3, _, _ := r.Propose(3, []raftlog.Record{{Value: []byte("c")}, {Value: []byte("d")}})
	if b2 != 2 || b3 != 3 {
		t.Fatalf("offsets %d %d, want 2 3", b2, b3)
	}
	if r.HasReady() {
		t.Fatalf("appended while an fsync was in flight: %+v", r.Ready().Append)
	}
	if r.NextDeadlineMs() != 27 {
		t.Fatalf("deadline %d, want 27 (linger bounds the wait)", r.NextDeadlineMs())
	}
	r.Advance(rd1)
	rd2 := r.Ready()
	if len(rd2.Append) != 1 || rd2.Append[0].BaseOffset != 2 || rd2.Append[0].LastOffset != 4 {
		t.Fatalf("after the fsync: append %+v, want one batch 2-4", rd2.Append)
	}
	if rd2.HighWatermark != 2 {
		t.Fatalf("high watermark %d, want 2 (offset 1 durable, 2-4 not yet)", rd2.HighWatermark)
	}
	r.Advance(rd2)
	if rd3 := r.Ready(); len(rd3.Append) != 0 || rd3.HighWatermark != 5 {
		t.Fatalf("append %+v high watermark %d: want nothing left to append, 5", rd3.Append, rd3.HighWatermark)
	}
}

// The linger time bounds how long a proposal waits for an fsync in flight: Tick
// appends it then, fsync or not.
func TestProposeLingerBoundsTheWait(t *testing.T) {
	r, err := NewRaft(Config{NodeID: 1, Voters: []int32{1}, AppendLingerMs: 25},
		raftlog.Loaded{State: raftlog.EmptyQuorumState()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Advance(r.Ready())
	r.Propose(1, []raftlog.Record{{Value: []byte("a")}})
	rd1 := r.Ready() // its fsync never completes in this test
	b2, _, _ := r.Propose(2, []raftlog.Record{{Value: []byte("b")}})
	b3, _, _ := r.Propose(10, []raftlog.Record{{Value: []byte("c")}})
	if b2 != 2 || b3 != 3 || r.NextDeadlineMs() != 27 {
		t.Fatalf("offsets %d %d deadline %d, want 2 3 27", b2, b3, r.NextDeadlineMs())
	}
	r.Tick(26)
	if r.HasReady() {
		t.Fatalf("appended before the linger time: %+v", r.Ready().Append)
	}
	r.Tick(27)
	rd := r.Ready()
	if len(rd.Append) != 1 || rd.Append[0].BaseOffset != 2 || rd.Append[0].LastOffset != 3 {
		t.Fatalf("append %+v, want one batch 2-3 at the linger deadline", rd.Append)
	}
	r.Advance(rd1)
	r.Advance(rd)
	if st := r.Status(); st.HighWatermark != 4 {
		t.Fatalf("high watermark %d, want 4", st.HighWatermark)
	}
}
