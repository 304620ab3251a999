package quorum_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

func upgradeDirID(id int32) [16]byte { return [16]byte{0: 0xd1, 15: byte(id)} }

func upgradeEndpoints(id int32) []quorum.Endpoint {
	return []quorum.Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: uint16(9090 + id)}}
}

// settle runs the cluster for ms in ticks of 100 ms, delivering everything.
func settle(e *quorumtest.Env, ms int64) {
	for range ms / 100 {
		e.Tick(100, e.IDs())
		stabilize(e)
	}
}

// envLeader is the one node that leads.
func envLeader(t *testing.T, e *quorumtest.Env) *quorum.Raft {
	t.Helper()
	var leader *quorum.Raft
	for _, id := range e.IDs() {
		if r := e.Nodes[id].Raft; r.Status().Role == quorum.Leader {
			if leader != nil {
				t.Fatal("two leaders")
			}
			leader = r
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	return leader
}

func refusalCode(err error) int16 {
	var ve *quorum.VoterChangeError
	if errors.As(err, &ve) {
		return ve.Code
	}
	return -1
}

// TestStaticQuorumUpgradesToKRaftVersion1 (KAFKA-16538): the voters of a static
// quorum report their directory ids and listeners to the leader through
// UpdateRaftVoter; the upgrade to kraft.version 1 is refused while a voter has not
// reported, then appends KRaftVersionRecord and VotersRecord; every node, restarted
// too, then takes the voter set from the log, committed records survive, and a
// fourth replica (an observer of the static configuration) can be added as a voter.
func TestStaticQuorumUpgradesToKRaftVersion1(t *testing.T) {
	e := electedEnv(t) // nodes 1-3 voters, 4 an observer, 1 leads with a, b, c committed
	for _, id := range []int32{1, 2, 4} {
		n := e.Nodes[id]
		n.Cfg.DirectoryID, n.Cfg.Endpoints = upgradeDirID(id), upgradeEndpoints(id)
		if err := e.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	e.Tick(2000, []int32{1, 2, 4})
	stabilize(e)
	leader := envLeader(t, e)
	_, err := leader.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionDynamic, false)
	if refusalCode(err) != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("upgrade while voter 3 has not reported: %v", err)
	}
	if _, err := leader.UpgradeKRaftVersion(e.NowMs, 2, false); refusalCode(err) != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("upgrade to an unsupported kraft.version 2: %v", err)
	}

	n3 := e.Nodes[3]
	n3.Cfg.DirectoryID, n3.Cfg.Endpoints = upgradeDirID(3), upgradeEndpoints(3)
	if err := e.Start(n3); err != nil {
		t.Fatal(err)
	}
	settle(e, 3000)
	leader = envLeader(t, e)
	if _, err := leader.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionDynamic, true); err != nil {
		t.Fatalf("validate-only upgrade once every voter reported: %v", err)
	}
	if st := leader.Status(); st.KRaftVersion != 0 {
		t.Fatalf("a validate-only upgrade changed kraft.version to %d", st.KRaftVersion)
	}
	off, err := leader.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionDynamic, false)
	if err != nil {
		t.Fatal(err)
	}
	e.Tick(50, nil)
	stabilize(e)
	for _, id := range e.IDs() {
		r := e.Nodes[id].Raft
		st := r.Status()
		vs, _, ok := r.VoterSet()
		if st.KRaftVersion != 1 || !ok || !slices.Equal(vs.IDs(), []int32{1, 2, 3}) || st.HighWatermark <= off {
			t.Fatalf("node %d after the upgrade: kraft.version %d, voters %v (%t), hw %d (upgrade at %d)",
				id, st.KRaftVersion, vs, ok, st.HighWatermark, off)
		}
		for _, v := range vs.Voters {
			if v.Key.DirectoryID != upgradeDirID(v.Key.ID) || !slices.Equal(v.Endpoints, upgradeEndpoints(v.Key.ID)) {
				t.Fatalf("node %d: voter %+v lacks its reported directory id or endpoints", id, v)
			}
		}
	}
	if _, err := leader.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionStatic, false); refusalCode(err) != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("downgrade to kraft.version 0: %v", err)
	}

	v4 := quorum.VoterNode{Key: quorum.ReplicaKey{ID: 4, DirectoryID: upgradeDirID(4)}, Endpoints: upgradeEndpoints(4),
		KRaftVersionMax: quorum.KRaftVersionMax}
	if _, err := leader.AddVoter(e.NowMs, v4); err != nil {
		t.Fatalf("add of voter 4 after the upgrade: %v", err)
	}
	e.Tick(50, nil)
	stabilize(e)
	if _, _, err := leader.Propose(e.NowMs, []raftlog.Record{{Value: []byte("d")}}); err != nil {
		t.Fatal(err)
	}
	e.Tick(50, nil)
	stabilize(e)
	for _, id := range []int32{2, 4} {
		if err := e.Start(e.Nodes[id]); err != nil {
			t.Fatalf("restart of node %d: %v", id, err)
		}
	}
	settle(e, 3000)
	for _, id := range e.IDs() {
		n := e.Nodes[id]
		st := n.Raft.Status()
		if st.KRaftVersion != 1 || !slices.Equal(st.VoterIDs, []int32{1, 2, 3, 4}) || !st.IsVoter {
			t.Fatalf("node %d: kraft.version %d, voters %v, voter %t", id, st.KRaftVersion, st.VoterIDs, st.IsVoter)
		}
		var vals []string
		for _, b := range n.Batches {
			if b.Control {
				continue
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				vals = append(vals, string(r.Value))
			}
		}
		if !slices.Equal(vals, []string{"a", "b", "c", "d"}) {
			t.Fatalf("node %d holds %q", id, vals)
		}
	}
}

// TestRemovedLeaderBringsItsRemovalToCommit: voters {L, B}; L removes itself while
// B is cut off, so the VotersRecord {B} is uncommitted and only L's side holds it;
// L then restarts, a non-voter by its own log. B, a voter of {L, B} by its log,
// needs L's vote, which L refuses for B's shorter log. L may still campaign
// (removedPendingCommit): it leads with the votes of {B}, commits its removal and
// resigns, and B leads. Without that no leader is ever elected (found by
// TestSimulationVoterChanges, seed 60).
func TestRemovedLeaderBringsItsRemovalToCommit(t *testing.T) {
	e := electedEnv(t)
	for _, id := range e.IDs() {
		n := e.Nodes[id]
		// Pre-vote on: without it the cut-off voter's ever higher epochs keep
		// resetting everyone's election timer (see simOldVote).
		n.Cfg.DirectoryID, n.Cfg.Endpoints, n.Cfg.DisablePreVote = upgradeDirID(id), upgradeEndpoints(id), false
		if err := e.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	settle(e, 3000)
	leader := envLeader(t, e)
	if _, err := leader.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionDynamic, false); err != nil {
		t.Fatal(err)
	}
	settle(e, 500)
	lid := leader.Status().NodeID
	var others []int32
	for _, id := range []int32{1, 2, 3} {
		if id != lid {
			others = append(others, id)
		}
	}
	a, b := others[0], others[1]
	if _, err := leader.RemoveVoter(e.NowMs, quorum.ReplicaKey{ID: a, DirectoryID: upgradeDirID(a)}); err != nil {
		t.Fatal(err)
	}
	settle(e, 500)
	if st := leader.Status(); !slices.Equal(st.VoterIDs, []int32{min(lid, b), max(lid, b)}) || st.Role != quorum.Leader {
		t.Fatalf("setup: leader %d is %s with voters %v", lid, st.Role, st.VoterIDs)
	}
	var rest []int32
	for _, id := range e.IDs() {
		if id != b {
			rest = append(rest, id)
		}
	}
	e.Partition([][]int32{{b}, rest})
	off, err := leader.RemoveVoter(e.NowMs, quorum.ReplicaKey{ID: lid, DirectoryID: upgradeDirID(lid)})
	if err != nil {
		t.Fatal(err)
	}
	settle(e, 300)
	if st := leader.Status(); st.HighWatermark > off {
		t.Fatalf("setup: the removal at %d committed without %d (hw %d)", off, b, st.HighWatermark)
	}
	e.Crash(e.Nodes[lid])
	if err := e.Start(e.Nodes[lid]); err != nil {
		t.Fatal(err)
	}
	e.Heal()
	settle(e, 10_000)
	bs := e.Nodes[b].Raft.Status()
	if bs.Role != quorum.Leader || !slices.Equal(bs.VoterIDs, []int32{b}) || bs.HighWatermark <= off {
		var states []string
		for _, id := range e.IDs() {
			states = append(states, quorumtest.StateLine(e.Nodes[id]))
		}
		out := e.Out.String()
		t.Fatalf("after the removed leader restarted: %d is %s with voters %v, hw %d (removal at %d)\n%s\n%s",
			b, bs.Role, bs.VoterIDs, bs.HighWatermark, off, strings.Join(states, "\n"), out[max(0, len(out)-3000):])
	}
	if st := e.Nodes[lid].Raft.Status(); st.Role != quorum.Follower || st.IsVoter || st.LeaderID != b {
		t.Fatalf("removed leader %d: %s, voter %t, follows %d", lid, st.Role, st.IsVoter, st.LeaderID)
	}
}
