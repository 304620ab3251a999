package app

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Mode selects which metadata system the node runs.
type Mode string

const (
	// ModeKRaft is the log-replicated metadata quorum (KIP-500, KIP-595).
	ModeKRaft Mode = "kraft"
	// ModeZKLegacy emulates the ZooKeeper-era controller that pushes
	// LeaderAndIsr/UpdateMetadata to brokers.
	ModeZKLegacy Mode = "zk-legacy"
)

// Role is one entry of process.roles.
type Role string

const (
	RoleBroker     Role = "broker"
	RoleController Role = "controller"
)

// DefaultMetadataVersion is the metadata.version kraftd formats and runs
// with. 3.6-IV2 (feature level 14) predates directory assignment (3.7-IV2),
// so no log-dir plumbing is needed in registrations and partition records.
const DefaultMetadataVersion = "3.6-IV2"

// Endpoint is one entry of listeners / advertised.listeners:
// NAME://host:port. An empty host means all interfaces in Kafka; kraftd
// keeps it as given.
type Endpoint struct {
	Name string
	Host string
	Port int
}

// String renders the endpoint back into listeners syntax.
func (e Endpoint) String() string {
	return e.Name + "://" + joinHostPort(e.Host, e.Port)
}

// Addr is the host:port the endpoint binds or advertises.
func (e Endpoint) Addr() string { return joinHostPort(e.Host, e.Port) }

// Voter is one entry of controller.quorum.voters: id@host:port.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// String renders the voter back into controller.quorum.voters syntax.
func (v Voter) String() string {
	return fmt.Sprintf("%d@%s", v.ID, joinHostPort(v.Host, v.Port))
}

// Config is everything a kraftd node needs, named after Kafka's
// server.properties keys (see Keys for the key -> field table with the
// defaults). Build one with DefaultConfig and Set, or LoadConfig; check it
// with Validate. Durations carry their unit last, like Kafka's key names.
//
// Config never reads flags, files or the environment itself: main does that,
// so that interop tests can build a Config in code.
type Config struct {
	// Mode is kraft (default) or zk-legacy. kraftd extension: "mode".
	Mode Mode
	// NodeID identifies the node in the quorum and cluster (node.id).
	// Required; -1 means unset.
	NodeID int32
	// ProcessRoles is broker, controller or both (process.roles).
	ProcessRoles []Role
	// Listeners are the endpoints to bind (listeners).
	Listeners []Endpoint
	// AdvertisedListeners are the endpoints published to others
	// (advertised.listeners). Empty means: listeners minus the controller
	// listeners for a broker, as in Kafka.
	AdvertisedListeners []Endpoint
	// ListenerSecurityProtocolMap maps listener name to security protocol
	// (listener.security.protocol.map). kraftd speaks only PLAINTEXT.
	ListenerSecurityProtocolMap map[string]string
	// ControllerListenerNames names the listeners controllers serve on
	// (controller.listener.names); the first is the one peers dial.
	ControllerListenerNames []string
	// InterBrokerListenerName is the listener brokers use among themselves
	// (inter.broker.listener.name).
	InterBrokerListenerName string
	// QuorumVoters is the static voter set (controller.quorum.voters).
	QuorumVoters []Voter
	// QuorumBootstrapServers are host:port controllers to discover a
	// dynamic quorum from (controller.quorum.bootstrap.servers, KIP-853).
	QuorumBootstrapServers []string

	// QuorumElectionTimeoutMs: controller.quorum.election.timeout.ms.
	QuorumElectionTimeoutMs int32
	// QuorumFetchTimeoutMs: controller.quorum.fetch.timeout.ms.
	QuorumFetchTimeoutMs int32
	// QuorumElectionBackoffMaxMs: controller.quorum.election.backoff.max.ms.
	QuorumElectionBackoffMaxMs int32
	// QuorumAppendLingerMs: controller.quorum.append.linger.ms.
	QuorumAppendLingerMs int32
	// QuorumRequestTimeoutMs: controller.quorum.request.timeout.ms.
	QuorumRequestTimeoutMs int32
	// QuorumRetryBackoffMs: controller.quorum.retry.backoff.ms.
	QuorumRetryBackoffMs int32
	// BrokerHeartbeatIntervalMs: broker.heartbeat.interval.ms.
	BrokerHeartbeatIntervalMs int32
	// BrokerSessionTimeoutMs: broker.session.timeout.ms.
	BrokerSessionTimeoutMs int32
	// InitialBrokerRegistrationTimeoutMs: initial.broker.registration.timeout.ms.
	InitialBrokerRegistrationTimeoutMs int64
	// MetadataLogSegmentBytes: metadata.log.segment.bytes.
	MetadataLogSegmentBytes int64
	// MetadataLogSegmentMs: metadata.log.segment.ms.
	MetadataLogSegmentMs int64
	// MetadataMaxRetentionBytes: metadata.max.retention.bytes.
	MetadataMaxRetentionBytes int64
	// MetadataMaxRetentionMs: metadata.max.retention.ms.
	MetadataMaxRetentionMs int64
	// MetadataLogMaxRecordBytesBetweenSnapshots:
	// metadata.log.max.record.bytes.between.snapshots.
	MetadataLogMaxRecordBytesBetweenSnapshots int64
	// MetadataLogMaxSnapshotIntervalMs: metadata.log.max.snapshot.interval.ms.
	MetadataLogMaxSnapshotIntervalMs int64
	// MetadataMaxIdleIntervalMs: metadata.max.idle.interval.ms.
	MetadataMaxIdleIntervalMs int32

	// LogDirs are the data directories (log.dirs). When empty, LogDir is used.
	LogDirs []string
	// LogDir is the single data directory used when LogDirs is empty (log.dir).
	LogDir string
	// MetadataLogDir holds __cluster_metadata-0 (metadata.log.dir); empty
	// means the first log directory.
	MetadataLogDir string

	// SocketRequestMaxBytes: socket.request.max.bytes.
	SocketRequestMaxBytes int32
	// MaxConnections: max.connections.
	MaxConnections int32
	// ListenerMaxConnections: listener.name.<name>.max.connections, by
	// upper-case listener name.
	ListenerMaxConnections map[string]int32
	// QueuedMaxRequestBytes: queued.max.request.bytes; <= 0 means no bound.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdleMs: connections.max.idle.ms.
	ConnectionsMaxIdleMs int64
	// ControllerMaxRecordsPerUserOp: controller.max.records.per.user.op
	// (kraftd extension), the controller's cap on the records of one
	// CreateTopics, CreatePartitions or DeleteTopics request.
	ControllerMaxRecordsPerUserOp int32
	// NumPartitions: num.partitions.
	NumPartitions int32
	// DefaultReplicationFactor: default.replication.factor.
	DefaultReplicationFactor int16
	// AutoCreateTopicsEnable is auto.create.topics.enable (true, as Kafka).
	AutoCreateTopicsEnable bool
	// MessageMaxBytes: message.max.bytes.
	MessageMaxBytes int32
	// LogSegmentBytes: log.segment.bytes.
	LogSegmentBytes int32
	// LogRollMs and LogRollHours: log.roll.ms (wins when set) and
	// log.roll.hours; see EffectiveLogRollMs.
	LogRollMs    OptInt64
	LogRollHours int32
	// LogRetentionMs, LogRetentionMinutes and LogRetentionHours:
	// log.retention.ms, .minutes and .hours, in that precedence; see
	// EffectiveLogRetentionMs.
	LogRetentionMs, LogRetentionMinutes OptInt64
	LogRetentionHours                   int32
	// LogRetentionBytes: log.retention.bytes (-1: no bound).
	LogRetentionBytes int64
	// LogRetentionCheckIntervalMs: log.retention.check.interval.ms.
	LogRetentionCheckIntervalMs int64
	// ProducerIDExpirationMs and ProducerIDExpirationCheckIntervalMs:
	// producer.id.expiration.ms and producer.id.expiration.check.interval.ms.
	ProducerIDExpirationMs, ProducerIDExpirationCheckIntervalMs int64
	// The transaction coordinator's settings, under Kafka's names:
	// transaction.state.log.num.partitions, .replication.factor, .min.isr,
	// .segment.bytes, transaction.max.timeout.ms.
	TransactionStateLogNumPartitions     int32
	TransactionStateLogReplicationFactor int16
	TransactionStateLogMinISR            int32
	TransactionStateLogSegmentBytes      int32
	TransactionMaxTimeoutMs              int32
	// TransactionalIDExpirationMs: transactional.id.expiration.ms.
	TransactionalIDExpirationMs int64
	// HighWatermarkCheckpointIntervalMs,
	// RecoveryPointCheckpointIntervalMs and
	// LogStartOffsetCheckpointIntervalMs:
	// replica.high.watermark.checkpoint.interval.ms,
	// log.flush.offset.checkpoint.interval.ms and
	// log.flush.start.offset.checkpoint.interval.ms.
	HighWatermarkCheckpointIntervalMs  int64
	RecoveryPointCheckpointIntervalMs  int64
	LogStartOffsetCheckpointIntervalMs int64
	// LogCleanupPolicy: log.cleanup.policy, "delete", "compact" or both
	// comma-separated.
	LogCleanupPolicy string
	// LogMessageTimestampType: log.message.timestamp.type.
	LogMessageTimestampType string
	// CompressionType: compression.type.
	CompressionType string
	// MinInsyncReplicas: min.insync.replicas.
	MinInsyncReplicas int32
	// ReplicaLagTimeMaxMs: replica.lag.time.max.ms.
	ReplicaLagTimeMaxMs int64
	// ReplicaFetchWaitMaxMs, ReplicaFetchMinBytes, ReplicaFetchMaxBytes,
	// ReplicaFetchResponseMaxBytes, ReplicaFetchBackoffMs and
	// NumReplicaFetchers: replica.fetch.wait.max.ms, replica.fetch.min.bytes,
	// replica.fetch.max.bytes, replica.fetch.response.max.bytes,
	// replica.fetch.backoff.ms and num.replica.fetchers.
	ReplicaFetchWaitMaxMs        int32
	ReplicaFetchMinBytes         int32
	ReplicaFetchMaxBytes         int32
	ReplicaFetchResponseMaxBytes int32
	ReplicaFetchBackoffMs        int32
	NumReplicaFetchers           int32
	// BackgroundThreads: background.threads, the broker's background
	// writers of new logs' partition.metadata files (Kafka's scheduler
	// threads, which run those writes).
	BackgroundThreads int32
	// MaxIncrementalFetchSessionCacheSlots:
	// max.incremental.fetch.session.cache.slots (0: no sessions).
	MaxIncrementalFetchSessionCacheSlots int32
	// UncleanLeaderElectionEnable: unclean.leader.election.enable (the
	// controller's static default; topics override it).
	UncleanLeaderElectionEnable bool
	// The group coordinator's settings, under Kafka's names:
	// offsets.topic.num.partitions, offsets.topic.replication.factor,
	// offsets.topic.segment.bytes, offsets.retention.minutes,
	// offsets.retention.check.interval.ms, offsets.commit.timeout.ms,
	// offset.metadata.max.bytes, group.min.session.timeout.ms,
	// group.max.session.timeout.ms, group.initial.rebalance.delay.ms,
	// group.max.size.
	OffsetsTopicNumPartitions       int32
	OffsetsTopicReplicationFactor   int16
	OffsetsTopicSegmentBytes        int32
	OffsetsRetentionMinutes         int32
	OffsetsRetentionCheckIntervalMs int64
	OffsetsCommitTimeoutMs          int32
	OffsetMetadataMaxBytes          int32
	GroupMinSessionTimeoutMs        int32
	GroupMaxSessionTimeoutMs        int32
	GroupInitialRebalanceDelayMs    int32
	GroupMaxSize                    int32
	// BrokerRack: broker.rack.
	BrokerRack string

	// ClusterID is the cluster id to format unformatted directories with
	// and to check formatted ones against. kraftd extension: "cluster.id".
	ClusterID string

	// ZooKeeperConnect: zookeeper.connect (zk-legacy mode).
	ZooKeeperConnect string
	// ZooKeeperSessionTimeoutMs: zookeeper.session.timeout.ms.
	ZooKeeperSessionTimeoutMs int32
	// ZooKeeperMaxInFlightRequests: zookeeper.max.in.flight.requests.
	ZooKeeperMaxInFlightRequests int32
	// ControlledShutdownMaxRetries: controlled.shutdown.max.retries
	// (zk-legacy mode; a KRaft broker's controlled shutdown is heartbeats).
	ControlledShutdownMaxRetries int32
	// ControlledShutdownRetryBackoffMs: controlled.shutdown.retry.backoff.ms.
	ControlledShutdownRetryBackoffMs int32

	// MetricsListener is host:port for the Prometheus endpoint; empty
	// disables it. kraftd extension: "metrics.listener".
	MetricsListener string
	// FaultInjectionEnable arms legacyzk's fault switches in zk-legacy mode
	// and serves them as POST /faults on MetricsListener, which must then be
	// a loopback address. Off by default; for test clusters only. kraftd
	// extension: "kraftd.fault.injection.enable".
	FaultInjectionEnable bool
	// PprofEnable serves Go's net/http/pprof profiles under /debug/pprof/
	// on MetricsListener, which must then be a loopback address (a CPU
	// profile or a goroutine dump of a node under test). Off by default.
	// kraftd extension: "kraftd.pprof.enable".
	PprofEnable bool

	// Logger receives all logs; nil means zap.NewNop().
	Logger *zap.Logger
	// Out receives the human-oriented lines Kafka prints on stdout (for
	// example "Formatting metadata directory ..."); nil discards them.
	Out io.Writer
	// Rand is the entropy source for generated ids; nil means crypto/rand.
	Rand io.Reader

	// explicit records which keys were set, for defaults that depend on
	// whether the user said something (the security protocol map, log.dirs,
	// broker.id).
	explicit map[string]bool
	// brokerID is broker.id, Kafka's synonym of node.id (LoadConfig).
	brokerID int32
	// ignored are the Kafka settings set but not used by kraftd.
	ignored []string
	// controllerReplayFault is controller.Config.ReplayFault: fault
	// injection, set only by this package's tests.
	controllerReplayFault func(raftlog.Batch) error
	// brokerWithoutReplicas runs the KRaft broker role with no replica
	// manager (metadata, lifecycle and client metadata APIs only), set only
	// by this package's benchmarks: a million partitions would need a
	// million partition logs per broker.
	brokerWithoutReplicas bool
}

// EffectiveLogRollMs is log.roll.ms, else log.roll.hours in ms, as Kafka's
// KafkaConfig.logRollTimeMillis.
func (c *Config) EffectiveLogRollMs() int64 {
	if c.LogRollMs.Set {
		return c.LogRollMs.Value
	}
	return int64(c.LogRollHours) * 60 * 60 * 1000
}

// EffectiveLogRetentionMs is log.retention.ms, else .minutes, else .hours,
// in ms; any negative value is -1 (keep forever), as Kafka's
// KafkaConfig.logRetentionTimeMillis.
func (c *Config) EffectiveLogRetentionMs() int64 {
	ms := int64(c.LogRetentionHours) * 60 * 60 * 1000
	switch {
	case c.LogRetentionMs.Set:
		ms = c.LogRetentionMs.Value
	case c.LogRetentionMinutes.Set:
		ms = c.LogRetentionMinutes.Value * 60 * 1000
	}
	return max(ms, -1)
}

// DefaultConfig returns a Config holding Kafka's default for every key.
func DefaultConfig() Config {
	var c Config
	for _, k := range keys {
		if err := k.set(&c, k.Default); err != nil {
			panic(fmt.Sprintf("app: default of %s does not parse: %v", k.Name, err))
		}
	}
	c.explicit = nil
	return c
}

// Set assigns one server.properties key. A setting Kafka defines but kraftd
// does not use is accepted and listed by IgnoredKafkaKeys (a few are refused
// for their value, see kafkaKeyChecks). The error names the key, e.g.
// `config: unknown key "foo.bar"` or `config: node.id: "x" is not an integer`.
func (c *Config) Set(key, value string) error {
	k, ok := lookupKey(key)
	if !ok {
		if kafkaKnownKey(key) {
			return c.noteKafkaKey(key, strings.TrimSpace(value))
		}
		return unknownKey(key)
	}
	if err := k.set(c, strings.TrimSpace(value)); err != nil {
		return err
	}
	if c.explicit == nil {
		c.explicit = make(map[string]bool)
	}
	c.explicit[key] = true
	return nil
}

// Setting is one key=value to apply, e.g. from a flag or --override.
type Setting struct {
	Key   string
	Value string
}

// LoadConfig starts from DefaultConfig and applies the layers in order, so a
// later layer wins: main passes (config file, flags, overrides). It does not
// validate; call Validate once the caller has added Logger and friends.
func LoadConfig(layers ...[]Setting) (Config, error) {
	c := DefaultConfig()
	for _, layer := range layers {
		for _, s := range layer {
			if err := c.Set(s.Key, s.Value); err != nil {
				return Config{}, err
			}
		}
	}
	if err := c.applyBrokerID(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// applyBrokerID makes broker.id a synonym of node.id, as Kafka's
// KafkaConfig.populateSynonyms does: a ZooKeeper-era file names the node with
// broker.id only.
func (c *Config) applyBrokerID() error {
	switch {
	case !c.explicit["broker.id"]:
	case !c.explicit["node.id"]:
		c.NodeID = c.brokerID
	case c.NodeID != c.brokerID:
		return invalid("you must set `node.id` to the same value as `broker.id` (node.id=%d, broker.id=%d)",
			c.NodeID, c.brokerID)
	}
	return nil
}

// ReadPropertiesFile parses a server.properties file into settings.
func ReadPropertiesFile(path string) ([]Setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	props, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]Setting, len(props))
	for i, p := range props {
		out[i] = Setting{Key: p.Key, Value: p.Value}
	}
	return out, nil
}

// HasRole reports whether process.roles contains r.
func (c *Config) HasRole(r Role) bool {
	for _, have := range c.ProcessRoles {
		if have == r {
			return true
		}
	}
	return false
}

// AllLogDirs returns every directory that must hold meta.properties: the
// data directories plus the metadata directory, without duplicates.
func (c *Config) AllLogDirs() []string {
	dirs := c.dataDirs()
	out := append([]string(nil), dirs...)
	if md := c.metadataDir(); md != "" && !contains(out, md) {
		out = append(out, md)
	}
	return out
}

// dataDirs is log.dirs, or log.dir when log.dirs was not set at all. As in
// Kafka, log.dirs set to an empty list does not fall back to log.dir
// (Validate refuses it).
func (c *Config) dataDirs() []string {
	if len(c.LogDirs) > 0 || c.explicit["log.dirs"] {
		return c.LogDirs
	}
	if c.LogDir == "" {
		return nil
	}
	return []string{c.LogDir}
}

// DataDir is the directory partition logs live in: the first data directory
// (one directory for now; JBOD can come later).
func (c *Config) DataDir() string {
	if dirs := c.dataDirs(); len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

// metadataDir is metadata.log.dir, or the first data directory.
func (c *Config) metadataDir() string {
	if c.MetadataLogDir != "" {
		return c.MetadataLogDir
	}
	if dirs := c.dataDirs(); len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

// MetadataDir is the directory holding __cluster_metadata-0.
func (c *Config) MetadataDir() string { return c.metadataDir() }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
