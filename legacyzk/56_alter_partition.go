package legacyzk

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
)

// AlterPartition (key 56) v0-v2, as a Kafka 3.3 controller serves it with
// inter.broker.protocol.version >= 2.7 (KIP-497; v1 brought the leader
// recovery state, v2 topic ids; v3's per-member broker epochs are 3.5+).
const (
	AlterPartitionMinVersion int16 = 0
	AlterPartitionMaxVersion int16 = 2
)

// handleAlterPartition answers a partition leader's ISR change on the
// controller; the work runs on the controller's event loop, like Kafka's
// AlterPartitionReceived event.
func (b *Broker) handleAlterPartition(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.AlterPartitionRequest)
	var resp *kmsg.AlterPartitionResponse
	err := b.ctrl.call(ctx, func() { resp = b.ctrl.alterPartition(r) })
	if err != nil {
		resp = r.ResponseKind().(*kmsg.AlterPartitionResponse)
		resp.ErrorCode = kerr.NotController.Code
	}
	return resp, nil
}

// alterItem is one partition of an AlterPartition request as the
// controller judges it.
type alterItem struct {
	tp    TopicPartition
	code  int16
	next  LeaderIsr
	write bool
	ti    int // topic index in the request
	pi    int // partition index in its topic
}

// alterPartition is KafkaController.processAlterPartition (3.3): the
// broker epoch must not be older than the sender's registration; each
// partition is checked against the controller's view, then every valid
// change is one fenced conditional write of the state znode whose expected
// version is the partition epoch the leader sent (the zkVersion it got in
// LeaderAndIsr or in its last AlterPartition answer). A lost race
// (BADVERSION) answers INVALID_UPDATE_VERSION and makes the controller
// re-read the znode and push UpdateMetadata for it; a committed change
// answers the new ISR and partition epoch (the new zkVersion) and is pushed
// to every live broker with UpdateMetadata. No LeaderAndIsr is sent: the
// leader epoch does not change.
//
// kraftd's additions (everything here comes from the network): the sender
// must be the partition's current leader at exactly its leader epoch, and
// the new ISR must be distinct replicas of the partition including the
// leader (INVALID_REQUEST, as the KRaft controller answers), before
// anything is written.
func (c *controller) alterPartition(r *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	if !c.active {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	info, ok := c.view.Live[r.BrokerID]
	if !ok || r.BrokerEpoch == -1 || r.BrokerEpoch < info.Epoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	var items []*alterItem
	names := c.topicNamesByID()
	for ti, rt := range r.Topics {
		topic := rt.Topic
		unknown := kerr.UnknownTopicOrPartition.Code
		if r.Version >= 2 {
			topic = names[records.UUID(rt.TopicID)]
			unknown = kerr.UnknownTopicID.Code
		}
		for pi, rp := range rt.Partitions {
			it := &alterItem{tp: TopicPartition{topic, rp.Partition}, ti: ti, pi: pi}
			if _, known := c.view.Topics[topic]; !known || topic == "" {
				it.code = unknown
			} else {
				it.code, it.next, it.write = c.checkAlter(r.Version, r.BrokerID, it.tp, rp)
			}
			items = append(items, it)
		}
	}
	if err := c.writeAlters(items); err != nil {
		c.guard(err)
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	for _, rt := range r.Topics {
		out := kmsg.NewAlterPartitionResponseTopic()
		out.Topic, out.TopidID = rt.Topic, rt.TopicID
		out.Partitions = make([]kmsg.AlterPartitionResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, out)
	}
	for _, it := range items {
		p := kmsg.NewAlterPartitionResponseTopicPartition()
		p.Partition, p.ErrorCode = it.tp.Partition, it.code
		if it.code == 0 {
			p.LeaderID, p.LeaderEpoch, p.ISR = it.next.Leader, it.next.LeaderEpoch, slices.Clone(it.next.ISR)
			p.LeaderRecoveryState, p.PartitionEpoch = it.next.RecoveryState, it.next.ZkVersion
		}
		resp.Topics[it.ti].Partitions[it.pi] = p
	}
	return resp
}

// topicNamesByID maps topic ids to names in the view.
func (c *controller) topicNamesByID() map[records.UUID]string {
	out := make(map[records.UUID]string, len(c.view.Topics))
	for name, a := range c.view.Topics {
		out[a.ID] = name
	}
	return out
}

// checkAlter judges one partition's change against the view; code 0 with
// write means next is to be written with next.ZkVersion as the expected
// version, code 0 without write that the partition is already in that
// state.
func (c *controller) checkAlter(version int16, brokerID int32, tp TopicPartition,
	rp kmsg.AlterPartitionRequestTopicPartition) (code int16, next LeaderIsr, write bool) {
	cur, ok := c.view.States[tp]
	replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
	switch {
	case !ok || replicas == nil || c.view.Deleting[tp.Topic]:
		return kerr.UnknownTopicOrPartition.Code, LeaderIsr{}, false
	case rp.LeaderEpoch != cur.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code, LeaderIsr{}, false
	case brokerID != cur.Leader:
		return kerr.InvalidRequest.Code, LeaderIsr{}, false
	}
	newISR := rp.NewISR
	if version >= 3 {
		newISR = nil
		for _, m := range rp.NewEpochISR {
			newISR = append(newISR, m.BrokerID)
		}
	}
	if len(newISR) == 0 || len(newISR) > len(replicas) || !slices.Contains(newISR, cur.Leader) {
		return kerr.InvalidRequest.Code, LeaderIsr{}, false
	}
	for i, id := range newISR {
		if !slices.Contains(replicas, id) || slices.Contains(newISR[:i], id) {
			return kerr.InvalidRequest.Code, LeaderIsr{}, false
		}
	}
	switch {
	case rp.LeaderRecoveryState != 0 && rp.LeaderRecoveryState != 1,
		rp.LeaderRecoveryState == 1 && len(newISR) > 1,
		cur.RecoveryState == 0 && rp.LeaderRecoveryState == 1:
		return kerr.InvalidRequest.Code, LeaderIsr{}, false
	}
	if slices.Equal(newISR, cur.ISR) && rp.LeaderRecoveryState == cur.RecoveryState {
		// Already in the desired state (equalsAllowStalePartitionEpoch):
		// answered as it is, without a write.
		return 0, cur, false
	}
	for _, id := range newISR {
		if !c.eligible(id) {
			if version >= 1 {
				return kerr.IneligibleReplica.Code, LeaderIsr{}, false
			}
			return kerr.OperationNotAttempted.Code, LeaderIsr{}, false
		}
	}
	return 0, LeaderIsr{Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch, ISR: slices.Clone(newISR),
		ControllerEpoch: c.epoch, RecoveryState: rp.LeaderRecoveryState, ZkVersion: rp.PartitionEpoch}, true
}

// writeAlters makes the valid changes, one fenced conditional write each
// (pipelined), and pushes UpdateMetadata for the partitions written and for
// those whose write lost the race (re-read first, so the push carries what
// ZooKeeper holds). It fills in each item's answer; an error means the
// controller was fenced or ZooKeeper failed.
func (c *controller) writeAlters(items []*alterItem) error {
	var plan []*alterItem
	var batches [][]Op
	for _, it := range items {
		if it.write {
			plan = append(plan, it)
			batches = append(batches, c.fenced(SetDataOp{Path: PartitionStatePath(it.tp.Topic, it.tp.Partition),
				Data: EncodeState(it.next), Version: it.next.ZkVersion}))
		}
	}
	if len(plan) == 0 {
		return nil
	}
	res, errs := multiAll(c.ctx, c.store, batches, c.cfg.Zk.MaxInFlightRequests)
	push := NewBatch()
	var conflicts []TopicPartition
	for i, it := range plan {
		switch {
		case errs[i] == nil:
			it.next.ZkVersion = res[i][1].Stat.Version
			c.view.States[it.tp] = it.next
			push.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live), it.tp)
		case epochCheckFailed(errs[i]):
			return fencedErr(errs[i])
		case errors.Is(errs[i], ErrBadVersion):
			it.code = kerr.InvalidUpdateVersion.Code
			conflicts = append(conflicts, it.tp)
		case errors.Is(errs[i], ErrNoNode):
			it.code = kerr.UnknownTopicOrPartition.Code
		default:
			return errs[i]
		}
	}
	if len(conflicts) > 0 {
		c.log.Info("AlterPartition lost a race for the partition state znode", zap.Int("partitions", len(conflicts)))
		cur, err := c.readStates(conflicts)
		if err != nil {
			return err
		}
		for tp, s := range cur {
			c.view.States[tp] = s
			push.AddUpdateMetadata(&c.view, sortedKeys(c.view.Live), tp)
		}
	}
	if push.Empty() {
		return nil
	}
	return c.sendPushes(Translate(&c.view, push, c.id, c.epoch), nil)
}
