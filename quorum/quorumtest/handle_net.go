package quorumtest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kraftd/kraftd/quorum"
)

// tick ms=N [nodes=1,2]: advance the clock and tick the nodes.
func (e *Env) handleTick(tc *TestCase) error {
	a, ok := tc.Arg("ms")
	if !ok || len(a.Vals) != 1 {
		return fmt.Errorf("tick needs ms=")
	}
	ms, err := strconv.ParseInt(a.Vals[0], 10, 64)
	if err != nil {
		return err
	}
	var ids []int32
	if na, ok := tc.Arg("nodes"); ok {
		if ids, err = parseIDs(na.Vals); err != nil {
			return err
		}
	}
	e.Tick(ms, ids)
	return nil
}

// process-ready [node=1,2]
func (e *Env) handleProcessReady(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	for _, n := range ns {
		e.ProcessReady(n)
	}
	return nil
}

// filter matches in-flight messages against from=, to=, type= arguments.
func filter(tc *TestCase) (func(quorum.Message) bool, error) {
	var from, to []int32
	var types []string
	var err error
	if a, ok := tc.Arg("from"); ok {
		if from, err = parseIDs(a.Vals); err != nil {
			return nil, err
		}
	}
	if a, ok := tc.Arg("to"); ok {
		if to, err = parseIDs(a.Vals); err != nil {
			return nil, err
		}
	}
	if a, ok := tc.Arg("type"); ok {
		types = a.Vals
	}
	in := func(xs []int32, x int32) bool {
		if xs == nil {
			return true
		}
		for _, v := range xs {
			if v == x {
				return true
			}
		}
		return false
	}
	return func(m quorum.Message) bool {
		if !in(from, m.From) || !in(to, m.To) {
			return false
		}
		if types == nil {
			return true
		}
		for _, t := range types {
			if t == MsgType(m) {
				return true
			}
		}
		return false
	}, nil
}

// Take removes and returns the matching in-flight messages.
func (e *Env) Take(match func(quorum.Message) bool) []quorum.Message {
	var got, keep []quorum.Message
	for _, m := range e.Net {
		if match(m) {
			got = append(got, m)
		} else {
			keep = append(keep, m)
		}
	}
	e.Net = keep
	return got
}

// deliver|drop [from=] [to=] [type=]
func (e *Env) handleDeliver(tc *TestCase, drop bool) error {
	match, err := filter(tc)
	if err != nil {
		return err
	}
	for _, m := range e.Take(match) {
		if drop {
			fmt.Fprintf(e.Out, "dropped %s\n", m)
			continue
		}
		e.Deliver(m)
	}
	return nil
}

// fail [from=] [to=] [type=]: matching in-flight requests fail (timeout) and their
// senders get a failed response.
func (e *Env) handleFail(tc *TestCase) error {
	match, err := filter(tc)
	if err != nil {
		return err
	}
	for _, m := range e.Take(func(m quorum.Message) bool { return m.IsRequest() && match(m) }) {
		resp := FailedResponse(m)
		e.Deliver(resp)
	}
	return nil
}

// FailedResponse is what a driver steps back in when request m timed out.
func FailedResponse(m quorum.Message) quorum.Message {
	r := quorum.Message{From: m.To, To: m.From, RequestID: m.RequestID, Err: quorum.ErrRequestFailed}
	switch {
	case m.Vote != nil:
		r.VoteResp = &quorum.VoteResponse{PreVote: m.Vote.PreVote}
	case m.BeginEpoch != nil:
		r.BeginEpochResp = &quorum.BeginQuorumEpochResponse{}
	case m.EndEpoch != nil:
		r.EndEpochResp = &quorum.EndQuorumEpochResponse{}
	case m.Fetch != nil:
		r.FetchResp = &quorum.FetchResponse{}
	case m.FetchSnapshot != nil:
		r.FetchSnapshotResp = &quorum.FetchSnapshotResponse{}
	case m.UpdateVoter != nil:
		r.UpdateVoterResp = &quorum.UpdateVoterResponse{LeaderID: -1, LeaderEpoch: -1}
	}
	return r
}

// stabilize [node=...]: process ready and deliver until nothing moves. Messages from
// or to nodes outside the set stay in flight.
func (e *Env) handleStabilize(tc *TestCase) error {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return err
	}
	set := map[int32]bool{}
	for _, n := range ns {
		set[n.ID] = true
	}
	for i := 0; i < 10000; i++ {
		moved := false
		for _, n := range ns {
			moved = e.ProcessReady(n) || moved
		}
		batch := e.Take(func(m quorum.Message) bool { return set[m.From] && set[m.To] })
		for _, m := range batch {
			e.Deliver(m)
			moved = true
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("stabilize did not converge")
}

// partition groups=1/2,3 ... as: partition 1 2,3
func (e *Env) handlePartition(tc *TestCase) error {
	var groups [][]int32
	for _, a := range tc.Args {
		ids, err := parseIDs(strings.Split(a.Key, ","))
		if err != nil {
			return err
		}
		groups = append(groups, ids)
	}
	e.Partition(groups)
	return nil
}

// cut from=1 to=2: one-way drop.
func (e *Env) handleCut(tc *TestCase) error {
	a, _ := tc.Arg("from")
	b, _ := tc.Arg("to")
	from, err := parseIDs(a.Vals)
	if err != nil {
		return err
	}
	to, err := parseIDs(b.Vals)
	if err != nil {
		return err
	}
	for _, x := range from {
		for _, y := range to {
			e.Cut(x, y)
		}
	}
	return nil
}
