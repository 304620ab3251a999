package quorum_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
)

// observerEnv returns voters 1, 2, 3 and observer 4 with node 1 leading epoch 1 and
// the observer following it.
func observerEnv(t *testing.T, seed uint64) *quorumtest.Env {
	t.Helper()
	e := quorumtest.NewEnv(seed)
	for _, id := range []int32{1, 2, 3, 4} {
		if err := e.AddNode(quorum.Config{NodeID: id, Voters: []int32{1, 2, 3}, DisablePreVote: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.Tick(2000, []int32{1})
	stabilize(e)
	if st := e.Nodes[4].Raft.Status(); st.Role != quorum.Follower || st.LeaderID != 1 {
		t.Fatalf("setup: observer is %s of %d, want follower of 1", st.Role, st.LeaderID)
	}
	return e
}

// takeFetch processes node from's Ready and takes the one Fetch it sent.
func takeFetch(t *testing.T, e *quorumtest.Env, from int32) quorum.Message {
	t.Helper()
	e.ProcessReady(e.Nodes[from])
	got := e.Take(func(m quorum.Message) bool { return m.From == from && m.Fetch != nil })
	if len(got) != 1 {
		t.Fatalf("node %d has %d fetches in flight, want 1: %v", from, len(got), got)
	}
	return got[0]
}

// TestObserverRediscoveryAvoidsFailedNode: behaviour 28
// (testObserverLeaderRediscoveryAfterBrokerNotAvailableError,
// testObserverLeaderRediscoveryAfterRequestTimeout,
// testObserverSendDiscoveryFetchAfterFetchTimeout). Whatever the seed, when the leader
// answers BROKER_NOT_AVAILABLE, when a Fetch to it times out, or after a fetch timeout
// with no successful fetch, the observer's next Fetch goes to another voter. It still
// follows leader 1 in epoch 1. A discovering observer likewise does not retry the
// voter whose Fetch just failed.
func TestObserverRediscoveryAvoidsFailedNode(t *testing.T) {
	const backoffMs = 20 // Config.RetryBackoffMs default
	for seed := uint64(1); seed <= 30; seed++ {
		for _, trigger := range []string{"broker-not-available", "request-timeout", "fetch-timeout"} {
			e := observerEnv(t, seed)
			// Answer the parked fetch so the observer has a fresh one in flight to node 1.
			e.Tick(500, []int32{1})
			e.ProcessReady(e.Nodes[1])
			for _, r := range e.Take(func(m quorum.Message) bool { return m.To == 4 }) {
				e.Deliver(r)
			}
			m := takeFetch(t, e, 4)
			if m.To != 1 {
				t.Fatalf("seed %d: observer fetches from %d, want leader 1", seed, m.To)
			}
			switch trigger {
			case "broker-not-available":
				e.Deliver(quorum.Message{From: 1, To: 4, RequestID: m.RequestID, FetchResp: &quorum.FetchResponse{
					ErrorCode: kerr.BrokerNotAvailable.Code, HighWatermark: -1, LeaderID: 1, LeaderEpoch: 1}})
				e.Tick(backoffMs, []int32{4})
			case "request-timeout":
				e.Deliver(quorumtest.FailedResponse(m))
				e.Tick(backoffMs, []int32{4})
			case "fetch-timeout":
				e.Tick(2000, []int32{4}) // no answer for fetch.timeout.ms
			}
			next := takeFetch(t, e, 4)
			st := e.Nodes[4].Raft.Status()
			if next.To == 1 || st.Role != quorum.Follower || st.LeaderID != 1 || st.Epoch != 1 {
				t.Errorf("seed %d %s: next fetch %s as %s of %d at epoch %d; want it to another voter, still following 1 at epoch 1",
					seed, trigger, next, st.Role, st.LeaderID, st.Epoch)
			}
		}
		// Discovery: the Unattached observer's first Fetch fails; the retry goes elsewhere.
		e := quorumtest.NewEnv(seed)
		if err := e.AddNode(quorum.Config{NodeID: 4, Voters: []int32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		first := takeFetch(t, e, 4)
		e.Deliver(quorumtest.FailedResponse(first))
		e.Tick(backoffMs, nil)
		if next := takeFetch(t, e, 4); next.To == first.To {
			t.Errorf("seed %d discovery: retried %d after its fetch failed", seed, next.To)
		}
	}
}

// TestObserverExpiryIsADeadline: the 300 s observer session timeout is a timer of its
// own. A driver that ticks the leader only at NextDeadlineMs drops an observer that
// stopped fetching exactly 300 s after its last fetch, even when no other timer is due
// earlier (one voter, so no check-quorum; the begin-epoch resend every 500 s).
func TestObserverExpiryIsADeadline(t *testing.T) {
	const sessionMs = 300_000
	e := quorumtest.NewEnv(1)
	for _, id := range []int32{1, 4} {
		if err := e.AddNode(quorum.Config{NodeID: id, Voters: []int32{1}, FetchTimeoutMs: 1_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	stabilize(e)
	leader := e.Nodes[1].Raft
	obs := leader.Status().Observers
	if len(obs) != 1 || obs[0].ReplicaID != 4 {
		t.Fatalf("setup: observers %+v, want observer 4", obs)
	}
	lastFetchMs := obs[0].LastFetchTimestampMs
	e.Crash(e.Nodes[4])
	for wakeups := 0; len(leader.Status().Observers) > 0; wakeups++ {
		d := leader.NextDeadlineMs()
		if wakeups > 10 || d > lastFetchMs+sessionMs {
			t.Fatalf("after %d wake-ups the next deadline is %d ms after the last fetch; observer still listed",
				wakeups, d-lastFetchMs)
		}
		e.Tick(d-e.NowMs, []int32{1})
		e.ProcessReady(e.Nodes[1])
		e.Net = nil // answers to the stopped observer are lost
	}
	if got := e.NowMs - lastFetchMs; got != sessionMs {
		t.Fatalf("observer dropped %d ms after its last fetch, want %d", got, sessionMs)
	}
	if vs := leader.Status().Voters; len(vs) != 1 || vs[0].ReplicaID != 1 {
		t.Fatalf("voters %+v, want voter 1", vs)
	}
}

// TestDiscoveryBacksOffOnStaleEpoch: an Unattached observer looking for the leader
// waits controller.quorum.retry.backoff.ms before asking again when the answer is of
// no use: an older epoch, UNKNOWN_LEADER_EPOCH, a top-level error, INVALID_REQUEST, a
// leader that is not a voter. It used to ask again at once, so one peer answering
// every discovery Fetch with epoch 1 kept the observer sending Fetches as fast as the
// network carried them.
func TestDiscoveryBacksOffOnStaleEpoch(t *testing.T) {
	answers := map[string]*quorum.FetchResponse{
		"older epoch":          {HighWatermark: -1, LeaderID: 2, LeaderEpoch: 1},
		"unknown leader epoch": {ErrorCode: kerr.UnknownLeaderEpoch.Code, HighWatermark: -1, LeaderID: -1, LeaderEpoch: 5},
		"top-level error":      {TopLevelErrorCode: kerr.ClusterAuthorizationFailed.Code, HighWatermark: -1, LeaderID: -1, LeaderEpoch: -1},
		"invalid request":      {ErrorCode: kerr.InvalidRequest.Code, HighWatermark: -1, LeaderID: -1, LeaderEpoch: 5},
		"non-voter leader":     {HighWatermark: -1, LeaderID: 99, LeaderEpoch: 5},
	}
	for name, resp := range answers {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				discoveryBacksOff(t, seed, resp)
			}
		})
	}
}

func discoveryBacksOff(t *testing.T, seed uint64, resp *quorum.FetchResponse) {
	t.Helper()
	const backoffMs = 20 // Config.RetryBackoffMs default
	e := quorumtest.NewEnv(seed)
	if err := e.AddNode(quorum.Config{NodeID: 4, Voters: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	obs := e.Nodes[4].Raft
	// A voter says epoch 2 has no known leader yet: the observer moves to epoch 2 and
	// asks again at once (the new epoch is news).
	first := takeFetch(t, e, 4)
	e.Deliver(quorum.Message{From: first.To, To: 4, RequestID: first.RequestID,
		FetchResp: &quorum.FetchResponse{HighWatermark: -1, LeaderID: -1, LeaderEpoch: 2}})
	if st := obs.Status(); st.Role != quorum.Unattached || st.Epoch != 2 {
		t.Fatalf("seed %d setup: observer %s at epoch %d, want unattached at 2", seed, st.Role, st.Epoch)
	}
	for round := range 3 {
		m := takeFetch(t, e, 4)
		answer := *resp
		e.Deliver(quorum.Message{From: m.To, To: 4, RequestID: m.RequestID, FetchResp: &answer})
		if d := obs.NextDeadlineMs(); d < e.NowMs+backoffMs {
			t.Fatalf("seed %d round %d: next deadline %d ms from now, want the %d ms retry backoff",
				seed, round, d-e.NowMs, backoffMs)
		}
		e.Tick(backoffMs-1, []int32{4})
		e.ProcessReady(e.Nodes[4])
		if early := e.Take(func(m quorum.Message) bool { return m.From == 4 }); len(early) > 0 {
			t.Fatalf("seed %d round %d: asked again %d ms after the answer: %v", seed, round, backoffMs-1, early)
		}
		e.Tick(1, []int32{4}) // the backoff is over: the next round takes the Fetch
		if st := obs.Status(); st.Role != quorum.Unattached || st.Epoch != 2 || st.LeaderID != -1 {
			t.Fatalf("seed %d round %d: observer %s of %d at epoch %d, want unattached at 2",
				seed, round, st.Role, st.LeaderID, st.Epoch)
		}
	}
}

// TestObserverDiscoveryAvoidsLostLeader: an observer following leader 1 learns from
// a candidate's answer that epoch 2 began without a known leader (leader 1 was
// killed or paused). Whatever the seed, its discovery Fetch goes to voter 2 or 3: a
// Fetch to a paused leader hangs for the request timeout.
func TestObserverDiscoveryAvoidsLostLeader(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		e := observerEnv(t, seed)
		e.Tick(500, []int32{1})
		e.ProcessReady(e.Nodes[1])
		for _, r := range e.Take(func(m quorum.Message) bool { return m.To == 4 }) {
			e.Deliver(r)
		}
		m := takeFetch(t, e, 4)
		e.Deliver(quorumtest.FailedResponse(m)) // the leader is gone
		e.Tick(20, []int32{4})
		ask := takeFetch(t, e, 4)
		if ask.To == 1 {
			t.Fatalf("seed %d: rediscovery fetch to the failed leader", seed)
		}
		// The voter asked is a candidate of epoch 2 by now.
		e.Deliver(quorum.Message{From: ask.To, To: 4, RequestID: ask.RequestID, FetchResp: &quorum.FetchResponse{
			ErrorCode: kerr.FencedLeaderEpoch.Code, HighWatermark: -1, LeaderID: -1, LeaderEpoch: 2}})
		if st := e.Nodes[4].Raft.Status(); st.Role != quorum.Unattached || st.Epoch != 2 {
			t.Fatalf("seed %d: observer is %s at epoch %d, want unattached at 2", seed, st.Role, st.Epoch)
		}
		e.Tick(20, []int32{4})
		if d := takeFetch(t, e, 4); d.To == 1 {
			t.Errorf("seed %d: discovery fetch to the lost leader 1, want voter 2 or 3", seed)
		}
	}
}
