package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/coordinator/group"
)

// GroupConfig holds the group coordinator's broker settings; zero values
// take Kafka's defaults.
type GroupConfig struct {
	// Disabled: no group coordinator and no group APIs even with a replica
	// manager.
	Disabled bool
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (50).
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor
	// (3): __consumer_offsets is created with it on the first
	// FindCoordinator; while fewer brokers are alive the creation fails and
	// FindCoordinator answers COORDINATOR_NOT_AVAILABLE.
	OffsetsTopicReplicationFactor int16
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes (100 MiB).
	OffsetsTopicSegmentBytes int32
	// The rest are group.Config's, under Kafka's names:
	// group.min.session.timeout.ms, group.max.session.timeout.ms,
	// group.initial.rebalance.delay.ms (0: 3000; negative: none),
	// offsets.retention.minutes, offsets.retention.check.interval.ms,
	// offset.metadata.max.bytes, offsets.commit.timeout.ms, group.max.size.
	MinSessionTimeoutMs, MaxSessionTimeoutMs, InitialRebalanceDelayMs int32
	OffsetsRetentionMinutes                                           int32
	OffsetsRetentionCheckIntervalMs                                   int64
	OffsetMetadataMaxBytes, CommitTimeoutMs, GroupMaxSize             int32
	// NowMs is the coordinator's clock (nil: the wall clock).
	NowMs func() int64
}

func (g *GroupConfig) setDefaults() {
	if g.OffsetsTopicNumPartitions <= 0 {
		g.OffsetsTopicNumPartitions = group.DefaultNumPartitions
	}
	if g.OffsetsTopicReplicationFactor <= 0 {
		g.OffsetsTopicReplicationFactor = 3
	}
	if g.OffsetsTopicSegmentBytes <= 0 {
		g.OffsetsTopicSegmentBytes = 100 * 1024 * 1024
	}
}

// newGroupCoordinator builds the coordinator over the replica manager; the
// ClientAPI starts it with Start and stops it in Close.
func (c *ClientAPI) newGroupCoordinator() error {
	g := c.cfg.Groups
	co, err := group.New(group.Config{
		BrokerID:      c.cfg.NodeID,
		Replicas:      c.cfg.Replicas,
		NumPartitions: g.OffsetsTopicNumPartitions,
		TopicPartitions: func() int32 {
			if t, ok := c.cfg.Metadata.Image().TopicByName(group.Topic); ok {
				return int32(t.NumPartitions())
			}
			return 0
		},
		MinSessionTimeoutMs:             g.MinSessionTimeoutMs,
		MaxSessionTimeoutMs:             g.MaxSessionTimeoutMs,
		InitialRebalanceDelayMs:         g.InitialRebalanceDelayMs,
		OffsetsRetentionMs:              int64(g.OffsetsRetentionMinutes) * 60 * 1000,
		OffsetsRetentionCheckIntervalMs: g.OffsetsRetentionCheckIntervalMs,
		OffsetMetadataMaxBytes:          int(g.OffsetMetadataMaxBytes),
		CommitTimeoutMs:                 g.CommitTimeoutMs,
		GroupMaxSize:                    int(g.GroupMaxSize),
		MinInsyncReplicas:               c.cfg.MinInsyncReplicas,
		PartitionExists: func(topic string, partition int32) bool {
			t, ok := c.cfg.Metadata.Image().TopicByName(topic)
			if !ok {
				return false
			}
			_, ok = t.Partition(partition)
			return ok
		},
		NowMs:  g.NowMs,
		Logger: c.log.Named("group"),
	})
	if err != nil {
		return err
	}
	c.groups = co
	return nil
}

// Groups is the group coordinator (nil without a replica manager).
func (c *ClientAPI) Groups() *group.Coordinator { return c.groups }

// createOffsetsTopic asks the controller for __consumer_offsets, as Kafka's
// AutoTopicCreationManager does on the first FindCoordinator: 50
// partitions, offsets.topic.replication.factor, compacted. It runs in the
// background (the FindCoordinator answer does not wait for it); one request
// at a time.
func (c *ClientAPI) createOffsetsTopic() {
	g := c.cfg.Groups
	c.createInternalTopic(group.Topic, g.OffsetsTopicNumPartitions, g.OffsetsTopicReplicationFactor,
		[][2]string{
			{"cleanup.policy", "compact"},
			{"compression.type", "producer"},
			{"segment.bytes", strconv.Itoa(int(g.OffsetsTopicSegmentBytes))},
		}, &c.creatingOffsets)
}

// createInternalTopic asks the controller, in the background, for an
// internal topic with configs; *creating marks the one request in flight
// (mu guards it), so a second ask while it runs does nothing.
func (c *ClientAPI) createInternalTopic(name string, partitions int32, rf int16, configs [][2]string, creating *bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || *creating {
		return
	}
	*creating = true
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = c.cfg.AutoCreateTimeoutMs
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions, t.ReplicationFactor = partitions, rf
	for _, kv := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = kv[0], &kv[1]
		t.Configs = append(t.Configs, cfg)
	}
	req.Topics = append(req.Topics, t)
	c.wg.Go(func() {
		defer func() {
			c.mu.Lock()
			*creating = false
			c.mu.Unlock()
		}()
		resp, err := c.cfg.Admin.CreateTopics(c.bgCtx, req)
		if err != nil {
			if c.bgCtx.Err() == nil {
				c.log.Info("creating "+name+" failed", zap.Error(err))
			}
			return
		}
		for _, rt := range resp.Topics {
			if e := kerr.ErrorForCode(rt.ErrorCode); e != nil && e != kerr.TopicAlreadyExists {
				c.log.Info("creating "+name+" failed", zap.Error(e))
			}
		}
	})
}
