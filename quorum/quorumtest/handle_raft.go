package quorumtest

import (
	"fmt"
	"strconv"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// propose node=N data=a,b: one batch with one record per value.
func (e *Env) handlePropose(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	a, _ := tc.Arg("data")
	var recs []raftlog.Record
	for _, v := range a.Vals {
		recs = append(recs, raftlog.Record{Value: []byte(v)})
	}
	base, epoch, err := n.Raft.Propose(e.NowMs, recs)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "proposed at offset %d epoch %d\n", base, epoch)
	return nil
}

// resign node=N
func (e *Env) handleResign(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	return n.Raft.Resign(e.NowMs)
}

// shutdown node=N: begin a graceful shutdown (a leader resigns and answers fetchers
// BROKER_NOT_AVAILABLE); the node keeps running.
func (e *Env) handleShutdown(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	return n.Raft.Shutdown(e.NowMs)
}

// raft-state [node=...]
func (e *Env) handleRaftState(tc *TestCase) {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		fmt.Fprintf(e.Out, "error: %v\n", err)
		return
	}
	for _, n := range ns {
		fmt.Fprintln(e.Out, StateLine(n))
	}
}

// log node=N: the node's in-memory log as seen through its disk and applied batches.
func (e *Env) handleLog(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "disk: %s\n", BatchesString(n.Batches))
	fmt.Fprintf(e.Out, "applied: %s\n", BatchesString(n.Applied))
	return nil
}

// BatchesString renders batches as [base..last]@epoch, control batches marked with c.
func BatchesString(bs []raftlog.Batch) string {
	s := ""
	for i, b := range bs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("[%d..%d]@%d", b.BaseOffset, b.LastOffset, b.Epoch)
		if b.Control {
			s += "c"
		}
	}
	if s == "" {
		return "(empty)"
	}
	return s
}

// status node=N: DescribeQuorum's view.
func (e *Env) handleStatus(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	s := n.Raft.Status()
	fmt.Fprintf(e.Out, "%s epoch=%d leader=%d hw=%d epoch-start=%d\n", s.Role, s.Epoch, s.LeaderID, s.HighWatermark, s.EpochStartOffset)
	for _, r := range s.Voters {
		fmt.Fprintf(e.Out, "voter %d end=%d fetch=%d caught-up=%d\n", r.ReplicaID, r.LogEndOffset, r.LastFetchTimestampMs, r.LastCaughtUpTimestampMs)
	}
	for _, r := range s.Observers {
		fmt.Fprintf(e.Out, "observer %d end=%d fetch=%d caught-up=%d\n", r.ReplicaID, r.LogEndOffset, r.LastFetchTimestampMs, r.LastCaughtUpTimestampMs)
	}
	if s.EndEpochPending != nil {
		fmt.Fprintf(e.Out, "end-epoch pending %v\n", s.EndEpochPending)
	}
	return nil
}

// set-prevote node=N peer=P ok=false
func (e *Env) handleSetPreVote(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	p, _ := tc.Arg("peer")
	ok, _ := tc.Arg("ok")
	peers, err := parseIDs(p.Vals)
	if err != nil {
		return err
	}
	for _, id := range peers {
		n.Raft.SetPeerSupportsPreVote(id, len(ok.Vals) == 0 || ok.Vals[0] != "false")
	}
	return nil
}

// send from=F to=T type=fetch|vote|prevote|begin|end [epoch=] [leader=] [offset=]
//
//	[last-epoch=] [replica=] [cluster=] [voter=] [wait=] [successors=]
//
// injects a hand-made request (from may be a node that does not exist); the answer is
// put on the network.
//
// send from=F to=T type=fetch-resp epoch= [leader=] [hw=] [diverging=EPOCH,OFFSET]
//
// answers T's last Fetch in F's name.
func (e *Env) handleSend(tc *TestCase) error {
	num := func(key string, def int64) int64 {
		a, ok := tc.Arg(key)
		if !ok || len(a.Vals) == 0 {
			return def
		}
		v, err := strconv.ParseInt(a.Vals[0], 10, 64)
		if err != nil {
			return def
		}
		return v
	}
	str := func(key, def string) string {
		if a, ok := tc.Arg(key); ok && len(a.Vals) > 0 {
			return a.Vals[0]
		}
		return def
	}
	from, to := int32(num("from", -1)), int32(num("to", -1))
	m := quorum.Message{From: from, To: to, RequestID: uint64(1000 + len(e.Net))}
	epoch := int32(num("epoch", 0))
	cluster := str("cluster", "cluster")
	switch t := str("type", ""); t {
	case "fetch":
		m.Fetch = &quorum.FetchRequest{ClusterID: cluster, ReplicaID: int32(num("replica", int64(from))),
			MaxWaitMs: int32(num("wait", 0)), CurrentLeaderEpoch: epoch,
			FetchOffset: num("offset", 0), LastFetchedEpoch: int32(num("last-epoch", 0))}
	case "vote", "prevote":
		m.Vote = &quorum.VoteRequest{ClusterID: cluster, VoterID: int32(num("voter", -1)), CandidateEpoch: epoch,
			CandidateID: from, LastOffsetEpoch: int32(num("last-epoch", 0)), LastOffset: num("offset", 0),
			PreVote: t == "prevote"}
	case "begin":
		m.BeginEpoch = &quorum.BeginQuorumEpochRequest{ClusterID: cluster, VoterID: int32(num("voter", -1)),
			LeaderID: int32(num("leader", int64(from))), LeaderEpoch: epoch}
	case "end":
		succ, _ := tc.Arg("successors")
		ids, err := parseIDs(succ.Vals)
		if err != nil {
			return err
		}
		m.EndEpoch = &quorum.EndQuorumEpochRequest{ClusterID: cluster, LeaderID: int32(num("leader", int64(from))),
			LeaderEpoch: epoch, PreferredSuccessors: ids}
	case "fetch-resp":
		n := e.Nodes[to]
		if n == nil || n.lastFetch.Fetch == nil {
			return fmt.Errorf("node %d sent no Fetch", to)
		}
		m.RequestID = n.lastFetch.RequestID
		m.FetchResp = &quorum.FetchResponse{HighWatermark: num("hw", -1), LeaderID: int32(num("leader", int64(from))),
			LeaderEpoch: epoch}
		if a, ok := tc.Arg("diverging"); ok {
			ids, err := parseIDs(a.Vals)
			if err != nil || len(ids) != 2 {
				return fmt.Errorf("diverging=EPOCH,OFFSET")
			}
			m.FetchResp.DivergingEpoch = &quorum.EpochEndOffset{Epoch: ids[0], EndOffset: int64(ids[1])}
		}
	default:
		return fmt.Errorf("unknown type %q", t)
	}
	e.Deliver(m)
	return nil
}
