package broker

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/replica"
)

// The data-plane handlers (Produce, Fetch, ListOffsets, InitProducerId) share
// these helpers: where a partition lives, how replica errors read on the wire,
// and the KIP-951 leader hints.

// ProducerIDSource hands out producer ids for InitProducerId. A KRaft broker
// takes blocks from the active controller (AllocateProducerIds, KIP-730).
type ProducerIDSource interface {
	// NextProducerID returns an id no other producer got. An error means no
	// block could be had now (the client retries: COORDINATOR_LOAD_IN_PROGRESS).
	NextProducerID(ctx context.Context) (int64, error)
}

// DefaultMinInsyncReplicas is min.insync.replicas' default.
const DefaultMinInsyncReplicas = 1

// replicaErrorCode is the Kafka error code for a replica package error.
func replicaErrorCode(err error) int16 {
	for _, m := range replicaErrorCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

var replicaErrorCodes = []struct {
	err  error
	code int16
}{
	{replica.ErrUnknownPartition, kerr.UnknownTopicOrPartition.Code},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition.Code},
	{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
	{replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch.Code},
	{replica.ErrOffsetNotAvailable, kerr.OffsetNotAvailable.Code},
	{replica.ErrCorruptRecords, kerr.CorruptMessage.Code},
	{replica.ErrInvalidRecord, kerr.InvalidRecord.Code},
	{replica.ErrMessageTooLarge, kerr.MessageTooLarge.Code},
	{replica.ErrRecordListTooLarge, kerr.RecordListTooLarge.Code},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
	{replica.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{replica.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{replica.ErrTransactionsUnsupported, kerr.InvalidTxnState.Code},
	{replica.ErrInvalidTxnState, kerr.InvalidTxnState.Code},
	{replica.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced.Code},
	{replica.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{replica.ErrStorage, kerr.KafkaStorageError.Code},
}

// hostedPartition finds the replica of topic/partition, or the error Kafka's
// ReplicaManager.getPartitionOrError gives: NOT_LEADER_OR_FOLLOWER when the
// metadata knows the partition but this broker does not host it,
// UNKNOWN_TOPIC_OR_PARTITION otherwise.
func (c *ClientAPI) hostedPartition(img *image.Image, t *image.Topic, partition int32) (*replica.Partition, error) {
	if t == nil {
		return nil, replica.ErrUnknownPartition
	}
	if p, ok := c.cfg.Replicas.Partition(replica.TopicPartition{Topic: t.Name(), Partition: partition}); ok {
		return p, nil
	}
	if _, ok := t.Partition(partition); ok {
		return nil, replica.ErrNotLeader
	}
	return nil, replica.ErrUnknownPartition
}

// leaderHint is the KIP-951 answer to NOT_LEADER_OR_FOLLOWER: the leader and
// epoch the image knows, plus the leader's endpoint on the request's listener.
type leaderHint struct {
	leaderID, leaderEpoch int32
	ok                    bool
}

func partitionLeaderHint(t *image.Topic, partition int32) leaderHint {
	if t == nil {
		return leaderHint{}
	}
	p, ok := t.Partition(partition)
	if !ok || p.Leader < 0 {
		return leaderHint{}
	}
	return leaderHint{leaderID: p.Leader, leaderEpoch: p.LeaderEpoch, ok: true}
}

// topicConfig is a topic's setting from the image: the topic's own config,
// else the cluster-wide dynamic broker default (brokerKey).
func topicConfig(img *image.Image, topic, key, brokerKey string) (string, bool) {
	if v, ok := img.ConfigValue(image.ConfigResource{Type: image.ConfigTopic, Name: topic}, key); ok {
		return v, true
	}
	return img.ConfigValue(image.ConfigResource{Type: image.ConfigBroker}, brokerKey)
}

// appendOptions are a produce's settings for one topic: min.insync.replicas
// (topic, cluster default, else the broker's static value) and
// message.timestamp.type (topic, cluster default, else the broker's static
// log.message.timestamp.type; LogAppendTime stamps batches with nowMs).
func (c *ClientAPI) appendOptions(img *image.Image, topic string, acks int16, nowMs int64) replica.AppendOptions {
	opts := replica.AppendOptions{RequiredAcks: acks, MinInsyncReplicas: c.cfg.MinInsyncReplicas, LogAppendTimeMs: -1}
	if v, ok := topicConfig(img, topic, "min.insync.replicas", "min.insync.replicas"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			opts.MinInsyncReplicas = n
		}
	}
	tsType := c.cfg.LogMessageTimestampType
	if v, ok := topicConfig(img, topic, "message.timestamp.type", "log.message.timestamp.type"); ok {
		tsType = v
	}
	if tsType == "LogAppendTime" {
		opts.LogAppendTimeMs = nowMs
	}
	return opts
}

// SyncReplicas makes the replica manager host what next says this broker
// hosts, given the image it had before (prev): partitions whose replicas
// include nodeID are applied (created on first sight, then leader or follower
// at the image's leader epoch and ISR); partitions of deleted topics, or no
// longer assigned here, are removed with their logs. It runs on the metadata
// publisher's goroutine after every publish.
//
// Topic configs go first: a topic's effective configuration (its configs,
// else this broker's or the cluster's dynamic defaults, else the manager's
// static defaults) is set whenever the topic or any of those configs
// changed, so new partitions open with it and open logs follow updates.
func SyncReplicas(m *replica.Manager, nodeID int32, prev, next *image.Image, log *zap.Logger) {
	changes := image.Diff(prev, next)
	syncTopicConfigs(m, nodeID, changes, next, log)
	// At its size (the partitions assigned here): a broker catching up on
	// a large create gets every partition in one publish, and a growing
	// append's copies were tens of megabytes at 100k partitions.
	n := 0
	for _, tc := range changes.Topics {
		if t, ok := next.TopicByID(tc.ID); ok && !tc.Deleted {
			for _, id := range tc.Partitions {
				if part, ok := t.Partition(id); ok && slices.Contains(part.Replicas(), nodeID) {
					n++
				}
			}
		}
	}
	states := make([]replica.PartitionState, 0, n)
	for _, tc := range changes.Topics {
		if tc.Deleted {
			removeTopic(m, prev, tc, log)
			continue
		}
		t, ok := next.TopicByID(tc.ID)
		if !ok {
			continue
		}
		for _, id := range tc.Partitions {
			if st, ok := syncPartition(m, nodeID, t, id, log); ok {
				states = append(states, st)
			}
		}
	}
	// One ApplyAll: the partitions' file work (log creation, leader epoch
	// starts) runs concurrently instead of one fsync after the other.
	if err := m.ApplyAll(states); err != nil {
		log.Error("hosting partitions failed", zap.Error(err))
	}
}

// syncTopicConfigs recomputes the configuration of the topics changes
// touches: new or changed topics, topics whose configs changed, and every
// hosted topic when a broker default (cluster-wide or this broker's) did.
func syncTopicConfigs(m *replica.Manager, nodeID int32, changes image.Changes, next *image.Image, log *zap.Logger) {
	topics := map[string]bool{}
	for _, tc := range changes.Topics {
		if tc.Deleted {
			m.ForgetTopicConfig(tc.Name)
		}
	}
	for _, tc := range changes.Topics {
		if !tc.Deleted {
			topics[tc.Name] = true
		}
	}
	own := strconv.Itoa(int(nodeID))
	for _, res := range changes.Configs {
		switch {
		case res.Type == image.ConfigTopic:
			topics[res.Name] = true
		case res.Type == image.ConfigBroker && (res.Name == "" || res.Name == own):
			for _, tp := range m.Hosted() {
				topics[tp.Topic] = true
			}
		}
	}
	for name := range topics {
		if _, ok := next.TopicByName(name); !ok {
			continue
		}
		cfg, err := EffectiveTopicConfig(m.DefaultTopicConfig(), next, nodeID, name)
		if err != nil {
			log.Warn("ignoring topic configs that do not parse", zap.String("topic", name), zap.Error(err))
		}
		m.SetTopicConfig(name, cfg)
	}
}

// EffectiveTopicConfig layers topic's configuration as Kafka's LogConfig
// does: the topic's own configs, else this broker's dynamic config, else the
// cluster-wide dynamic default, else defaults (the static settings). A value
// that does not parse leaves the layer below in force and is reported.
func EffectiveTopicConfig(defaults replica.TopicConfig, img *image.Image, nodeID int32, topic string) (replica.TopicConfig, error) {
	own := image.ConfigResource{Type: image.ConfigBroker, Name: strconv.Itoa(int(nodeID))}
	cluster := image.ConfigResource{Type: image.ConfigBroker}
	topicRes := image.ConfigResource{Type: image.ConfigTopic, Name: topic}
	return defaults.With(func(topicKey, brokerKey string) (string, bool) {
		if v, ok := img.ConfigValue(topicRes, topicKey); ok {
			return v, true
		}
		if v, ok := img.ConfigValue(own, brokerKey); ok {
			return v, true
		}
		return img.ConfigValue(cluster, brokerKey)
	})
}

// removeTopic deletes the hosted logs of deleted topic tc, looking up the
// partitions prev gave it by name: a delete costs the same whatever else the
// broker hosts (it listed and sorted every hosted partition per deleted
// topic: at a million partitions about half a second each, issue 17).
func removeTopic(m *replica.Manager, prev *image.Image, tc image.TopicChange, log *zap.Logger) {
	t, ok := prev.TopicByID(tc.ID)
	if !ok {
		return
	}
	for id := range t.Partitions() {
		tp := replica.TopicPartition{Topic: tc.Name, Partition: id}
		p, ok := m.Partition(tp)
		if !ok {
			continue
		}
		if tid, _ := p.Log().TopicID(); tid != [16]byte(tc.ID) {
			continue // a newer topic of the same name
		}
		if err := m.Remove(tp, true); err != nil {
			log.Error("deleting the log of a deleted topic failed", zap.Stringer("partition", tp), zap.Error(err))
		}
	}
}

// syncPartition removes partition id of t if it is no longer assigned
// here, or returns the state to apply.
func syncPartition(m *replica.Manager, nodeID int32, t *image.Topic, id int32, log *zap.Logger) (replica.PartitionState, bool) {
	tp := replica.TopicPartition{Topic: t.Name(), Partition: id}
	part, ok := t.Partition(id)
	if !ok || !slices.Contains(part.Replicas(), nodeID) {
		if p, hosted := m.Partition(tp); hosted {
			if tid, _ := p.Log().TopicID(); tid == [16]byte(t.ID()) {
				if err := m.Remove(tp, true); err != nil {
					log.Error("deleting a moved replica's log failed", zap.Stringer("partition", tp), zap.Error(err))
				}
			}
		}
		return replica.PartitionState{}, false
	}
	return replica.PartitionState{TopicPartition: tp, TopicID: [16]byte(t.ID()), Leader: part.Leader,
		LeaderEpoch: part.LeaderEpoch, PartitionEpoch: part.PartitionEpoch,
		Replicas: part.Replicas(), ISR: part.ISR()}, true
}

// DeleteStrays removes partition logs left on disk that img no longer
// assigns to nodeID: their topic was deleted, or recreated under a new id, or
// the replica moved, while the broker was down. The broker runs it once, on
// the first publish after the controller found it caught up (RECOVERY), as
// Kafka's broker does after its initial metadata catch-up; an older image
// would take a newer topic's log for a stray.
func DeleteStrays(m *replica.Manager, nodeID int32, img *image.Image, log *zap.Logger) {
	_, err := m.DeleteStrays(func(tp replica.TopicPartition, id [16]byte) bool {
		t, ok := img.TopicByID(records.UUID(id))
		if !ok || t.Name() != tp.Topic {
			return false
		}
		p, ok := t.Partition(tp.Partition)
		return ok && slices.Contains(p.Replicas(), nodeID)
	})
	if err != nil {
		log.Error("deleting stray partition logs failed", zap.Error(err))
	}
}
