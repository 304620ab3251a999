// Package quorumtest is an interaction environment for the quorum core: simulated
// nodes with a simulated disk, a simulated network and a manual clock, driven by
// transcript commands (one handler per command, as etcd's rafttest). Everything is
// reachable through the core's public API (Step, Tick, Ready, Advance, Status), so a
// randomized simulation can drive the same environment.
package quorumtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Node is one simulated process plus its disk.
type Node struct {
	ID   int32
	Cfg  quorum.Config
	Raft *quorum.Raft
	Down bool
	// Disk: what survives a crash.
	State   raftlog.QuorumState
	Batches []raftlog.Batch
	// Recovery is the recovery marker on disk (nil: none).
	Recovery *raftlog.Recovery
	// Applied is every committed batch handed to the state machine in this process life.
	Applied []raftlog.Batch
	// HW is the last high watermark reported by Ready in this process life.
	HW int64

	// StartOffset is the log start on disk (the end of the snapshot it was cut to).
	StartOffset int64
	// Base is the state loaded from a snapshot (at restart or after a download).
	Base []raftlog.Batch
	// Loads lists the snapshots loaded through a download in this process life.
	Loads []raftlog.SnapshotID
	// lastFetch is the last Fetch the node sent: "send type=fetch-resp" answers it.
	lastFetch quorum.Message
	// crashAtLoad: the node crashes after committing the next downloaded snapshot,
	// before restarting its log at it.
	crashAtLoad bool
	snaps       *diskSnapshots
	part        []byte
	partID      raftlog.SnapshotID
}

// Env is the interaction environment.
type Env struct {
	NowMs int64
	Nodes map[int32]*Node
	// Net holds messages in flight, in send order.
	Net []quorum.Message
	// cut[{a,b}] drops messages from a to b.
	cut  map[[2]int32]bool
	seed uint64
	Out  *bytes.Buffer
	// Fatal is the first fatal error a node's Step returned.
	Fatal error
	base  quorum.Config
}

// NewEnv returns an empty environment whose nodes' randomness derives from seed.
func NewEnv(seed uint64) *Env {
	return &Env{Nodes: map[int32]*Node{}, cut: map[[2]int32]bool{}, seed: seed, Out: &bytes.Buffer{}}
}

// IDs returns the node ids in order.
func (e *Env) IDs() []int32 {
	ids := make([]int32, 0, len(e.Nodes))
	for id := range e.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (e *Env) logger() *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zapcore.EncoderConfig{
		LevelKey: "level", MessageKey: "msg", EncodeLevel: zapcore.CapitalLevelEncoder,
		ConsoleSeparator: " ",
	})
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(e.Out), zapcore.InfoLevel))
}

// AddNode creates a node with the given config template (NodeID, Voters and timings
// set by the caller) and starts it from an empty disk.
func (e *Env) AddNode(cfg quorum.Config) error {
	n := &Node{ID: cfg.NodeID, Cfg: cfg, State: raftlog.EmptyQuorumState(),
		snaps: &diskSnapshots{files: map[raftlog.SnapshotID][]byte{}}}
	e.Nodes[cfg.NodeID] = n
	return e.Start(n)
}

// Start (re)starts n from its disk.
func (e *Env) Start(n *Node) error {
	cfg := n.Cfg
	cfg.Logger = e.logger()
	cfg.Rand = rand.New(rand.NewPCG(e.seed, uint64(n.ID)+uint64(e.NowMs)<<8))
	cfg.Snapshots = n.snaps
	loaded := raftlog.Loaded{State: n.State, Batches: slices.Clone(n.Batches), StartOffset: n.StartOffset,
		Snapshot: n.loadLatest(), Recovery: n.Recovery}
	if !loaded.LogContinuesSnapshot() {
		// As FileStorage at open: the log restarts at the latest snapshot.
		id := *loaded.Snapshot
		fmt.Fprintf(e.Out, "%d restarts its log at snapshot (%d,%d)\n", n.ID, id.EndOffset, id.Epoch)
		n.Batches, n.StartOffset = nil, id.EndOffset
		loaded.Batches, loaded.StartOffset = nil, id.EndOffset
	}
	r, err := quorum.NewRaft(cfg, loaded, e.NowMs)
	if err != nil {
		return err
	}
	n.Raft, n.Down, n.Applied, n.HW, n.Loads, n.part = r, false, nil, 0, nil, nil
	return nil
}

// ProcessReady persists n's Ready to its disk and puts its messages on the network.
// It reports whether there was anything to do.
func (e *Env) ProcessReady(n *Node) bool {
	if n.Down || !n.Raft.HasReady() {
		return false
	}
	rd := n.Raft.Ready()
	for _, m := range append(rd.Messages, rd.MessagesAfterPersist...) {
		if m.Fetch != nil {
			n.lastFetch = m
		}
	}
	e.Net = append(e.Net, rd.Messages...)
	if rd.QuorumState != nil {
		n.State = *rd.QuorumState
	}
	if err := e.applySnapshotReady(n, rd); err != nil && e.Fatal == nil {
		e.Fatal = err
		fmt.Fprintf(e.Out, "FATAL %v\n", err)
	}
	if n.Down {
		return true // crashed inside the Ready (crash at=load-snapshot)
	}
	if rd.TruncateTo >= 0 {
		i := slices.IndexFunc(n.Batches, func(b raftlog.Batch) bool { return b.BaseOffset >= rd.TruncateTo })
		if i >= 0 {
			n.Batches = n.Batches[:i:i]
		}
	}
	n.Batches = append(n.Batches, rd.Append...)
	if rd.RecoveryDone {
		n.Recovery = nil
		fmt.Fprintf(e.Out, "%d removed its recovery marker\n", n.ID)
	}
	e.Net = append(e.Net, rd.MessagesAfterPersist...)
	n.Applied = append(n.Applied, rd.Committed...)
	n.HW = rd.HighWatermark
	n.Raft.Advance(rd)
	return true
}

// Deliver steps m into its target, or drops it when the target is down, unknown or cut
// off, writing a transcript line before the target's own log lines.
func (e *Env) Deliver(m quorum.Message) {
	to := e.Nodes[m.To]
	switch {
	case to == nil:
		fmt.Fprintf(e.Out, "dropped (no node) %s\n", m)
		return
	case to.Down || e.cut[[2]int32{m.From, m.To}]:
		fmt.Fprintf(e.Out, "dropped %s\n", m)
		return
	}
	fmt.Fprintln(e.Out, m.String())
	if err := to.Raft.Step(e.NowMs, m); err != nil {
		if e.Fatal == nil {
			e.Fatal = fmt.Errorf("node %d: %w", m.To, err)
		}
		fmt.Fprintf(e.Out, "FATAL node %d: %v\n", m.To, err)
	}
}

// Tick advances the clock by ms and ticks the given nodes (all live ones if nil).
func (e *Env) Tick(ms int64, ids []int32) {
	e.NowMs += ms
	if ids == nil {
		ids = e.IDs()
	}
	for _, id := range ids {
		if n := e.Nodes[id]; n != nil && !n.Down {
			n.Raft.Tick(e.NowMs)
		}
	}
}

// Partition cuts every link between the groups (both directions).
func (e *Env) Partition(groups [][]int32) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					e.cut[[2]int32{a, b}] = true
				}
			}
		}
	}
}

// Cut drops messages from a to b (one way).
func (e *Env) Cut(a, b int32) { e.cut[[2]int32{a, b}] = true }

// Heal removes every cut.
func (e *Env) Heal() { clear(e.cut) }

// Crash stops n; everything it had not persisted is lost (ProcessReady persists
// synchronously, so that is its un-processed Ready).
func (e *Env) Crash(n *Node) { n.Down = true }

// StateLine renders one node's state for transcripts.
func StateLine(n *Node) string {
	if n.Down {
		return fmt.Sprintf("%d: down", n.ID)
	}
	s := n.Raft.Status()
	kind := ""
	if !s.IsVoter {
		kind = " (observer)"
	}
	if n.Raft.Recovering() {
		kind += " (recovering)"
	}
	return fmt.Sprintf("%d: %s%s epoch=%d leader=%d voted=%d leo=%d hw=%d applied=%d",
		n.ID, s.Role, kind, s.Epoch, s.LeaderID, s.VotedID, s.LogEndOffset, s.HighWatermark, s.AppliedOffset)
}

// MsgType names a message's payload for filters.
func MsgType(m quorum.Message) string {
	switch {
	case m.Vote != nil && m.Vote.PreVote:
		return "prevote"
	case m.Vote != nil:
		return "vote"
	case m.VoteResp != nil && m.VoteResp.PreVote:
		return "prevote-resp"
	case m.VoteResp != nil:
		return "vote-resp"
	case m.BeginEpoch != nil:
		return "begin"
	case m.BeginEpochResp != nil:
		return "begin-resp"
	case m.EndEpoch != nil:
		return "end"
	case m.EndEpochResp != nil:
		return "end-resp"
	case m.Fetch != nil:
		return "fetch"
	case m.FetchResp != nil:
		return "fetch-resp"
	case m.FetchSnapshot != nil:
		return "fetch-snapshot"
	case m.FetchSnapshotResp != nil:
		return "fetch-snapshot-resp"
	case m.UpdateVoter != nil:
		return "update-voter"
	case m.UpdateVoterResp != nil:
		return "update-voter-resp"
	}
	return "?"
}

func parseIDs(vals []string) ([]int32, error) {
	var ids []int32
	for _, v := range vals {
		if v == "" {
			continue
		}
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, err
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}
