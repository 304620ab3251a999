package legacyzk

// ElectLeaders (key 43, v0-v2) on a ZooKeeper-era broker, as Kafka 3.3's
// KafkaApis.handleElectLeaders, ReplicaManager.electLeaders and
// KafkaController's ReplicaLeaderElection event (AdminClientTriggered):
//
//   - The broker that receives it takes the partitions named (as a set:
//     a partition named twice is elected and answered once), or every
//     partition of its metadata cache for a null topic list, and hands them
//     to its own controller: if that is not the active one, every
//     partition answers NOT_CONTROLLER (clients send it to the controller
//     Metadata names).
//   - The controller, on its event loop: a partition it does not know is
//     UNKNOWN_TOPIC_OR_PARTITION "The partition does not exist."; one of a
//     topic being deleted INVALID_TOPIC_EXCEPTION "The topic is being
//     deleted"; PREFERRED whose first assigned replica leads, or UNCLEAN
//     whose leader is live, ELECTION_NOT_NEEDED. The rest go through the
//     partition state machine to OnlinePartition with
//     PreferredReplicaPartitionLeaderElectionStrategy (the first assigned
//     replica, if live, not shutting down and in the ISR; the ISR stays) or
//     OfflinePartitionLeaderElectionStrategy(allowUnclean = true) (a live
//     ISR member in assignment order, else the first live replica, alone
//     in the ISR and RECOVERING, KIP-704): state znodes re-read, one fenced
//     conditional write each, then LeaderAndIsr to the replicas and
//     UpdateMetadata to every live broker. A partition it cannot elect for
//     (a StateChangeFailedException) answers PREFERRED_LEADER_NOT_AVAILABLE
//     or ELIGIBLE_LEADERS_NOT_AVAILABLE.
//   - The broker then waits (DelayedElectLeader) until its own cache shows
//     each elected leader, at most TimeoutMillis; those not seen by then
//     answer REQUEST_TIMED_OUT. With a null topic list, partitions that
//     needed no election are left out (and so are topics left empty).
//
// As in KRaft mode (kraftd's, where Kafka 3.3 differed): an unknown
// election type is INVALID_REQUEST for the whole request (Kafka 3.3 failed
// it with UNKNOWN_SERVER_ERROR); more elections than
// Config.MaxRecordsPerUserOp refuse the whole request with POLICY_VIOLATION
// (3.3 had no cap); and a request naming more topic and partition entries
// than max(that cap, topics plus partitions in the cache) is refused at
// the top level before anything is built from it. Kafka requires ALTER on
// the CLUSTER resource; kraftd has no ACLs.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
)

// Election types (Kafka's ElectionType).
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electOutcome is one partition's answer from the controller: an error
// code and message, or (code 0) the leader it elected.
type electOutcome struct {
	code   int16
	msg    *string
	leader int32
}

// ElectLeaders serves an ElectLeaders request received by this broker.
// The error is non-nil only when ctx ended.
func (b *Broker) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	img := b.Image()
	if req.Topics != nil {
		n := len(req.Topics)
		for _, t := range req.Topics {
			n += len(t.Partitions)
		}
		if n > max(b.cfg.MaxRecordsPerUserOp, img.NumTopics()+img.NumPartitions()) {
			resp.ErrorCode = errTooLarge.Code
			return resp, nil
		}
	}
	typ := req.ElectionType
	if req.Version < 1 {
		typ = electionPreferred
	}
	if typ != electionPreferred && typ != electionUnclean {
		return electLeadersError(req, kerr.InvalidRequest.Code, fmt.Sprintf("Unknown election type %d", typ)), nil
	}
	tps := electionTargets(req, img)
	var out map[TopicPartition]electOutcome
	tooLarge := false
	err := b.ctrl.call(ctx, func() { out, tooLarge = b.ctrl.electLeaders(tps, typ, b.cfg.MaxRecordsPerUserOp) })
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		out = map[TopicPartition]electOutcome{}
		for _, tp := range tps {
			out[tp] = electOutcome{code: kerr.NotController.Code}
		}
	case tooLarge:
		return electLeadersError(req, errTooLarge.Code, excessivelyLargeMessage), nil
	}
	// DelayedElectLeader: wait for this broker's cache to name each
	// elected leader; the ones it does not by the deadline time out.
	seen := func(img *image.Image, tp TopicPartition, leader int32) bool {
		t, ok := img.TopicByName(tp.Topic)
		if !ok {
			return false
		}
		p, ok := t.Partition(tp.Partition)
		return ok && p.Leader == leader
	}
	b.awaitCache(ctx, req.TimeoutMillis, func(img *image.Image) bool {
		for tp, o := range out {
			if o.code == 0 && !seen(img, tp, o.leader) {
				return false
			}
		}
		return true
	}, func() {
		img := b.Image()
		for tp, o := range out {
			if o.code == 0 && !seen(img, tp, o.leader) {
				out[tp] = electOutcome{code: kerr.RequestTimedOut.Code}
			}
		}
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	byTopic := map[string]int{}
	for _, tp := range tps {
		o := out[tp]
		if req.Topics == nil && o.code == kerr.ElectionNotNeeded.Code {
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = tp.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = tp.Partition, o.code, o.msg
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// electionTargets is the set of partitions req names, in request order,
// or every partition in img (by topic name) for a null topic list.
func electionTargets(req *kmsg.ElectLeadersRequest, img *image.Image) []TopicPartition {
	var tps []TopicPartition
	if req.Topics == nil {
		for t := range img.Topics() {
			for p := range t.Partitions() {
				tps = append(tps, TopicPartition{t.Name(), p})
			}
		}
		return tps
	}
	seen := map[TopicPartition]bool{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p}
			if !seen[tp] {
				seen[tp] = true
				tps = append(tps, tp)
			}
		}
	}
	return tps
}

// electLeadersError is Kafka's ElectLeadersRequest.getErrorResponse: the
// top-level code and the same code for each partition named.
func electLeadersError(req *kmsg.ElectLeadersRequest, code int16, msg string) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, kmsg.StringPtr(msg)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electLeaders is KafkaController.processReplicaLeaderElection for an
// admin request, on the controller's loop: the outcome per partition of
// tps, or tooLarge when more than maxElections need an election (nothing
// is then written).
func (c *controller) electLeaders(tps []TopicPartition, typ int8, maxElections int) (map[TopicPartition]electOutcome, bool) {
	out := make(map[TopicPartition]electOutcome, len(tps))
	if !c.active {
		for _, tp := range tps {
			out[tp] = electOutcome{code: kerr.NotController.Code}
		}
		return out, false
	}
	var electable []TopicPartition
	for _, tp := range tps {
		var replicas []int32
		if a, ok := c.view.Topics[tp.Topic]; ok {
			replicas = a.Partitions[tp.Partition]
		}
		st, hasState := c.view.States[tp]
		switch {
		case len(replicas) == 0:
			out[tp] = electOutcome{code: kerr.UnknownTopicOrPartition.Code, msg: kmsg.StringPtr("The partition does not exist.")}
		case c.view.Deleting[tp.Topic]:
			out[tp] = electOutcome{code: kerr.InvalidTopicException.Code, msg: kmsg.StringPtr("The topic is being deleted")}
		case hasState && typ == electionPreferred && st.Leader == replicas[0],
			hasState && typ == electionUnclean && st.Leader != NoLeader && c.alive(st.Leader):
			out[tp] = electOutcome{code: kerr.ElectionNotNeeded.Code}
		default:
			electable = append(electable, tp)
		}
	}
	if len(electable) > maxElections {
		return nil, true
	}
	if len(electable) == 0 {
		return out, false
	}
	strategy := "PreferredReplicaPartitionLeaderElectionStrategy"
	failCode := kerr.PreferredLeaderNotAvailable.Code
	if typ == electionUnclean {
		strategy, failCode = "OfflinePartitionLeaderElectionStrategy(true)", kerr.EligibleLeadersNotAvailable.Code
	}
	changed, _, err := c.changeStates(electable, nil, func(tp TopicPartition, cur LeaderIsr, exists bool) (LeaderIsr, bool) {
		if !exists {
			return cur, false
		}
		replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
		var r electionResult
		if typ == electionPreferred {
			r = electPreferred(replicas, cur, c.eligible, c.epoch)
		} else {
			r = electUnclean(replicas, cur, c.eligible, c.epoch)
		}
		return r.state, r.ok
	})
	if len(changed) > 0 {
		b := NewBatch()
		for _, tp := range sortedTPs(changed) {
			replicas := c.view.Topics[tp.Topic].Partitions[tp.Partition]
			if typ == electionUnclean {
				replicas = filter(replicas, c.eligible)
			}
			b.AddLeaderAndIsr(&c.view, replicas, tp, false)
		}
		if perr := c.sendPushes(Translate(&c.view, b, c.id, c.epoch), nil); perr != nil && err == nil {
			err = perr
		}
	}
	for _, tp := range electable {
		switch {
		case changed[tp]:
			out[tp] = electOutcome{leader: c.view.States[tp].Leader}
		case err != nil && (errors.Is(err, ErrControllerMoved) || errors.Is(err, ErrCrashed)):
			out[tp] = electOutcome{code: kerr.NotController.Code}
		case err != nil:
			out[tp] = electOutcome{code: kerr.UnknownServerError.Code, msg: kmsg.StringPtr(err.Error())}
		default:
			out[tp] = electOutcome{code: failCode, msg: kmsg.StringPtr(fmt.Sprintf(
				"Failed to elect leader for partition %s-%d under strategy %s", tp.Topic, tp.Partition, strategy))}
		}
	}
	if err != nil {
		c.guard(err)
	}
	return out, false
}

// electPreferred is PreferredReplicaPartitionLeaderElectionStrategy
// (leaderForPreferredReplica): the first assigned replica leads if it is
// eligible and in the ISR, with a new leader epoch and the same ISR; else
// no election.
func electPreferred(replicas []int32, cur LeaderIsr, eligible func(int32) bool, controllerEpoch int32) electionResult {
	if len(replicas) == 0 || !eligible(replicas[0]) || !slices.Contains(cur.ISR, replicas[0]) {
		return electionResult{state: cur}
	}
	return electionResult{state: LeaderIsr{Leader: replicas[0], LeaderEpoch: cur.LeaderEpoch + 1, ISR: slices.Clone(cur.ISR),
		ControllerEpoch: controllerEpoch, RecoveryState: cur.RecoveryState, ZkVersion: cur.ZkVersion}, ok: true}
}

// electUnclean is OfflinePartitionLeaderElectionStrategy with unclean
// election allowed (an operator asked for it): a clean offline election
// first; else the first eligible replica in assignment order leads alone
// in the ISR, leader recovery RECOVERING (KIP-704, inter-broker protocol
// 3.2+); else no election.
func electUnclean(replicas []int32, cur LeaderIsr, eligible func(int32) bool, controllerEpoch int32) electionResult {
	if r := electOffline(replicas, cur, eligible, controllerEpoch); r.ok {
		r.state.RecoveryState = cur.RecoveryState
		return r
	}
	for _, r := range replicas {
		if eligible(r) {
			return electionResult{state: LeaderIsr{Leader: r, LeaderEpoch: cur.LeaderEpoch + 1, ISR: []int32{r},
				ControllerEpoch: controllerEpoch, RecoveryState: 1, ZkVersion: cur.ZkVersion}, ok: true}
		}
	}
	return electionResult{state: cur}
}
