package replica

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
)

// The leader's side of replication: what it knows of each follower (Kafka's
// Replica/ReplicaState), the high watermark over the maximal ISR, and ISR
// changes (KIP-497 AlterPartition, one in flight per partition).

// DefaultReplicaLagTimeMaxMs is replica.lag.time.max.ms' default.
const DefaultReplicaLagTimeMaxMs = 30000

// BrokerView is what the leader checks ISR candidates against: the
// metadata's broker registrations (KIP-841, KIP-903).
type BrokerView interface {
	// ISRBroker returns broker id's registered broker epoch and whether it may
	// be in an ISR (registered, unfenced, not in controlled shutdown);
	// registered is false when the metadata does not know it.
	ISRBroker(id int32) (brokerEpoch int64, eligible, registered bool)
}

// ISRMember is one replica of a proposed ISR with the broker epoch the
// leader saw in its fetches (-1 when it has none: the controller skips the
// check, KIP-903).
type ISRMember struct {
	BrokerID    int32
	BrokerEpoch int64
}

// AlterPartitionItem is one partition's ISR change sent to the controller.
type AlterPartitionItem struct {
	TopicPartition
	TopicID        [16]byte
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []ISRMember
}

// AlterOutcome classifies the controller's answer for one partition, as
// Kafka's Partition.handleAlterPartitionError does.
type AlterOutcome int

const (
	// AlterCommitted: the controller accepted; the result carries the new state.
	AlterCommitted AlterOutcome = iota
	// AlterRejected: INELIGIBLE_REPLICA or OPERATION_NOT_ATTEMPTED: the
	// change was certainly not applied; the leader goes back to its committed ISR.
	AlterRejected
	// AlterStale: the partition or leader epoch moved on, the topic is gone,
	// or the request was invalid: the leader keeps the change pending until
	// metadata replaces its state.
	AlterStale
	// AlterRetry: any other error; the change is sent again.
	AlterRetry
)

func (o AlterOutcome) String() string {
	switch o {
	case AlterCommitted:
		return "Committed"
	case AlterRejected:
		return "Rejected"
	case AlterStale:
		return "Stale"
	}
	return "Retry"
}

// AlterPartitionResult is the controller's answer for one item.
type AlterPartitionResult struct {
	Outcome        AlterOutcome
	ErrorCode      int16 // the Kafka error code, for logs
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// AlterPartitionTransport sends ISR changes to the active controller
// (AlterPartition, key 56). results[i] answers items[i]. An error means no
// answer (the items are retried).
type AlterPartitionTransport interface {
	AlterPartition(ctx context.Context, brokerID int32, brokerEpoch int64, items []AlterPartitionItem) ([]AlterPartitionResult, error)
}

// followerState is what a leader knows of one follower (Kafka's ReplicaState).
//
// INVARIANTS: lastCaughtUpMs only grows while the leader epoch stays;
// endOffset is -1 until the follower fetched in this leader epoch.
type followerState struct {
	endOffset          int64 // the follower's log end offset: its last fetch offset
	startOffset        int64
	lastFetchLeaderEnd int64 // the leader's log end offset at the previous fetch
	lastFetchMs        int64
	lastCaughtUpMs     int64
	brokerEpoch        int64 // from its fetches (-1: an old Fetch version); valid when hasEpoch
	hasEpoch           bool
	// session is the time of the latest fetch of the fetch session this
	// follower's last read came from (FollowerFetch.SessionFetchMs); nil
	// when it came from no session.
	session *atomic.Int64
}

// followerMap is a leader's follower states by broker id: a slice, not a
// Go map, as a partition has a few replicas (a map of two followers was
// some 190 heap bytes per led partition, this 64: issue 17's memory per
// hosted partition). Order carries no meaning. A nil *followerMap has
// no follower (the partition does not lead).
//
// INVARIANTS: at most one entry per id; f is never nil.
type followerMap struct {
	entries []followerEntry
}

type followerEntry struct {
	id int32
	f  *followerState
}

// get is follower id's state, nil when it has none.
func (m *followerMap) get(id int32) *followerState {
	for _, e := range m.all() {
		if e.id == id {
			return e.f
		}
	}
	return nil
}

// all are the followers (none for a nil m).
func (m *followerMap) all() []followerEntry {
	if m == nil {
		return nil
	}
	return m.entries
}

// newFollowerState is a follower's state when this broker starts leading
// (Kafka's Replica.resetReplicaState for a new leader): an ISR member counts
// as caught up now, so it has replica.lag.time.max.ms to fetch.
func newFollowerState(inISR bool, nowMs int64) *followerState {
	f := &followerState{endOffset: -1, startOffset: -1, lastFetchLeaderEnd: -1}
	if inISR {
		f.lastCaughtUpMs = nowMs
	}
	return f
}

// updateFetch records a fetch at fetchOffset (Kafka's
// Replica.updateFetchStateOrThrow): the follower has caught up at this fetch
// when it asked for the leader's log end, and at its previous fetch when it
// now asks for at least what the leader's log end was then.
func (f *followerState) updateFetch(fetchOffset, startOffset, leaderEnd, nowMs, brokerEpoch int64) {
	switch {
	case fetchOffset >= leaderEnd:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, nowMs)
	case fetchOffset >= f.lastFetchLeaderEnd:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.endOffset, f.startOffset = fetchOffset, startOffset
	f.lastFetchLeaderEnd = max(leaderEnd, f.lastFetchLeaderEnd)
	f.lastFetchMs = nowMs
	f.brokerEpoch, f.hasEpoch = brokerEpoch, true
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: at the leader's log end, or
// caught up within the last lagMs.
func (f *followerState) caughtUp(leaderEnd, nowMs, lagMs int64) bool {
	return f.endOffset == leaderEnd || nowMs-f.lastCaughtUpMs <= lagMs
}

// followersCaughtUpLocked records, before a leader append moves the log
// end, that the ISR followers holding the whole log were caught up at their
// fetch session's latest fetch; mu held. Kafka's leader learns this from
// each follower fetch, which names every partition of the session (at
// most replica.fetch.wait.max.ms apart) and sets lastCaughtUpTimeMs to the
// fetch's time when the follower is at the log end; a fetch session here
// reads an idle partition only when it changes (broker/fetch_sessions.go),
// so a follower's last read of a partition idle for longer than
// replica.lag.time.max.ms is old, and without this the first append after
// the idle spell would find the follower out of sync (lagging, last caught
// up long ago) and shrink the ISR before the follower could fetch the new
// batch. The time is the session's, not now: a follower whose session
// stopped fetching (a stuck or dead fetcher) is out of sync at the first
// append, as in Kafka, not only replica.lag.time.max.ms after it. A
// follower whose last read came from no session has none (its every
// fetch reads every partition, so its state is current).
func (p *Partition) followersCaughtUpLocked() {
	end := p.log.EndOffset()
	for _, id := range p.state.ISR {
		if f := p.followers.get(id); f != nil && f.endOffset == end && f.session != nil {
			f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.session.Load())
		}
	}
}

// hwReplica is one follower as the high watermark sees it.
type hwReplica struct {
	endOffset int64 // -1: unknown (no fetch in this leader epoch yet)
	// holds: in the maximal ISR, or caught up and eligible to join it (Kafka
	// waits for those so that a follower catching up is not outrun forever).
	holds bool
}

// highWatermarkCandidate is the smallest log end offset among the leader and
// the followers that hold the high watermark (Kafka's maybeIncrementLeaderHW).
// An unknown end offset (-1) holds it below any current value, so the caller
// keeps the old one.
func highWatermarkCandidate(leaderEnd int64, replicas []hwReplica) int64 {
	hw := leaderEnd
	for _, r := range replicas {
		if r.holds && r.endOffset < hw {
			hw = r.endOffset
		}
	}
	return hw
}

// pendingISR is an AlterPartition in flight (Kafka's PendingExpandIsr /
// PendingShrinkIsr).
//
// INVARIANTS: maximal is the committed ISR plus the replica being added
// (expand) or the committed ISR itself (shrink): never smaller than either.
type pendingISR struct {
	item    *AlterPartitionItem
	maximal []int32
}

// maximalISRLocked is the ISR the high watermark and acks=-1 use: the
// committed one, or with an expansion in flight, the committed one plus the
// new member (KIP-497: a bigger ISR only makes the HW stricter). mu held.
func (p *Partition) maximalISRLocked() []int32 {
	if p.pending != nil {
		return p.pending.maximal
	}
	return p.state.ISR
}

// eligible reports whether follower id may be in the ISR: its broker is
// registered, unfenced and not shutting down, and the broker epoch of its
// fetches (if it sent one) is the registered one (KIP-903). mu held.
func (p *Partition) eligibleLocked(id int32, f *followerState) bool {
	view := p.hooks.brokers()
	if view == nil || f == nil || !f.hasEpoch {
		return false
	}
	epoch, ok, registered := view.ISRBroker(id)
	return registered && ok && (f.brokerEpoch == -1 || f.brokerEpoch == epoch)
}

// maybeAdvanceHW moves the leader's high watermark to the smallest log end
// offset among itself and the followers that hold it; mu held. It reports
// whether it moved. Nothing moves while the committed ISR is smaller than
// min.insync.replicas (at most the replicas there are), as Kafka 3.7+'s
// maybeIncrementLeaderHW (KAFKA-15583): a record acknowledged to acks=1 or
// read by a consumer then is one that fewer than min.insync.replicas brokers
// hold, and an unclean or even clean election could lose it.
func (p *Partition) maybeAdvanceHW(nowMs int64) bool {
	if !p.isLeader() || p.underMinISRLocked() {
		return false
	}
	leaderEnd := p.log.EndOffset()
	maximal := p.maximalISRLocked()
	lagMs := p.hooks.lagMs()
	followers := p.followers.all()
	views := make([]hwReplica, 0, len(followers))
	for _, e := range followers {
		holds := slices.Contains(maximal, e.id) ||
			e.f.caughtUp(leaderEnd, nowMs, lagMs) && p.eligibleLocked(e.id, e.f)
		views = append(views, hwReplica{endOffset: e.f.endOffset, holds: holds})
	}
	// A member of the ISR that is not among the assigned replicas (metadata
	// in flux) has no state: it holds the high watermark where it is.
	for _, id := range maximal {
		if p.followers.get(id) == nil && id != p.brokerID {
			views = append(views, hwReplica{endOffset: -1, holds: true})
		}
	}
	hw := highWatermarkCandidate(leaderEnd, views)
	if hw <= p.hw.Load() {
		return false
	}
	p.hw.Store(hw)
	return true
}

// underMinISRLocked is Kafka's isUnderMinIsr: the committed ISR (not the
// maximal one) is below the topic's effective min.insync.replicas; mu held.
func (p *Partition) underMinISRLocked() bool {
	return len(p.state.ISR) < p.effectiveMinISRLocked(p.cfg.Load().MinInsyncReplicas)
}

// resetFollowersLocked gives the leader fresh follower states for a new
// leader epoch (Kafka's makeLeader): followers it already tracked keep their
// end offsets when this broker led before, so the HW need not wait for a
// fetch; mu held.
func (p *Partition) resetFollowersLocked(wasLeader bool, nowMs int64) {
	old := p.followers
	m := &followerMap{entries: make([]followerEntry, 0, max(len(p.state.Replicas)-1, 0))}
	for _, id := range p.state.Replicas {
		if id == p.brokerID {
			continue
		}
		inISR := slices.Contains(p.state.ISR, id)
		f := newFollowerState(inISR, nowMs)
		if o := old.get(id); wasLeader && o != nil {
			*f = *o
			f.lastFetchLeaderEnd = p.log.EndOffset()
			if inISR {
				f.lastFetchMs, f.lastCaughtUpMs = nowMs, nowMs
			} else {
				f.lastFetchMs, f.lastCaughtUpMs = 0, 0
			}
		}
		m.entries = append(m.entries, followerEntry{id: id, f: f})
	}
	p.followers = m
}

// followerInSyncLocked is Kafka's isFollowerInSync: the follower has
// everything below the high watermark and has reached this leader epoch's
// start (else it might lead without committed data between the HW and our
// log end). mu held.
func (p *Partition) followerInSyncLocked(f *followerState) bool {
	return f.endOffset >= p.hw.Load() && p.epochStart >= 0 && f.endOffset >= p.epochStart
}

// maybeExpandISRLocked proposes adding follower id to the ISR when it is in
// sync and eligible and no change is in flight; mu held.
func (p *Partition) maybeExpandISRLocked(id int32, f *followerState) *AlterPartitionItem {
	if p.pending != nil || slices.Contains(p.state.ISR, id) || !p.eligibleLocked(id, f) || !p.followerInSyncLocked(f) {
		return nil
	}
	isr := append(slices.Clone(p.state.ISR), id)
	return p.proposeISRLocked(isr, isr)
}

// outOfSyncLocked lists the ISR followers that have not caught up within
// lagMs (Kafka's getOutOfSyncReplicas); none while a change is in flight. mu held.
func (p *Partition) outOfSyncLocked(nowMs, lagMs int64) []int32 {
	if p.pending != nil {
		return nil
	}
	leaderEnd := p.log.EndOffset()
	var out []int32
	for _, id := range p.state.ISR {
		if id == p.brokerID {
			continue
		}
		if f := p.followers.get(id); f == nil || !f.caughtUp(leaderEnd, nowMs, lagMs) {
			out = append(out, id)
		}
	}
	return out
}

// maybeShrinkISR proposes removing the followers that fell out of sync, as
// Kafka's maybeShrinkIsr run every replica.lag.time.max.ms / 2. The maximal
// ISR stays the committed one until the controller answers: a shrink that
// fails must not have advanced the high watermark.
func (p *Partition) maybeShrinkISR(nowMs int64) *AlterPartitionItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader() {
		return nil
	}
	out := p.outOfSyncLocked(nowMs, p.hooks.lagMs())
	if len(out) == 0 {
		return nil
	}
	isr := slices.DeleteFunc(slices.Clone(p.state.ISR), func(id int32) bool { return slices.Contains(out, id) })
	p.hooks.log.Info("shrinking ISR", zap.Stringer("partition", p.tp), zap.Int32s("isr", p.state.ISR),
		zap.Int32s("newIsr", isr), zap.Int64("highWatermark", p.hw.Load()), zap.Int64("logEndOffset", p.log.EndOffset()))
	return p.proposeISRLocked(isr, slices.Clone(p.state.ISR))
}

// proposeISRLocked records an AlterPartition for isr as in flight; mu held.
func (p *Partition) proposeISRLocked(isr, maximal []int32) *AlterPartitionItem {
	item := &AlterPartitionItem{TopicPartition: p.tp, TopicID: p.state.TopicID,
		LeaderEpoch: p.state.LeaderEpoch, PartitionEpoch: p.state.PartitionEpoch}
	for _, id := range isr {
		m := ISRMember{BrokerID: id, BrokerEpoch: -1}
		if id == p.brokerID {
			m.BrokerEpoch = p.hooks.ownBrokerEpoch()
		} else if f := p.followers.get(id); f != nil && f.hasEpoch {
			m.BrokerEpoch = f.brokerEpoch
		}
		item.NewISR = append(item.NewISR, m)
	}
	p.pending = &pendingISR{item: item, maximal: maximal}
	return item
}

// handleAlterResult applies the controller's answer to item (Kafka's
// handleAlterPartitionUpdate / handleAlterPartitionError). It reports whether
// the item must be sent again.
func (p *Partition) handleAlterResult(item *AlterPartitionItem, res AlterPartitionResult, nowMs int64) (retry bool) {
	p.mu.Lock()
	moved := false
	switch {
	case p.pending == nil || p.pending.item != item:
		// Metadata replaced the state first (or a newer change is in
		// flight): this answer is out of date.
	case res.Outcome == AlterCommitted:
		if res.LeaderEpoch == p.state.LeaderEpoch && res.PartitionEpoch >= p.state.PartitionEpoch {
			p.state.ISR, p.state.PartitionEpoch = slices.Clone(res.ISR), res.PartitionEpoch
			p.pending = nil
			p.hooks.log.Info("ISR updated", zap.Stringer("partition", p.tp), zap.Int32s("isr", res.ISR),
				zap.Int32("partitionEpoch", res.PartitionEpoch))
			moved = p.maybeAdvanceHW(nowMs)
		}
	case res.Outcome == AlterRejected:
		p.pending = nil
		p.hooks.log.Info("controller rejected ISR change", zap.Stringer("partition", p.tp), zap.Int16("errorCode", res.ErrorCode))
	case res.Outcome == AlterRetry:
		retry = true
	}
	p.mu.Unlock()
	if moved {
		p.notify()
	}
	return retry
}

// String is for logs.
func (it *AlterPartitionItem) String() string {
	return fmt.Sprintf("%s leaderEpoch %d partitionEpoch %d isr %v", it.TopicPartition, it.LeaderEpoch, it.PartitionEpoch, it.NewISR)
}
