package legacyzk

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// updateMetadataRecords translates one accepted UpdateMetadata into the
// metadata records that turn the broker's current cache image into what
// ZkMetadataCache.updateMetadata would hold: the live-broker list replaces
// the registered brokers (unfenced, as every broker a ZooKeeper controller
// lists is usable), each carried partition state overwrites the cached
// one (no epoch comparison: the last push from a current controller
// wins), and leader -2 removes a partition; a topic with no partition left
// is removed. It is pure: the caller replays the records into a Delta.
func updateMetadataRecords(cur *image.Image, req *kmsg.UpdateMetadataRequest) []records.Record {
	var out []records.Record
	add := func(v int16, m records.Message) { out = append(out, records.Record{Version: v, Message: m}) }
	live := map[int32]bool{}
	for _, lb := range req.LiveBrokers {
		live[lb.ID] = true
		add(1, registerRecord(lb))
	}
	for _, b := range cur.Brokers() {
		if !live[b.ID] {
			add(0, &records.UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch})
		}
	}
	for _, ts := range req.TopicStates {
		out = append(out, topicRecords(cur, ts)...)
	}
	return out
}

func registerRecord(lb kmsg.UpdateMetadataRequestLiveBroker) *records.RegisterBrokerRecord {
	r := &records.RegisterBrokerRecord{BrokerID: lb.ID, Rack: lb.Rack, Fenced: false}
	for _, e := range lb.Endpoints {
		r.EndPoints = append(r.EndPoints, records.BrokerEndpoint{Name: e.ListenerName, Host: e.Host,
			Port: uint16(e.Port), SecurityProtocol: e.SecurityProtocol})
	}
	return r
}

// topicRecords handles one topic of an UpdateMetadata.
func topicRecords(cur *image.Image, ts kmsg.UpdateMetadataRequestTopicState) []records.Record {
	var out []records.Record
	add := func(v int16, m records.Message) { out = append(out, records.Record{Version: v, Message: m}) }
	id := records.UUID(ts.TopicID)
	existing, known := cur.TopicByName(ts.Topic)
	if known && existing.ID() != id {
		add(0, &records.RemoveTopicRecord{TopicID: existing.ID()}) // deleted and re-created
		known = false
	}
	deleted := map[int32]bool{}
	var live []kmsg.UpdateMetadataRequestTopicPartition
	for _, p := range ts.PartitionStates {
		if p.Leader == LeaderDuringDelete {
			deleted[p.Partition] = true
		} else {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		if known && coversAll(existing, deleted) {
			add(0, &records.RemoveTopicRecord{TopicID: id})
		}
		return out
	}
	if !known {
		add(0, &records.TopicRecord{Name: ts.Topic, TopicID: id})
	}
	for _, p := range live {
		add(0, &records.PartitionRecord{PartitionID: p.Partition, TopicID: id,
			Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR),
			RemovingReplicas: []int32{}, AddingReplicas: []int32{},
			Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.ZKVersion})
	}
	return out
}

// coversAll reports whether every partition of t is in deleted.
func coversAll(t *image.Topic, deleted map[int32]bool) bool {
	for p := range t.Partitions() {
		if !deleted[p] {
			return false
		}
	}
	return true
}
