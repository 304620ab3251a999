package quorum

import (
	"iter"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// SimNode hands the production Node's step machine to the simulator in package
// quorum_test: each method is one event, and the simulator calls Settle after it, as
// the production shell's loop does (node_shell.go run).
type SimNode struct{ n *Node }

// NewSimNode builds a Node on host without the production shell: no goroutine, no
// client.
func NewSimNode(cfg NodeConfig, host NodeHost) (*SimNode, error) {
	n, err := newNode(cfg, host)
	if err != nil {
		return nil, err
	}
	return &SimNode{n: n}, nil
}

func (s *SimNode) Register(l Listener)                        { s.n.Register(l) }
func (s *SimNode) Begin()                                     { s.n.begin() }
func (s *SimNode) Request(m Message) uint64                   { return s.n.onRequest(m) }
func (s *SimNode) Response(m Message)                         { s.n.onResponse(m) }
func (s *SimNode) Tick()                                      { s.n.onTick() }
func (s *SimNode) FlushDone(err error)                        { s.n.onFlushDone(err) }
func (s *SimNode) Settle()                                    { s.n.settle() }
func (s *SimNode) NextDeadlineMs() int64                      { return s.n.nextDeadlineMs() }
func (s *SimNode) Status() Status                             { return s.n.raft.Status() }
func (s *SimNode) HasReady() bool                             { return s.n.raft.HasReady() }
func (s *SimNode) Fatal() error                               { return s.n.fatal }
func (s *SimNode) Resign() error                              { return s.n.raft.Resign(s.n.nowMs()) }
func (s *SimNode) Shutdown() error                            { return s.n.raft.Shutdown(s.n.nowMs()) }
func (s *SimNode) Applied() int64                             { return s.n.applied }
func (s *SimNode) Stopped()                                   { s.n.stopped() }
func (s *SimNode) LatestSnapshot() (raftlog.SnapshotID, bool) { return s.n.raft.LatestSnapshot() }

// Propose is Node.Propose's body on the step machine.
func (s *SimNode) Propose(records []raftlog.Record) (int64, int32, error) {
	return s.n.raft.Propose(s.n.nowMs(), records)
}

// Mutant names the mutation compiled in (mutant_off.go), "" for none.
func Mutant() string {
	switch {
	case mutSendFirst:
		return "sendfirst"
	case mutSkipStateSave:
		return "nostate"
	case mutFigure8:
		return "fig8"
	}
	return ""
}

// SnapshotFile is the snapshot writer a simulated storage returns from
// CreateSnapshot (its snapshotStore side).
type SnapshotFile = snapshotFile

// WriteSnapshot is Node.WriteSnapshot's body on the step machine.
func (s *SimNode) WriteSnapshot(id raftlog.SnapshotID, ts int64, records iter.Seq2[raftlog.Record, error]) (<-chan error, error) {
	return s.n.beginSnapshot(id, ts, records)
}
