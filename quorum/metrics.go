package quorum

import (
	"sync/atomic"
	"time"
)

// NodeMetrics is a point-in-time view of a Node for monitoring (Kafka's
// raft-metrics group: current-epoch, current-leader, high-watermark,
// log-end-offset, current-state). It is read without a round trip through the
// driver loop, so a scrape never waits behind a long fsync; the fields are
// each current but not necessarily from the same instant.
type NodeMetrics struct {
	Role     Role
	Epoch    int32
	LeaderID int32 // -1 when no leader is known
	// HighWatermark is -1 on a leader that has not committed in its epoch yet.
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// AppliedOffset is the next offset to hand to listeners (all below it were delivered).
	AppliedOffset int64
	// ConflictingLeaderTotal counts requests and responses that named another leader
	// for an epoch whose leader this node knew (rejected; each logged at ERROR).
	ConflictingLeaderTotal int64
	// InconsistentVoterSetTotal counts Vote, BeginQuorumEpoch and EndQuorumEpoch
	// requests refused with INCONSISTENT_VOTER_SET: sent by a non-voter, or to an
	// observer.
	InconsistentVoterSetTotal int64
	// RefusedResponseTotal counts peers' answers to this node's quorum RPCs that it
	// refused (an INVALID_REQUEST answer, a divergence below its high watermark, an
	// unusable snapshot id or chunk; see Counters.RefusedResponse). Each was logged at
	// ERROR and handled as a failed request; Kafka stops the process on most of them.
	RefusedResponseTotal int64
	// ObserversUntrackedTotal counts Fetches a leader served from observers it did
	// not track (DescribeQuorum does not list them) because it already tracked
	// MaxTrackedObservers observers.
	ObserversUntrackedTotal int64
}

// nodeGauges mirrors the core's monitoring fields in atomics. The driver
// stores them after every pass over Ready; Node.Metrics loads them from any
// goroutine.
type nodeGauges struct {
	role, epoch, leader   atomic.Int32
	hw, lso, leo, applied atomic.Int64
	conflicting, voterSet atomic.Int64
	refused, untracked    atomic.Int64
}

// update is called on the driver goroutine only.
func (g *nodeGauges) update(r *Raft, applied int64) {
	hw := r.hw
	if r.role == Leader {
		hw = r.leaderHW()
	}
	g.role.Store(int32(r.role))
	g.epoch.Store(r.epoch)
	g.leader.Store(r.leaderID)
	g.hw.Store(hw)
	g.lso.Store(r.log.startOffset)
	g.leo.Store(r.log.endOffset())
	g.applied.Store(applied)
	c := r.Counters()
	g.conflicting.Store(c.ConflictingLeader)
	g.voterSet.Store(c.InconsistentVoterSet)
	g.refused.Store(c.RefusedResponse)
	g.untracked.Store(c.ObserversUntracked)
}

// Metrics returns the latest monitoring view; safe from any goroutine, before
// Start (zero values) and after Close (the last values).
func (n *Node) Metrics() NodeMetrics {
	g := &n.gauges
	return NodeMetrics{
		Role:           Role(g.role.Load()),
		Epoch:          g.epoch.Load(),
		LeaderID:       g.leader.Load(),
		HighWatermark:  g.hw.Load(),
		LogStartOffset: g.lso.Load(),
		LogEndOffset:   g.leo.Load(),
		AppliedOffset:  g.applied.Load(),

		ConflictingLeaderTotal:    g.conflicting.Load(),
		InconsistentVoterSetTotal: g.voterSet.Load(),
		RefusedResponseTotal:      g.refused.Load(),
		ObserversUntrackedTotal:   g.untracked.Load(),
	}
}

// commitTimer measures, on a leader, the time from Propose accepting a batch
// to the commit of its last offset being delivered to listeners: the figure
// a controller waits on before answering a request. Owned by the driver
// goroutine.
//
// INVARIANTS: pending is sorted by last offset (Propose appends in log order);
// it is emptied whenever the role or epoch changes, because a batch proposed in
// an older epoch may be truncated and its offsets reused by other records.
type commitTimer struct {
	observe func(time.Duration)
	pending []pendingCommit
	epoch   int32
}

type pendingCommit struct {
	last int64
	at   time.Time
}

// proposed records that the batch ending at last was accepted in epoch.
func (t *commitTimer) proposed(epoch int32, last int64, now time.Time) {
	if t.observe == nil {
		return
	}
	if epoch != t.epoch {
		t.pending, t.epoch = t.pending[:0], epoch
	}
	t.pending = append(t.pending, pendingCommit{last: last, at: now})
}

// delivered reports every pending batch whose last offset is below next (the
// first offset not yet delivered).
func (t *commitTimer) delivered(next int64, now time.Time) {
	i := 0
	for ; i < len(t.pending) && t.pending[i].last < next; i++ {
		t.observe(now.Sub(t.pending[i].at))
	}
	if i > 0 {
		t.pending = append(t.pending[:0], t.pending[i:]...)
	}
}

// reset drops every pending batch (leadership changed).
func (t *commitTimer) reset() { t.pending = t.pending[:0] }
