package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// legacyStopTimeout bounds a zk-legacy broker's controlled shutdown when
// the caller's context has no earlier deadline.
const legacyStopTimeout = 30 * time.Second

// legacyRole runs a ZooKeeper-era broker (--mode zk-legacy): legacyzk does
// the ZooKeeper session, registration, the /controller election and the
// push APIs; the client APIs are broker.ClientAPI, the same handlers a
// KRaft broker serves, reading the legacy metadata cache and doing admin
// requests the ZooKeeper way.
//
// The legacy broker binds its listener itself (LegacyListener), so App's
// own protocol server does not bind that one; App.Addr finds it here. Its
// socket server gets the limits App's servers get (legacyBrokerConfig).
//
// Cluster id: as in Kafka's ZooKeeper mode, /cluster/id is the truth (the
// first broker creates it). After connecting, the role checks it against
// cluster.id (when set) and every formatted log directory, and writes
// meta.properties version 0 (broker.id, cluster.id) into the empty ones,
// as KafkaServer does; a mismatch stops the start, as Kafka's
// InconsistentClusterIdException does.
type legacyRole struct {
	a *App

	mu          sync.Mutex
	b           *legacyzk.Broker
	api         *broker.ClientAPI
	replicas    *replica.Manager       // partition logs; closed after the broker stops
	fetchClient *broker.FetchTransport // follower fetches
}

// LegacyListener is the listener a zk-legacy node serves clients and the
// controller's pushes on: inter.broker.listener.name when it is a
// listener, else the first broker listener.
func (c *Config) LegacyListener() (Endpoint, bool) {
	eps := c.BrokerEndpoints()
	for _, l := range eps {
		if l.Name == c.InterBrokerListenerName {
			return l, true
		}
	}
	if len(eps) == 0 {
		return Endpoint{}, false
	}
	return eps[0], true
}

// Start runs KafkaServer.startup's order: connect to ZooKeeper (the
// cluster id), check and write meta.properties, load every partition log
// of the directory (LogManager.startup), open the data plane (the replica
// manager takes LeaderAndIsr and StopReplica, follower fetches and ISR
// changes start), and only then register the broker (it starts competing
// for /controller at once) and serve the client APIs. Registering first,
// as kraftd did, listed a restarted broker before its logs were loaded: at
// 10,000 partitions the logs then loaded behind the controller's
// LeaderAndIsr, after the broker counted as back. Called by App.Start with
// the App lock held.
func (r *legacyRole) Start(ctx context.Context) error {
	cfg := &r.a.cfg
	l, _ := cfg.LegacyListener() // Validate made sure there is one
	reg := r.a.registries[l.Name]
	ready := make(chan struct{})
	gateClientAPIs(reg, ready)
	lbCfg := cfg.legacyBrokerConfig(l, reg)
	lbCfg.DataPlane = true
	lb, err := legacyzk.OpenBroker(ctx, lbCfg)
	if err != nil {
		return fmt.Errorf("legacyzk: %w", err)
	}
	clusterID := lb.ClusterID()
	if err := prepareLegacyStorage(cfg, clusterID); err != nil {
		// The logs were not opened: a directory of another cluster is
		// left exactly as it was.
		return errors.Join(err, lb.Close())
	}
	replicas, err := newReplicaManager(cfg)
	if err != nil {
		return errors.Join(fmt.Errorf("legacyzk: %w", err), lb.Close())
	}
	replicas.Start() // retention and checkpoints; stopped by replicas.Close
	fail := func(err error) error { return errors.Join(err, lb.Close(), replicas.Close()) }
	if _, err := replicas.LoadLogs(); err != nil {
		// As Kafka's LogManager, a log that cannot be opened is reported;
		// its LeaderAndIsr opens it again and answers KAFKA_STORAGE_ERROR
		// if it still fails.
		r.a.log.Error("loading partition logs", zap.Error(err))
	}
	fetchClient := broker.NewReplicaFetchTransport(fmt.Sprintf("broker-%d-fetcher", cfg.NodeID),
		cfg.Logger.Named("fetch-client"), lb.LeaderAddr, 13)
	err = replicas.StartReplication(replica.Replication{
		// Kafka 3.3 with inter.broker.protocol.version 3.3: Fetch v13 (no
		// broker epoch) and AlterPartition v2 (topic ids).
		Fetch:          fetchClient,
		AlterPartition: broker.NewAlterPartitionTransport(2, lb.SendAlterPartition),
		Brokers:        lb,
		BrokerEpoch:    lb.BrokerEpoch,
	})
	if err != nil {
		fetchClient.Close()
		return fail(err)
	}
	lb.OpenDataPlane(replicas)
	if err := lb.Start(ctx); err != nil {
		replicas.StopReplication()
		fetchClient.Close()
		return fail(fmt.Errorf("legacyzk: %w", err))
	}
	api, err := broker.NewClientAPI(r.clientAPIConfig(lb, replicas))
	if err != nil {
		replicas.StopReplication()
		fetchClient.Close()
		return fail(err)
	}
	// The listener already answers ApiVersions and the controller's pushes;
	// the client APIs replace their gates once the cluster id is known (the
	// registry takes registrations while serving), then the gates open.
	api.Register(reg)
	api.Start() // the group coordinator's driver; stopped by api.Close in Stop
	close(ready)
	r.mu.Lock()
	r.b, r.api, r.replicas, r.fetchClient = lb, api, replicas, fetchClient
	r.mu.Unlock()
	r.a.clusterID = clusterID
	for _, c := range broker.ReplicaCollectors(cfg.NodeID, replicas) {
		if err := r.a.metrics.registry.Register(c); err != nil {
			r.a.log.Error("registering the replica manager's metrics", zap.Error(err))
		}
	}
	if cfg.FaultInjectionEnable {
		// Validate allowed it only on a loopback metrics.listener; the
		// metrics server checks the bound address again.
		r.a.metrics.handleLoopbackOnly("kraftd.fault.injection.enable", "POST /faults", faultsHandler(lb))
		r.a.metrics.handleLoopbackOnly("kraftd.fault.injection.enable", "GET /controller/view", controllerViewHandler(lb))
	}
	return nil
}

// legacyBrokerConfig is the legacy broker's configuration for listener l
// (served with reg): ZooKeeper, the broker settings, and the socket
// server's limits as App's own servers take them (serverConfig), with
// listener.name.<l>.max.connections.
func (c *Config) legacyBrokerConfig(l Endpoint, reg *protocol.Registry) legacyzk.Config {
	interBroker := ""
	if l.Name == c.InterBrokerListenerName {
		interBroker = l.Name
	}
	return legacyzk.Config{
		NodeID: c.NodeID,
		Zk: legacyzk.ZkConfig{Connect: c.ZooKeeperConnect, SessionTimeoutMs: int(c.ZooKeeperSessionTimeoutMs),
			MaxInFlightRequests: int(c.ZooKeeperMaxInFlightRequests), Logger: c.Logger.Named("zookeeper")},
		ListenerName:             l.Name,
		ListenAddr:               l.Addr(),
		Registry:                 reg,
		Server:                   c.serverConfig(interBroker, "protocol"),
		ListenerMaxConnections:   int(c.ListenerMaxConnections[l.Name]),
		Rack:                     rackPtr(c.BrokerRack),
		NumPartitions:            c.NumPartitions,
		DefaultReplicationFactor: c.DefaultReplicationFactor,
		MaxRecordsPerUserOp:      c.legacyMaxRecordsPerUserOp(),
		// Zero is legacyzk's "default"; a zero backoff must stay zero.
		ControlledShutdownMaxRetries:     int(c.ControlledShutdownMaxRetries),
		ControlledShutdownRetryBackoffMs: max(int(c.ControlledShutdownRetryBackoffMs), 1),
		FaultInjection:                   c.FaultInjectionEnable,
		Logger:                           c.Logger,
	}
}

// faultsHandler is the admin endpoint of legacyzk's fault switches on
// metrics.listener, served only with kraftd.fault.injection.enable and a
// loopback metrics.listener: POST /faults with the switch as the body, e.g.
// "drop-update-metadata-to=2", "crash-after-zk-write", "pause-before-push",
// "resume" or "clear" (legacyzk.Faults.Apply). It answers 204, or 400
// naming an unknown switch.
func faultsHandler(lb *legacyzk.Broker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 256))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := lb.Faults().Apply(strings.TrimSpace(string(body))); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// controllerViewHandler serves the active controller's in-memory
// partition states as JSON (legacyzk.ControllerView), for
// `kraftd check-divergence --controller-admin`; 404 when this broker is
// not the active controller. Served with the fault switches only.
func controllerViewHandler(lb *legacyzk.Broker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v, ok, err := lb.ControllerView(req.Context())
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case !ok:
			http.Error(w, "not the active controller", http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
	})
}

// gateClientAPIs registers every key broker.ClientAPI serves on reg with
// a handler that waits until ready is closed and then runs what reg holds
// for the key by then: the ClientAPI's own handler, which replaced the
// gate. The legacy broker must listen before it knows the cluster id (it
// registers its bound port in ZooKeeper, next to reading /cluster/id), and
// Kafka's ZooKeeper-era broker behaves alike: its sockets are bound early
// but requests are processed only once startup is done, so an early
// client waits instead of being cut off. A failed start closes the
// listener, which ends the waits.
func gateClientAPIs(reg *protocol.Registry, ready <-chan struct{}) {
	for _, v := range broker.ClientAPIVersions(true, true, true, legacyMaxVersions) {
		if _, _, _, served := reg.Lookup(v.ApiKey); served {
			continue // ApiVersions, or a push API
		}
		key := v.ApiKey
		reg.Register(key, v.MinVersion, v.MaxVersion, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
			select {
			case <-ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_, _, h, _ := reg.Lookup(key)
			return h(ctx, req)
		})
	}
}

// clientAPIConfig wires the shared handlers to the legacy broker.
func (r *legacyRole) clientAPIConfig(lb *legacyzk.Broker, replicas *replica.Manager) broker.ClientAPIConfig {
	cfg := &r.a.cfg
	return broker.ClientAPIConfig{
		NodeID:    cfg.NodeID,
		ClusterID: lb.ClusterID(),
		Metadata:  lb,
		Admin:     lb,
		// ZooKeeper-era brokers report the controller their cache knows
		// (MetadataResponse.controllerId from UpdateMetadata), and clients
		// send admin requests to any broker anyway.
		ControllerID:                         func(*image.Image, string) int32 { return lb.ControllerID() },
		AutoCreateTopicsEnable:               cfg.AutoCreateTopicsEnable,
		DefaultNumPartitions:                 cfg.NumPartitions,
		DefaultReplicationFactor:             cfg.DefaultReplicationFactor,
		StaticConfigs:                        legacyStatics(cfg),
		StaticTopicDefaults:                  staticTopicConfigs(cfg),
		MaxIncrementalFetchSessionCacheSlots: fetchSessionSlots(cfg),
		Replicas:                             replicas,
		ProducerIDs:                          lb, // blocks from /latest_producer_id_block
		MinInsyncReplicas:                    int(cfg.MinInsyncReplicas),
		LogMessageTimestampType:              cfg.LogMessageTimestampType,
		MaxVersions:                          legacyMaxVersions,
		// The group and transaction coordinators are the KRaft ones:
		// __consumer_offsets and __transaction_state are created through
		// Admin (the ZooKeeper-era CreateTopics, as Kafka 3.3 creates
		// internal topics through ZooKeeper), their partitions'
		// leadership comes from LeaderAndIsr through the replica manager,
		// and markers go to the leaders the metadata cache names.
		Groups:              groupConfig(cfg),
		Txns:                txnConfig(cfg),
		InterBrokerListener: cfg.InterBrokerListenerName,
		Logger:              cfg.Logger.Named("clientapi"),
	}
}

// legacyMaxVersions are the data-plane versions a Kafka 3.3 broker serves:
// Produce v9 and Fetch v13 (KIP-951's leader hints came with Produce v10
// and Fetch v16 in 3.7), ListOffsets v7; OffsetForLeaderEpoch v4 and
// InitProducerId v4 as in KRaft mode.
var legacyMaxVersions = map[int16]int16{0: 9, 1: 13, 2: 7}

// legacyStatics are the static settings DescribeConfigs shows for a
// zk-legacy broker (Kafka names them broker.id in ZooKeeper mode).
func legacyStatics(cfg *Config) []broker.StaticConfig {
	return []broker.StaticConfig{
		{Name: "auto.create.topics.enable", Value: strconv.FormatBool(cfg.AutoCreateTopicsEnable), Type: kmsg.ConfigTypeBoolean},
		{Name: "broker.id", Value: strconv.Itoa(int(cfg.NodeID)), Type: kmsg.ConfigTypeInt},
		{Name: "default.replication.factor", Value: strconv.Itoa(int(cfg.DefaultReplicationFactor)), Type: kmsg.ConfigTypeInt},
		{Name: "num.partitions", Value: strconv.Itoa(int(cfg.NumPartitions)), Type: kmsg.ConfigTypeInt},
		{Name: "zookeeper.connect", Value: cfg.ZooKeeperConnect, Type: kmsg.ConfigTypeString},
		{Name: "zookeeper.session.timeout.ms", Value: strconv.Itoa(int(cfg.ZooKeeperSessionTimeoutMs)), Type: kmsg.ConfigTypeInt},
	}
}

// prepareLegacyStorage checks the cluster id read from /cluster/id against
// cluster.id and the formatted log directories, and writes meta.properties
// v0 into the unformatted ones.
func prepareLegacyStorage(cfg *Config, clusterID string) error {
	if cfg.ClusterID != "" && cfg.ClusterID != clusterID {
		return fmt.Errorf("%w: ZooKeeper's /cluster/id is %s but cluster.id is %s; "+
			"zookeeper.connect may name the wrong cluster", ErrClusterIDMismatch, clusterID, cfg.ClusterID)
	}
	st, err := inspect(cfg)
	if err != nil {
		return err
	}
	if err := st.verify(clusterID, cfg.NodeID); err != nil {
		return fmt.Errorf("%w (the cluster id comes from ZooKeeper's /cluster/id; "+
			"zookeeper.connect may name the wrong cluster)", err)
	}
	for _, dir := range st.empty {
		m := MetaProperties{Version: 0, ClusterID: clusterID, NodeID: cfg.NodeID}
		if err := WriteMetaProperties(dir, m, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// Stop is Kafka's controlled shutdown (ControlledShutdown to the
// controller, retried as controlled.shutdown.* say), then the session
// closes and the registration vanishes; then replication stops and the
// partition logs close (flushed, checkpoints and the clean-shutdown marker
// written). An incomplete controlled shutdown
// is logged by legacyzk and not an error here: Kafka shuts down anyway.
func (r *legacyRole) Stop(ctx context.Context) error {
	r.mu.Lock()
	lb, api, replicas, fetchClient := r.b, r.api, r.replicas, r.fetchClient
	r.mu.Unlock()
	if lb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, legacyStopTimeout)
	defer cancel()
	err := lb.Shutdown(ctx)
	api.Close()
	replicas.StopReplication()
	fetchClient.Close()
	closeErr := replicas.Close()
	if errors.Is(err, legacyzk.ErrShutdownIncomplete) || errors.Is(err, context.DeadlineExceeded) {
		r.a.log.Warn("controlled shutdown incomplete; stopped anyway", zap.Error(err))
		err = nil
	}
	return errors.Join(err, closeErr)
}

// Kill stops the legacy broker as kill -9 would (its ZooKeeper session
// lingers until it would expire); Stop then only closes the logs.
func (r *legacyRole) Kill() {
	if lb := r.Broker(); lb != nil {
		lb.Kill()
	}
}

// Broker is the running legacy broker or nil.
func (r *legacyRole) Broker() *legacyzk.Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

// Replicas is the running legacy broker's replica manager or nil.
func (r *legacyRole) Replicas() *replica.Manager {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replicas
}

// LegacyReplicas is the zk-legacy broker's replica manager (nil in KRaft
// mode or before Start).
func (a *App) LegacyReplicas() *replica.Manager {
	if a.legacy == nil {
		return nil
	}
	return a.legacy.Replicas()
}

// legacyMaxRecordsPerUserOp is the zk-legacy brokers' admin request cap:
// controller.max.records.per.user.op when it is set, else legacyzk's own
// default (zero). The key's default is the KRaft controller's, Kafka's
// MAX_RECORDS_PER_USER_OP; ZooKeeper-era Kafka had no such cap, so a
// zk-legacy broker only keeps kraftd's bound on what one request allocates.
func (c *Config) legacyMaxRecordsPerUserOp() int {
	if !c.explicit["controller.max.records.per.user.op"] {
		return 0
	}
	return int(c.ControllerMaxRecordsPerUserOp)
}
