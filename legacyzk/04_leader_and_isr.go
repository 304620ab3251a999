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

// handleLeaderAndIsr is ReplicaManager.becomeLeaderOrFollower: a stale
// broker epoch (a request meant for an earlier incarnation, KIP-380)
// rejects the request with STALE_BROKER_EPOCH; an older controller epoch
// than the highest seen rejects it whole with STALE_CONTROLLER_EPOCH;
// otherwise the epoch is adopted and each partition applies only if its
// leader epoch is strictly greater than the one this broker holds.
func (b *Broker) handleLeaderAndIsr(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	r := req.Body.(*kmsg.LeaderAndISRRequest)
	if code, err := b.verifyPush(ctx, r.BrokerEpoch, r.ControllerEpoch); err != nil || code != 0 {
		return leaderAndIsrError(r, code), err
	}
	if err := b.waitDataPlane(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if code := b.pushFenced(r.BrokerEpoch, r.ControllerEpoch); code != 0 {
		return leaderAndIsrError(r, code), nil
	}
	b.controllerEpoch = r.ControllerEpoch
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	var accepted []acceptedState
	pending := map[TopicPartition]int32{} // leader epochs accepted earlier in this request
	for ti, ts := range r.TopicStates {
		rt := kmsg.LeaderAndISRResponseTopic{TopicID: ts.TopicID}
		id := records.UUID(ts.TopicID)
		for _, p := range ts.PartitionStates {
			tp := TopicPartition{ts.Topic, p.Partition}
			code := b.checkLeaderAndIsr(tp, id, p, pending)
			if code == 0 {
				pending[tp] = p.LeaderEpoch
				accepted = append(accepted, acceptedState{topic: ti, part: len(rt.Partitions), tp: tp, id: id, p: p})
			}
			rt.Partitions = append(rt.Partitions, kmsg.LeaderAndISRResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	codes := b.hostReplicas(ctx, accepted)
	for i, a := range accepted {
		resp.Topics[a.topic].Partitions[a.part].ErrorCode = codes[i]
		if codes[i] != 0 {
			continue
		}
		b.replicas[a.tp] = ReplicaState{TopicID: a.id, Leader: a.p.Leader, LeaderEpoch: a.p.LeaderEpoch,
			ISR: slices.Clone(a.p.ISR), Replicas: slices.Clone(a.p.Replicas), PartitionEpoch: a.p.ZKVersion,
			ControllerEpoch: a.p.ControllerEpoch}
	}
	return resp, nil
}

// acceptedState is one partition of a LeaderAndIsr that passed
// checkLeaderAndIsr, with where its answer goes in the response.
type acceptedState struct {
	topic, part int
	tp          TopicPartition
	id          records.UUID
	p           kmsg.LeaderAndISRRequestTopicPartition
}

// verifyPush is kraftd's check, beyond Kafka's, of the epochs a push
// claims where the broker's own state cannot vouch for them; it runs
// before the handler takes mu and before pushFenced. Anyone who can reach
// the listener can send a push, and Kafka's rules alone let a forged one
// with controller epoch 2147483647 fence the real controller for good (the
// highest epoch seen wins) and one with broker epoch -1 (unknown) or
// anything above the broker's own pass the broker-epoch check. So:
//
//   - broker epoch -1 is STALE_BROKER_EPOCH: every version served here is
//     sent with the target's real epoch (KIP-380; -1 came only from
//     controllers older than 2.2, which send older versions);
//   - a broker epoch above this broker's must be the czxid of its
//     registration in ZooKeeper (the controller may learn a new
//     registration before registerSelf returns), else STALE_BROKER_EPOCH;
//   - a controller epoch above the highest ZooKeeper has shown this broker
//     is checked against /controller_epoch, after a sync: a controller
//     bumps it there before its first push, so a higher one is forged and
//     answered STALE_CONTROLLER_EPOCH without being adopted.
//
// A ZooKeeper error (the session is being replaced) returns err, which
// closes the connection: the controller's sender then sends the push
// again, as after any connection loss, instead of losing it.
func (b *Broker) verifyPush(ctx context.Context, brokerEpoch int64, controllerEpoch int32) (int16, error) {
	if brokerEpoch == -1 {
		return kerr.StaleBrokerEpoch.Code, nil
	}
	checkBroker := brokerEpoch > b.brokerEpoch.Load()
	checkController := controllerEpoch > b.zkControllerEpoch.Load()
	if !checkBroker && !checkController {
		return 0, nil
	}
	c := b.started.Load()
	if c == nil {
		return 0, errNotStarted
	}
	st := c.currentStore()
	if err := st.Sync(ctx, ControllerEpochPath); err != nil {
		return 0, err
	}
	if checkBroker {
		stat, ok, err := st.Exists(ctx, BrokerPath(b.cfg.NodeID), false)
		if err != nil {
			return 0, err
		}
		if !ok || stat.Czxid != brokerEpoch {
			b.log.Warn("rejected a push claiming a broker epoch ZooKeeper does not hold",
				zap.Int64("pushBrokerEpoch", brokerEpoch), zap.Int64("registrationCzxid", stat.Czxid))
			return kerr.StaleBrokerEpoch.Code, nil
		}
	}
	if checkController {
		data, _, err := st.Get(ctx, ControllerEpochPath, false)
		var zkEpoch int32
		if err == nil {
			zkEpoch, err = DecodeControllerEpoch(data)
		} else if errors.Is(err, ErrNoNode) {
			err = nil
		}
		if err != nil {
			return 0, err
		}
		for cur := b.zkControllerEpoch.Load(); zkEpoch > cur && !b.zkControllerEpoch.CompareAndSwap(cur, zkEpoch); {
			cur = b.zkControllerEpoch.Load()
		}
		if controllerEpoch > zkEpoch {
			b.log.Warn("rejected a push claiming a controller epoch ZooKeeper has not reached",
				zap.Int32("pushEpoch", controllerEpoch), zap.Int32("zkEpoch", zkEpoch))
			return kerr.StaleControllerEpoch.Code, nil
		}
	}
	return 0, nil
}

// errNotStarted closes the connection of a push that arrives before the
// broker has a ZooKeeper session to check it with; the sender resends it.
var errNotStarted = errors.New("legacyzk: push before the broker started")

// pushFenced is the broker-epoch then controller-epoch check every push
// goes through (KafkaApis.isBrokerEpochStale, then the controller epoch
// check of ReplicaManager); 0 means accepted. Caller holds mu.
func (b *Broker) pushFenced(brokerEpoch int64, controllerEpoch int32) int16 {
	if brokerEpoch != -1 && brokerEpoch < b.brokerEpoch.Load() {
		return kerr.StaleBrokerEpoch.Code
	}
	if controllerEpoch < b.controllerEpoch {
		b.log.Info("rejected push from an older controller", zap.Int32("pushEpoch", controllerEpoch), zap.Int32("seenEpoch", b.controllerEpoch))
		return kerr.StaleControllerEpoch.Code
	}
	return 0
}

// checkLeaderAndIsr is the per-partition check of becomeLeaderOrFollower:
// the topic id must match, the leader epoch must be strictly greater than
// the one held (or accepted earlier in the same request, pending), and
// this broker must be a replica; caller holds mu.
func (b *Broker) checkLeaderAndIsr(tp TopicPartition, id records.UUID, p kmsg.LeaderAndISRRequestTopicPartition, pending map[TopicPartition]int32) int16 {
	cur, known := b.replicas[tp]
	epoch, seen := pending[tp]
	if !seen {
		epoch, seen = cur.LeaderEpoch, known
	}
	switch {
	case known && cur.TopicID != id && !cur.TopicID.IsZero():
		return kerr.InconsistentTopicID.Code
	case seen && p.LeaderEpoch <= epoch:
		return kerr.StaleControllerEpoch.Code // Kafka reports stale leader epochs this way
	case !slices.Contains(p.Replicas, b.cfg.NodeID):
		return kerr.UnknownTopicOrPartition.Code
	}
	return 0
}

// leaderAndIsrError is LeaderAndIsrRequest.getErrorResponse: the top-level
// code and the same code for every partition.
func leaderAndIsrError(r *kmsg.LeaderAndISRRequest, code int16) *kmsg.LeaderAndISRResponse {
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	resp.ErrorCode = code
	for _, ts := range r.TopicStates {
		rt := kmsg.LeaderAndISRResponseTopic{TopicID: ts.TopicID}
		for _, p := range ts.PartitionStates {
			rt.Partitions = append(rt.Partitions, kmsg.LeaderAndISRResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
