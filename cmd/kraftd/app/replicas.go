package app

import (
	"github.com/kraftd/kraftd/replica"
)

// newReplicaManager is the partition log manager of a broker, KRaft or
// zk-legacy: log.dirs, the static topic defaults and the checkpoint and
// replication settings.
func newReplicaManager(cfg *Config) (*replica.Manager, error) {
	topicDefaults, err := replica.DefaultTopicConfig().With(func(_, brokerKey string) (string, bool) {
		v, ok := staticTopicDefaults(cfg)[brokerKey]
		return v, ok
	})
	if err != nil {
		return nil, err
	}
	return replica.New(replica.Config{
		Dir:                                 cfg.DataDir(),
		BrokerID:                            cfg.NodeID,
		Topic:                               topicDefaults,
		RetentionCheckIntervalMs:            cfg.LogRetentionCheckIntervalMs,
		ProducerIDExpirationMs:              cfg.ProducerIDExpirationMs,
		ProducerIDExpirationCheckIntervalMs: cfg.ProducerIDExpirationCheckIntervalMs,
		HighWatermarkCheckpointIntervalMs:   cfg.HighWatermarkCheckpointIntervalMs,
		RecoveryPointCheckpointIntervalMs:   cfg.RecoveryPointCheckpointIntervalMs,
		LogStartOffsetCheckpointIntervalMs:  cfg.LogStartOffsetCheckpointIntervalMs,
		ReplicaLagTimeMaxMs:                 cfg.ReplicaLagTimeMaxMs,
		Fetch:                               replicaFetchConfig(cfg),
		BackgroundThreads:                   int(cfg.BackgroundThreads),
		Logger:                              cfg.Logger,
	})
}
