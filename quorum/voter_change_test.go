package quorum

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

func changeCode(err error) int16 {
	var ve *VoterChangeError
	if errors.As(err, &ve) {
		return ve.Code
	}
	if err == nil {
		return 0
	}
	return -1
}

// standaloneLeader is voter 1 of a dynamic quorum, leading epoch 1 with its high
// watermark established.
func standaloneLeader(t *testing.T) *Raft {
	t.Helper()
	r := dynamicRaft(t, 1, testDirID(1), dynVoters(t, 1))
	drain(r)
	r.Tick(2000)
	drain(r)
	if st := r.Status(); st.Role != Leader || st.HighWatermark <= 0 {
		t.Fatalf("setup: %s, hw %d", st.Role, st.HighWatermark)
	}
	return r
}

// observerFetch makes replica id (directory id testDirID(id)) fetch from the
// leader at offset.
func observerFetch(t *testing.T, r *Raft, id int32, offset int64, nowMs int64) {
	t.Helper()
	observerFetchAs(t, r, id, testDirID(byte(id)), offset, nowMs)
}

func observerFetchAs(t *testing.T, r *Raft, id int32, dir [16]byte, offset int64, nowMs int64) {
	t.Helper()
	req := &FetchRequest{ReplicaID: id, ReplicaDirectoryID: dir, CurrentLeaderEpoch: r.Status().Epoch, FetchOffset: offset,
		LastFetchedEpoch: r.log.lastEpoch(), MaxBytes: 1 << 20}
	if err := r.Step(nowMs, Message{From: id, To: 1, RequestID: uint64(100 + id), Fetch: req}); err != nil {
		t.Fatal(err)
	}
	drain(r)
}

// TestVoterChangeRules: AddVoter and RemoveVoter follow KIP-853's rules: a new voter
// must be a caught-up observer fetching with the directory id to add
// (REQUEST_TIMED_OUT otherwise), DUPLICATE_VOTER is
// keyed on the id, one change at a time (REQUEST_TIMED_OUT while a VotersRecord is
// uncommitted), VOTER_NOT_FOUND for an unknown replica and for the last voter,
// UNSUPPORTED_VERSION at kraft.version 0, NOT_LEADER_OR_FOLLOWER off the leader. The
// set changes when the record is appended.
func TestVoterChangeRules(t *testing.T) {
	r := standaloneLeader(t)
	v2 := dynVoters(t, 2).Voters[0]
	if _, err := r.AddVoter(2000, v2); changeCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("add of a replica that never fetched: %v", err)
	}
	observerFetch(t, r, 2, 0, 2000)
	if _, err := r.AddVoter(2000, v2); changeCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("add of an observer behind the high watermark: %v", err)
	}
	observerFetchAs(t, r, 2, testDirID(9), r.log.endOffset(), 2001)
	if _, err := r.AddVoter(2001, v2); changeCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("add of 2 while replica 2 fetches with another directory id: %v", err)
	}
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	if _, err := r.AddVoter(2001, dynVoters(t, 1).Voters[0]); changeCode(err) != kerr.DuplicateVoter.Code {
		t.Fatalf("add of voter 1 again: %v", err)
	}
	dupID := v2
	dupID.Key.ID = 1
	if _, err := r.AddVoter(2001, dupID); changeCode(err) != kerr.DuplicateVoter.Code {
		t.Fatalf("add of id 1 with another directory id: %v", err)
	}
	off, err := r.AddVoter(2001, v2)
	if err != nil || !slices.Equal(r.voterIDs(), []int32{1, 2}) {
		t.Fatalf("add of caught-up observer 2: %v, voters %v", err, r.voterIDs())
	}
	drain(r)
	if st := r.Status(); st.HighWatermark > off {
		t.Fatalf("the record committed without voter 2 (hw %d, record at %d)", st.HighWatermark, off)
	}
	if _, err := r.RemoveVoter(2001, ReplicaKey{ID: 2}); changeCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("a second change while the first is uncommitted: %v", err)
	}
	observerFetch(t, r, 2, r.log.endOffset(), 2002)
	if st := r.Status(); st.HighWatermark <= off {
		t.Fatalf("voter 2 fetched past the record, hw %d", st.HighWatermark)
	}
	if _, err := r.RemoveVoter(2002, ReplicaKey{ID: 3}); changeCode(err) != kerr.VoterNotFound.Code {
		t.Fatalf("remove of unknown 3: %v", err)
	}
	if _, err := r.RemoveVoter(2002, ReplicaKey{ID: 2, DirectoryID: testDirID(9)}); changeCode(err) != kerr.VoterNotFound.Code {
		t.Fatalf("remove of 2 with another directory id: %v", err)
	}
	if _, err := r.RemoveVoter(2002, ReplicaKey{ID: 2, DirectoryID: testDirID(2)}); err != nil || !slices.Equal(r.voterIDs(), []int32{1}) {
		t.Fatalf("remove of 2: %v, voters %v", err, r.voterIDs())
	}
	drain(r)
	if _, err := r.RemoveVoter(2003, ReplicaKey{ID: 1}); changeCode(err) != kerr.VoterNotFound.Code {
		t.Fatalf("remove of the last voter: %v", err)
	}

	follower := dynamicRaft(t, 2, testDirID(2), dynVoters(t, 1))
	if _, err := follower.AddVoter(0, v2); changeCode(err) != kerr.NotLeaderForPartition.Code {
		t.Fatalf("add at a non-leader: %v", err)
	}
	static, err := NewRaft(Config{NodeID: 1, Voters: []int32{1}, AppendLingerMs: AppendLingerMsNone}, raftlogLoadedEmpty(), 0)
	if err != nil {
		t.Fatal(err)
	}
	drain(static)
	static.Tick(2000)
	drain(static)
	if _, err := static.AddVoter(2000, v2); changeCode(err) != kerr.UnsupportedVersion.Code {
		t.Fatalf("add at kraft.version 0: %v (leader: %s)", err, static.Status().Role)
	}
}

// TestLeaderRemovesItself: a leader that removes itself keeps leading until the
// record commits on the remaining voters, then resigns, and at the end of the epoch
// becomes a non-voter that does not campaign.
func TestLeaderRemovesItself(t *testing.T) {
	r := standaloneLeader(t)
	observerFetch(t, r, 2, r.log.endOffset(), 2000)
	if _, err := r.AddVoter(2000, dynVoters(t, 2).Voters[0]); err != nil {
		t.Fatal(err)
	}
	drain(r)
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	off, err := r.RemoveVoter(2001, ReplicaKey{ID: 1})
	if err != nil || !slices.Equal(r.voterIDs(), []int32{2}) || r.Status().Role != Leader {
		t.Fatalf("remove of the leader itself: %v, voters %v, %s", err, r.voterIDs(), r.Status().Role)
	}
	drain(r)
	if r.Status().Role != Leader {
		t.Fatalf("resigned before the removal committed: %s", r.Status().Role)
	}
	observerFetch(t, r, 2, off+1, 2002)
	if st := r.Status(); st.Role != Resigned {
		t.Fatalf("after voter 2 fetched past the removal: %s, hw %d", st.Role, st.HighWatermark)
	}
	r.Tick(10_000)
	drain(r)
	if st := r.Status(); st.Role != Unattached || st.IsVoter || st.Epoch != 2 {
		t.Fatalf("removed leader after the election timeout: %s, voter %t, epoch %d", st.Role, st.IsVoter, st.Epoch)
	}
	r.Tick(30_000)
	drain(r)
	if st := r.Status(); st.Role == Candidate || st.Role == Prospective || st.Epoch != 2 {
		t.Fatalf("removed leader campaigns: %s at epoch %d", st.Role, st.Epoch)
	}
}

func raftlogLoadedEmpty() raftlog.Loaded { return raftlog.Loaded{State: raftlog.EmptyQuorumState()} }

// TestResignNamesSuccessorDirectoryIDs: a dynamic-quorum leader that resigns names
// its preferred successors with their directory ids in EndQuorumEpoch v1
// (PreferredCandidates, KIP-853).
func TestResignNamesSuccessorDirectoryIDs(t *testing.T) {
	r := standaloneLeader(t)
	observerFetch(t, r, 2, r.log.endOffset(), 2000)
	if _, err := r.AddVoter(2000, dynVoters(t, 2).Voters[0]); err != nil {
		t.Fatal(err)
	}
	drain(r)
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	if err := r.Resign(2001); err != nil {
		t.Fatal(err)
	}
	var end *EndQuorumEpochRequest
	for _, m := range drain(r) {
		if m.EndEpoch != nil {
			end = m.EndEpoch
		}
	}
	if end == nil || !slices.Equal(end.PreferredSuccessors, []int32{2}) || len(end.PreferredDirectoryIDs) != 1 ||
		end.PreferredDirectoryIDs[0] != testDirID(2) {
		t.Fatalf("EndQuorumEpoch %+v", end)
	}
	req := encodeEndEpoch(end, "", 1).(*kmsg.EndQuorumEpochRequest)
	if c := req.Topics[0].Partitions[0].PreferredCandidates; len(c) != 1 || c[0].CandidateID != 2 || c[0].CandidateDirectoryID != testDirID(2) {
		t.Fatalf("EndQuorumEpoch v1 PreferredCandidates %+v", c)
	}
}

// TestDirectoryIDsOnTheWire: the replica directory ids KIP-853 adds survive
// encoding and decoding at the versions that carry them (Vote v1, BeginQuorumEpoch
// v1, Fetch v17, FetchSnapshot v1) and are left out below them.
func TestDirectoryIDsOnTheWire(t *testing.T) {
	d1, d2 := testDirID(1), testDirID(2)
	roundTrip := func(req kmsg.Request) kmsg.Request {
		t.Helper()
		out := kmsg.RequestForKey(req.Key())
		out.SetVersion(req.GetVersion())
		if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		return out
	}
	n := &Node{}
	for _, v := range []int16{0, 1} {
		in := roundTrip(encodeVote(&VoteRequest{VoterID: 2, VoterDirectoryID: d2, CandidateID: 1, CandidateDirectoryID: d1,
			CandidateEpoch: 1}, "", v))
		m, _, _, err := n.decodeVoteRPC(in)
		want := v >= 1
		if err != nil || (m.Vote.VoterDirectoryID == d2) != want || (m.Vote.CandidateDirectoryID == d1) != want {
			t.Errorf("Vote v%d: %+v, %v", v, m.Vote, err)
		}
		bin := roundTrip(encodeBeginEpoch(&BeginQuorumEpochRequest{VoterID: 2, VoterDirectoryID: d2, LeaderID: 1, LeaderEpoch: 1}, "", v))
		m, _, _, err = n.decodeBeginEpochRPC(bin)
		if err != nil || (m.BeginEpoch.VoterDirectoryID == d2) != want {
			t.Errorf("BeginQuorumEpoch v%d: %+v, %v", v, m.BeginEpoch, err)
		}
		fs := roundTrip(encodeFetchSnapshot(&FetchSnapshotRequest{ReplicaID: 2, ReplicaDirectoryID: d2}, "", v))
		m, _, _, err = n.decodeFetchSnapshotRPC(fs)
		if err != nil || (m.FetchSnapshot.ReplicaDirectoryID == d2) != want {
			t.Errorf("FetchSnapshot v%d: %+v, %v", v, m.FetchSnapshot, err)
		}
	}
	for _, v := range []int16{16, 17} {
		f := roundTrip(encodeFetch(&FetchRequest{ReplicaID: 2, ReplicaDirectoryID: d2, LastFetchedEpoch: 0}, "", v))
		m, _, _, err := n.decodeFetchRPC(f)
		if err != nil || (m.Fetch.ReplicaDirectoryID == d2) != (v >= 17) {
			t.Errorf("Fetch v%d: %+v, %v", v, m.Fetch, err)
		}
	}
}

// TestReplacedDiskDoesNotAckForTheVoter: a Fetch from a voter's id with another
// directory id (the controller came back on a new disk, KIP-853: a new replica) is
// not that voter's: its offset does not count toward the high watermark nor its
// fetch toward check-quorum, as Kafka's LeaderState tracks such a replica as an
// observer. The Node simulation found it: a replaced disk's fetches committed
// batches that only one voter of three held.
func TestReplacedDiskDoesNotAckForTheVoter(t *testing.T) {
	r := standaloneLeader(t)
	observerFetch(t, r, 2, r.log.endOffset(), 2000)
	off, err := r.AddVoter(2000, dynVoters(t, 2).Voters[0])
	if err != nil {
		t.Fatal(err)
	}
	drain(r)
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	if st := r.Status(); st.HighWatermark <= off {
		t.Fatalf("setup: voter 2 fetched past its VotersRecord at %d, hw %d", off, st.HighWatermark)
	}
	before := r.Status().HighWatermark
	if _, _, err := r.Propose(2002, []raftlog.Record{{Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	drain(r)
	var lastFetchMs int64
	for _, v := range r.Status().Voters {
		if v.ReplicaID == 2 {
			lastFetchMs = v.LastFetchTimestampMs
		}
	}
	observerFetchAs(t, r, 2, testDirID(9), r.log.endOffset(), 2003)
	observerFetchAs(t, r, 2, [16]byte{}, r.log.endOffset(), 2003) // Fetch v16: no directory id
	st := r.Status()
	if st.HighWatermark != before {
		t.Fatalf("replica 2 on another disk acknowledged for voter 2: hw %d -> %d", before, st.HighWatermark)
	}
	for _, v := range st.Voters {
		if v.ReplicaID == 2 && (v.LastFetchTimestampMs != lastFetchMs || v.LogEndOffset != before) {
			t.Fatalf("replica 2 on another disk updated voter 2's row: %+v (last fetch was at %d)", v, lastFetchMs)
		}
	}
	observerFetch(t, r, 2, r.log.endOffset(), 2004)
	if st := r.Status(); st.HighWatermark <= before {
		t.Fatalf("voter 2 on its own disk fetched to the end, hw %d", st.HighWatermark)
	}
}

// TestCheckQuorumFollowsTheVoterSet: a leader alone in its voter set has no
// check-quorum deadline (an expired one would fire at once on every tick: the
// driver spun at 100% CPU once a voter set shrank to its leader, found by the
// Node simulation with -sim.solevoter); once the set grows, the new voters must
// fetch within the window, or the leader resigns.
func TestCheckQuorumFollowsTheVoterSet(t *testing.T) {
	r := standaloneLeader(t)
	window := r.checkQuorumWindowMs()
	observerFetch(t, r, 2, r.log.endOffset(), 2000)
	off, err := r.AddVoter(2000, dynVoters(t, 2).Voters[0])
	if err != nil {
		t.Fatal(err)
	}
	drain(r)
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	if st := r.Status(); st.HighWatermark <= off {
		t.Fatalf("setup: voter 2 fetched past its VotersRecord at %d, hw %d", off, st.HighWatermark)
	}
	if got := r.lead.checkQuorumMs; got == noDeadline || got > 2001+window {
		t.Fatalf("voter set grew to 2: check-quorum deadline %d, want by %d", got, 2001+window)
	}

	// The other voter leaves: the leader is alone again.
	if _, err := r.RemoveVoter(2002, ReplicaKey{ID: 2, DirectoryID: testDirID(2)}); err != nil {
		t.Fatal(err)
	}
	drain(r)
	now := 2002 + 2*window
	r.Tick(now)
	drain(r)
	if st := r.Status(); st.Role != Leader {
		t.Fatalf("a leader alone in its voter set lost check-quorum: %s", st.Role)
	}
	if got := r.lead.checkQuorumMs; got <= now {
		t.Fatalf("a leader alone in its voter set keeps a check-quorum deadline at %d, not after now %d: every tick fires it", got, now)
	}

	// It grows again, and the new voter never fetches: the leader resigns.
	observerFetch(t, r, 3, r.log.endOffset(), now)
	if _, err := r.AddVoter(now, dynVoters(t, 3).Voters[0]); err != nil {
		t.Fatal(err)
	}
	drain(r)
	r.Tick(now + window + 1)
	drain(r)
	if st := r.Status(); st.Role == Leader {
		t.Fatalf("voter 3 never fetched for %d ms after it was added, and the leader still leads", window+1)
	}
}
