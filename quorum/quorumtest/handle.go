package quorumtest

import (
	"fmt"
	"strings"
)

// Handle runs one transcript command and returns its output: the command's own lines
// interleaved with the nodes' state-transition log lines.
func (e *Env) Handle(tc *TestCase) string {
	e.Out.Reset()
	var err error
	switch tc.Cmd {
	case "add-nodes":
		err = e.handleAddNodes(tc)
	case "crash":
		err = e.handleCrash(tc)
	case "set-state":
		err = e.handleSetState(tc)
	case "restart":
		err = e.handleRestart(tc)
	case "recover":
		err = e.handleRecover(tc)
	case "tick":
		err = e.handleTick(tc)
	case "process-ready", "persist":
		err = e.handleProcessReady(tc)
	case "deliver":
		err = e.handleDeliver(tc, false)
	case "drop":
		err = e.handleDeliver(tc, true)
	case "fail":
		err = e.handleFail(tc)
	case "stabilize":
		err = e.handleStabilize(tc)
	case "partition":
		err = e.handlePartition(tc)
	case "cut":
		err = e.handleCut(tc)
	case "heal":
		e.Heal()
	case "propose":
		err = e.handlePropose(tc)
	case "resign":
		err = e.handleResign(tc)
	case "shutdown":
		err = e.handleShutdown(tc)
	case "raft-state":
		e.handleRaftState(tc)
	case "log":
		err = e.handleLog(tc)
	case "status":
		err = e.handleStatus(tc)
	case "send":
		err = e.handleSend(tc)
	case "set-prevote":
		err = e.handleSetPreVote(tc)
	case "snapshot":
		err = e.handleSnapshot(tc)
	case "compact":
		err = e.handleCompact(tc)
	case "state-machine":
		err = e.handleStateMachine(tc)
	case "net":
		for _, m := range e.Net {
			fmt.Fprintln(e.Out, m.String())
		}
	default:
		err = fmt.Errorf("unknown command %q", tc.Cmd)
	}
	if err != nil {
		fmt.Fprintf(e.Out, "error: %v\n", err)
	}
	return strings.TrimRight(e.Out.String(), "\n")
}

// nodesArg returns the nodes named by key (all if absent).
func (e *Env) nodesArg(tc *TestCase, key string) ([]*Node, error) {
	a, ok := tc.Arg(key)
	if !ok {
		var all []*Node
		for _, id := range e.IDs() {
			all = append(all, e.Nodes[id])
		}
		return all, nil
	}
	ids, err := parseIDs(a.Vals)
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, id := range ids {
		n := e.Nodes[id]
		if n == nil {
			return nil, fmt.Errorf("no node %d", id)
		}
		out = append(out, n)
	}
	return out, nil
}

func (e *Env) nodeArg(tc *TestCase) (*Node, error) {
	ns, err := e.nodesArg(tc, "node")
	if err != nil {
		return nil, err
	}
	if len(ns) != 1 {
		return nil, fmt.Errorf("need exactly one node=")
	}
	return ns[0], nil
}
