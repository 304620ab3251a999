package legacyzk

import (
	"errors"
	"slices"
	"time"
)

// decideFunc computes a partition's next state from its current one
// (exists=false: no state znode yet). write=false leaves it alone.
type decideFunc func(tp TopicPartition, cur LeaderIsr, exists bool) (next LeaderIsr, write bool)

// maxStateRetries bounds BADVERSION retries of one state change; Kafka
// retries until done, but a lost race twice in a row means another writer
// is active, which only a fenced controller would see.
const maxStateRetries = 5

// changeStates is the partition state machine's write path: re-read the
// state znodes of tps (pipelined getData), decide, and write each change
// as a fenced conditional Multi (pipelined, max in flight); partitions
// whose write lost on BADVERSION are re-read and decided again. The view
// is updated with what was written. It returns the partitions changed and
// which of them were created.
func (c *controller) changeStates(tps []TopicPartition, decide decideFunc) (changed, created map[TopicPartition]bool, err error) {
	changed, created = map[TopicPartition]bool{}, map[TopicPartition]bool{}
	for attempt := 0; len(tps) > 0 && attempt < maxStateRetries; attempt++ {
		cur, err := c.readStates(tps)
		if err != nil {
			return changed, created, err
		}
		var retry []TopicPartition
		var plan []TopicPartition
		var batches [][]Op
		nexts := map[TopicPartition]LeaderIsr{}
		for _, tp := range tps {
			s, exists := cur[tp]
			if exists {
				c.view.States[tp] = s
			}
			next, write := decide(tp, s, exists)
			if !write {
				continue
			}
			if !exists {
				if err := ensurePath(c.ctx, c.store, PartitionPath(tp.Topic, tp.Partition)); err != nil {
					return changed, created, err
				}
			}
			nexts[tp] = next
			plan = append(plan, tp)
			batches = append(batches, c.fenced(stateOp(tp, next, exists, s.ZkVersion)))
		}
		start := time.Now()
		res, errs := multiAll(c.ctx, c.store, batches, c.cfg.Zk.MaxInFlightRequests)
		c.stats.observeStateChanges(len(batches), time.Since(start))
		for i, tp := range plan {
			switch {
			case errs[i] == nil:
				next := nexts[tp]
				next.ZkVersion = res[i][1].Stat.Version
				c.view.States[tp] = next
				changed[tp] = true
				if _, existed := cur[tp]; !existed {
					created[tp] = true
				}
			case epochCheckFailed(errs[i]):
				return changed, created, fencedErr(errs[i])
			case errors.Is(errs[i], ErrBadVersion), errors.Is(errs[i], ErrNodeExists):
				retry = append(retry, tp)
			default:
				return changed, created, errs[i]
			}
		}
		tps = retry
	}
	return changed, created, nil
}

func stateOp(tp TopicPartition, next LeaderIsr, exists bool, version int32) Op {
	path := PartitionStatePath(tp.Topic, tp.Partition)
	if !exists {
		return CreateOp{Path: path, Data: EncodeState(next), Mode: Persistent}
	}
	return SetDataOp{Path: path, Data: EncodeState(next), Version: version}
}

// electOfflineAndNew is onReplicasBecomeOffline + the partition state
// machine's triggerOnlinePartitionStateChange in one pass: partitions with
// no state are initialised, partitions whose leader is not live get a new
// leader (offline election), and live-led partitions drop dead brokers
// from their ISR (OfflineReplica). Each change is one fenced write, then
// LeaderAndIsr to the live replicas and UpdateMetadata to everyone.
func (c *controller) electOfflineAndNew() error {
	var tps []TopicPartition
	for t, a := range c.view.Topics {
		if c.view.Deleting[t] {
			continue
		}
		for p := range a.Partitions {
			tp := TopicPartition{t, p}
			if c.needsStateChange(tp) {
				tps = append(tps, tp)
			}
		}
	}
	slices.SortFunc(tps, compareTP)
	if len(tps) == 0 {
		return nil
	}
	changed, created, err := c.changeStates(tps, c.decideOnline)
	if len(changed) > 0 {
		b := NewBatch()
		for _, tp := range sortedTPs(changed) {
			c.addOnlineReplicas(b, tp, created[tp])
		}
		if perr := c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil); perr != nil {
			return perr
		}
	}
	return err
}

func (c *controller) needsStateChange(tp TopicPartition) bool {
	s, ok := c.view.States[tp]
	if !ok || !c.alive(s.Leader) {
		return true
	}
	return slices.ContainsFunc(s.ISR, func(b int32) bool { return !c.alive(b) })
}

// decideOnline picks the transition for electOfflineAndNew from the state
// just re-read.
func (c *controller) decideOnline(tp TopicPartition, cur LeaderIsr, exists bool) (LeaderIsr, bool) {
	replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
	if !exists {
		return initialState(replicas, c.eligible, c.epoch)
	}
	if !c.alive(cur.Leader) {
		r := electOffline(replicas, cur, c.eligible, c.epoch)
		if !r.ok && cur.Leader == NoLeader {
			return cur, false // still no eligible leader: nothing to write
		}
		return r.state, true
	}
	next := cur
	for _, b := range cur.ISR {
		if !c.alive(b) {
			next = removeFromIsr(next, b, c.epoch)
		}
	}
	if next.LeaderEpoch == cur.LeaderEpoch {
		return cur, false
	}
	next.LeaderEpoch = cur.LeaderEpoch + 1 // one controller change, one bump
	return next, true
}
