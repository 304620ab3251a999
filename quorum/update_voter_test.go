package quorum

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// stepUpdateVoter steps an UpdateRaftVoter from v's id into r and returns the
// answer's error code.
func stepUpdateVoter(t *testing.T, r *Raft, epoch int32, v VoterNode, nowMs int64) int16 {
	t.Helper()
	if err := r.Step(nowMs, Message{From: v.Key.ID, To: r.cfg.NodeID, RequestID: 77,
		UpdateVoter: &UpdateVoterRequest{CurrentLeaderEpoch: epoch, Voter: v}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range drain(r) {
		if m.UpdateVoterResp != nil && m.RequestID == 77 {
			return m.UpdateVoterResp.ErrorCode
		}
	}
	t.Fatal("no UpdateRaftVoter answer")
	return 0
}

// twoVoterLeader is standaloneLeader with voter 2 added and the change committed.
func twoVoterLeader(t *testing.T) *Raft {
	t.Helper()
	r := standaloneLeader(t)
	observerFetch(t, r, 2, r.log.endOffset(), 2000)
	if _, err := r.AddVoter(2000, dynVoters(t, 2).Voters[0]); err != nil {
		t.Fatal(err)
	}
	drain(r)
	observerFetch(t, r, 2, r.log.endOffset(), 2001)
	if v, _ := r.log.kraft.latestVoters(); v.offset >= r.hw {
		t.Fatalf("setup: voter 2's addition at %d uncommitted (hw %d)", v.offset, r.hw)
	}
	return r
}

// TestUpdateVoterRules: UpdateRaftVoter at kraft.version 1 answers as Kafka's
// UpdateVoterHandler: other epochs fenced or unknown, INVALID_REQUEST without a
// directory id or with a range leaving out the finalized kraft.version,
// VOTER_NOT_FOUND for a non-voter (id or directory id), NOT_LEADER_OR_FOLLOWER off
// the leader; an accepted update appends a VotersRecord with the new endpoints at
// once, and a second waits (REQUEST_TIMED_OUT) until it commits; an update that
// changes nothing appends a copy of the voter set, as Kafka's handler does.
func TestUpdateVoterRules(t *testing.T) {
	r := twoVoterLeader(t)
	epoch := r.Status().Epoch
	v2 := dynVoters(t, 2).Voters[0]
	moved := cloneVoterNode(v2)
	moved.Endpoints[0].Port = 19092

	noDir := cloneVoterNode(moved)
	noDir.Key.DirectoryID = [16]byte{}
	tooNew := cloneVoterNode(moved)
	tooNew.KRaftVersionMin, tooNew.KRaftVersionMax = 2, 3
	otherDisk := cloneVoterNode(moved)
	otherDisk.Key.DirectoryID = testDirID(9)
	stranger := dynVoters(t, 3).Voters[0]
	for _, c := range []struct {
		name  string
		epoch int32
		v     VoterNode
		want  int16
	}{
		{"an older epoch", epoch - 1, moved, kerr.FencedLeaderEpoch.Code},
		{"a newer epoch", epoch + 1, moved, kerr.UnknownLeaderEpoch.Code},
		{"no directory id", epoch, noDir, kerr.InvalidRequest.Code},
		{"a range without kraft.version 1", epoch, tooNew, kerr.InvalidRequest.Code},
		{"another disk of voter 2", epoch, otherDisk, kerr.VoterNotFound.Code},
		{"a non-voter", epoch, stranger, kerr.VoterNotFound.Code},
	} {
		end := r.log.endOffset()
		if got := stepUpdateVoter(t, r, c.epoch, c.v, 2002); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, errName(got), errName(c.want))
		}
		if r.log.endOffset() != end {
			t.Fatalf("%s: a refused update appended", c.name)
		}
	}

	end := r.log.endOffset()
	if got := stepUpdateVoter(t, r, epoch, moved, 2003); got != 0 {
		t.Fatalf("update of voter 2's endpoint: %s", errName(got))
	}
	v, _ := r.log.kraft.latestVoters()
	if got, _ := v.set.Voter(2); v.offset != end || got.Endpoints[0].Port != 19092 {
		t.Fatalf("voter set after the update: %+v at %d (log end was %d)", got, v.offset, end)
	}
	again := cloneVoterNode(moved)
	again.Endpoints[0].Port = 29092
	if got := stepUpdateVoter(t, r, epoch, again, 2003); got != kerr.RequestTimedOut.Code {
		t.Fatalf("a second update while the first is uncommitted: %s", errName(got))
	}
	observerFetch(t, r, 2, r.log.endOffset(), 2004)
	end = r.log.endOffset()
	before, _ := r.log.kraft.latestVoters()
	if got := stepUpdateVoter(t, r, epoch, moved, 2005); got != 0 {
		t.Fatalf("an update that changes nothing: %s", errName(got))
	}
	if v, _ := r.log.kraft.latestVoters(); v.offset != end || !v.set.Equal(before.set) {
		t.Fatalf("an update that changes nothing appended voters %v at %d, want a copy of %v at %d (Kafka's UpdateVoterHandler)",
			v.set, v.offset, before.set, end)
	}
	if got := stepUpdateVoter(t, r, epoch, moved, 2005); got != kerr.RequestTimedOut.Code {
		t.Fatalf("a second unchanged update while the copy is uncommitted: %s", errName(got))
	}

	follower := dynamicRaft(t, 2, testDirID(2), dynVoters(t, 1, 2))
	if got := stepUpdateVoter(t, follower, follower.Status().Epoch, moved, 0); got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("update at a non-leader: %s", errName(got))
	}
}

// TestFollowerSendsUpdateVoter: a voter with endpoints configured sends
// UpdateRaftVoter to its leader after its first successful Fetch when its entry in
// the voter set is out of date, and not once the entry matches.
func TestFollowerSendsUpdateVoter(t *testing.T) {
	vs := dynVoters(t, 1, 2)
	r := dynamicRaft(t, 2, testDirID(2), vs)
	r.cfg.Endpoints = []Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 19092}}
	drain(r)
	if err := r.Step(10, Message{From: 1, To: 2, RequestID: 1, BeginEpoch: &BeginQuorumEpochRequest{
		VoterID: 2, LeaderID: 1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	sent := func() (fetch, update *Message) {
		for _, m := range drain(r) {
			switch {
			case m.Fetch != nil:
				fetch = &m
			case m.UpdateVoter != nil:
				update = &m
			}
		}
		return fetch, update
	}
	fetch, update := sent()
	if fetch == nil || update != nil {
		t.Fatalf("after BeginQuorumEpoch: fetch %v, update %v (want a Fetch, no update before one succeeded)", fetch, update)
	}
	if err := r.Step(20, Message{From: 1, To: 2, RequestID: fetch.RequestID, FetchResp: &FetchResponse{
		LeaderID: 1, LeaderEpoch: 1, HighWatermark: r.log.endOffset()}}); err != nil {
		t.Fatal(err)
	}
	_, update = sent()
	if update == nil || update.To != 1 || update.UpdateVoter.Voter.Key != (ReplicaKey{ID: 2, DirectoryID: testDirID(2)}) ||
		!slices.Equal(update.UpdateVoter.Voter.Endpoints, r.cfg.Endpoints) || update.UpdateVoter.Voter.KRaftVersionMax != KRaftVersionMax {
		t.Fatalf("after a successful Fetch: update %v", update)
	}
	if err := r.Step(21, Message{From: 1, To: 2, RequestID: update.RequestID,
		UpdateVoterResp: &UpdateVoterResponse{LeaderID: 1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	r.Tick(600)
	if _, update = sent(); update != nil {
		t.Fatalf("sent again after the leader accepted: %v", update)
	}

	same := dynamicRaft(t, 2, testDirID(2), vs)
	same.cfg.Endpoints = vs.Voters[1].Endpoints
	drain(same)
	if err := same.Step(10, Message{From: 1, To: 2, RequestID: 1, BeginEpoch: &BeginQuorumEpochRequest{
		VoterID: 2, LeaderID: 1, LeaderEpoch: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range drain(same) {
		if m.Fetch != nil {
			if err := same.Step(20, Message{From: 1, To: 2, RequestID: m.RequestID, FetchResp: &FetchResponse{
				LeaderID: 1, LeaderEpoch: 1, HighWatermark: same.log.endOffset()}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range drain(same) {
		if m.UpdateVoter != nil {
			t.Fatalf("a voter whose entry is up to date sent %v", m)
		}
	}
}

// TestUpdateVoterRPCRefusesHostileListeners: an UpdateRaftVoter with more than
// maxVoterEndpoints listeners, or one listener name twice, is INVALID_REQUEST at
// decoding, before the core sees it (nothing is stored or appended).
func TestUpdateVoterRPCRefusesHostileListeners(t *testing.T) {
	listener := func(name string) kmsg.UpdateRaftVoterRequestListener {
		l := kmsg.NewUpdateRaftVoterRequestListener()
		l.Name, l.Host, l.Port = name, "127.0.0.1", 9093
		return l
	}
	many := kmsg.NewPtrUpdateRaftVoterRequest()
	for i := range maxVoterEndpoints + 1 {
		many.Listeners = append(many.Listeners, listener(fmt.Sprint("L", i)))
	}
	twice := kmsg.NewPtrUpdateRaftVoterRequest()
	twice.Listeners = []kmsg.UpdateRaftVoterRequestListener{listener("CONTROLLER"), listener("CONTROLLER")}
	atCap := kmsg.NewPtrUpdateRaftVoterRequest()
	for i := range maxVoterEndpoints {
		atCap.Listeners = append(atCap.Listeners, listener(fmt.Sprint("L", i)))
	}
	n := &Node{}
	for name, req := range map[string]*kmsg.UpdateRaftVoterRequest{"too many listeners": many, "a name twice": twice} {
		m, _, early, err := n.decodeUpdateVoterRPC(req)
		if err != nil || early == nil || m.UpdateVoter != nil {
			t.Fatalf("%s: message %+v, early answer %v, err %v", name, m, early, err)
		}
		if code := early.(*kmsg.UpdateRaftVoterResponse).ErrorCode; code != kerr.InvalidRequest.Code {
			t.Errorf("%s: %s, want INVALID_REQUEST", name, kerr.ErrorForCode(code))
		}
	}
	if m, _, early, err := n.decodeUpdateVoterRPC(atCap); err != nil || early != nil || m.UpdateVoter == nil ||
		len(m.UpdateVoter.Voter.Endpoints) != maxVoterEndpoints {
		t.Fatalf("%d distinct listeners refused: %v %v", maxVoterEndpoints, early, err)
	}
}

// reelect makes the leader r resign and runs its clock until it leads again (a
// single-voter quorum), returning the records of its new epoch's first batch.
func reelect(t *testing.T, r *Raft, nowMs int64) (records []raftlog.Record, base int64) {
	t.Helper()
	epoch := r.Status().Epoch
	if err := r.Resign(nowMs); err != nil {
		t.Fatal(err)
	}
	drain(r)
	for now := nowMs; now < nowMs+20_000; now += 100 {
		r.Tick(now)
		drain(r)
		if st := r.Status(); st.Role == Leader && st.Epoch > epoch {
			b := r.log.batches[r.log.batchIndex(st.EpochStartOffset)]
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			return recs, b.BaseOffset
		}
	}
	t.Fatalf("node %d did not lead again after epoch %d: %+v", r.cfg.NodeID, epoch, r.Status())
	return nil, 0
}

// TestLeaderRewritesOwnEntryAtEpochStart: a leader at kraft.version 1 whose
// advertised controller listeners or supported kraft.version range differ from its
// entry in the voter set in force writes the set with its entry updated in its
// LeaderChange batch, after the LeaderChange record (KRaftVersionRecord, then
// VotersRecord), as Kafka's LeaderState.appendStartOfEpochControlRecords; with its
// entry up to date (listeners in another order included) the batch holds the
// LeaderChange alone.
func TestLeaderRewritesOwnEntryAtEpochStart(t *testing.T) {
	boot := dynVoters(t, 1)
	boot.Voters[0].KRaftVersionMin = 1 // what an older formatter might have written
	loaded := raftlog.Loaded{State: raftlog.EmptyQuorumState(), Snapshot: &raftlog.BootstrapSnapshotID}
	r, err := NewRaftFromSnapshot(Config{NodeID: 1, DirectoryID: testDirID(1), AppendLingerMs: AppendLingerMsNone,
		Endpoints: slices.Clone(boot.Voters[0].Endpoints)}, loaded, SnapshotKRaft{KRaftVersion: KRaftVersionDynamic, Voters: boot}, 0)
	if err != nil {
		t.Fatal(err)
	}
	drain(r)
	r.Tick(2000)
	drain(r)
	recs, _ := r.log.batches[0].Records()
	if len(recs) != 3 {
		t.Fatalf("first LeaderChange batch holds %d records, want 3", len(recs))
	}
	if vs, err := ParseVotersRecord(recs[2].Value); err != nil || vs.Voters[0].KRaftVersionMin != 0 {
		t.Fatalf("bootstrap voters written with the leader's range 0-%d: %v %+v", KRaftVersionMax, err, vs.Voters)
	}

	moved := []Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 19091}, {Name: "REPLICATION", Host: "127.0.0.1", Port: 19191}}
	r.cfg.Endpoints = moved
	recs, base := reelect(t, r, 3000)
	if len(recs) != 3 {
		t.Fatalf("LeaderChange batch of a leader on new listeners holds %d records, want LeaderChange, KRaftVersion, Voters", len(recs))
	}
	for i, want := range []raftlog.ControlType{raftlog.ControlLeaderChange, raftlog.ControlKRaftVersion, raftlog.ControlKRaftVoters} {
		if got, err := raftlog.ParseControlKey(recs[i].Key); err != nil || got != want {
			t.Fatalf("record %d of the LeaderChange batch is %v (%v), want %v", i, got, err, want)
		}
	}
	if level, err := ParseKRaftVersionRecord(recs[1].Value); err != nil || level != KRaftVersionDynamic {
		t.Fatalf("KRaftVersionRecord %d, %v", level, err)
	}
	vs, err := ParseVotersRecord(recs[2].Value)
	if err != nil || len(vs.Voters) != 1 || !slices.Equal(vs.Voters[0].Endpoints, moved) || vs.Voters[0].Key != boot.Voters[0].Key {
		t.Fatalf("voters at the new epoch's start: %+v, %v", vs.Voters, err)
	}
	if v, _ := r.log.kraft.latestVoters(); v.offset != base+2 || !v.set.Equal(vs) {
		t.Fatalf("voter set in force %v from %d, want the epoch start's at %d", v.set, v.offset, base+2)
	}

	r.cfg.Endpoints = []Endpoint{moved[1], moved[0]}
	if recs, _ := reelect(t, r, 30_000); len(recs) != 1 {
		t.Fatalf("a leader whose entry is up to date (listeners reordered) wrote %d records at epoch start", len(recs))
	}
}
