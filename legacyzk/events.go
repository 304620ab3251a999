package legacyzk

import (
	"errors"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"
)

// processBrokerChange handles the /brokers/ids child watch: re-read the
// registrations, diff against the live set (new, dead, and bounced: same
// id, larger czxid, KIP-380), tear down senders of dead and bounced
// brokers (their queues are lost), then onBrokerFailure and
// onBrokerStartup.
func (c *controller) processBrokerChange() error {
	cur, _, err := c.readBrokers()
	if err != nil {
		return err
	}
	var added, dead, bounced []int32
	for id, b := range cur {
		old, ok := c.view.Live[id]
		switch {
		case !ok:
			added = append(added, id)
		case b.Epoch > old.Epoch:
			bounced = append(bounced, id)
		}
	}
	for id := range c.view.Live {
		if _, ok := cur[id]; !ok {
			dead = append(dead, id)
		}
	}
	slices.Sort(added)
	slices.Sort(dead)
	slices.Sort(bounced)
	c.log.Info("broker change", zap.Int32s("new", added), zap.Int32s("dead", dead), zap.Int32s("bounced", bounced))
	for _, id := range append(slices.Clone(dead), bounced...) {
		c.chans.removeBroker(id)
		delete(c.view.ShuttingDown, id)
	}
	// As Kafka does, a bounced broker is first failed (so its leaderships
	// and ISR memberships move with fresh leader epochs) and only then
	// started again: the new incarnation must not keep old roles.
	c.view.Live = maps.Clone(cur)
	for _, id := range bounced {
		delete(c.view.Live, id)
	}
	if len(dead) > 0 || len(bounced) > 0 {
		if err := c.onBrokerFailure(); err != nil {
			return err
		}
	}
	c.view.Live = cur
	for _, id := range append(slices.Clone(added), bounced...) {
		c.chans.addBroker(cur[id])
		c.rearm(BrokerPath(id))
	}
	if len(added) > 0 || len(bounced) > 0 {
		return c.onBrokerStartup(append(added, bounced...))
	}
	return nil
}

// onBrokerFailure elects new leaders for partitions that lost theirs and
// shrinks ISRs; with nothing to change it still tells everybody the new
// broker list.
func (c *controller) onBrokerFailure() error {
	before := len(c.view.States)
	changedAny := false
	for tp := range c.view.States {
		if c.needsStateChange(tp) {
			changedAny = true
			break
		}
	}
	if !changedAny || before == 0 {
		b := NewBatch()
		b.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live))
		return c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil)
	}
	return c.electOfflineAndNew()
}

// onBrokerStartup: UpdateMetadata (brokers only) to the existing brokers,
// a full UpdateMetadata (every partition) to the new ones, LeaderAndIsr
// for every replica they host, then elect partitions that were offline.
func (c *controller) onBrokerStartup(newIDs []int32) error {
	isNew := map[int32]bool{}
	for _, id := range newIDs {
		isNew[id] = true
	}
	existing := filter(sortedKeys(c.view.Live), func(id int32) bool { return !isNew[id] })
	b1 := NewBatch()
	b1.AddUpdateMetadata(&c.view, existing)
	b2 := NewBatch()
	b2.AddUpdateMetadata(&c.view, newIDs, slices.Collect(maps.Keys(c.view.States))...)
	b3 := NewBatch()
	for _, tp := range sortedTPs(c.view.States) {
		replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
		targets := filter(replicas, func(r int32) bool { return isNew[r] })
		if len(targets) > 0 {
			b3.AddLeaderAndIsr(&c.view, targets, tp, false)
		}
	}
	var pushes []Push
	for _, b := range []*Batch{b1, b2, b3} {
		pushes = append(pushes, Translate(&c.view, b, c.id, c.epoch)...)
	}
	if err := c.sendPushes(pushes, nil); err != nil {
		return err
	}
	return c.electOfflineAndNew()
}

// processTopicChange handles the /brokers/topics child watch: new topics
// are read (arming their data watch) and their partitions initialised;
// topics whose znode vanished are forgotten.
func (c *controller) processTopicChange() error {
	names, err := c.store.Children(c.ctx, BrokerTopicsPath, true)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var added []string
	for _, n := range names {
		present[n] = true
		if _, ok := c.view.Topics[n]; !ok {
			added = append(added, n)
		}
	}
	for n := range c.view.Topics {
		if !present[n] {
			c.forgetTopic(n)
		}
	}
	if len(added) == 0 {
		return nil
	}
	topics, err := c.readTopics(added)
	if err != nil {
		return err
	}
	if err := c.assignMissingTopicIDs(topics); err != nil {
		return err
	}
	maps.Copy(c.view.Topics, topics)
	var fresh []TopicPartition
	for n, a := range topics {
		for p := range a.Partitions {
			fresh = append(fresh, TopicPartition{n, p})
		}
	}
	return c.onNewPartitionCreation(fresh)
}

// processPartitionModification handles a topic znode data watch: new
// partitions in the assignment are initialised (CreatePartitions).
func (c *controller) processPartitionModification(topic string) error {
	topics, err := c.readTopics([]string{topic})
	if err != nil {
		return err
	}
	a, ok := topics[topic]
	if !ok {
		return nil
	}
	old := c.view.Topics[topic]
	var added []TopicPartition
	for p, r := range a.Partitions {
		if _, had := old.Partitions[p]; had {
			a.Partitions[p] = old.Partitions[p] // reassignment is not emulated
		} else {
			added = append(added, TopicPartition{topic, p})
			c.log.Info("partition added", zap.String("topic", topic), zap.Int32("partition", p), zap.Int32s("replicas", r))
		}
	}
	c.view.Topics[topic] = a
	return c.onNewPartitionCreation(added)
}

func (c *controller) forgetTopic(name string) {
	for p := range c.view.Topics[name].Partitions {
		delete(c.view.States, TopicPartition{name, p})
	}
	delete(c.view.Topics, name)
	delete(c.view.Deleting, name)
}

// processTopicDeletion handles /admin/delete_topics children (the
// TopicDeletionManager, simplified): for each marked topic, brokers get
// UpdateMetadata with leader -2 (drop it from the cache) and its replicas
// StopReplica(delete=true); then the controller deletes the topic's
// znodes and the marker, fenced. Kafka waits for every StopReplica
// response before deleting the znodes; here the znodes go at once.
func (c *controller) processTopicDeletion() error {
	marked, err := c.store.Children(c.ctx, DeleteTopicsPath, true)
	if err != nil || len(marked) == 0 {
		return err
	}
	slices.Sort(marked)
	b := NewBatch()
	var doomed []string
	for _, t := range marked {
		a, ok := c.view.Topics[t]
		if !ok {
			continue
		}
		doomed = append(doomed, t)
		c.view.Deleting[t] = true
		for _, p := range sortedPartitions(a.Partitions) {
			tp := TopicPartition{t, p}
			if _, ok := c.view.States[tp]; !ok {
				c.view.States[tp] = LeaderIsr{Leader: NoLeader}
			}
			b.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live), tp)
			for _, r := range a.Partitions[p] {
				b.AddStopReplica(&c.view, r, tp, true)
			}
		}
	}
	if err := c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil); err != nil {
		return err
	}
	for _, t := range doomed {
		if err := c.deleteTopicZnodes(t); err != nil {
			return err
		}
		c.forgetTopic(t)
	}
	for _, t := range marked {
		if err := c.fencedDelete(DeleteTopicPath(t)); err != nil && !errors.Is(err, ErrNoNode) {
			return err
		}
	}
	return nil
}

// deleteTopicZnodes removes /brokers/topics/<t> with everything under it
// and /config/topics/<t>, each delete fenced.
func (c *controller) deleteTopicZnodes(t string) error {
	if err := c.deleteRecursive(TopicPath(t)); err != nil && !errors.Is(err, ErrNoNode) {
		return err
	}
	if err := c.fencedDelete(ConfigTopicsPath + "/" + t); err != nil && !errors.Is(err, ErrNoNode) {
		return err
	}
	return nil
}

func (c *controller) deleteRecursive(p string) error {
	kids, err := c.store.Children(c.ctx, p, false)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := c.deleteRecursive(p + "/" + k); err != nil && !errors.Is(err, ErrNoNode) {
			return err
		}
	}
	return c.fencedDelete(p)
}

func (c *controller) fencedDelete(p string) error {
	_, err := c.store.Multi(c.ctx, c.fenced(DeleteOp{Path: p, Version: -1})...)
	return fencedErr(err)
}

// processBrokerModification handles the data watch on /brokers/ids/<id>
// (endpoints changed, KAFKA-7235's BrokerModifications): re-read it, and if
// the endpoints or rack moved, tell everybody the new broker list.
func (c *controller) processBrokerModification(p string) error {
	id, err := strconv.ParseInt(p[len(BrokerIDsPath)+1:], 10, 32)
	if err != nil {
		return nil
	}
	data, st, err := c.store.Get(c.ctx, p, true)
	if errors.Is(err, ErrNoNode) {
		return nil // gone: the child watch handles it
	}
	if err != nil {
		return err
	}
	b, err := DecodeBroker(int32(id), data)
	if err != nil {
		return err
	}
	b.Epoch = st.Czxid
	old, ok := c.view.Live[b.ID]
	if !ok || old.Epoch != b.Epoch || (slices.Equal(old.Endpoints, b.Endpoints) && ptrEq(old.Rack, b.Rack)) {
		return nil
	}
	c.view.Live[b.ID] = b
	c.chans.removeBroker(b.ID)
	c.chans.addBroker(b)
	batch := NewBatch()
	batch.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live))
	return c.sendPushes(Translate(&c.view, batch, c.id, c.epoch), nil)
}

func ptrEq(a, b *string) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}
