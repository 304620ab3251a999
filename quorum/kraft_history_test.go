package quorum

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// dynVoters is a voter set of ids with directory ids testDirID(id).
func dynVoters(t testing.TB, ids ...int32) VoterSet {
	t.Helper()
	var nodes []VoterNode
	for _, id := range ids {
		nodes = append(nodes, VoterNode{Key: ReplicaKey{ID: id, DirectoryID: testDirID(byte(id))},
			Endpoints: []Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: uint16(9090 + id)}}, KRaftVersionMax: 1})
	}
	return mustVoterSet(t, nodes...)
}

// dynamicRaft starts node id of a dynamic quorum (no Config.Voters) from the
// bootstrap snapshot `storage format` writes with voters boot.
func dynamicRaft(t *testing.T, id int32, dir [16]byte, boot VoterSet) *Raft {
	t.Helper()
	loaded := raftlog.Loaded{State: raftlog.EmptyQuorumState(), Snapshot: &raftlog.BootstrapSnapshotID}
	r, err := NewRaftFromSnapshot(Config{NodeID: id, DirectoryID: dir, AppendLingerMs: AppendLingerMsNone}, loaded,
		SnapshotKRaft{KRaftVersion: KRaftVersionDynamic, Voters: boot}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// drain handles every Ready as a driver with an instant disk would and returns the
// messages sent.
func drain(r *Raft) []Message {
	var out []Message
	for r.HasReady() {
		rd := r.Ready()
		out = append(append(out, rd.Messages...), rd.MessagesAfterPersist...)
		rd.flushEnd = r.log.endOffset()
		r.Advance(rd)
	}
	return out
}

func votersBatch(t testing.TB, base int64, epoch int32, vs VoterSet) raftlog.Batch {
	t.Helper()
	return raftlog.EncodeBatch(base, epoch, 0, true, KRaftControlRecords(KRaftVersionDynamic, vs))
}

func leaderChangeAt(base int64, epoch, leader int32) raftlog.Batch {
	msg := kmsg.LeaderChangeMessage{LeaderID: leader}
	return raftlog.EncodeBatch(base, epoch, 0, true,
		[]raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlLeaderChange), Value: msg.AppendTo(nil)}})
}

// TestStandaloneVoterLeads: a controller formatted --standalone takes its voter set
// from the bootstrap snapshot and, as the only voter, elects itself; its
// LeaderChange names it. The same node id with another directory id (the disk was
// replaced) is a new replica: not a voter, it never campaigns.
func TestStandaloneVoterLeads(t *testing.T) {
	boot := dynVoters(t, 1)
	r := dynamicRaft(t, 1, testDirID(1), boot)
	if st := r.Status(); !st.IsVoter || r.kraftVersion() != KRaftVersionDynamic {
		t.Fatalf("standalone voter: IsVoter %t, kraft.version %d", st.IsVoter, r.kraftVersion())
	}
	drain(r)
	r.Tick(2000)
	drain(r)
	if st := r.Status(); st.Role != Leader || st.Epoch != 1 {
		t.Fatalf("standalone voter is %s at epoch %d, want Leader at 1", st.Role, st.Epoch)
	}
	recs, _ := r.log.batches[0].Records()
	var lc kmsg.LeaderChangeMessage
	if err := lc.ReadFrom(recs[0].Value); err != nil || len(lc.Voters) != 1 || lc.Voters[0].VoterID != 1 {
		t.Fatalf("LeaderChange %+v, %v", lc, err)
	}
	// The bootstrap snapshot is never served: the first leader writes the voter set
	// into the log, in its LeaderChange batch, for the replicas that lack it.
	if len(recs) != 3 {
		t.Fatalf("LeaderChange batch holds %d records, want LeaderChange, KRaftVersion, Voters", len(recs))
	}
	if vs, err := ParseVotersRecord(recs[2].Value); err != nil || !vs.Equal(boot) {
		t.Fatalf("voters in the LeaderChange batch: %v, %v", vs, err)
	}
	if v, _ := r.log.kraft.latestVoters(); v.offset != 2 {
		t.Fatalf("voter set in force from offset %d, want 2 (the log's record)", v.offset)
	}
	// A later leader whose voter set comes from the log writes no voters again.
	r.log.truncateTo(0)
	r.log.kraft.reset(raftlog.BootstrapSnapshotID, SnapshotKRaft{})
	r.log.append(votersBatch(t, 0, 1, boot))
	if recs, _ := r.leaderChangeBatch(0).Records(); len(recs) != 1 {
		t.Fatalf("LeaderChange batch of a voter set from the log holds %d records", len(recs))
	}

	replaced := dynamicRaft(t, 1, testDirID(99), boot)
	drain(replaced)
	replaced.Tick(5000)
	drain(replaced)
	if st := replaced.Status(); st.IsVoter || st.Role != Unattached || st.Epoch != 0 {
		t.Fatalf("replaced replica: IsVoter %t, %s at epoch %d; want a non-voter, Unattached at 0",
			st.IsVoter, st.Role, st.Epoch)
	}
}

// TestVoterSetFollowsLogAndRollsBack: a follower's voter set in force is the last
// VotersRecord it appended, committed or not: the record adding it makes it a
// voter at once, and a divergence that truncates the record rolls the set back.
// A VotersRecord that does not decode is refused, not appended.
func TestVoterSetFollowsLogAndRollsBack(t *testing.T) {
	r := dynamicRaft(t, 2, testDirID(2), dynVoters(t, 1))
	drain(r)
	if err := r.Step(0, Message{From: 1, To: 2, BeginEpoch: &BeginQuorumEpochRequest{VoterID: 2, LeaderID: 1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	fetch := func() Message {
		t.Helper()
		for _, m := range drain(r) {
			if m.Fetch != nil {
				return m
			}
		}
		t.Fatalf("no Fetch from a %s", r.Status().Role)
		return Message{}
	}
	answer := func(req Message, resp FetchResponse) {
		t.Helper()
		resp.LeaderID, resp.LeaderEpoch = 1, 1
		if err := r.Step(0, Message{From: 1, To: 2, RequestID: req.RequestID, FetchResp: &resp}); err != nil {
			t.Fatal(err)
		}
	}
	answer(fetch(), FetchResponse{HighWatermark: 1, Batches: []raftlog.Batch{leaderChangeAt(0, 1, 1),
		votersBatch(t, 1, 1, dynVoters(t, 1, 2))}})
	if st := r.Status(); !st.IsVoter || !slices.Equal(r.voterIDs(), []int32{1, 2}) || st.HighWatermark != 1 {
		t.Fatalf("after the uncommitted VotersRecord: IsVoter %t, voters %v, hw %d; want a voter of [1 2], hw 1",
			st.IsVoter, r.voterIDs(), st.HighWatermark)
	}
	if k := r.snapshotKRaft(raftlog.SnapshotID{EndOffset: 1, Epoch: 1}); !k.Voters.Equal(dynVoters(t, 1)) {
		t.Fatalf("voters at offset 0: %v, want the bootstrap set", k.Voters)
	}
	answer(fetch(), FetchResponse{HighWatermark: 1, DivergingEpoch: &EpochEndOffset{Epoch: 1, EndOffset: 1}})
	if st := r.Status(); st.IsVoter || !slices.Equal(r.voterIDs(), []int32{1}) || st.LogEndOffset != 1 {
		t.Fatalf("after truncating it: IsVoter %t, voters %v, end %d; want a non-voter of [1], end 1",
			st.IsVoter, r.voterIDs(), st.LogEndOffset)
	}

	bad := raftlog.EncodeBatch(1, 1, 0, true, []raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlKRaftVoters),
		Value: AppendVotersRecord(nil, VoterSet{})}})
	refused := r.Counters().RefusedResponse
	answer(fetch(), FetchResponse{HighWatermark: 1, Batches: []raftlog.Batch{bad}})
	if st := r.Status(); st.LogEndOffset != 1 || r.Counters().RefusedResponse != refused+1 || !slices.Equal(r.voterIDs(), []int32{1}) {
		t.Fatalf("empty VotersRecord: end %d, refused %d (was %d), voters %v", st.LogEndOffset,
			r.Counters().RefusedResponse, refused, r.voterIDs())
	}
}

// TestVoterHistorySnapshotAndRestart: loading a snapshot replaces the voter set
// with the snapshot's; at a restart the log's records at or above the latest
// snapshot's end apply on top of it, and those below (kept by retention) do not.
func TestVoterHistorySnapshotAndRestart(t *testing.T) {
	l := &raftLog{pendingTruncate: -1}
	l.append(leaderChangeAt(0, 1, 1), votersBatch(t, 1, 1, dynVoters(t, 1, 2)), votersBatch(t, 3, 1, dynVoters(t, 1, 2, 3)))
	if v, _ := l.kraft.latestVoters(); !slices.Equal(v.ids, []int32{1, 2, 3}) {
		t.Fatalf("voters %v", v.ids)
	}
	l.truncateTo(3)
	if v, _ := l.kraft.latestVoters(); !slices.Equal(v.ids, []int32{1, 2}) {
		t.Fatalf("after truncating to 3: voters %v", v.ids)
	}
	l.resetTo(raftlog.SnapshotID{EndOffset: 10, Epoch: 2}, SnapshotKRaft{KRaftVersion: 1, Voters: dynVoters(t, 4)})
	if v, _ := l.kraft.latestVoters(); !slices.Equal(v.ids, []int32{4}) || l.kraft.latestKRaftVersion() != 1 {
		t.Fatalf("after loading a snapshot of [4]: voters %v", v.ids)
	}

	loaded := raftlog.Loaded{StartOffset: 1, Snapshot: &raftlog.SnapshotID{EndOffset: 3, Epoch: 1},
		Batches: []raftlog.Batch{votersBatch(t, 1, 1, dynVoters(t, 7)), votersBatch(t, 3, 1, dynVoters(t, 5, 6))}}
	rl, err := newRaftLog(loaded, SnapshotKRaft{KRaftVersion: 1, Voters: dynVoters(t, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := rl.kraft.latestVoters(); !slices.Equal(v.ids, []int32{5, 6}) {
		t.Fatalf("restart: voters %v, want [5 6]", v.ids)
	}
	if vs, _ := rl.kraft.votersAt(2); !vs.Equal(dynVoters(t, 1, 2)) {
		t.Fatalf("restart: voters at 2 are %v, want the snapshot's [1 2]", vs)
	}
	loaded.Batches[1] = raftlog.EncodeBatch(3, 1, 0, true, []raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlKRaftVoters),
		Value: []byte{0, 0, 9}}})
	if _, err := newRaftLog(loaded, SnapshotKRaft{}); err == nil {
		t.Fatal("a log with an undecodable VotersRecord loaded")
	}
}

// TestVoterKeyAndVotesAtKRaftVersion1: a Vote or BeginQuorumEpoch addressed to
// this node's id with another directory id (the replica whose disk this one
// replaced) gets INVALID_VOTER_KEY and changes nothing; at kraft.version 1 a vote
// is granted to a candidate the local voter set does not (yet) list, and by a
// replica that is not in it, as Kafka does (KIP-853); the static check of
// kraft.version 0 would refuse both (INCONSISTENT_VOTER_SET). A candidate names
// the voter's and its own directory id.
func TestVoterKeyAndVotesAtKRaftVersion1(t *testing.T) {
	r := dynamicRaft(t, 2, testDirID(2), dynVoters(t, 1, 2))
	drain(r)
	vote := func(dir [16]byte, candidate int32) VoteResponse {
		t.Helper()
		req := &VoteRequest{VoterID: 2, VoterDirectoryID: dir, CandidateID: candidate, CandidateEpoch: 1}
		if err := r.Step(0, Message{From: candidate, To: 2, RequestID: 7, Vote: req}); err != nil {
			t.Fatal(err)
		}
		for _, m := range drain(r) {
			if m.VoteResp != nil {
				return *m.VoteResp
			}
		}
		t.Fatal("no Vote answer")
		return VoteResponse{}
	}
	if resp := vote(testDirID(9), 1); resp.ErrorCode != kerr.InvalidVoterKey.Code || resp.VoteGranted || r.Status().Epoch != 0 {
		t.Fatalf("vote for another directory id: %+v at epoch %d", resp, r.Status().Epoch)
	}
	if err := r.Step(0, Message{From: 1, To: 2, RequestID: 8, BeginEpoch: &BeginQuorumEpochRequest{VoterID: 2,
		VoterDirectoryID: testDirID(9), LeaderID: 1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range drain(r) {
		if m.BeginEpochResp != nil && m.BeginEpochResp.ErrorCode != kerr.InvalidVoterKey.Code {
			t.Fatalf("BeginQuorumEpoch for another directory id: %+v", m.BeginEpochResp)
		}
	}
	if st := r.Status(); st.Epoch != 0 || st.LeaderID != -1 {
		t.Fatalf("after refused requests: epoch %d leader %d", st.Epoch, st.LeaderID)
	}
	if resp := vote(testDirID(2), 3); resp.ErrorCode != 0 || !resp.VoteGranted {
		t.Fatalf("vote for candidate 3, not a local voter, at kraft.version 1: %+v", resp)
	}

	outsider := dynamicRaft(t, 5, testDirID(5), dynVoters(t, 1, 2))
	drain(outsider)
	if err := outsider.Step(0, Message{From: 1, To: 5, RequestID: 9, Vote: &VoteRequest{VoterID: 5, CandidateID: 1, CandidateEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	granted := false
	for _, m := range drain(outsider) {
		granted = granted || (m.VoteResp != nil && m.VoteResp.VoteGranted)
	}
	if !granted {
		t.Fatal("a replica outside the voter set refused a vote at kraft.version 1")
	}

	leader := dynamicRaft(t, 1, testDirID(1), dynVoters(t, 1, 2, 3))
	drain(leader)
	leader.Tick(5000)
	var asked []VoteRequest
	for _, m := range drain(leader) {
		if m.Vote != nil {
			asked = append(asked, *m.Vote)
		}
	}
	if len(asked) != 2 || asked[0].VoterDirectoryID != testDirID(byte(asked[0].VoterID)) ||
		asked[0].CandidateDirectoryID != testDirID(1) {
		t.Fatalf("vote requests %+v", asked)
	}
}

// TestDynamicVoterRefusesLostState: a voter of a dynamic quorum whose quorum-state
// is missing after it took part (its log shows epoch 3) is refused at start, as a
// static voter is; the same directory as a non-voter (another directory id) starts.
func TestDynamicVoterRefusesLostState(t *testing.T) {
	loaded := raftlog.Loaded{State: raftlog.EmptyQuorumState(), StateMissing: true, Snapshot: &raftlog.BootstrapSnapshotID,
		Batches: []raftlog.Batch{leaderChangeAt(0, 3, 1)}}
	boot := SnapshotKRaft{KRaftVersion: KRaftVersionDynamic, Voters: dynVoters(t, 1, 2)}
	if _, err := NewRaftFromSnapshot(Config{NodeID: 2, DirectoryID: testDirID(2)}, loaded, boot, 0); !errors.Is(err, ErrUnusableQuorumState) {
		t.Fatalf("voter 2 with a lost quorum-state: %v, want ErrUnusableQuorumState", err)
	}
	if _, err := NewRaftFromSnapshot(Config{NodeID: 2, DirectoryID: testDirID(9)}, loaded, boot, 0); err != nil {
		t.Fatalf("a non-voter replica with no quorum-state: %v", err)
	}
}
