package legacyzk

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// onControllerFailover is the 3.3 failover sequence (zk-era.md section 2):
// arm the child watches, read every broker, topic and partition state back
// from ZooKeeper (one getData per znode, pipelined), start a sender per
// live broker, then push UpdateMetadata (brokers only), LeaderAndIsr for
// every replica plus UpdateMetadata for every partition, and finally elect
// leaders for offline or brand-new partitions. Nothing else is handled
// until it returns: the event loop is busy.
func (c *controller) onControllerFailover() error {
	start := time.Now()
	c.active = true
	c.activeEpoch.Store(c.epoch)
	reads, err := c.clearNotifications()
	if err != nil {
		return err
	}
	n, err := c.initializeContext()
	reads += n
	if err != nil {
		return err
	}
	timing := FailoverTiming{ControllerEpoch: c.epoch, ZkReads: reads, ZkReadTime: time.Since(start),
		Partitions: len(c.view.States), Brokers: len(c.view.Live)}
	c.chans = &channelManager{client: c.client, listener: c.cfg.ListenerName, faults: c.faults, stats: c.stats,
		log: c.log, onResp: c.onPushResponse, senders: map[int32]*sender{}}
	for _, id := range sortedKeys(c.view.Live) {
		c.chans.addBroker(c.view.Live[id])
	}

	brokersOnly := NewBatch()
	brokersOnly.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live))
	full := NewBatch()
	for _, tp := range sortedTPs(c.view.States) {
		c.addOnlineReplicas(full, tp, false)
	}
	pushes := append(Translate(&c.view, brokersOnly, c.id, c.epoch), Translate(&c.view, full, c.id, c.epoch)...)
	timing.Pushes = len(pushes)
	idx := c.stats.addFailover(timing)
	tr := &pushTracker{start: time.Now(), done: func(d time.Duration) { c.stats.setFailoverPushTime(idx, d) }}
	tr.remaining.Store(int64(len(pushes)))
	if err := c.sendPushes(pushes, tr); err != nil {
		return err
	}

	electStart := time.Now()
	err = c.electOfflineAndNew()
	c.stats.setFailoverElectionTime(idx, time.Since(electStart))
	if err != nil {
		return err
	}
	return c.processTopicDeletion()
}

// clearNotifications is failover steps 2-3: arm the watches on the
// notification parents and the admin znodes (2 getChildren, 2 exists) and
// delete pending ISR-change and log-dir notifications, fenced; nothing
// here acts on them (leader-initiated ISR changes are not emulated).
func (c *controller) clearNotifications() (int, error) {
	reads := 0
	for _, p := range []string{ReassignPartitionsPath, PreferredElectionPath} {
		reads++
		if _, _, err := c.store.Exists(c.ctx, p, true); err != nil {
			return reads, err
		}
	}
	for _, parent := range []string{LogDirEventNotifyPath, IsrChangeNotifyPath} {
		kids, err := c.store.Children(c.ctx, parent, true)
		reads++
		if err != nil {
			return reads, err
		}
		for _, k := range kids {
			if err := c.fencedDelete(parent + "/" + k); err != nil && !errors.Is(err, ErrNoNode) {
				return reads, err
			}
		}
	}
	return reads, nil
}

// initializeContext reads the cluster back; it returns how many reads it
// made.
func (c *controller) initializeContext() (int, error) {
	c.view = ClusterView{Live: map[int32]BrokerInfo{}, ShuttingDown: map[int32]bool{},
		Topics: map[string]TopicAssignment{}, States: map[TopicPartition]LeaderIsr{},
		Deleting: map[string]bool{}, Listener: c.cfg.ListenerName}
	live, reads, err := c.readBrokers()
	if err != nil {
		return reads, err
	}
	c.view.Live = live
	names, err := c.store.Children(c.ctx, BrokerTopicsPath, true)
	reads++
	if err != nil {
		return reads, err
	}
	topics, err := c.readTopics(names)
	reads += len(names)
	if err != nil {
		return reads, err
	}
	if err := c.assignMissingTopicIDs(topics); err != nil {
		return reads, err
	}
	c.view.Topics = topics
	for _, id := range sortedKeys(live) {
		c.rearm(BrokerPath(id)) // per-broker data watch, one at a time as Kafka does
		reads++
	}
	var tps []TopicPartition
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		for _, p := range sortedPartitions(topics[t].Partitions) {
			tps = append(tps, TopicPartition{t, p})
		}
	}
	states, err := c.readStates(tps)
	reads += len(tps)
	c.view.States = states
	return reads, err
}

// assignMissingTopicIDs gives topics created by pre-2.8 tools an id, as
// the 2.8+ controller does at failover (KIP-516): a fenced conditional
// setData of the topic znode at version 3.
func (c *controller) assignMissingTopicIDs(topics map[string]TopicAssignment) error {
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		a := topics[name]
		if !a.ID.IsZero() {
			continue
		}
		_, _ = rand.Read(a.ID[:])
		_, err := c.store.Multi(c.ctx, c.fenced(SetDataOp{Path: TopicPath(name), Data: EncodeTopic(a), Version: a.zkVersion})...)
		if err != nil {
			return fencedErr(err)
		}
		topics[name] = a
	}
	return nil
}

// readBrokers is getChildren(/brokers/ids) + one getData per broker; the
// czxid of each registration is its broker epoch.
func (c *controller) readBrokers() (map[int32]BrokerInfo, int, error) {
	kids, err := c.store.Children(c.ctx, BrokerIDsPath, true)
	if err != nil {
		return nil, 1, err
	}
	paths := make([]string, len(kids))
	for i, k := range kids {
		paths[i] = BrokerIDsPath + "/" + k
	}
	res := getAll(c.ctx, c.store, paths, false, c.cfg.Zk.MaxInFlightRequests)
	live := make(map[int32]BrokerInfo, len(kids))
	for i, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || res[i].err != nil {
			continue // gone between the two reads (KAFKA-3085): not live
		}
		b, err := DecodeBroker(int32(id), res[i].data)
		if err != nil {
			c.log.Warn("skipping broker", zap.Error(err))
			continue
		}
		b.Epoch = res[i].stat.Czxid
		live[b.ID] = b
	}
	return live, 1 + len(kids), nil
}

// readTopics reads each topic znode, arming its data watch.
func (c *controller) readTopics(names []string) (map[string]TopicAssignment, error) {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = TopicPath(n)
	}
	res := getAll(c.ctx, c.store, paths, true, c.cfg.Zk.MaxInFlightRequests)
	out := make(map[string]TopicAssignment, len(names))
	for i, n := range names {
		if errors.Is(res[i].err, ErrNoNode) {
			continue
		}
		if res[i].err != nil {
			return nil, res[i].err
		}
		a, err := DecodeTopic(n, res[i].data)
		if err != nil {
			return nil, err
		}
		a.zkVersion = res[i].stat.Version
		out[n] = a
	}
	return out, nil
}

// readStates reads partition state znodes; a missing one is simply absent
// from the result (a new partition).
func (c *controller) readStates(tps []TopicPartition) (map[TopicPartition]LeaderIsr, error) {
	paths := make([]string, len(tps))
	for i, tp := range tps {
		paths[i] = PartitionStatePath(tp.Topic, tp.Partition)
	}
	res := getAll(c.ctx, c.store, paths, false, c.cfg.Zk.MaxInFlightRequests)
	out := make(map[TopicPartition]LeaderIsr, len(tps))
	for i, tp := range tps {
		if errors.Is(res[i].err, ErrNoNode) {
			continue
		}
		if res[i].err != nil {
			return nil, fmt.Errorf("read %s: %w", paths[i], res[i].err)
		}
		s, err := DecodeState(res[i].data, res[i].stat.Version)
		if err != nil {
			return nil, err
		}
		out[tp] = s
	}
	return out, nil
}

// addOnlineReplicas queues LeaderAndIsr for tp to its live replicas
// (OnlineReplica) and UpdateMetadata for tp to everybody.
func (c *controller) addOnlineReplicas(b *Batch, tp TopicPartition, isNew bool) {
	replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
	b.AddLeaderAndIsr(&c.view, c.liveReplicas(replicas), tp, isNew)
}

func (c *controller) liveReplicas(replicas []int32) []int32 {
	return filter(replicas, c.alive)
}

// eligible is isReplicaOnline without shutting-down brokers: who may be
// elected leader.
func (c *controller) eligible(b int32) bool { return c.alive(b) && !c.view.ShuttingDown[b] }

func (c *controller) alive(b int32) bool {
	_, ok := c.view.Live[b]
	return ok
}

// sendPushes hands requests to the senders, unless a fault intervenes:
// CrashAfterZkWrite kills the node instead, PauseBeforePush queues them
// behind frozen senders and freezes the event loop until Resume.
func (c *controller) sendPushes(pushes []Push, tr *pushTracker) error {
	if c.faults.fire(&c.faults.CrashAfterZkWrite) {
		c.log.Info("fault: crashing after the ZooKeeper write, before the push", zap.Int("dropped", len(pushes)))
		c.crash()
		return ErrCrashed
	}
	if c.faults.fire(&c.faults.PauseBeforePush) {
		resume := c.faults.pause()
		c.chans.send(pushes, tr)
		c.log.Info("fault: paused before push (zombie)", zap.Int("queued", len(pushes)))
		select {
		case <-resume:
		case <-c.ctx.Done():
			return ErrClosed
		}
		// The zombie wakes up with its requests already on their way: let
		// the senders deliver them before the loop can notice the lost
		// session (which would drop the queues). In Kafka this is a race
		// between the send threads and the event thread; here the zombie
		// always wins it, so the fencing is what stops its pushes.
		c.chans.drain(c.ctx, zombieDrainTimeout)
		return nil
	}
	c.chans.send(pushes, tr)
	return nil
}

// zombieDrainTimeout bounds how long a resumed zombie lets its senders
// deliver what they hold.
const zombieDrainTimeout = 2 * time.Second

// crash is CrashAfterZkWrite: drop every queued push and stop the node;
// the broker keeps the session open for CrashSessionLingerMs, as ZooKeeper
// keeps a dead process's session until it times out.
func (c *controller) crash() {
	c.crashed.Store(true)
	c.resign()
	if c.onCrash != nil {
		c.onCrash()
	}
}
