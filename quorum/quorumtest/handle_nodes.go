package quorumtest

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// add-nodes voters=1,2,3 [observers=4] [prevote=false] [linger=N] [cluster=ID]
//
//	[election-timeout=N] [fetch-timeout=N] [backoff-max=N]
func (e *Env) handleAddNodes(tc *TestCase) error {
	cfg := quorum.Config{AppendLingerMs: quorum.AppendLingerMsNone, ClusterID: "cluster"}
	var voters, observers []int32
	for _, a := range tc.Args {
		var err error
		val := ""
		if len(a.Vals) > 0 {
			val = a.Vals[0]
		}
		switch a.Key {
		case "voters":
			voters, err = parseIDs(a.Vals)
		case "observers":
			observers, err = parseIDs(a.Vals)
		case "prevote":
			cfg.DisablePreVote = val == "false"
		case "cluster":
			cfg.ClusterID = val
		case "linger":
			cfg.AppendLingerMs, err = strconv.ParseInt(val, 10, 64)
		case "election-timeout":
			cfg.ElectionTimeoutMs, err = strconv.ParseInt(val, 10, 64)
		case "fetch-timeout":
			cfg.FetchTimeoutMs, err = strconv.ParseInt(val, 10, 64)
		case "fetch-max-bytes":
			var v int64
			v, err = strconv.ParseInt(val, 10, 32)
			cfg.FetchMaxBytes = int32(v)
		case "max-batch":
			cfg.MaxBatchBytes, err = strconv.Atoi(val)
		case "backoff-max":
			cfg.ElectionBackoffMaxMs, err = strconv.ParseInt(val, 10, 64)
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return err
		}
	}
	cfg.Voters = voters
	for _, id := range append(voters, observers...) {
		c := cfg
		c.NodeID = id
		c.Voters = append([]int32(nil), voters...)
		if err := e.AddNode(c); err != nil {
			return err
		}
	}
	return nil
}

// crash node=N [at=load-snapshot]: the node stops; its unprocessed Ready is lost.
// at=load-snapshot crashes it later, once it has committed its next downloaded
// snapshot file and before it restarts its log there.
func (e *Env) handleCrash(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	at := ""
	if a, ok := tc.Arg("at"); ok && len(a.Vals) > 0 {
		at = a.Vals[0]
	}
	for _, n := range ns {
		switch at {
		case "":
			e.Crash(n)
		case "load-snapshot":
			n.crashAtLoad = true
		default:
			return fmt.Errorf("unknown crash point %q", at)
		}
	}
	return nil
}

// restart node=N: start again from the node's disk.
func (e *Env) handleRestart(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	for _, n := range ns {
		if err := e.Start(n); err != nil {
			return err
		}
	}
	return nil
}

// recover node=N [cut=OFFSET] [lose-state]: what `kraftd storage recover` does to a
// stopped node's disk (Env.Damage with the marker).
func (e *Env) handleRecover(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	cut := int64(-1)
	if a, ok := tc.Arg("cut"); ok && len(a.Vals) > 0 {
		if cut, err = strconv.ParseInt(a.Vals[0], 10, 64); err != nil {
			return err
		}
	}
	_, lose := tc.Arg("lose-state")
	rec, err := e.Damage(n, cut, lose, true)
	if err != nil {
		return err
	}
	end := n.StartOffset
	if k := len(n.Batches); k > 0 {
		end = n.Batches[k-1].NextOffset()
	}
	fmt.Fprintf(e.Out, "%d recovery marker: epoch %d, state lost %t; log ends at %d\n", n.ID, rec.Epoch, rec.StateLost, end)
	return nil
}

// Damage models disk damage found on a stopped node and its repair: E (the highest
// epoch of its quorum-state and log, before the cut) is computed, the quorum-state is
// lost if loseState, and the log is cut at the batch holding offset cut (-1: no cut),
// as `kraftd storage recover` cuts at the first invalid batch. With marker the repair
// leaves the recovery marker holding E; without it, it is --unsafe-accept-data-loss
// (a lost quorum-state comes back at E with no vote). It returns the marker's content.
func (e *Env) Damage(n *Node, cut int64, loseState, marker bool) (raftlog.Recovery, error) {
	if !n.Down {
		return raftlog.Recovery{}, fmt.Errorf("node %d is running; crash it first", n.ID)
	}
	epoch := n.State.LeaderEpoch
	for _, b := range n.Batches {
		epoch = max(epoch, b.Epoch)
	}
	if n.Recovery != nil {
		epoch = max(epoch, n.Recovery.Epoch)
		loseState = loseState || n.Recovery.StateLost
	}
	if loseState {
		n.State = raftlog.EmptyQuorumState()
	}
	rec := raftlog.Recovery{Epoch: epoch, StateLost: loseState}
	if marker {
		n.Recovery = &rec
	} else {
		n.Recovery = nil
		if loseState {
			n.State = raftlog.QuorumState{LeaderID: -1, LeaderEpoch: epoch, VotedID: -1}
		}
	}
	if cut >= 0 {
		if i := slices.IndexFunc(n.Batches, func(b raftlog.Batch) bool { return b.LastOffset >= cut }); i >= 0 {
			n.Batches = n.Batches[:i:i]
		}
	}
	return rec, nil
}

// set-state node=N epoch=E [leader=L] [voted=V]: overwrite the node's quorum-state file
// (a stale or corrupt store replaced by an older one).
func (e *Env) handleSetState(tc *TestCase) error {
	n, err := e.nodeArg(tc)
	if err != nil {
		return err
	}
	get := func(key string) (int32, error) {
		a, ok := tc.Arg(key)
		if !ok || len(a.Vals) == 0 {
			return -1, nil
		}
		v, err := strconv.ParseInt(a.Vals[0], 10, 32)
		return int32(v), err
	}
	var vals [3]int32
	for i, k := range []string{"epoch", "leader", "voted"} {
		if vals[i], err = get(k); err != nil {
			return err
		}
	}
	n.State.LeaderEpoch, n.State.LeaderID, n.State.VotedID = max(vals[0], 0), vals[1], vals[2]
	return nil
}
