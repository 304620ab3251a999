package quorum

import (
	"slices"
	"testing"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestQuorumStateDataVersion1: at kraft.version 1 the quorum-state is Kafka's
// data_version 1 (votedDirectoryId, no currentVoters); a vote is for a replica key,
// so the same id with another directory id is refused in that epoch, also after a
// restart from the persisted state. A static quorum keeps data_version 0 with the
// voters.
func TestQuorumStateDataVersion1(t *testing.T) {
	r := dynamicRaft(t, 2, testDirID(2), dynVoters(t, 1, 2, 3))
	drain(r)
	vote := func(r *Raft, dir [16]byte) (bool, *raftlog.QuorumState) {
		t.Helper()
		req := &VoteRequest{VoterID: 2, CandidateID: 3, CandidateDirectoryID: dir, CandidateEpoch: 4}
		if err := r.Step(0, Message{From: 3, To: 2, RequestID: 7, Vote: req}); err != nil {
			t.Fatal(err)
		}
		var st *raftlog.QuorumState
		granted := false
		for r.HasReady() {
			rd := r.Ready()
			if rd.QuorumState != nil {
				st = rd.QuorumState
			}
			for _, m := range append(rd.Messages, rd.MessagesAfterPersist...) {
				granted = granted || (m.VoteResp != nil && m.VoteResp.VoteGranted)
			}
			rd.flushEnd = r.log.endOffset()
			r.Advance(rd)
		}
		return granted, st
	}
	granted, st := vote(r, testDirID(3))
	if !granted || st == nil || st.DataVersion != 1 || st.VotedID != 3 || st.VotedDirectoryID != testDirID(3) ||
		st.CurrentVoters != nil || st.LeaderEpoch != 4 {
		t.Fatalf("vote for 3:%x granted %t, persisted %+v", testDirID(3), granted, st)
	}
	if granted, _ := vote(r, testDirID(9)); granted {
		t.Fatal("a second replica with id 3 got the vote of epoch 4")
	}
	if granted, _ := vote(r, testDirID(3)); !granted {
		t.Fatal("the replica voted for was refused again")
	}

	loaded := raftlog.Loaded{State: *st, Snapshot: &raftlog.BootstrapSnapshotID}
	restarted, err := NewRaftFromSnapshot(Config{NodeID: 2, DirectoryID: testDirID(2), AppendLingerMs: AppendLingerMsNone}, loaded,
		SnapshotKRaft{KRaftVersion: KRaftVersionDynamic, Voters: dynVoters(t, 1, 2, 3)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	drain(restarted)
	if granted, _ := vote(restarted, testDirID(9)); granted {
		t.Fatal("after a restart, a second replica with id 3 got the vote of epoch 4")
	}
	if granted, _ := vote(restarted, testDirID(3)); !granted {
		t.Fatal("after a restart, the replica voted for was refused")
	}

	static := newTestRaft(t, 2, 1, 2, 3)
	static.Ready()
	if err := static.Step(0, Message{From: 3, To: 2, RequestID: 7, Vote: &VoteRequest{VoterID: 2, CandidateID: 3, CandidateEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	rd := static.Ready()
	if rd.QuorumState == nil || rd.QuorumState.DataVersion != 0 || !slices.Equal(rd.QuorumState.CurrentVoters, []int32{1, 2, 3}) {
		t.Fatalf("static quorum-state %+v", rd.QuorumState)
	}
}
