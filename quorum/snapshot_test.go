package quorum_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// electedEnv returns three voters and observer 4 with node 1 leading epoch 1 and
// records at offsets 1..3 committed everywhere.
func electedEnv(t *testing.T) *quorumtest.Env {
	t.Helper()
	e := quorumtest.NewEnv(7)
	for _, id := range []int32{1, 2, 3, 4} {
		cfg := quorum.Config{NodeID: id, Voters: []int32{1, 2, 3}, DisablePreVote: true, FetchMaxBytes: 64}
		if err := e.AddNode(cfg); err != nil {
			t.Fatal(err)
		}
	}
	e.Tick(2000, []int32{1})
	stabilize(e)
	for _, v := range []string{"a", "b", "c"} {
		if _, _, err := e.Nodes[1].Raft.Propose(e.NowMs, []raftlog.Record{{Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
		e.Tick(50, nil)
		stabilize(e)
	}
	if st := e.Nodes[1].Raft.Status(); st.Role != quorum.Leader || st.AppliedOffset != 4 {
		t.Fatalf("setup: node 1 is %s applied %d, want leader applied 4", st.Role, st.AppliedOffset)
	}
	return e
}

// deliverOrFail delivers m, or, when it is lost or its target is down, answers a
// request with the failure a real driver steps back after a timeout (a lost response
// is the same timeout for the requester, so requests are what get lost).
func deliverOrFail(e *quorumtest.Env, m quorum.Message, lose bool) {
	to := e.Nodes[m.To]
	if m.IsRequest() && (lose || to == nil || to.Down) {
		if from := e.Nodes[m.From]; from != nil && !from.Down {
			e.Deliver(quorumtest.FailedResponse(m))
		}
		return
	}
	e.Deliver(m)
}

// stabilize delivers messages until the network is quiet.
func stabilize(e *quorumtest.Env) {
	for range 1000 {
		moved := false
		for _, id := range e.IDs() {
			moved = e.ProcessReady(e.Nodes[id]) || moved
		}
		net := e.Net
		e.Net = nil
		for _, m := range net {
			deliverOrFail(e, m, false)
			moved = true
		}
		if !moved {
			return
		}
	}
}

// stepLeader sends one request to node 1 and returns its single answer.
func stepLeader(t *testing.T, e *quorumtest.Env, m quorum.Message) quorum.Message {
	t.Helper()
	m.From, m.To, m.RequestID = 3, 1, 999
	if err := e.Nodes[1].Raft.Step(e.NowMs, m); err != nil {
		t.Fatal(err)
	}
	rd := e.Nodes[1].Raft.Ready()
	defer e.Nodes[1].Raft.Advance(rd)
	for _, out := range append(rd.Messages, rd.MessagesAfterPersist...) {
		if out.RequestID == 999 && out.To == 3 {
			return out
		}
	}
	t.Fatalf("no answer to %s", m)
	return quorum.Message{}
}

func TestValidateSnapshotID(t *testing.T) {
	e := electedEnv(t)
	r := e.Nodes[1].Raft
	for _, tc := range []struct {
		id raftlog.SnapshotID
		ok bool
	}{
		{raftlog.SnapshotID{EndOffset: 4, Epoch: 1}, true},
		{raftlog.SnapshotID{EndOffset: 2, Epoch: 1}, true},
		{raftlog.SnapshotID{EndOffset: 5, Epoch: 1}, false}, // above applied / HW
		{raftlog.SnapshotID{EndOffset: 4, Epoch: 2}, false}, // epoch after current
		{raftlog.SnapshotID{EndOffset: 4, Epoch: 0}, false}, // wrong epoch for offset 3
		{raftlog.SnapshotID{EndOffset: 0, Epoch: 0}, false},
	} {
		err := r.ValidateSnapshotID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSnapshotID(%+v) = %v, want ok=%t", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, quorum.ErrInvalidSnapshotID) {
			t.Errorf("error %v does not wrap ErrInvalidSnapshotID", err)
		}
	}
}

// TestFetchSnapshotErrors: behaviour 38, and 36's offset-0 rule (KAFKA-15078).
func TestFetchSnapshotErrors(t *testing.T) {
	e := electedEnv(t)
	id, err := e.TakeSnapshot(e.Nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	fs := func(epoch int32, sid raftlog.SnapshotID, pos int64) quorum.Message {
		return quorum.Message{FetchSnapshot: &quorum.FetchSnapshotRequest{
			ReplicaID: 3, MaxBytes: 1 << 20, CurrentLeaderEpoch: epoch, SnapshotID: sid, Position: pos}}
	}
	for _, tc := range []struct {
		name string
		m    quorum.Message
		code int16
	}{
		{"ok", fs(1, id, 0), 0},
		{"unknown id", fs(1, raftlog.SnapshotID{EndOffset: 3, Epoch: 1}, 0), kerr.SnapshotNotFound.Code},
		{"bootstrap id", fs(1, raftlog.SnapshotID{}, 0), kerr.SnapshotNotFound.Code},
		{"negative position", fs(1, id, -1), kerr.PositionOutOfRange.Code},
		{"position at size", fs(1, id, 1<<20), kerr.PositionOutOfRange.Code},
		{"fenced", fs(0, id, 0), kerr.FencedLeaderEpoch.Code},
		{"unknown epoch", fs(2, id, 0), kerr.UnknownLeaderEpoch.Code},
	} {
		out := stepLeader(t, e, tc.m).FetchSnapshotResp
		if out == nil || out.ErrorCode != tc.code {
			t.Errorf("%s: got %v, want error code %d", tc.name, out, tc.code)
		}
		if tc.code == 0 && (out.Size <= 0 || len(out.Bytes) == 0 || len(out.Bytes) > 64) {
			t.Errorf("%s: size %d, %d bytes; want a chunk of at most FetchMaxBytes", tc.name, out.Size, len(out.Bytes))
		}
	}
	// A newer snapshot does not cut a download of the older one short.
	if _, _, err := e.Nodes[1].Raft.Propose(e.NowMs, []raftlog.Record{{Value: []byte("d")}}); err != nil {
		t.Fatal(err)
	}
	e.Tick(50, nil)
	stabilize(e)
	id2, err := e.TakeSnapshot(e.Nodes[1])
	if err != nil || id2.EndOffset <= id.EndOffset {
		t.Fatalf("second snapshot %+v: %v", id2, err)
	}
	if out := stepLeader(t, e, fs(1, id, 64)).FetchSnapshotResp; out.ErrorCode != 0 || out.Position != 64 || len(out.Bytes) == 0 {
		t.Errorf("older snapshot after a newer one: %v", out)
	}
	// Not the leader: NOT_LEADER_OR_FOLLOWER with the leader named.
	m := fs(1, id, 0)
	m.From, m.To, m.RequestID = 3, 2, 5
	if err := e.Nodes[2].Raft.Step(e.NowMs, m); err != nil {
		t.Fatal(err)
	}
	rd := e.Nodes[2].Raft.Ready()
	e.Nodes[2].Raft.Advance(rd)
	got := append(rd.Messages, rd.MessagesAfterPersist...)
	if len(got) != 1 || got[0].FetchSnapshotResp.ErrorCode != kerr.NotLeaderForPartition.Code || got[0].FetchSnapshotResp.LeaderID != 1 {
		t.Errorf("follower answered %v", got)
	}
	// A Fetch at offset 0 is sent to the snapshot even though the log still starts at 0.
	f := stepLeader(t, e, quorum.Message{Fetch: &quorum.FetchRequest{ReplicaID: 3, CurrentLeaderEpoch: 1, MaxBytes: 1 << 20}}).FetchResp
	if f.SnapshotID == nil || *f.SnapshotID != id2 || len(f.Batches) != 0 {
		t.Errorf("fetch at 0 got %s, want the latest snapshot %+v", f, id2)
	}
	// Behaviour 36: after compaction a fetch below the log start, or at it with another
	// epoch, gets the snapshot id; a fetch at the log start with its epoch reads on.
	e.Compact(e.Nodes[1])
	for _, tc := range []struct {
		offset int64
		epoch  int32
		snap   bool
	}{{2, 1, true}, {5, 0, true}, {5, 1, false}} {
		f := stepLeader(t, e, quorum.Message{Fetch: &quorum.FetchRequest{
			ReplicaID: 3, CurrentLeaderEpoch: 1, FetchOffset: tc.offset, LastFetchedEpoch: tc.epoch, MaxBytes: 1 << 20}}).FetchResp
		if (f.SnapshotID != nil) != tc.snap || f.DivergingEpoch != nil {
			t.Errorf("fetch (%d,%d): %s, want snapshot=%t", tc.offset, tc.epoch, f, tc.snap)
		}
	}
}

// TestShuttingDownLeaderAnswersBrokerNotAvailable: behaviour 20. A leader that began a
// graceful shutdown answers Fetch and FetchSnapshot with BROKER_NOT_AVAILABLE, after
// the epoch checks (validateLeaderOnlyRequest's order); a resignation that is not a
// shutdown answers NOT_LEADER_OR_FOLLOWER, and a non-leader has nothing to shut down.
func TestShuttingDownLeaderAnswersBrokerNotAvailable(t *testing.T) {
	fs := func(epoch int32, sid raftlog.SnapshotID) quorum.Message {
		return quorum.Message{FetchSnapshot: &quorum.FetchSnapshotRequest{
			ReplicaID: 3, MaxBytes: 1 << 20, CurrentLeaderEpoch: epoch, SnapshotID: sid}}
	}
	fetch := func(epoch int32) quorum.Message {
		return quorum.Message{Fetch: &quorum.FetchRequest{
			ReplicaID: 3, MaxBytes: 1 << 20, CurrentLeaderEpoch: epoch, FetchOffset: 4, LastFetchedEpoch: min(epoch, 1)}}
	}
	for _, shutdown := range []bool{true, false} {
		e := electedEnv(t)
		id, err := e.TakeSnapshot(e.Nodes[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Nodes[2].Raft.Shutdown(e.NowMs); !errors.Is(err, quorum.ErrNotLeader) {
			t.Fatalf("follower Shutdown: %v, want ErrNotLeader", err)
		}
		stop, want := e.Nodes[1].Raft.Resign, kerr.NotLeaderForPartition.Code
		if shutdown {
			stop, want = e.Nodes[1].Raft.Shutdown, kerr.BrokerNotAvailable.Code
		}
		if err := stop(e.NowMs); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			m    quorum.Message
			code int16
		}{
			{"fetch snapshot", fs(1, id), want},
			{"fetch snapshot, older epoch", fs(0, id), kerr.FencedLeaderEpoch.Code},
			{"fetch snapshot, newer epoch", fs(2, id), kerr.UnknownLeaderEpoch.Code},
			{"fetch", fetch(1), want},
			{"fetch, older epoch", fetch(0), kerr.FencedLeaderEpoch.Code},
			{"fetch, newer epoch", fetch(2), kerr.UnknownLeaderEpoch.Code},
		} {
			out := stepLeader(t, e, tc.m)
			code, leader := int16(-1), int32(-1)
			switch {
			case out.FetchSnapshotResp != nil:
				code, leader = out.FetchSnapshotResp.ErrorCode, out.FetchSnapshotResp.LeaderID
			case out.FetchResp != nil:
				code, leader = out.FetchResp.ErrorCode, out.FetchResp.LeaderID
			}
			if code != tc.code || leader != 1 {
				t.Errorf("shutdown=%t %s: got %s, want error %d naming leader 1", shutdown, tc.name, out, tc.code)
			}
		}
	}
}

// TestSnapshotDownloadDroppedOnNewEpoch: behaviour 39. A download in progress is
// abandoned when a newer leader appears; the follower restarts from position 0 with
// the new leader.
func TestSnapshotDownloadDroppedOnNewEpoch(t *testing.T) {
	e := electedEnv(t)
	if _, err := e.TakeSnapshot(e.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	e.Compact(e.Nodes[1])
	// Observer 4 restarts with an empty disk and is sent to the snapshot.
	n4 := e.Nodes[4]
	n4.Batches, n4.State = nil, raftlog.EmptyQuorumState()
	if err := e.Start(n4); err != nil {
		t.Fatal(err)
	}
	var sawChunk bool
	for range 50 {
		e.ProcessReady(n4)
		e.ProcessReady(e.Nodes[1])
		net := e.Net
		e.Net = nil
		for _, m := range net {
			if m.FetchSnapshotResp != nil && m.To == 4 && m.FetchSnapshotResp.Position > 0 {
				sawChunk = true
				// Replace the second chunk's answer by one from a newer epoch.
				m.FetchSnapshotResp = &quorum.FetchSnapshotResponse{
					ErrorCode: kerr.FencedLeaderEpoch.Code, LeaderID: 2, LeaderEpoch: 2}
				e.Deliver(m)
				goto done
			}
			e.Deliver(m)
		}
	}
done:
	if !sawChunk {
		t.Fatal("observer never downloaded a second chunk")
	}
	e.ProcessReady(n4)
	var next *quorum.Message
	for _, m := range e.Net {
		if m.From == 4 {
			next = &m
		}
	}
	st := n4.Raft.Status()
	if st.Epoch != 2 || st.LeaderID != 2 || next == nil || next.To != 2 || next.Fetch == nil || next.Fetch.FetchOffset != 0 {
		t.Fatalf("after a newer epoch: %+v, next %v; want a plain Fetch at 0 to leader 2", st, next)
	}
	if len(n4.Loads) != 0 {
		t.Fatalf("loaded %v from an abandoned download", n4.Loads)
	}
}

// TestSnapshotDownloadRetriesSamePosition: a FetchSnapshot that fails (timeout, cut
// connection) or is answered BROKER_NOT_AVAILABLE (the leader is shutting down) is
// retried from the same position with the same leader, so the partial file continues
// where it stopped.
func TestSnapshotDownloadRetriesSamePosition(t *testing.T) {
	for _, bna := range []bool{false, true} {
		testSnapshotDownloadRetriesSamePosition(t, bna)
	}
}

func testSnapshotDownloadRetriesSamePosition(t *testing.T, bna bool) {
	e := electedEnv(t)
	if _, err := e.TakeSnapshot(e.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	e.Compact(e.Nodes[1])
	n4 := e.Nodes[4]
	n4.Batches, n4.State = nil, raftlog.EmptyQuorumState()
	if err := e.Start(n4); err != nil {
		t.Fatal(err)
	}
	var positions []int64
	failed := false
	for range 200 {
		for _, id := range e.IDs() { // an observer retries a failed chunk via another voter
			e.ProcessReady(e.Nodes[id])
		}
		net := e.Net
		e.Net = nil
		if len(net) == 0 {
			e.Tick(20, []int32{4}) // a retry backoff
		}
		for _, m := range net {
			if m.FetchSnapshot != nil && m.From == 4 {
				positions = append(positions, m.FetchSnapshot.Position)
				if m.FetchSnapshot.Position > 0 && !failed {
					failed = true
					resp := quorumtest.FailedResponse(m)
					if bna {
						resp.Err = nil
						resp.FetchSnapshotResp = &quorum.FetchSnapshotResponse{ErrorCode: kerr.BrokerNotAvailable.Code,
							LeaderID: 1, LeaderEpoch: 1, SnapshotID: m.FetchSnapshot.SnapshotID, Position: m.FetchSnapshot.Position}
					}
					e.Deliver(resp)
					e.Tick(100, []int32{4}) // past the retry backoff
					continue
				}
			}
			deliverOrFail(e, m, false)
		}
		if len(n4.Loads) > 0 {
			break
		}
	}
	if !failed || len(n4.Loads) != 1 {
		t.Fatalf("bna=%t: failed=%t loads=%v", bna, failed, n4.Loads)
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] < positions[i-1] {
			t.Fatalf("bna=%t: download went back: positions %v", bna, positions)
		}
	}
	var repeated bool
	for i := 1; i < len(positions); i++ {
		repeated = repeated || positions[i] > 0 && positions[i] == positions[i-1]
	}
	if !repeated {
		t.Fatalf("bna=%t: the failed chunk was not asked again at its position: %v", bna, positions)
	}
	if got, want := quorumtest.BatchesString(n4.StateMachine()), quorumtest.BatchesString(e.Nodes[1].StateMachine()); got != want {
		t.Fatalf("bna=%t: observer state %s, leader %s", bna, got, want)
	}
}
