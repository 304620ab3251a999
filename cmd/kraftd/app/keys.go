package app

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Key describes one configuration key kraftd accepts: its server.properties
// name, its default in text form, and what it means. The table drives
// DefaultConfig, Set, the --help text and the README reference, so the three
// cannot drift apart.
type Key struct {
	Name    string
	Default string
	Doc     string
	set     func(c *Config, v string) error
}

// Flag is the command-line flag for the key: dots become dashes.
func (k Key) Flag() string { return strings.ReplaceAll(k.Name, ".", "-") }

// Keys returns the table of known keys in documentation order.
func Keys() []Key { return append([]Key(nil), keys...) }

var keys = []Key{
	{"mode", "kraft", "kraftd extension: kraft or zk-legacy.", setMode},
	{"node.id", "-1", "Node id; required.", int32Field("node.id", func(c *Config) *int32 { return &c.NodeID })},
	{"broker.id", "-1", "Kafka's ZooKeeper-era name of node.id: when only one of the two is set, the other takes its value; when both are, they must be equal.", int32Field("broker.id", func(c *Config) *int32 { return &c.brokerID })},
	{"process.roles", "", "Comma-separated roles: broker, controller or both.", setRoles},
	{"listeners", "PLAINTEXT://:9092", "Comma-separated NAME://host:port endpoints to bind.", endpointsField("listeners", func(c *Config) *[]Endpoint { return &c.Listeners })},
	{"advertised.listeners", "", "Endpoints published to clients and peers; empty means listeners without the controller listeners.", endpointsField("advertised.listeners", func(c *Config) *[]Endpoint { return &c.AdvertisedListeners })},
	{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "NAME:PROTOCOL pairs. Unless set explicitly, controller listeners map to PLAINTEXT. kraftd serves PLAINTEXT only.", setSecurityMap},
	{"controller.listener.names", "", "Comma-separated listener names used by the controller; the first is the one peers dial.", listField(func(c *Config) *[]string { return &c.ControllerListenerNames })},
	{"inter.broker.listener.name", "PLAINTEXT", "Listener brokers use to reach each other.", stringField(func(c *Config) *string { return &c.InterBrokerListenerName })},
	{"controller.quorum.voters", "", "Static quorum: comma-separated id@host:port.", setVoters},
	{"controller.quorum.bootstrap.servers", "", "Comma-separated host:port of controllers to find the quorum leader through instead of controller.quorum.voters. A controller with it alone is part of a dynamic quorum (KIP-853) whose voters are kept in the metadata log: format it with kraftd storage format --standalone, --initial-controllers or --no-initial-controllers.", setBootstrapServers},
	{"controller.quorum.election.timeout.ms", "1000", "Time without a leader before a voter starts an election (plus up to the same again of jitter).", int32Field("controller.quorum.election.timeout.ms", func(c *Config) *int32 { return &c.QuorumElectionTimeoutMs })},
	{"controller.quorum.fetch.timeout.ms", "2000", "Time without a successful fetch before a follower starts an election.", int32Field("controller.quorum.fetch.timeout.ms", func(c *Config) *int32 { return &c.QuorumFetchTimeoutMs })},
	{"controller.quorum.election.backoff.max.ms", "1000", "Maximum backoff before a new election after a failed one.", int32Field("controller.quorum.election.backoff.max.ms", func(c *Config) *int32 { return &c.QuorumElectionBackoffMaxMs })},
	{"controller.quorum.append.linger.ms", "25", "Longest time a proposal waits to be batched with others before the leader appends and flushes it (Kafka: how long the leader lets writes accumulate before flushing). kraftd appends at once when no earlier append is in flight and batches only while one is being fsynced and committed (group commit), so this bounds the wait rather than adding to every commit; 0 appends every proposal at once.", int32Field("controller.quorum.append.linger.ms", func(c *Config) *int32 { return &c.QuorumAppendLingerMs })},
	{"controller.quorum.request.timeout.ms", "2000", "Timeout of quorum RPCs.", int32Field("controller.quorum.request.timeout.ms", func(c *Config) *int32 { return &c.QuorumRequestTimeoutMs })},
	{"controller.quorum.retry.backoff.ms", "20", "Backoff before retrying a failed quorum RPC.", int32Field("controller.quorum.retry.backoff.ms", func(c *Config) *int32 { return &c.QuorumRetryBackoffMs })},
	{"broker.heartbeat.interval.ms", "2000", "Interval between broker heartbeats to the controller.", int32Field("broker.heartbeat.interval.ms", func(c *Config) *int32 { return &c.BrokerHeartbeatIntervalMs })},
	{"broker.session.timeout.ms", "9000", "Time without a heartbeat after which the controller fences a broker.", int32Field("broker.session.timeout.ms", func(c *Config) *int32 { return &c.BrokerSessionTimeoutMs })},
	{"initial.broker.registration.timeout.ms", "60000", "How long a broker waits for its first registration to succeed.", int64Field("initial.broker.registration.timeout.ms", func(c *Config) *int64 { return &c.InitialBrokerRegistrationTimeoutMs })},
	{"log.dirs", "", "Comma-separated data directories; overrides log.dir.", listField(func(c *Config) *[]string { return &c.LogDirs })},
	{"log.dir", "./kraftd-data", "Data directory when log.dirs is unset (Kafka: /tmp/kafka-logs).", stringField(func(c *Config) *string { return &c.LogDir })},
	{"metadata.log.dir", "", "Directory of __cluster_metadata-0; empty means the first data directory.", stringField(func(c *Config) *string { return &c.MetadataLogDir })},
	{"metadata.log.segment.bytes", "1073741824", "Maximum size of one metadata log segment.", int64Field("metadata.log.segment.bytes", func(c *Config) *int64 { return &c.MetadataLogSegmentBytes })},
	{"metadata.log.segment.ms", "604800000", "Maximum age of the active metadata log segment before it rolls.", int64Field("metadata.log.segment.ms", func(c *Config) *int64 { return &c.MetadataLogSegmentMs })},
	{"metadata.max.retention.bytes", "104857600", "Metadata log bytes kept beyond the latest snapshot.", int64Field("metadata.max.retention.bytes", func(c *Config) *int64 { return &c.MetadataMaxRetentionBytes })},
	{"metadata.max.retention.ms", "604800000", "Age after which metadata log segments and snapshots older than the latest snapshot are deleted.", int64Field("metadata.max.retention.ms", func(c *Config) *int64 { return &c.MetadataMaxRetentionMs })},
	{"metadata.log.max.record.bytes.between.snapshots", "20971520", "Bytes of new metadata after which a snapshot is taken.", int64Field("metadata.log.max.record.bytes.between.snapshots", func(c *Config) *int64 { return &c.MetadataLogMaxRecordBytesBetweenSnapshots })},
	{"metadata.log.max.snapshot.interval.ms", "3600000", "Time after which a snapshot is taken if anything changed; 0 disables.", int64Field("metadata.log.max.snapshot.interval.ms", func(c *Config) *int64 { return &c.MetadataLogMaxSnapshotIntervalMs })},
	{"metadata.max.idle.interval.ms", "500", "The active controller appends a NoOpRecord after this long without writes; 0 disables.", int32Field("metadata.max.idle.interval.ms", func(c *Config) *int32 { return &c.MetadataMaxIdleIntervalMs })},
	{"socket.request.max.bytes", "104857600", "Largest request frame accepted.", int32Field("socket.request.max.bytes", func(c *Config) *int32 { return &c.SocketRequestMaxBytes })},
	{"max.connections", "2147483647", "Maximum concurrent connections of one socket server (the broker listeners, or the controller listeners, which have a server of their own as in Kafka). At the limit a listener stops accepting until a connection closes; the inter-broker listener is not held back, and closes the least recently active connection of another listener instead. At least 1 (Kafka's 0 blocks every client connection; kraftd refuses it).", int32Field("max.connections", func(c *Config) *int32 { return &c.MaxConnections })},
	{"queued.max.request.bytes", "268435456", "Bytes of requests being read or handled, over all connections of one socket server, before reading pauses; one request at a time may go past it. A frame's buffer grows as its bytes arrive. kraftd's default is 256 MiB; Kafka's is -1, no bound (0 or less means no bound here too).", int64Field("queued.max.request.bytes", func(c *Config) *int64 { return &c.QueuedMaxRequestBytes })},
	{"connections.max.idle.ms", "600000", "Idle connections are closed after this long; -1 (any negative value) never closes them, as in Kafka; 0 is refused (Kafka closes every connection as soon as it is idle).", int64Field("connections.max.idle.ms", func(c *Config) *int64 { return &c.ConnectionsMaxIdleMs })},
	{"controller.max.records.per.user.op", "10000", "Most metadata records one CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs or IncrementalAlterConfigs request may write (one per topic, topic config and partition, one per deleted topic). The default is Kafka's MAX_RECORDS_PER_USER_OP, which Kafka does not let you change; setting the key (a kraftd extension) raises it. Past it the KRaft controller answers as Kafka: CreateTopics and the config requests are refused whole with POLICY_VIOLATION \"Unable to perform excessively large batch operation.\" (a topic of 9,999 partitions is exactly 10,000 records and passes; 10,000 are refused), and CreatePartitions and DeleteTopics answer UNKNOWN_SERVER_ERROR for each topic that does not fit and go on with the others; nothing of an over-cap request's size is allocated. An ElectLeaders electing more partitions than the cap is refused whole with POLICY_VIOLATION, as Kafka's controller does, in both modes. Whatever this cap, a CreateTopics asking for more than 10,000 partitions over all its topics is refused with POLICY_VIOLATION \"Excessively large number of partitions per request.\", as Kafka does. A zk-legacy broker applies the key to the admin requests it serves only when it is set (ZooKeeper-era Kafka had no cap; unset, it allows 200000).", int32Field("controller.max.records.per.user.op", func(c *Config) *int32 { return &c.ControllerMaxRecordsPerUserOp })},
	{"num.partitions", "1", "Default partition count of new topics.", int32Field("num.partitions", func(c *Config) *int32 { return &c.NumPartitions })},
	{"default.replication.factor", "1", "Default replication factor of new topics.", int16Field("default.replication.factor", func(c *Config) *int16 { return &c.DefaultReplicationFactor })},
	{"auto.create.topics.enable", "true", "Create unknown topics on Metadata requests, as Kafka does.", boolField("auto.create.topics.enable", func(c *Config) *bool { return &c.AutoCreateTopicsEnable })},
	{"message.max.bytes", "1048588", "Largest record batch a producer may append.", int32Field("message.max.bytes", func(c *Config) *int32 { return &c.MessageMaxBytes })},
	{"log.segment.bytes", "1073741824", "Partition log segments roll before they would grow past this size (topics override it with segment.bytes).", int32Field("log.segment.bytes", func(c *Config) *int32 { return &c.LogSegmentBytes })},
	{"log.roll.ms", "", "Partition log segments roll when a batch's timestamp is this far past the segment's first (topic: segment.ms); unset means log.roll.hours.", optInt64Field("log.roll.ms", func(c *Config) *OptInt64 { return &c.LogRollMs })},
	{"log.roll.hours", "168", "log.roll.ms in hours, used when log.roll.ms is unset.", int32Field("log.roll.hours", func(c *Config) *int32 { return &c.LogRollHours })},
	{"log.retention.ms", "", "Partition log segments whose newest record is older than this are deleted (topic: retention.ms); -1 keeps them forever; unset means log.retention.minutes, then log.retention.hours.", optInt64Field("log.retention.ms", func(c *Config) *OptInt64 { return &c.LogRetentionMs })},
	{"log.retention.minutes", "", "log.retention.ms in minutes, used when log.retention.ms is unset.", optInt64Field("log.retention.minutes", func(c *Config) *OptInt64 { return &c.LogRetentionMinutes })},
	{"log.retention.hours", "168", "log.retention.ms in hours, used when log.retention.ms and log.retention.minutes are unset.", int32Field("log.retention.hours", func(c *Config) *int32 { return &c.LogRetentionHours })},
	{"log.retention.bytes", "-1", "Oldest whole segments of a partition log are deleted while the log is larger than this (topic: retention.bytes); -1 means no bound.", int64Field("log.retention.bytes", func(c *Config) *int64 { return &c.LogRetentionBytes })},
	{"log.retention.check.interval.ms", "300000", "How often partition logs are checked for segments to delete by retention.", int64Field("log.retention.check.interval.ms", func(c *Config) *int64 { return &c.LogRetentionCheckIntervalMs })},
	{"producer.id.expiration.ms", "86400000", "An idempotent or transactional producer with no ongoing transaction is forgotten by a partition once its last batch's timestamp is this far in the past (a retry of its batches is then no longer answered as a duplicate).", int64Field("producer.id.expiration.ms", func(c *Config) *int64 { return &c.ProducerIDExpirationMs })},
	{"producer.id.expiration.check.interval.ms", "600000", "How often partitions forget producers past producer.id.expiration.ms.", int64Field("producer.id.expiration.check.interval.ms", func(c *Config) *int64 { return &c.ProducerIDExpirationCheckIntervalMs })},
	{"transaction.state.log.num.partitions", "50", "Partitions of __transaction_state, created on the first FindCoordinator for a transactional id; a transactional id's coordinator leads partition abs(hash(transactional.id)) % this.", int32Field("transaction.state.log.num.partitions", func(c *Config) *int32 { return &c.TransactionStateLogNumPartitions })},
	{"transaction.state.log.replication.factor", "3", "Replication factor of __transaction_state; while fewer brokers are alive it is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE (the embedded default sets 1).", int16Field("transaction.state.log.replication.factor", func(c *Config) *int16 { return &c.TransactionStateLogReplicationFactor })},
	{"transaction.state.log.min.isr", "2", "min.insync.replicas of __transaction_state (capped by its replicas; the embedded default sets 1).", int32Field("transaction.state.log.min.isr", func(c *Config) *int32 { return &c.TransactionStateLogMinISR })},
	{"transaction.state.log.segment.bytes", "104857600", "segment.bytes of __transaction_state.", int32Field("transaction.state.log.segment.bytes", func(c *Config) *int32 { return &c.TransactionStateLogSegmentBytes })},
	{"transactional.id.expiration.ms", "604800000", "A transactional id with no transaction in flight and no update for this long is deleted from __transaction_state (its next InitProducerId gets a new producer id).", int64Field("transactional.id.expiration.ms", func(c *Config) *int64 { return &c.TransactionalIDExpirationMs })},
	{"transaction.max.timeout.ms", "900000", "Longest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it); transactions open longer than their timeout are aborted.", int32Field("transaction.max.timeout.ms", func(c *Config) *int32 { return &c.TransactionMaxTimeoutMs })},
	{"replica.high.watermark.checkpoint.interval.ms", "5000", "How often the high watermarks are written to replication-offset-checkpoint in the log directory (also at shutdown).", int64Field("replica.high.watermark.checkpoint.interval.ms", func(c *Config) *int64 { return &c.HighWatermarkCheckpointIntervalMs })},
	{"log.flush.offset.checkpoint.interval.ms", "60000", "How often the recovery points are written to recovery-point-offset-checkpoint (also at shutdown); recovery after a crash scans the logs from there.", int64Field("log.flush.offset.checkpoint.interval.ms", func(c *Config) *int64 { return &c.RecoveryPointCheckpointIntervalMs })},
	{"log.flush.start.offset.checkpoint.interval.ms", "60000", "How often log start offsets are written to log-start-offset-checkpoint (also at shutdown).", int64Field("log.flush.start.offset.checkpoint.interval.ms", func(c *Config) *int64 { return &c.LogStartOffsetCheckpointIntervalMs })},
	{"log.cleanup.policy", "delete", "Default cleanup.policy of topics: delete (retention applies), compact (records need keys; compaction itself is not implemented, and retention does not apply), or both, comma-separated.", setCleanupPolicy},
	{"log.message.timestamp.type", "CreateTime", "Default message.timestamp.type of topics: CreateTime keeps the producer's timestamps, LogAppendTime stamps batches with the broker's time.", setTimestampType},
	{"compression.type", "producer", "Default compression.type of topics: producer stores batches as sent; uncompressed, gzip, snappy, lz4 or zstd make the leader recompress batches of another codec.", setCompressionType},
	{"min.insync.replicas", "1", "In-sync replicas an acks=-1 produce needs (topics may override).", int32Field("min.insync.replicas", func(c *Config) *int32 { return &c.MinInsyncReplicas })},
	{"replica.lag.time.max.ms", "30000", "A follower that has not caught up with its leader's log end for this long leaves the ISR (and rejoins once it has).", int64Field("replica.lag.time.max.ms", func(c *Config) *int64 { return &c.ReplicaLagTimeMaxMs })},
	{"replica.fetch.wait.max.ms", "500", "How long a leader holds a follower's fetch that finds no new data; at most replica.lag.time.max.ms.", int32Field("replica.fetch.wait.max.ms", func(c *Config) *int32 { return &c.ReplicaFetchWaitMaxMs })},
	{"replica.fetch.min.bytes", "1", "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms) before the leader answers.", int32Field("replica.fetch.min.bytes", func(c *Config) *int32 { return &c.ReplicaFetchMinBytes })},
	{"replica.fetch.max.bytes", "1048576", "Bytes a follower fetches per partition in one fetch; the first batch comes whole even when larger.", int32Field("replica.fetch.max.bytes", func(c *Config) *int32 { return &c.ReplicaFetchMaxBytes })},
	{"replica.fetch.response.max.bytes", "10485760", "Bytes a follower fetches over all partitions in one fetch; the first batch comes whole even when larger.", int32Field("replica.fetch.response.max.bytes", func(c *Config) *int32 { return &c.ReplicaFetchResponseMaxBytes })},
	{"replica.fetch.backoff.ms", "1000", "Pause of a follower's fetches after a failed fetch, or of a partition after an error from a leader that has served it; a follower that has just learned of a new leader fetches at once, and retries within milliseconds while that leader catches up with the metadata.", int32Field("replica.fetch.backoff.ms", func(c *Config) *int32 { return &c.ReplicaFetchBackoffMs })},
	{"num.replica.fetchers", "1", "Fetchers (each with its own connection) a follower runs per leader broker; a partition goes to one by Kafka's hash of its name.", int32Field("num.replica.fetchers", func(c *Config) *int32 { return &c.NumReplicaFetchers })},
	{"background.threads", "10", "How many partition.metadata files (a new partition log's topic id, each written with a file and a directory fsync) a broker writes at once in the background after it creates logs; Kafka runs those writes on its scheduler of this many threads. kraftd's other background work (retention, checkpoints) runs on goroutines of its own. At least 1.", int32Field("background.threads", func(c *Config) *int32 { return &c.BackgroundThreads })},
	{"max.incremental.fetch.session.cache.slots", "1000", "Incremental fetch sessions (KIP-227) a broker keeps; a full fetch finding none free (and none to evict) is answered without a session. 0 disables sessions.", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return badValue("max.incremental.fetch.session.cache.slots", v, "is not an integer >= 0")
		}
		c.MaxIncrementalFetchSessionCacheSlots = int32(n)
		return nil
	}},
	{"unclean.leader.election.enable", "false", "Whether the controller may elect a live replica outside the ISR when no ISR member can lead (losing what only the ISR had); the topic config of the same name overrides it. The elected leader's ISR becomes just itself, with leader recovery state RECOVERING until it reports RECOVERED.", boolField("unclean.leader.election.enable", func(c *Config) *bool { return &c.UncleanLeaderElectionEnable })},
	{"offsets.topic.num.partitions", "50", "Partitions of __consumer_offsets, created on the first FindCoordinator; a group's coordinator leads partition abs(hash(group.id)) % this.", int32Field("offsets.topic.num.partitions", func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions })},
	{"offsets.topic.replication.factor", "3", "Replication factor of __consumer_offsets; while fewer brokers are alive it is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE (the embedded default sets 1).", int16Field("offsets.topic.replication.factor", func(c *Config) *int16 { return &c.OffsetsTopicReplicationFactor })},
	{"offsets.topic.segment.bytes", "104857600", "segment.bytes of __consumer_offsets.", int32Field("offsets.topic.segment.bytes", func(c *Config) *int32 { return &c.OffsetsTopicSegmentBytes })},
	{"offsets.retention.minutes", "10080", "Committed offsets of a group empty for this long (or of topics its consumers no longer subscribe to, committed this long ago) are deleted.", int32Field("offsets.retention.minutes", func(c *Config) *int32 { return &c.OffsetsRetentionMinutes })},
	{"offsets.retention.check.interval.ms", "600000", "How often expired offsets are looked for.", int64Field("offsets.retention.check.interval.ms", func(c *Config) *int64 { return &c.OffsetsRetentionCheckIntervalMs })},
	{"offsets.commit.timeout.ms", "5000", "How long an offset commit (or a group's assignment) waits for its __consumer_offsets replicas before failing.", int32Field("offsets.commit.timeout.ms", func(c *Config) *int32 { return &c.OffsetsCommitTimeoutMs })},
	{"offset.metadata.max.bytes", "4096", "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE above it).", int32Field("offset.metadata.max.bytes", func(c *Config) *int32 { return &c.OffsetMetadataMaxBytes })},
	{"group.min.session.timeout.ms", "6000", "Smallest session timeout a JoinGroup may ask for (INVALID_SESSION_TIMEOUT below it).", int32Field("group.min.session.timeout.ms", func(c *Config) *int32 { return &c.GroupMinSessionTimeoutMs })},
	{"group.max.session.timeout.ms", "1800000", "Largest session timeout a JoinGroup may ask for (INVALID_SESSION_TIMEOUT above it).", int32Field("group.max.session.timeout.ms", func(c *Config) *int32 { return &c.GroupMaxSessionTimeoutMs })},
	{"group.initial.rebalance.delay.ms", "3000", "How long the first rebalance of an empty group waits for more members (again for each newcomer, up to the rebalance timeout); 0 disables.", int32Field("group.initial.rebalance.delay.ms", func(c *Config) *int32 { return &c.GroupInitialRebalanceDelayMs })},
	{"group.max.size", "2147483647", "Most members a classic group may have (GROUP_MAX_SIZE_REACHED beyond).", int32Field("group.max.size", func(c *Config) *int32 { return &c.GroupMaxSize })},
	{"broker.rack", "", "Rack of this broker, reported in Metadata.", stringField(func(c *Config) *string { return &c.BrokerRack })},
	{"cluster.id", "", "kraftd extension: cluster id to format empty directories with and to check formatted ones against.", setClusterID},
	{"zookeeper.connect", "", "zk-legacy mode: ZooKeeper connect string host:port[,host:port][/chroot].", stringField(func(c *Config) *string { return &c.ZooKeeperConnect })},
	{"zookeeper.session.timeout.ms", "18000", "zk-legacy mode: ZooKeeper session timeout.", int32Field("zookeeper.session.timeout.ms", func(c *Config) *int32 { return &c.ZooKeeperSessionTimeoutMs })},
	{"zookeeper.max.in.flight.requests", "10", "zk-legacy mode: maximum unacknowledged ZooKeeper requests.", int32Field("zookeeper.max.in.flight.requests", func(c *Config) *int32 { return &c.ZooKeeperMaxInFlightRequests })},
	{"controlled.shutdown.max.retries", "3", "zk-legacy mode: ControlledShutdown attempts before a broker stops anyway.", int32Field("controlled.shutdown.max.retries", func(c *Config) *int32 { return &c.ControlledShutdownMaxRetries })},
	{"controlled.shutdown.retry.backoff.ms", "5000", "zk-legacy mode: pause between ControlledShutdown attempts.", int32Field("controlled.shutdown.retry.backoff.ms", func(c *Config) *int32 { return &c.ControlledShutdownRetryBackoffMs })},
	{"metrics.listener", "", "kraftd extension: host:port of the Prometheus /metrics endpoint; empty disables it.", stringField(func(c *Config) *string { return &c.MetricsListener })},
	{"kraftd.pprof.enable", "false", "kraftd extension: serves Go's net/http/pprof profiles under /debug/pprof/ on metrics.listener, which must then be set and bind a loopback address.", boolField("kraftd.pprof.enable", func(c *Config) *bool { return &c.PprofEnable })},
	{"kraftd.fault.injection.enable", "false", "kraftd extension, zk-legacy mode, for test clusters: arms legacyzk's fault switches and serves POST /faults on metrics.listener, which must then bind a loopback address.", boolField("kraftd.fault.injection.enable", func(c *Config) *bool { return &c.FaultInjectionEnable })},
}

// PatternKey is a family of keys with a variable part in the name, like
// Kafka's listener-prefixed settings (listener.name.<name>.max.connections).
// Files and --override set them; they have no flag of their own. Key.Name
// is the pattern, as the README shows it.
type PatternKey struct {
	Key
	prefix, suffix string
	setFor         func(c *Config, name, value string) error
}

// PatternKeys returns the key families in documentation order.
func PatternKeys() []PatternKey { return append([]PatternKey(nil), patternKeys...) }

var patternKeys = []PatternKey{
	{
		Key:    Key{Name: "listener.name.<name>.max.connections", Doc: "Maximum concurrent connections of the listener named in the key, in any case (as in Kafka: listener.name.internal.max.connections), on top of max.connections; at the limit the listener stops accepting until one of its connections closes. Unset means no listener limit; set from a file or --override."},
		prefix: "listener.name.", suffix: ".max.connections",
		setFor: setListenerMaxConnections,
	},
}

// lookupKey finds the key a name sets: a key of the table, or a member of a
// key family (then the returned Key's set is bound to the variable part).
func lookupKey(name string) (Key, bool) {
	if k, ok := keyIndex[name]; ok {
		return k, true
	}
	for _, p := range patternKeys {
		rest, ok := strings.CutPrefix(name, p.prefix)
		if !ok {
			continue
		}
		variable, ok := strings.CutSuffix(rest, p.suffix)
		if !ok || variable == "" || strings.Contains(variable, ".") {
			continue
		}
		k := p.Key
		k.Name = name
		k.set = func(c *Config, v string) error { return p.setFor(c, variable, v) }
		return k, true
	}
	return Key{}, false
}

func setListenerMaxConnections(c *Config, listener, v string) error {
	key := "listener.name." + listener + ".max.connections"
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return badValue(key, v, "is not an integer")
	}
	if n < 1 {
		// Kafka refuses it too when set dynamically; statically, 0 would
		// silently make the listener accept nothing.
		return badValue(key, v, "must be at least 1")
	}
	if c.ListenerMaxConnections == nil {
		c.ListenerMaxConnections = make(map[string]int32)
	}
	c.ListenerMaxConnections[strings.ToUpper(listener)] = int32(n)
	return nil
}

var keyIndex = func() map[string]Key {
	m := make(map[string]Key, len(keys))
	for _, k := range keys {
		m[k.Name] = k
	}
	return m
}()

// ValueError is a value that does not parse for its key. It matches
// ErrBadValue with errors.Is and reads `config: node.id: "x" is not an integer`.
type ValueError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("config: %s: %q %s", e.Key, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrBadValue) true.
func (e *ValueError) Is(target error) bool { return target == ErrBadValue }

func badValue(key, value, reason string) error {
	return &ValueError{Key: key, Value: value, Reason: reason}
}

func stringField(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func listField(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = splitList(v); return nil }
}

func int16Field(key string, field func(*Config) *int16) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil {
			return badValue(key, v, "is not a 16-bit integer")
		}
		*field(c) = int16(n)
		return nil
	}
}

func int32Field(key string, field func(*Config) *int32) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return badValue(key, v, "is not an integer")
		}
		*field(c) = int32(n)
		return nil
	}
}

func int64Field(key string, field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badValue(key, v, "is not a long integer")
		}
		*field(c) = n
		return nil
	}
}

func boolField(key string, field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		// Java's ConfigDef accepts only true/false, case-insensitively.
		switch strings.ToLower(v) {
		case "true":
			*field(c) = true
		case "false":
			*field(c) = false
		default:
			return badValue(key, v, "is not a boolean (true or false)")
		}
		return nil
	}
}

// OptInt64 is a setting whose Kafka default is null: Set says whether it was
// given.
type OptInt64 struct {
	Value int64
	Set   bool
}

func optInt64Field(key string, field func(*Config) *OptInt64) func(*Config, string) error {
	return func(c *Config, v string) error {
		if strings.TrimSpace(v) == "" {
			*field(c) = OptInt64{}
			return nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return badValue(key, v, "is not a long integer")
		}
		*field(c) = OptInt64{Value: n, Set: true}
		return nil
	}
}

func setCleanupPolicy(c *Config, v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return badValue("log.cleanup.policy", v, "is empty; use delete, compact or both")
	}
	for _, p := range items {
		if p != "delete" && p != "compact" {
			return badValue("log.cleanup.policy", v, "contains "+strconvQuote(p)+"; policies are delete and compact")
		}
	}
	c.LogCleanupPolicy = strings.Join(items, ",")
	return nil
}

func setTimestampType(c *Config, v string) error {
	if v != "CreateTime" && v != "LogAppendTime" {
		return badValue("log.message.timestamp.type", v, "is not one of CreateTime, LogAppendTime")
	}
	c.LogMessageTimestampType = v
	return nil
}

func setCompressionType(c *Config, v string) error {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd":
		c.CompressionType = v
		return nil
	}
	return badValue("compression.type", v, "is not one of producer, uncompressed, gzip, snappy, lz4, zstd")
}

func endpointsField(key string, field func(*Config) *[]Endpoint) func(*Config, string) error {
	return func(c *Config, v string) error {
		eps, err := ParseEndpoints(v)
		if err != nil {
			return badValue(key, v, err.Error())
		}
		*field(c) = eps
		return nil
	}
}

func setMode(c *Config, v string) error {
	switch Mode(v) {
	case ModeKRaft, ModeZKLegacy:
		c.Mode = Mode(v)
		return nil
	}
	return badValue("mode", v, "is not one of kraft, zk-legacy")
}

func setRoles(c *Config, v string) error {
	var roles []Role
	for _, r := range splitList(v) {
		role := Role(strings.ToLower(r))
		if role != RoleBroker && role != RoleController {
			return badValue("process.roles", v, "contains "+strconvQuote(r)+"; roles are broker and controller")
		}
		for _, have := range roles {
			if have == role {
				return badValue("process.roles", v, "contains "+strconvQuote(r)+" twice")
			}
		}
		roles = append(roles, role)
	}
	c.ProcessRoles = roles
	return nil
}

func setSecurityMap(c *Config, v string) error {
	m := make(map[string]string)
	for _, pair := range splitList(v) {
		name, proto, ok := strings.Cut(pair, ":")
		name, proto = strings.TrimSpace(name), strings.TrimSpace(proto)
		if !ok || name == "" || proto == "" {
			return badValue("listener.security.protocol.map", v, "has an entry that is not NAME:PROTOCOL")
		}
		m[strings.ToUpper(name)] = strings.ToUpper(proto)
	}
	c.ListenerSecurityProtocolMap = m
	return nil
}

func setVoters(c *Config, v string) error {
	voters, err := ParseVoters(v)
	if err != nil {
		return badValue("controller.quorum.voters", v, err.Error())
	}
	c.QuorumVoters = voters
	return nil
}

func setBootstrapServers(c *Config, v string) error {
	servers := splitList(v)
	for _, s := range servers {
		if _, _, err := splitHostPort(s); err != nil {
			return badValue("controller.quorum.bootstrap.servers", v, err.Error())
		}
	}
	c.QuorumBootstrapServers = servers
	return nil
}

func setClusterID(c *Config, v string) error {
	if v != "" {
		if _, err := ParseUUID(v); err != nil {
			return badValue("cluster.id", v, "is not a base64-encoded 16-byte UUID (generate one with `kraftd storage random-uuid`)")
		}
	}
	c.ClusterID = v
	return nil
}

// ParseEndpoints parses listeners syntax: NAME://host:port, comma-separated.
// Names are upper-cased, as Kafka does.
func ParseEndpoints(s string) ([]Endpoint, error) {
	var out []Endpoint
	for _, item := range splitList(s) {
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("has an entry %q that is not NAME://host:port", item)
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			return nil, err
		}
		out = append(out, Endpoint{Name: strings.ToUpper(name), Host: host, Port: port})
	}
	return out, nil
}

// ParseVoters parses controller.quorum.voters syntax: id@host:port, comma-separated.
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	for _, item := range splitList(s) {
		idText, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("has an entry %q that is not id@host:port", item)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("has an entry %q whose id is not a non-negative integer", item)
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			return nil, err
		}
		for _, v := range out {
			if v.ID == int32(id) {
				return nil, fmt.Errorf("lists voter %d twice", id)
			}
		}
		out = append(out, Voter{ID: int32(id), Host: host, Port: port})
	}
	return out, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("has an address %q that is not host:port", addr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("has an address %q with an invalid port", addr)
	}
	return host, port, nil
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// splitList splits a comma-separated value, trimming blanks and dropping
// empty items, like Kafka's ConfigDef LIST type.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func strconvQuote(s string) string { return strconv.Quote(s) }
