package legacyzk

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
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
// whose write lost on BADVERSION or NODEEXISTS are re-read and decided
// again. Partitions in unread are not read the first time: the caller
// knows they have no state znode (Kafka's NewPartition, whose state
// initializeLeaderAndIsrForPartitions creates without reading it). The
// view is updated with what was written. It returns the partitions
// changed and which of them were created.
func (c *controller) changeStates(tps []TopicPartition, unread map[TopicPartition]bool, decide decideFunc) (changed, created map[TopicPartition]bool, err error) {
	changed, created = map[TopicPartition]bool{}, map[TopicPartition]bool{}
	for attempt := 0; len(tps) > 0 && attempt < maxStateRetries; attempt++ {
		read := tps
		if attempt == 0 && len(unread) > 0 {
			read = slices.DeleteFunc(slices.Clone(tps), func(tp TopicPartition) bool { return unread[tp] })
		}
		cur, err := c.readStates(read)
		if err != nil {
			return changed, created, err
		}
		var retry []TopicPartition
		var plan, fresh []TopicPartition
		nexts := map[TopicPartition]LeaderIsr{}
		for _, tp := range tps {
			s, exists := cur[tp]
			if exists {
				c.view.States[tp] = s
				if s.ControllerEpoch > c.epoch {
					// As Kafka's partition and replica state machines: the
					// znode was written by a controller elected after this
					// one (this one went through a soft failure), so this
					// change is aborted, not written over it.
					c.log.Error("aborted a partition state change: the state znode was written by a controller with a newer epoch",
						zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition),
						zap.Int32("znodeControllerEpoch", s.ControllerEpoch), zap.Int32("controllerEpoch", c.epoch))
					continue
				}
			}
			next, write := decide(tp, s, exists)
			if !write {
				continue
			}
			nexts[tp] = next
			plan = append(plan, tp)
			if !exists {
				fresh = append(fresh, tp)
			}
		}
		if len(fresh) > 0 {
			gone, err := c.createPartitionParents(fresh)
			if err != nil {
				return changed, created, err
			}
			plan = slices.DeleteFunc(plan, func(tp TopicPartition) bool { return gone[tp] })
		}
		batches := make([][]Op, len(plan))
		for i, tp := range plan {
			s, exists := cur[tp]
			batches[i] = c.fenced(stateOp(tp, nexts[tp], exists, s.ZkVersion))
		}
		start := time.Now()
		var res [][]OpResult
		var errs []error
		lost := len(plan) > 0 && c.faults.fire(&c.faults.ZkWriteLost)
		if lost {
			res, errs = c.pretendWritten(plan, batches, cur)
		} else {
			res, errs = multiAll(c.ctx, c.store, batches, c.cfg.Zk.MaxInFlightRequests)
		}
		c.stats.observeStateChanges(len(batches), time.Since(start))
		ackLost := !lost && len(plan) > 0 && c.faults.fire(&c.faults.ZkWriteAckLost)
		for i, tp := range plan {
			switch {
			case errs[i] == nil && ackLost:
				c.log.Info("fault: a partition state write landed in ZooKeeper but the controller takes it as failed",
					zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition))
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

// pretendWritten is the ZkWriteLost fault: nothing is sent, and every
// write of plan is answered as applied at the next znode version.
func (c *controller) pretendWritten(plan []TopicPartition, batches [][]Op, cur map[TopicPartition]LeaderIsr) ([][]OpResult, []error) {
	res, errs := make([][]OpResult, len(batches)), make([]error, len(batches))
	for i, tp := range plan {
		c.log.Info("fault: a partition state write never reached ZooKeeper but the controller takes it as applied",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition))
		version := int32(0)
		if s, ok := cur[tp]; ok {
			version = s.ZkVersion + 1
		}
		res[i] = []OpResult{{}, {Stat: Stat{Version: version}}}
	}
	return res, errs
}

// createPartitionParents is the first two steps of Kafka's
// createTopicPartitionStatesRaw for partitions that have no state znode
// yet: /brokers/topics/<t>/partitions once per topic, then
// /brokers/topics/<t>/partitions/<p> per partition, each a create fenced by
// the controller-epoch check and each step pipelined (max in flight), so a
// new partition costs two pipelined round trips before its state znode
// instead of a serial create per path level. An existing znode is fine (a
// partition added to an existing topic, or a retry); a partition whose
// topic znode is gone (deleted meanwhile) is returned in gone and not
// written.
func (c *controller) createPartitionParents(tps []TopicPartition) (gone map[TopicPartition]bool, err error) {
	gone = map[TopicPartition]bool{}
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	create := func(paths []string) ([]error, error) {
		batches := make([][]Op, len(paths))
		for i, p := range paths {
			batches[i] = c.fenced(CreateOp{Path: p, Mode: Persistent})
		}
		_, errs := multiAll(c.ctx, c.store, batches, c.cfg.Zk.MaxInFlightRequests)
		for i, e := range errs {
			switch {
			case e == nil, errors.Is(e, ErrNodeExists):
				errs[i] = nil
			case epochCheckFailed(e):
				return nil, fencedErr(e)
			case errors.Is(e, ErrNoNode):
			default:
				return nil, e
			}
		}
		return errs, nil
	}
	paths := make([]string, len(topics))
	for i, t := range topics {
		paths[i] = PartitionsPath(t)
	}
	errs, err := create(paths)
	if err != nil {
		return nil, err
	}
	missing := map[string]bool{}
	for i, e := range errs {
		if e != nil {
			missing[topics[i]] = true
		}
	}
	var live []TopicPartition
	for _, tp := range tps {
		if missing[tp.Topic] {
			gone[tp] = true
		} else {
			live = append(live, tp)
		}
	}
	paths = make([]string, len(live))
	for i, tp := range live {
		paths[i] = PartitionPath(tp.Topic, tp.Partition)
	}
	if errs, err = create(paths); err != nil {
		return nil, err
	}
	for i, e := range errs {
		if e != nil {
			gone[live[i]] = true
		}
	}
	return gone, nil
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
// LeaderAndIsr to the live replicas and UpdateMetadata to everyone. It
// scans every partition, so it runs where Kafka's controller looks at all
// of them (failover, broker changes), not on topic or partition creation
// (onNewPartitionCreation).
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
	return c.onlinePartitions(tps)
}

// onNewPartitionCreation is KafkaController.onNewPartitionCreation: the
// partitions just added (new topics, or CreatePartitions) go
// NewPartition -> OnlinePartition, and only they are read, written and
// pushed: LeaderAndIsr to their live replicas and UpdateMetadata carrying
// only them (sendUpdateMetadataRequest(..., newPartitions)). The partitions
// that exist already are not looked at, so a create costs what it creates,
// whatever the cluster holds.
func (c *controller) onNewPartitionCreation(tps []TopicPartition) error {
	tps = slices.DeleteFunc(tps, func(tp TopicPartition) bool { return c.view.Deleting[tp.Topic] })
	return c.onlinePartitions(tps)
}

// onlinePartitions moves tps to OnlinePartition (decideOnline from their
// re-read state znodes) and pushes the partitions it changed. A partition
// the controller holds no state for is Kafka's NewPartition: its state
// znode is created without being read first (a create that finds it
// there is re-read and decided again).
func (c *controller) onlinePartitions(tps []TopicPartition) error {
	slices.SortFunc(tps, compareTP)
	if len(tps) == 0 {
		return nil
	}
	unread := map[TopicPartition]bool{}
	for _, tp := range tps {
		if _, known := c.view.States[tp]; !known {
			unread[tp] = true
		}
	}
	changed, created, err := c.changeStates(tps, unread, c.decideOnline)
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
