package broker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// Endpoint is one advertised broker listener, as it goes into
// BrokerRegistration and from there into every client's Metadata answer.
type Endpoint struct {
	Name string // listener name, e.g. "PLAINTEXT"
	Host string
	Port uint16
	// SecurityProtocol is Kafka's id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
	// 3 SASL_SSL.
	SecurityProtocol int16
}

// Defaults for Config zero values (Kafka's defaults where Kafka has one).
const (
	DefaultHeartbeatIntervalMs          = 2000  // broker.heartbeat.interval.ms
	DefaultSessionTimeoutMs             = 9000  // broker.session.timeout.ms
	DefaultInitialRegistrationTimeoutMs = 60000 // initial.broker.registration.timeout.ms
	DefaultControllerRequestTimeoutMs   = 2000
	DefaultControlledShutdownTimeoutMs  = 30000
	// DefaultMinMetadataVersion is 3.3-IV3, the oldest metadata.version
	// Kafka 4.0 brokers accept.
	DefaultMinMetadataVersion int16 = 7
	// DefaultMaxMetadataVersion is 3.9-IV0; newer levels need record
	// versions metadata/image does not replay.
	DefaultMaxMetadataVersion int16 = 21
)

// Config configures a Broker. Validate fills in defaults; durations are in
// milliseconds, zero means the default and negative values are rejected.
type Config struct {
	// NodeID is node.id. Required, >= 0.
	NodeID int32
	// ClusterID is the cluster id from meta.properties: sent in
	// BrokerRegistration and returned in Metadata/DescribeCluster. Required.
	ClusterID string
	// Rack is broker.rack; "" means no rack.
	Rack string
	// Listeners are the advertised listeners (advertised.listeners). At
	// least one is required.
	Listeners []Endpoint
	// LogDirs are the directory ids of the online log directories
	// (meta.properties directory.id, KIP-858). Empty gets one random id per
	// start, which is enough for a broker that stores no partition data.
	LogDirs [][16]byte

	// ControllerAddrs maps each controller (voter) id to its controller
	// listener host:port (controller.quorum.voters).
	ControllerAddrs map[int32]string
	// ControllerBootstrapServers are controller host:port addresses to find the
	// active controller through when ControllerAddrs is empty
	// (controller.quorum.bootstrap.servers); the quorum's leader changes then
	// carry the leader's address. One of the two is required.
	ControllerBootstrapServers []string
	// ControllerListenerName names the controller listener; informational.
	ControllerListenerName string
	// ControllerClient overrides the client used for controller traffic
	// (tests). By default the broker opens its own: registration and
	// heartbeats never queue behind the quorum's long-polling Fetch.
	ControllerClient *protocol.Client

	HeartbeatIntervalMs          int64 // broker.heartbeat.interval.ms (2000)
	SessionTimeoutMs             int64 // broker.session.timeout.ms (9000)
	InitialRegistrationTimeoutMs int64 // initial.broker.registration.timeout.ms (60000)
	// ControllerRequestTimeoutMs bounds one registration or heartbeat RPC
	// (2000). It is clamped below SessionTimeoutMs: a heartbeat that may
	// wait longer than the session would let the controller fence a live
	// broker (KAFKA-14392).
	ControllerRequestTimeoutMs int64
	// ControlledShutdownTimeoutMs bounds Stop's wait for ShouldShutdown
	// when its ctx has no earlier deadline (30000).
	ControlledShutdownTimeoutMs int64

	// MinMetadataVersion and MaxMetadataVersion are the metadata.version
	// range this broker registers as supported.
	MinMetadataVersion, MaxMetadataVersion int16

	// AutoCreateTopicsEnable is auto.create.topics.enable. The zero value is
	// false; kraftd's command line defaults it to true, as Kafka does, so a
	// producer can write to a new topic right away.
	AutoCreateTopicsEnable bool
	// Replicas, when set, hosts this broker's partition logs: the broker keeps
	// it in step with the published image (SyncReplicas) and serves Produce,
	// Fetch, ListOffsets and InitProducerId. The caller owns it and closes it
	// after Stop.
	Replicas *replica.Manager
	// MinInsyncReplicas is the static min.insync.replicas (1).
	MinInsyncReplicas int
	// LogMessageTimestampType is the static log.message.timestamp.type
	// (CreateTime when empty).
	LogMessageTimestampType string
	// MaxIncrementalFetchSessionCacheSlots is
	// max.incremental.fetch.session.cache.slots
	// (ClientAPIConfig.MaxIncrementalFetchSessionCacheSlots).
	MaxIncrementalFetchSessionCacheSlots int
	// StaticTopicDefaults are the log.* settings behind topic configs that
	// server.properties sets (ClientAPIConfig.StaticTopicDefaults).
	StaticTopicDefaults []StaticConfig
	// InterBrokerListenerName is inter.broker.listener.name: the listener of
	// other brokers this broker's followers fetch from. Empty: the first of
	// Listeners.
	InterBrokerListenerName string

	// DefaultNumPartitions (num.partitions, 1) and
	// DefaultReplicationFactor (default.replication.factor, 1) shape
	// auto-created topics.
	DefaultNumPartitions     int32
	DefaultReplicationFactor int16
	// Groups configures the group coordinator (with Replicas).
	Groups GroupConfig
	// Txns configures the transaction coordinator (with Replicas).
	Txns TxnConfig

	// OnFatal is called once, from a broker goroutine, when the broker must
	// stop: a committed record it cannot apply, or no registration within
	// InitialRegistrationTimeoutMs. nil only logs.
	OnFatal func(error)

	// Rand picks the ControllerID reported to clients and jitters backoff.
	// nil gets a generator seeded from the clock.
	Rand *rand.Rand
	// Now is the wall clock (metric lag). nil is time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

// Validate checks cfg and fills in defaults.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("%w: node id %d", ErrInvalidConfig, c.NodeID)
	case c.ClusterID == "":
		return fmt.Errorf("%w: no cluster id", ErrInvalidConfig)
	case len(c.Listeners) == 0:
		return fmt.Errorf("%w: no advertised listeners", ErrInvalidConfig)
	case len(c.ControllerAddrs) == 0 && len(c.ControllerBootstrapServers) == 0:
		return fmt.Errorf("%w: no controller addresses", ErrInvalidConfig)
	}
	for _, ms := range []int64{c.HeartbeatIntervalMs, c.SessionTimeoutMs, c.InitialRegistrationTimeoutMs,
		c.ControllerRequestTimeoutMs, c.ControlledShutdownTimeoutMs} {
		if ms < 0 {
			return fmt.Errorf("%w: negative timing %d ms", ErrInvalidConfig, ms)
		}
	}
	setDefault(&c.HeartbeatIntervalMs, DefaultHeartbeatIntervalMs)
	setDefault(&c.SessionTimeoutMs, DefaultSessionTimeoutMs)
	setDefault(&c.InitialRegistrationTimeoutMs, DefaultInitialRegistrationTimeoutMs)
	setDefault(&c.ControllerRequestTimeoutMs, DefaultControllerRequestTimeoutMs)
	setDefault(&c.ControlledShutdownTimeoutMs, DefaultControlledShutdownTimeoutMs)
	c.ControllerRequestTimeoutMs = max(1, min(c.ControllerRequestTimeoutMs, c.SessionTimeoutMs-1))
	if c.MinMetadataVersion == 0 && c.MaxMetadataVersion == 0 {
		c.MinMetadataVersion, c.MaxMetadataVersion = DefaultMinMetadataVersion, DefaultMaxMetadataVersion
	}
	if c.MinMetadataVersion < 1 || c.MaxMetadataVersion < c.MinMetadataVersion {
		return fmt.Errorf("%w: metadata.version range %d-%d", ErrInvalidConfig, c.MinMetadataVersion, c.MaxMetadataVersion)
	}
	if c.DefaultNumPartitions <= 0 {
		c.DefaultNumPartitions = 1
	}
	if c.DefaultReplicationFactor <= 0 {
		c.DefaultReplicationFactor = 1
	}
	if c.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		c.Rand = rand.New(rand.NewPCG(seed, uint64(c.NodeID)))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Listeners = slices.Clone(c.Listeners)
	if c.InterBrokerListenerName == "" {
		c.InterBrokerListenerName = c.Listeners[0].Name
	}
	return nil
}

func setDefault(v *int64, def int64) {
	if *v == 0 {
		*v = def
	}
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
