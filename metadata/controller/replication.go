package controller

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// isActive reports whether broker id may lead or join an ISR: registered,
// unfenced and not in controlled shutdown (Kafka's ClusterControlManager.isActive).
func isActive(img *image.Image, id int32) bool {
	b, ok := img.Broker(id)
	return ok && !b.Fenced && !b.InControlledShutdown
}

// partitionChange is the record that moves partition p towards targetISR,
// electing a new leader if the current one is no longer acceptable, or nil
// when nothing changes. It follows Kafka's PartitionChangeBuilder for an
// election without ELR (KIP-966) or reassignment:
//
//   - the current leader stays if it is in targetISR and acceptable;
//   - otherwise the first replica, in assignment order, that is in
//     targetISR and acceptable leads (a clean election);
//   - otherwise, when unclean (unclean.leader.election.enable), the first
//     acceptable replica in assignment order leads, the ISR becomes just it
//     and, from metadata.version 3.2-IV0, the leader recovery state
//     RECOVERING (KIP-704) until the leader reports RECOVERED in an
//     AlterPartition; this may lose what only the old ISR had;
//   - otherwise the leader is -1;
//   - the ISR never becomes empty: when targetISR is empty the ISR is left
//     as it is (so the last member of a leaderless partition stays in it);
//   - before metadata.version 3.6-IV0 an ISR shrink without a leader change
//     still bumps the leader epoch (KAFKA-15021).
func partitionChange(topicID records.UUID, id int32, p image.Partition, targetISR []int32,
	acceptable func(int32) bool, unclean bool, mv int16) *records.PartitionChangeRecord {
	rec := records.NewPartitionChangeRecord()
	if !fillPartitionChange(rec, topicID, id, p, targetISR, false, acceptable, unclean, mv) {
		return nil
	}
	return rec
}

// fillPartitionChange is partitionChange writing into rec, which must be
// in its default state; it reports whether anything changes. With
// ownTarget, rec may keep targetISR itself rather than a copy.
func fillPartitionChange(rec *records.PartitionChangeRecord, topicID records.UUID, id int32, p image.Partition,
	targetISR []int32, ownTarget bool, acceptable func(int32) bool, unclean bool, mv int16) bool {
	leader, uncleanLeader := electLeader(p, targetISR, acceptable, unclean)
	rec.TopicID, rec.PartitionID = topicID, id
	changed := false
	if leader != p.Leader {
		rec.Leader, changed = leader, true
	}
	switch {
	case uncleanLeader:
		rec.ISR = []int32{leader}
		if p.LeaderRecoveryState != image.LeaderRecovering && mv >= mv32IV0 {
			rec.LeaderRecoveryState = image.LeaderRecovering
		}
	case len(targetISR) > 0 && !slices.Equal(targetISR, p.ISR()):
		rec.ISR, changed = targetISR, true
		if !ownTarget {
			rec.ISR = slices.Clone(targetISR)
		}
		shrunk := slices.ContainsFunc(p.ISR(), func(r int32) bool { return !slices.Contains(targetISR, r) })
		if mv < mv36IV0 && rec.Leader == records.NoLeaderChange && shrunk {
			rec.Leader = p.Leader
		}
	}
	return changed
}

// electLeader is PartitionChangeBuilder.electAnyLeader without ELR: the
// current leader if still valid, else the first valid replica, else (unclean)
// the first acceptable one; -1 when none qualifies. unclean reports an
// out-of-sync leader.
func electLeader(p image.Partition, targetISR []int32, acceptable func(int32) bool, unclean bool) (int32, bool) {
	valid := func(r int32) bool { return slices.Contains(targetISR, r) && acceptable(r) }
	if valid(p.Leader) {
		return p.Leader, false
	}
	if i := slices.IndexFunc(p.Replicas(), valid); i >= 0 {
		return p.Replicas()[i], false
	}
	if unclean {
		// Kafka's tryElection acts only on a leader change: an unclean
		// pick that is the current leader leaves the ISR to the clean rules.
		if i := slices.IndexFunc(p.Replicas(), acceptable); i >= 0 {
			return p.Replicas()[i], p.Replicas()[i] != p.Leader
		}
	}
	return image.NoLeader, false
}

// uncleanPolicy says whether a topic may elect an out-of-sync leader; nil
// never does.
type uncleanPolicy func(topic string) bool

// uncleanLeaderElection is Kafka's
// ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic:
// unclean.leader.election.enable from the topic's config, else node's
// dynamic broker config, else the cluster-wide one, else static. A value
// other than true or false (any case) is skipped.
func uncleanLeaderElection(img *image.Image, nodeID int32, static bool) uncleanPolicy {
	return func(topic string) bool {
		for _, res := range []image.ConfigResource{{Type: image.ConfigTopic, Name: topic},
			{Type: image.ConfigBroker, Name: strconv.Itoa(int(nodeID))}, {Type: image.ConfigBroker}} {
			v, ok := img.ConfigValue(res, "unclean.leader.election.enable")
			switch v = strings.TrimSpace(v); {
			case ok && strings.EqualFold(v, "true"):
				return true
			case ok && strings.EqualFold(v, "false"):
				return false
			}
		}
		return static
	}
}

// partitionChangeVersion is the PartitionChangeRecord version for mv
// (v1 arrives with directories at 3.7-IV2, which we do not support).
func partitionChangeVersion(int16) int16 { return 0 }

// changeRecords appends one PartitionChangeRecord per partition of tps
// (sorted by topic, as the image's broker index lists them) whose state
// moves: brokerOut leaves the ISR and may not lead, brokerIn may lead even
// though the image still shows it fenced (it is being unfenced in the same
// batch). Either may be -1. It costs O(len(tps)), not a scan of the cluster.
func changeRecords(out []records.Record, img *image.Image, brokerOut, brokerIn int32,
	tps []image.TopicPartition, mv int16, unclean uncleanPolicy) []records.Record {
	active := map[int32]bool{} // isActive per replica, looked up once
	acceptable := func(r int32) bool {
		if r == brokerOut {
			return false
		}
		if r == brokerIn {
			return true
		}
		a, ok := active[r]
		if !ok {
			a = isActive(img, r)
			active[r] = a
		}
		return a
	}
	// The records and their ISRs are carved out of a few large allocations
	// (a controlled shutdown at 1M partitions writes up to a million).
	out = slices.Grow(out, len(tps))
	var slab []records.PartitionChangeRecord
	var ints []int32
	var t *image.Topic
	uncleanTopic := false
	for _, tp := range tps {
		if t == nil || t.ID() != tp.TopicID {
			t, _ = img.TopicByID(tp.TopicID)
			uncleanTopic = t != nil && unclean != nil && unclean(t.Name())
		}
		p, ok := t.Partition(tp.Partition)
		if !ok {
			continue
		}
		target, own := p.ISR(), false
		if brokerOut >= 0 && slices.Contains(target, brokerOut) {
			if cap(ints)-len(ints) < len(target) {
				ints = make([]int32, 0, max(4096, len(target)))
			}
			start := len(ints)
			for _, r := range target {
				if r != brokerOut {
					ints = append(ints, r)
				}
			}
			target, own = ints[start:len(ints):len(ints)], true
		}
		if len(slab) == cap(slab) {
			slab = make([]records.PartitionChangeRecord, 0, min(len(tps), 4096))
		}
		slab = slab[:len(slab)+1]
		rec := &slab[len(slab)-1]
		// The slab is zeroed, or holds a record that fillPartitionChange
		// set and left unused: restore the defaults of the fields it sets.
		rec.ISR, rec.Leader, rec.LeaderRecoveryState = nil, records.NoLeaderChange, records.NoLeaderRecoveryStateChange
		if fillPartitionChange(rec, tp.TopicID, tp.Partition, p, target, own, acceptable, uncleanTopic, mv) {
			out = append(out, records.Record{Version: partitionChangeVersion(mv), Message: rec})
		} else {
			slab = slab[:len(slab)-1]
		}
	}
	return out
}

// fenceBroker is Kafka's handleBrokerFenced: drop the broker from every ISR
// (electing new leaders where it led), then mark it fenced.
func fenceBroker(img *image.Image, id int32, mv int16, unclean uncleanPolicy) []records.Record {
	b, _ := img.Broker(id)
	out := changeRecords(nil, img, id, -1, img.PartitionsWithISRMember(id), mv, unclean)
	if mv >= mv33IV2 {
		return append(out, records.Record{Message: &records.BrokerRegistrationChangeRecord{
			BrokerID: id, BrokerEpoch: b.Epoch, Fenced: records.FenceChangeFence}})
	}
	return append(out, records.Record{Message: &records.FenceBrokerRecord{ID: id, Epoch: b.Epoch}})
}

// unfenceBroker is Kafka's handleBrokerUnfenced: mark the broker unfenced,
// then give leaderless partitions a leader, which may be this broker.
func unfenceBroker(img *image.Image, id int32, brokerEpoch int64, mv int16, unclean uncleanPolicy) []records.Record {
	var out []records.Record
	if mv >= mv33IV2 {
		out = append(out, records.Record{Message: &records.BrokerRegistrationChangeRecord{
			BrokerID: id, BrokerEpoch: brokerEpoch, Fenced: records.FenceChangeUnfence}})
	} else {
		out = append(out, records.Record{Message: &records.UnfenceBrokerRecord{ID: id, Epoch: brokerEpoch}})
	}
	return changeRecords(out, img, -1, id, img.PartitionsWithoutLeader(), mv, unclean)
}

// controlledShutdown is Kafka's handleBrokerInControlledShutdown: mark the
// broker (once), then move its leaderships away and drop it from ISRs.
func controlledShutdown(img *image.Image, id int32, brokerEpoch int64, mv int16, unclean uncleanPolicy) []records.Record {
	var out []records.Record
	if b, _ := img.Broker(id); mv >= mv33IV3 && !b.InControlledShutdown {
		out = append(out, records.Record{Version: 1, Message: &records.BrokerRegistrationChangeRecord{
			BrokerID: id, BrokerEpoch: brokerEpoch, InControlledShutdown: 1}})
	}
	return changeRecords(out, img, id, -1, img.PartitionsWithISRMember(id), mv, unclean)
}

// hasLeaderships reports whether broker id leads any partition (the image
// counts them).
func hasLeaderships(img *image.Image, id int32) bool { return img.LeaderCount(id) > 0 }
