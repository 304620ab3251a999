package controller

// ElectLeaders, API key 43, versions 0-2 (v1: election types, KIP-460, and
// a top-level error code; v2 flexible). Brokers forward it here, as Kafka's
// KafkaApis does (maybeForwardToController); kafka-leader-election.sh and
// kadm.Client.ElectLeaders send it.
//
// As Kafka's ReplicationControlManager.electLeaders and electLeader (3.9):
//   - Election type 0 is PREFERRED, 1 UNCLEAN; any other answers the whole
//     request INVALID_REQUEST "Unknown election type N" (v0 carries no type
//     and is PREFERRED).
//   - Per partition: unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION
//     ("No such topic as T", "No such partition as T-P"); PREFERRED whose
//     first assigned replica already leads, or UNCLEAN with any leader,
//     ELECTION_NOT_NEEDED; otherwise the election below, and when it
//     changes nothing PREFERRED_LEADER_NOT_AVAILABLE (PREFERRED) or
//     ELIGIBLE_LEADERS_NOT_AVAILABLE (UNCLEAN); else NONE and one
//     PartitionChangeRecord, written through the same record and replay
//     path as every other leader change (replication.go).
//   - PREFERRED (PartitionChangeBuilder.electPreferredLeader): the first
//     assigned replica if it is in the ISR and active (registered,
//     unfenced, not in controlled shutdown); else the current leader stays
//     if it still qualifies; else the first other replica that does; else
//     no leader. Only the leader changes; the ISR is kept.
//   - UNCLEAN (electAnyLeader with Election.UNCLEAN): a clean election
//     first; then the first active replica in assignment order, whatever
//     unclean.leader.election.enable says (the operator asked), with the
//     ISR set to it alone and, from 3.2-IV0, leader recovery RECOVERING.
//   - A null topic list means every partition of every topic: each topic
//     is answered, but partitions that needed no election are left out of
//     the answer (Kafka's compatibility with the ZooKeeper-era broker). An
//     empty list answers nothing and writes nothing.
//   - The records count against Config.MaxRecordsPerUserOp (Kafka's
//     BoundedList of MAX_RECORDS_PER_USER_OP): past it the whole request is
//     answered POLICY_VIOLATION "Unable to perform excessively large batch
//     operation." and nothing is written. Kafka writes what it elected as
//     one non-atomic ControllerResult; so does kraftd.
//   - The answer comes once the records commit; brokers apply them from
//     the log (Kafka's KRaft broker does not wait for its cache either).
//
// kraftd's additions, for hostile requests:
//   - A partition named twice (in one topic entry, or in two entries for
//     the same topic) is elected once: every mention gets the first one's
//     result and one record is written (Kafka, whose request collection
//     keeps duplicates, writes one record per mention, each bumping the
//     leader epoch).
//   - A request naming more topic and partition entries than
//     max(Config.MaxRecordsPerUserOp, topics plus partitions in the
//     cluster) cannot be honest (it must repeat or invent names): it is
//     answered
//     POLICY_VIOLATION at the top level (v1+) with no per-partition
//     results, before anything proportional to it is built. A v0 client,
//     which has no top-level error, sees an empty answer.
//
// Authorization: Kafka requires ALTER on the CLUSTER resource
// (CLUSTER_AUTHORIZATION_FAILED otherwise); kraftd has no ACLs, so every
// request is allowed.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// Election types (Kafka's ElectionType).
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electLeadersEntries is how many topic and partition entries req names
// (counted without allocating).
func electLeadersEntries(req *kmsg.ElectLeadersRequest) int {
	n := len(req.Topics)
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	return n
}

func (c *core) electLeaders(req *kmsg.ElectLeadersRequest) Result {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.SetVersion(req.Version)
	img := c.pending.img
	if req.Topics != nil && electLeadersEntries(req) > max(c.cfg.MaxRecordsPerUserOp, img.NumTopics()+img.NumPartitions()) {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return Result{Response: resp}
	}
	if req.Version < 1 {
		req.ElectionType = electionPreferred
	}
	if req.ElectionType != electionPreferred && req.ElectionType != electionUnclean {
		return Result{Response: errorResponseMessage(req, kerr.InvalidRequest.Code,
			kmsg.StringPtr(fmt.Sprintf("Unknown election type %d", req.ElectionType)))}
	}
	e := elector{img: img, typ: req.ElectionType, mv: c.metadataVersion(),
		budget: recordBudget(c.cfg.MaxRecordsPerUserOp)}
	if req.Topics == nil {
		for t := range img.Topics() {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Name()
			for id, p := range t.Partitions() {
				code, msg := e.elect(t, id, p)
				if code != kerr.ElectionNotNeeded.Code {
					rt.Partitions = append(rt.Partitions, partitionResult(id, code, msg))
				}
			}
			resp.Topics = append(resp.Topics, rt)
		}
	} else {
		type named struct {
			topic     string
			partition int32
		}
		seen := map[named]kmsg.ElectLeadersResponseTopicPartition{}
		for _, rt := range req.Topics {
			out := kmsg.NewElectLeadersResponseTopic()
			out.Topic = rt.Topic
			t, _ := img.TopicByName(rt.Topic)
			for _, id := range rt.Partitions {
				k := named{rt.Topic, id}
				r, ok := seen[k]
				if !ok {
					code, msg := e.electNamed(t, rt.Topic, id)
					r = partitionResult(id, code, msg)
					seen[k] = r
				}
				out.Partitions = append(out.Partitions, r)
			}
			resp.Topics = append(resp.Topics, out)
		}
	}
	if e.overflow {
		return excessivelyLarge(req)
	}
	return Result{Records: e.recs, Response: resp, nonAtomic: true} // Kafka: ControllerResult.of
}

// elector runs the elections of one ElectLeaders request against img.
type elector struct {
	img      *image.Image
	typ      int8
	mv       int16
	budget   recordBudget
	recs     []records.Record
	overflow bool // a record did not fit the budget: the request fails whole
}

func partitionResult(id int32, code int16, msg *string) kmsg.ElectLeadersResponseTopicPartition {
	r := kmsg.NewElectLeadersResponseTopicPartition()
	r.Partition, r.ErrorCode, r.ErrorMessage = id, code, msg
	return r
}

// electNamed is elect for a partition the request names: t is nil when no
// topic is called name.
func (e *elector) electNamed(t *image.Topic, name string, id int32) (int16, *string) {
	if t == nil {
		return kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr("No such topic as " + name)
	}
	p, ok := t.Partition(id)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr(fmt.Sprintf("No such partition as %s-%d", name, id))
	}
	return e.elect(t, id, p)
}

// elect is Kafka's electLeader for an existing partition: the error code
// and message of its result, appending its record when it changes.
func (e *elector) elect(t *image.Topic, id int32, p image.Partition) (int16, *string) {
	replicas := p.Replicas()
	if (e.typ == electionPreferred && len(replicas) > 0 && p.Leader == replicas[0]) ||
		(e.typ == electionUnclean && p.Leader != image.NoLeader) {
		return kerr.ElectionNotNeeded.Code, nil
	}
	acceptable := func(r int32) bool { return isActive(e.img, r) }
	var rec *records.PartitionChangeRecord
	if e.typ == electionPreferred {
		rec = preferredChange(t.ID(), id, p, acceptable)
	} else {
		rec = partitionChange(t.ID(), id, p, p.ISR(), acceptable, true, e.mv)
	}
	if rec == nil {
		if e.typ == electionPreferred {
			return kerr.PreferredLeaderNotAvailable.Code, nil
		}
		return kerr.EligibleLeadersNotAvailable.Code, nil
	}
	if !e.budget.take(1) {
		e.overflow = true
		return kerr.PolicyViolation.Code, nil // the whole request is answered so
	}
	e.recs = append(e.recs, records.Record{Version: partitionChangeVersion(e.mv), Message: rec})
	return 0, nil
}

// preferredChange is Kafka's PartitionChangeBuilder with Election.PREFERRED
// and no ELR: the first assigned replica leads if it is in the ISR and
// acceptable; else the current leader stays if it is; else the first
// other replica that is; else no leader. nil when the leader stays. The
// ISR and the leader recovery state are left as they are.
func preferredChange(topicID records.UUID, id int32, p image.Partition, acceptable func(int32) bool) *records.PartitionChangeRecord {
	valid := func(r int32) bool { return slices.Contains(p.ISR(), r) && acceptable(r) }
	replicas := p.Replicas()
	leader := image.NoLeader
	switch {
	case len(replicas) > 0 && valid(replicas[0]):
		leader = replicas[0]
	case valid(p.Leader):
		leader = p.Leader
	case len(replicas) > 1:
		if i := slices.IndexFunc(replicas[1:], valid); i >= 0 {
			leader = replicas[1+i]
		}
	}
	if leader == p.Leader {
		return nil
	}
	rec := records.NewPartitionChangeRecord()
	rec.TopicID, rec.PartitionID, rec.Leader = topicID, id, leader
	return rec
}
