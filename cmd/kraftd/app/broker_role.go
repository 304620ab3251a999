package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// brokerRole runs the KRaft broker: registration and heartbeats with the active
// controller, the metadata publisher fed by the quorum (as an observer on a
// broker-only node, or sharing the voter on a combined node), and the client APIs on
// every listener that is not a controller listener.
type brokerRole struct {
	a        *App
	mu       sync.Mutex
	b        *broker.Broker
	replicas *replica.Manager // partition logs; closed after the broker stops
}

// Prepare builds the broker; called by App.Start with the App lock held.
func (r *brokerRole) Prepare(context.Context) error {
	cfg := &r.a.cfg
	var listeners []broker.Endpoint
	for _, l := range cfg.EffectiveAdvertisedListeners() {
		listeners = append(listeners, broker.Endpoint{Name: l.Name, Host: l.Host, Port: uint16(l.Port)})
	}
	ctrl := make(map[int32]string, len(cfg.QuorumVoters))
	for _, v := range cfg.QuorumVoters {
		ctrl[v.ID] = joinHostPort(v.Host, v.Port)
	}
	controllerListener := ""
	if len(cfg.ControllerListenerNames) > 0 {
		controllerListener = cfg.ControllerListenerNames[0]
	}
	var replicas *replica.Manager
	if !cfg.brokerWithoutReplicas {
		var err error
		if replicas, err = newReplicaManager(cfg); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	b, err := broker.New(broker.Config{
		NodeID:                               cfg.NodeID,
		ClusterID:                            r.a.clusterID,
		Rack:                                 cfg.BrokerRack,
		Listeners:                            listeners,
		ControllerAddrs:                      ctrl,
		ControllerBootstrapServers:           cfg.QuorumBootstrapServers,
		ControllerListenerName:               controllerListener,
		HeartbeatIntervalMs:                  int64(cfg.BrokerHeartbeatIntervalMs),
		SessionTimeoutMs:                     int64(cfg.BrokerSessionTimeoutMs),
		InitialRegistrationTimeoutMs:         cfg.InitialBrokerRegistrationTimeoutMs,
		ControllerRequestTimeoutMs:           int64(cfg.QuorumRequestTimeoutMs),
		AutoCreateTopicsEnable:               cfg.AutoCreateTopicsEnable,
		Replicas:                             replicas,
		MinInsyncReplicas:                    int(cfg.MinInsyncReplicas),
		LogMessageTimestampType:              cfg.LogMessageTimestampType,
		StaticTopicDefaults:                  staticTopicConfigs(cfg),
		MaxIncrementalFetchSessionCacheSlots: fetchSessionSlots(cfg),
		InterBrokerListenerName:              cfg.InterBrokerListenerName,
		DefaultNumPartitions:                 cfg.NumPartitions,
		DefaultReplicationFactor:             cfg.DefaultReplicationFactor,
		Groups:                               groupConfig(cfg),
		Txns:                                 txnConfig(cfg),
		OnFatal:                              r.a.reportFatal,
		Logger:                               cfg.Logger,
	})
	if err != nil {
		if replicas != nil {
			_ = replicas.Close() // nothing was hosted yet
		}
		return fmt.Errorf("broker: %w", err)
	}
	for _, l := range cfg.BrokerEndpoints() {
		if reg := r.a.registries[l.Name]; reg != nil {
			b.RegisterHandlers(reg)
			holdUntilUnfenced(reg, b)
		}
	}
	r.a.quorum.addListener(b.Listener())
	for _, c := range b.Collectors() {
		if err := r.a.metrics.registry.Register(c); err != nil {
			return fmt.Errorf("broker metrics: %w", err)
		}
	}
	r.mu.Lock()
	r.b, r.replicas = b, replicas
	r.mu.Unlock()
	return nil
}

// holdUntilUnfenced makes every API reg serves but ApiVersions wait until
// the broker was first unfenced (lifecycle RUNNING), as Kafka's
// BrokerServer.startup enables request processing only after
// lifecycleManager.setReadyToUnfence completes, that is once the
// controller unfenced the broker: a restarting broker serves nothing, not
// even Metadata from the image it replayed, while the other brokers do not
// list it yet. A request that arrives earlier waits (its connection ending
// ends the wait) rather than being refused: the listener is already bound,
// which Kafka's is not until then. A broker that later loses its session
// and is fenced again keeps serving, as Kafka's does. Requests after the
// first unfence pay one atomic load.
func holdUntilUnfenced(reg *protocol.Registry, b *broker.Broker) {
	for _, v := range reg.Versions() {
		if v.ApiKey == apiVersionsKey {
			continue
		}
		_, _, h, _ := reg.Lookup(v.ApiKey)
		reg.Register(v.ApiKey, v.MinVersion, v.MaxVersion, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
			if b.State() < broker.StateRunning {
				if err := b.WaitState(ctx, broker.StateRunning); err != nil {
					return nil, err
				}
			}
			return h(ctx, req)
		})
	}
}

// apiVersionsKey is ApiVersions' api key: answered at once, before the
// broker is unfenced, so clients can negotiate while they wait.
const apiVersionsKey = 18

// replicaFetchConfig is the follower fetchers' replica.fetch.* settings.
func replicaFetchConfig(cfg *Config) replica.FetchConfig {
	return replica.FetchConfig{
		MaxWaitMs: zeroAsNegative(cfg.ReplicaFetchWaitMaxMs), MinBytes: zeroAsNegative(cfg.ReplicaFetchMinBytes),
		MaxBytes: zeroAsNegative(cfg.ReplicaFetchResponseMaxBytes), PartitionMaxBytes: zeroAsNegative(cfg.ReplicaFetchMaxBytes),
		BackoffMs: int64(zeroAsNegative(cfg.ReplicaFetchBackoffMs)), NumFetchers: int(cfg.NumReplicaFetchers),
	}
}

// zeroAsNegative maps a setting's 0 to replica.FetchConfig's "zero" (a
// negative value; its 0 means "Kafka's default").
func zeroAsNegative(v int32) int32 {
	if v == 0 {
		return -1
	}
	return v
}

// groupConfig is the group coordinator's part of cfg.
func groupConfig(cfg *Config) broker.GroupConfig {
	delayMs := cfg.GroupInitialRebalanceDelayMs
	if delayMs <= 0 {
		delayMs = -1 // group.initial.rebalance.delay.ms=0: no delay (GroupConfig's 0 is the default)
	}
	return broker.GroupConfig{
		OffsetsTopicNumPartitions:       cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor:   cfg.OffsetsTopicReplicationFactor,
		OffsetsTopicSegmentBytes:        cfg.OffsetsTopicSegmentBytes,
		MinSessionTimeoutMs:             cfg.GroupMinSessionTimeoutMs,
		MaxSessionTimeoutMs:             cfg.GroupMaxSessionTimeoutMs,
		InitialRebalanceDelayMs:         delayMs,
		OffsetsRetentionMinutes:         cfg.OffsetsRetentionMinutes,
		OffsetsRetentionCheckIntervalMs: cfg.OffsetsRetentionCheckIntervalMs,
		OffsetMetadataMaxBytes:          cfg.OffsetMetadataMaxBytes,
		CommitTimeoutMs:                 cfg.OffsetsCommitTimeoutMs,
		GroupMaxSize:                    cfg.GroupMaxSize,
	}
}

// txnConfig is the transaction coordinator's part of cfg.
func txnConfig(cfg *Config) broker.TxnConfig {
	return broker.TxnConfig{
		NumPartitions:     cfg.TransactionStateLogNumPartitions,
		ReplicationFactor: cfg.TransactionStateLogReplicationFactor,
		MinInsyncReplicas: int(cfg.TransactionStateLogMinISR),
		SegmentBytes:      cfg.TransactionStateLogSegmentBytes,
		MaxTimeoutMs:      cfg.TransactionMaxTimeoutMs,
		IDExpirationMs:    cfg.TransactionalIDExpirationMs,
	}
}

// staticTopicDefaults are the server.properties values of the broker
// settings behind topic configs (replica.TopicConfigKeys' broker names).
func staticTopicDefaults(cfg *Config) map[string]string {
	return map[string]string{
		"log.segment.bytes":   strconv.Itoa(int(cfg.LogSegmentBytes)),
		"log.roll.ms":         strconv.FormatInt(cfg.EffectiveLogRollMs(), 10),
		"log.retention.ms":    strconv.FormatInt(cfg.EffectiveLogRetentionMs(), 10),
		"log.retention.bytes": strconv.FormatInt(cfg.LogRetentionBytes, 10),
		"message.max.bytes":   strconv.Itoa(int(cfg.MessageMaxBytes)),
		"compression.type":    cfg.CompressionType,
		"log.cleanup.policy":  cfg.LogCleanupPolicy,
		"min.insync.replicas": strconv.Itoa(int(cfg.MinInsyncReplicas)),
	}
}

// staticTopicConfigs are the settings of staticTopicDefaults (and
// log.message.timestamp.type) that server.properties sets, one of their
// synonyms at least: what DescribeConfigs shows as a topic's
// STATIC_BROKER_CONFIG values.
func staticTopicConfigs(cfg *Config) []broker.StaticConfig {
	values := staticTopicDefaults(cfg)
	values["log.message.timestamp.type"] = cfg.LogMessageTimestampType
	synonyms := map[string][]string{
		"log.roll.ms":      {"log.roll.ms", "log.roll.hours"},
		"log.retention.ms": {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	}
	var out []broker.StaticConfig
	for key, v := range values {
		names, ok := synonyms[key]
		if !ok {
			names = []string{key}
		}
		if slices.ContainsFunc(names, func(n string) bool { return cfg.explicit[n] }) {
			out = append(out, broker.StaticConfig{Name: key, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b broker.StaticConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fetchSessionSlots maps max.incremental.fetch.session.cache.slots to the
// broker's setting, whose 0 means the default: 0 (no sessions) is -1.
func fetchSessionSlots(cfg *Config) int {
	if cfg.MaxIncrementalFetchSessionCacheSlots == 0 {
		return -1
	}
	return int(cfg.MaxIncrementalFetchSessionCacheSlots)
}

// Start starts the replica manager's background work and begins
// registration; it returns at once (a combined node's own controller
// listener is not serving yet).
func (r *brokerRole) Start(ctx context.Context) error {
	r.mu.Lock()
	replicas := r.replicas
	r.mu.Unlock()
	if replicas != nil {
		replicas.Start() // retention; stopped by replicas.Close in Stop
	}
	return r.Broker().Start(ctx)
}

// Stop runs a controlled shutdown (WantShutDown until the controller says
// ShouldShutdown, bounded by ctx) and stops the broker.
func (r *brokerRole) Stop(ctx context.Context) error {
	b := r.Broker()
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := b.Stop(ctx)
	if errors.Is(err, broker.ErrStopped) {
		err = nil
	}
	r.mu.Lock()
	replicas := r.replicas
	r.mu.Unlock()
	if replicas == nil {
		return err
	}
	return errors.Join(err, replicas.Close())
}

// Broker is the running broker or nil.
func (r *brokerRole) Broker() *broker.Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}
