package quorum_test

import (
	"errors"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestPreVoteFallsBackWhenPeersLackVoteV2: the driver learns from ApiVersions that the
// other voters serve no Vote v2 (KIP-996), tells the core (SetPeerSupportsPreVote) and
// fails the pre-vote requests; at its next election timeout the prospective must
// campaign for real. It used to start another pre-vote round at every timeout, so a
// quorum whose majority lacks Vote v2 never elected a leader (found by the simulation
// with older peers on the wire: seed 40 of go test ./quorum -run 'TestSimulation$'
// -sim.seed=40 stayed leaderless through the liveness phase).
func TestPreVoteFallsBackWhenPeersLackVoteV2(t *testing.T) {
	r, err := quorum.NewRaft(quorum.Config{NodeID: 1, Voters: []int32{1, 2, 3}}, raftlog.Loaded{State: raftlog.EmptyQuorumState()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	var preVotes []quorum.Message
	for step := 0; step < 100 && r.Status().Role != quorum.Prospective; step++ {
		now = max(now+1, r.NextDeadlineMs())
		r.Tick(now)
	}
	if r.Status().Role != quorum.Prospective {
		t.Fatalf("no pre-vote round: %+v", r.Status())
	}
	for r.HasReady() {
		rd := r.Ready()
		for _, m := range append(rd.Messages, rd.MessagesAfterPersist...) {
			if m.Vote != nil && m.Vote.PreVote {
				preVotes = append(preVotes, m)
			}
		}
		r.Advance(rd)
	}
	if len(preVotes) != 2 {
		t.Fatalf("%d pre-votes sent, want 2", len(preVotes))
	}
	// What the production host does for a peer whose ApiVersions lacks Vote v2.
	for _, m := range preVotes {
		r.SetPeerSupportsPreVote(m.To, false)
		if err := r.Step(now, quorum.Message{From: m.To, To: 1, RequestID: m.RequestID, Err: errors.New("no Vote v2"),
			VoteResp: &quorum.VoteResponse{PreVote: true, LeaderID: -1, LeaderEpoch: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	now = max(now+1, r.NextDeadlineMs())
	r.Tick(now)
	if st := r.Status(); st.Role != quorum.Candidate || st.Epoch != 1 {
		t.Fatalf("after the election timeout: %s at epoch %d, want a candidate at epoch 1", st.Role, st.Epoch)
	}
}
