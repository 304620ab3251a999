package quorum

import (
	"fmt"
	"iter"

	"github.com/twmb/franz-go/pkg/kmsg"

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
func (s *SimNode) SetPeerSupportsPreVote(id int32, ok bool) { s.n.raft.SetPeerSupportsPreVote(id, ok) }

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
	case mutNoRecovery:
		return "norecovery"
	case mutTwoChanges:
		return "twochanges"
	case mutDiskAck:
		return "diskack"
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

// WireRequest is m as its sender's Node puts it on the wire: the Kafka request body
// at the highest version both sides serve, the peer serving up to peerMax(key).
func (s *SimNode) WireRequest(m Message, peerMax func(key int16) int16) (key, version int16, body []byte) {
	key, version = requestKeyAndMax(m)
	version = min(version, peerMax(key))
	req := encodeRequest(m, s.n.cfg.Raft.ClusterID, version)
	s.n.addLeaderEndpoints(req)
	return key, version, req.AppendTo(nil)
}

// ServeWire parses a request body as the listener does and decodes it with the
// handler's decode half; encode is the handler's encode half, to response bytes.
func (s *SimNode) ServeWire(key, version int16, body []byte) (Message, func(Message) []byte, error) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return Message{}, nil, fmt.Errorf("no request for key %d", key)
	}
	req.SetVersion(version)
	if err := req.ReadFrom(body); err != nil {
		return Message{}, nil, fmt.Errorf("parse %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	m, encode, early, err := s.n.decodeRPC(req)
	if err != nil {
		return Message{}, nil, err
	}
	if early != nil {
		return Message{}, nil, fmt.Errorf("%s v%d answered without the core: %+v", kmsg.NameForKey(key), version, early)
	}
	m.To = s.n.cfg.Raft.NodeID // as stepRPC does
	return m, func(out Message) []byte { return encode(out).AppendTo(nil) }, nil
}

// ReadWireResponse parses response bytes to req (sent at version) and converts them
// as the production host's roundTrip does.
func ReadWireResponse(req Message, key, version int16, body []byte) (Message, error) {
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return Message{}, fmt.Errorf("parse %s response v%d: %w", kmsg.NameForKey(key), version, err)
	}
	out, err := decodeResponse(req, resp)
	if err != nil {
		return Message{}, err
	}
	out.From, out.To, out.RequestID = req.To, req.From, req.RequestID
	return out, nil
}

// AddVoter, RemoveVoter and UpgradeKRaftVersion are the driver steps of Node.AddVoter,
// RemoveVoter and UpgradeKRaftVersion (what the AddRaftVoter, RemoveRaftVoter and
// UpdateFeatures handlers call): the change on the core and, when waited for, the
// waiter the driver answers once the record commits. done is nil when nothing waits;
// it receives nil once the change at offset committed, an error once its leader left
// the epoch.
func (s *SimNode) AddVoter(v VoterNode, ackWhenCommitted bool) (done <-chan error, offset int64, err error) {
	return s.voterChange(ackWhenCommitted, s.n.addVoterChange(v))
}

func (s *SimNode) RemoveVoter(key ReplicaKey) (done <-chan error, offset int64, err error) {
	return s.voterChange(true, s.n.removeVoterChange(key))
}

func (s *SimNode) UpgradeKRaftVersion(level int16) (done <-chan error, offset int64, err error) {
	return s.voterChange(true, s.n.upgradeChange(level, false))
}

func (s *SimNode) voterChange(wait bool, change func() (int64, error)) (<-chan error, int64, error) {
	w, err := s.n.startVoterChange(wait, change)
	if w == nil {
		return nil, -1, err
	}
	return w.done, w.offset, err
}

// VoterSet is the voter set in force on the node's core and its generation.
func (s *SimNode) VoterSet() (VoterSet, uint64, bool) { return s.n.raft.VoterSet() }
