package legacyzk

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// handleControlledShutdown answers ControlledShutdown (key 7) on the
// controller: the work runs on the controller's event loop, like Kafka's
// ControlledShutdown event.
func (b *Broker) handleControlledShutdown(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.ControlledShutdownRequest)
	resp := r.ResponseKind().(*kmsg.ControlledShutdownResponse)
	var remaining []TopicPartition
	var code int16
	err := b.ctrl.call(ctx, func() { remaining, code = b.ctrl.controlledShutdown(r.BrokerID, r.BrokerEpoch) })
	if err != nil {
		code = kerr.NotController.Code
	}
	resp.ErrorCode = code
	for _, tp := range remaining {
		resp.PartitionsRemaining = append(resp.PartitionsRemaining,
			kmsg.ControlledShutdownResponsePartitionsRemaining{Topic: tp.Topic, Partition: tp.Partition})
	}
	return resp, nil
}

// controlledShutdown is KafkaController.doControlledShutdown (1.1+), with
// the broker epoch checked for equality (not only staleness): the
// broker's led partitions move, as one batch, to the next in-sync live
// replica; it is removed from the ISR of the partitions it follows and
// told to stop them. It returns the partitions the broker still leads.
func (c *controller) controlledShutdown(id int32, brokerEpoch int64) ([]TopicPartition, int16) {
	if !c.active {
		return nil, kerr.NotController.Code
	}
	info, ok := c.view.Live[id]
	if !ok {
		return nil, kerr.BrokerNotAvailable.Code
	}
	if brokerEpoch != info.Epoch {
		// Kafka refuses only an older epoch and lets -1 (a broker older
		// than 2.2) through. kraftd serves v3 only, which every sender
		// fills with its epoch, and refuses any other: a forged request
		// for broker N must at least name N's current registration. A
		// real broker whose new registration the controller has not read
		// yet retries (controlled.shutdown.max.retries).
		return nil, kerr.StaleBrokerEpoch.Code
	}
	c.view.ShuttingDown[id] = true
	var led, followed []TopicPartition
	for _, tp := range sortedTPs(c.view.States) {
		replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
		st := c.view.States[tp]
		if len(replicas) <= 1 || !slices.Contains(replicas, id) || c.view.Deleting[tp.Topic] {
			continue
		}
		if st.Leader == id {
			led = append(led, tp)
		} else if st.Leader >= 0 {
			followed = append(followed, tp)
		}
	}
	if err := c.moveLeadersOff(id, led); err != nil {
		c.guard(err)
		return c.stillLed(id), codeFor(err)
	}
	if err := c.stopFollowers(id, followed); err != nil {
		c.guard(err)
		return c.stillLed(id), codeFor(err)
	}
	return c.stillLed(id), 0
}

func codeFor(err error) int16 {
	if err == nil {
		return 0
	}
	return kerr.NotController.Code
}

func (c *controller) stillLed(id int32) []TopicPartition {
	if !c.active {
		return nil
	}
	var out []TopicPartition
	for _, tp := range sortedTPs(c.view.States) {
		if c.view.States[tp].Leader == id && len(c.view.Topics[tp.Topic].Partitions[tp.Partition]) > 1 {
			out = append(out, tp)
		}
	}
	return out
}

// moveLeadersOff elects new leaders for the partitions led by a shutting
// down broker (controlledShutdownPartitionLeaderElection), then sends
// LeaderAndIsr to the remaining replicas and UpdateMetadata to all.
func (c *controller) moveLeadersOff(id int32, led []TopicPartition) error {
	if len(led) == 0 {
		return nil
	}
	shutting := func(b int32) bool { return c.view.ShuttingDown[b] }
	changed, _, err := c.changeStates(led, nil, func(tp TopicPartition, cur LeaderIsr, exists bool) (LeaderIsr, bool) {
		if !exists || cur.Leader != id {
			return cur, false
		}
		r := electControlledShutdown(c.view.Topics[tp.Topic].Partitions[tp.Partition], cur, c.alive, shutting, c.epoch)
		return r.state, r.ok
	})
	if err != nil {
		return err
	}
	b := NewBatch()
	for _, tp := range sortedTPs(changed) {
		replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
		b.AddLeaderAndIsr(&c.view, filter(c.liveReplicas(replicas), func(r int32) bool { return !shutting(r) }), tp, false)
	}
	return c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil)
}

// stopFollowers: StopReplica(delete=false) to the shutting-down broker,
// then OfflineReplica: drop it from each ISR (leader epoch + 1), fenced
// write, LeaderAndIsr to the other live replicas, UpdateMetadata to all.
func (c *controller) stopFollowers(id int32, followed []TopicPartition) error {
	if len(followed) == 0 {
		return nil
	}
	stop := NewBatch()
	for _, tp := range followed {
		stop.AddStopReplica(&c.view, id, tp, false)
	}
	if err := c.sendPushes(Translate(&c.view, stop, c.id, c.epoch), nil); err != nil {
		return err
	}
	changed, _, err := c.changeStates(followed, nil, func(tp TopicPartition, cur LeaderIsr, exists bool) (LeaderIsr, bool) {
		if !exists || !slices.Contains(cur.ISR, id) || cur.Leader == id {
			return cur, false
		}
		return removeFromIsr(cur, id, c.epoch), true
	})
	if err != nil {
		return err
	}
	b := NewBatch()
	for _, tp := range sortedTPs(changed) {
		replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
		b.AddLeaderAndIsr(&c.view, filter(c.liveReplicas(replicas), func(r int32) bool { return r != id }), tp, false)
	}
	return c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil)
}
