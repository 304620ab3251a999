package controller

import (
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerState is a broker's state at the active controller (Kafka's
// BrokerControlState), derived from its session and registration.
type brokerState int8

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

func (s brokerState) String() string {
	return [...]string{"FENCED", "UNFENCED", "CONTROLLED_SHUTDOWN", "SHUTDOWN_NOW"}[s]
}

// fenced is what the heartbeat response reports as IsFenced.
func (s brokerState) fenced() bool { return s == stateFenced || s == stateShutdownNow }

// session is the active controller's soft state about one broker: never
// in the log, rebuilt (fresh) on every activation, as Kafka's
// BrokerHeartbeatManager is.
//
// INVARIANTS:
//   - fenced implies controlledShutdownOffset == -1 (a fenced broker leaves
//     controlled shutdown; its next heartbeat gets SHUTDOWN_NOW);
//   - controlledShutdownOffset, once set, changes only back to -1 by fencing.
type session struct {
	lastContactMs int64
	// metadataOffset is the broker's CurrentMetadataOffset at its last
	// heartbeat; -1 before the first one.
	metadataOffset int64
	// fenced mirrors the state the last heartbeat decided (or the
	// registration), ahead of the image while the records are in flight.
	fenced bool
	// controlledShutdownOffset is the offset whose commit moved the last
	// leadership off the broker; -1 when not shutting down.
	controlledShutdownOffset int64
}

func (s *session) shuttingDown() bool { return s.controlledShutdownOffset >= 0 }

// sessions tracks every registered broker's session.
type sessions struct {
	timeoutMs int64
	byID      map[int32]*session
}

func newSessions(timeoutMs int64) *sessions {
	return &sessions{timeoutMs: timeoutMs, byID: map[int32]*session{}}
}

// register starts a fresh session (registration or activation): the broker
// gets a full session timeout before it can be fenced for silence.
func (ss *sessions) register(id int32, fenced bool, nowMs int64) {
	s, ok := ss.byID[id]
	offset := int64(-1)
	if !ok {
		s = &session{controlledShutdownOffset: -1}
		ss.byID[id] = s
	} else if s.fenced != fenced {
		offset = s.metadataOffset
	}
	ss.touch(s, fenced, offset, nowMs)
}

func (ss *sessions) touch(s *session, fenced bool, metadataOffset, nowMs int64) {
	s.lastContactMs, s.metadataOffset, s.fenced = nowMs, metadataOffset, fenced
	if fenced {
		s.controlledShutdownOffset = -1
	}
}

func (ss *sessions) remove(id int32) { delete(ss.byID, id) }

// valid reports whether id has a live, unfenced session; only such a
// session blocks another incarnation from registering.
func (ss *sessions) valid(id int32, nowMs int64) bool {
	s, ok := ss.byID[id]
	return ok && !s.fenced && s.lastContactMs+ss.timeoutMs >= nowMs
}

// oldestUnfenced is the unfenced broker heard from least recently (lowest
// id on ties, for determinism), or -1.
func (ss *sessions) oldestUnfenced() (int32, *session) {
	best, bestID := (*session)(nil), int32(-1)
	for _, id := range ss.sortedIDs() {
		s := ss.byID[id]
		if !s.fenced && (best == nil || s.lastContactMs < best.lastContactMs) {
			best, bestID = s, id
		}
	}
	return bestID, best
}

// stale returns one broker whose session expired, or -1. Expired brokers
// are fenced one at a time so each fencing sees the ISR changes of the
// previous one (KAFKA-13173).
func (ss *sessions) stale(nowMs int64) int32 {
	id, s := ss.oldestUnfenced()
	if s != nil && s.lastContactMs+ss.timeoutMs < nowMs {
		return id
	}
	return -1
}

// nextExpiryMs is when the oldest unfenced session expires, or MaxInt64.
func (ss *sessions) nextExpiryMs() int64 {
	if _, s := ss.oldestUnfenced(); s != nil {
		return s.lastContactMs + ss.timeoutMs + 1
	}
	return math.MaxInt64
}

// lowestActiveOffset is the smallest metadata offset among brokers that are
// unfenced and not shutting down; MaxInt64 if there are none. A broker in
// controlled shutdown may stop only once every active broker has seen the
// leadership moves (its controlledShutdownOffset).
func (ss *sessions) lowestActiveOffset() int64 {
	low := int64(math.MaxInt64)
	for _, s := range ss.byID {
		if !s.fenced && !s.shuttingDown() {
			low = min(low, s.metadataOffset)
		}
	}
	return low
}

func (ss *sessions) sortedIDs() []int32 {
	ids := make([]int32, 0, len(ss.byID))
	for id := range ss.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// fence marks id's session fenced ahead of the fencing records' commit, so
// the next staleness check moves on to the next broker.
func (ss *sessions) fence(id int32) {
	if s, ok := ss.byID[id]; ok {
		s.fenced, s.controlledShutdownOffset = true, -1
	}
}

// answersNow reports whether req's response, computed from the pending
// view without writing anything, may be sent before what is appended
// commits: a BrokerHeartbeat whose broker's registration (epoch, fencing,
// controlled shutdown) is the same in the committed image readers see as in
// the pending one reveals nothing uncommitted. Kafka holds every heartbeat
// answer until the log end commits; kraftd does not make a steady broker
// wait for another request's records (a 100,000-partition create).
func (c *core) answersNow(req kmsg.Request) bool {
	hb, ok := req.(*kmsg.BrokerHeartbeatRequest)
	if !ok {
		return false
	}
	id := hb.BrokerID
	p, inPending := c.pending.img.Broker(id)
	v, inCommitted := c.committed.visible().Broker(id)
	committedReg := c.committed.regOffsets
	if c.committed.txnBase != nil {
		committedReg = c.committed.txnBase.regOffsets
	}
	return inPending && inCommitted && p.Epoch == v.Epoch && p.Fenced == v.Fenced &&
		p.InControlledShutdown == v.InControlledShutdown && c.pending.regOffsets[id] == committedReg[id]
}

// writesNothing reports whether handling req now appends no records:
// DescribeCluster, a steady heartbeat, or anything while not active (it is
// answered NOT_CONTROLLER).
func (c *core) writesNothing(req kmsg.Request) bool {
	if _, ok := req.(*kmsg.DescribeClusterRequest); ok || !c.active {
		return true
	}
	return c.steadyHeartbeat(req)
}

// steadyHeartbeat reports, without changing anything, whether req is a
// BrokerHeartbeat that writes no records: a known broker at its epoch whose
// state the heartbeat does not move. The event loop serves these (and
// nothing else that writes) while a large operation is being appended.
func (c *core) steadyHeartbeat(req kmsg.Request) bool {
	hb, ok := req.(*kmsg.BrokerHeartbeatRequest)
	if !ok {
		return false
	}
	img := c.pending.img
	b, ok := img.Broker(hb.BrokerID)
	s, hasSession := c.sessions.byID[hb.BrokerID]
	if !ok || !hasSession || b.Epoch != hb.BrokerEpoch {
		return true // STALE_BROKER_EPOCH, no records
	}
	cur := currentState(s)
	next := nextState(cur, hb, c.pending.regOffsets[hb.BrokerID], s, c.sessions,
		func() bool { return hasLeaderships(img, hb.BrokerID) })
	return next == cur
}
