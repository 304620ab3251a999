package group

import (
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/storage"
)

// runTimersLocked runs one group's deadlines at nowMs (Kafka's delayed
// operations: DelayedHeartbeat, DelayedJoin, InitialDelayedJoin,
// DelayedSync and the pending-member expiry); mu held.
func (c *Coordinator) runTimersLocked(sh *shard, g *group, nowMs int64) {
	for id, deadline := range g.pending {
		if nowMs >= deadline {
			delete(g.pending, id)
			c.maybeCompleteJoinLocked(g, nowMs)
		}
	}
	for id, m := range g.members { // removeMemberLocked may delete others: check each is still there
		if g.members[id] != m || m.joinWait != nil || m.syncWait != nil || nowMs < m.heartbeatDeadline {
			continue // a parked join or sync keeps the session alive
		}
		c.log.Info("group member session expired", zap.String("group", g.id), zap.String("member", id))
		c.removeMemberLocked(g, m, nowMs)
	}
	if g.state == PreparingRebalance && g.joinDeadline > 0 && nowMs >= g.joinDeadline {
		if g.initialDelay && g.newMemberJoined && g.initialRemaining > 0 {
			// InitialDelayedJoin: new members came during the delay;
			// wait another delay (at most what the rebalance timeout
			// leaves) for more.
			delayMs := int64(c.cfg.InitialRebalanceDelayMs)
			g.newMemberJoined = false
			g.joinDeadline = nowMs + min(delayMs, g.initialRemaining)
			g.initialRemaining = max(g.initialRemaining-delayMs, 0)
		} else {
			c.completeJoinLocked(g, nowMs)
		}
	}
	if (g.state == CompletingRebalance || g.state == Stable) && len(g.pendingSync) > 0 && g.syncDeadline > 0 && nowMs >= g.syncDeadline {
		// DelayedSync: members that joined but never synced are removed.
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				c.forgetMemberLocked(g, m)
			}
		}
		g.pendingSync = map[string]bool{}
		c.prepareRebalanceLocked(g, nowMs, "members did not sync before the rebalance timeout")
	}
	if g.state == Empty && len(g.members) == 0 && len(g.offsets) == 0 && len(g.pending) == 0 && len(g.pendingTxn) == 0 && g.generation == 0 {
		delete(sh.groups, g.id) // never used: nothing was written for it
	}
}

// expireOffsetsLocked drops offsets past offsets.retention.minutes (Kafka
// 2.1+, KIP-211): an Empty group's offsets once it has been empty that
// long; a consumer group's offsets of topics no member subscribes to once
// they were committed that long ago. A group left Empty without offsets is
// deleted. Tombstones are written for everything removed; mu held.
func (c *Coordinator) expireOffsetsLocked(nowMs int64) {
	retention := c.cfg.OffsetsRetentionMs
	for _, sh := range c.shards {
		if !sh.loaded {
			continue
		}
		for _, g := range sh.groups {
			var recs []storage.Record
			subscribed, known := g.subscribedTopics()
			for tp, o := range g.offsets {
				var expired bool
				switch {
				case g.state == Empty:
					expired = nowMs-max(g.stateSinceMs, o.commitMs) >= retention
				case known && !subscribed[tp.Topic]:
					expired = nowMs-o.commitMs >= retention
				}
				if expired && !g.hasPending(tp) { // a pending one is about to replace it
					delete(g.offsets, tp)
					recs = append(recs, offsetCommitRecord(g.id, tp, nil))
				}
			}
			if g.state == Empty && len(g.offsets) == 0 && len(g.members) == 0 && len(g.pending) == 0 && len(g.pendingTxn) == 0 {
				recs = append(recs, groupTombstone(g.id))
				g.transition(Dead, nowMs)
				delete(sh.groups, g.id)
			}
			if len(recs) > 0 {
				c.writeBackgroundLocked(sh, recs)
			}
		}
	}
}
