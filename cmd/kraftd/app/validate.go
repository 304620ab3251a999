package app

import (
	"fmt"
	"net"
	"strings"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/legacyzk"
)

// Validate fills in the defaults that depend on other settings (Logger,
// Out) and checks that the settings can work together. Messages follow
// Kafka's KafkaConfig wording where Kafka has a rule, so a Kafka operator
// recognises them; each names the keys involved.
func (c *Config) Validate() error {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	roleCheck := c.checkKRaft
	if c.Mode == ModeZKLegacy {
		roleCheck = c.checkZKLegacy
	}
	checks := []func() error{c.checkRanges, c.checkConnections, c.checkDirs, roleCheck, c.checkListeners, c.checkFaultInjection, c.checkPprof}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// checkRanges rejects values no node can run with, such as zero timeouts.
func (c *Config) checkRanges() error {
	positive := []struct {
		key   string
		value int64
	}{
		{"controller.quorum.election.timeout.ms", int64(c.QuorumElectionTimeoutMs)},
		{"controller.quorum.fetch.timeout.ms", int64(c.QuorumFetchTimeoutMs)},
		{"controller.quorum.request.timeout.ms", int64(c.QuorumRequestTimeoutMs)},
		{"broker.heartbeat.interval.ms", int64(c.BrokerHeartbeatIntervalMs)},
		{"broker.session.timeout.ms", int64(c.BrokerSessionTimeoutMs)},
		{"initial.broker.registration.timeout.ms", c.InitialBrokerRegistrationTimeoutMs},
		{"metadata.log.segment.bytes", c.MetadataLogSegmentBytes},
		{"metadata.log.segment.ms", c.MetadataLogSegmentMs},
		{"metadata.log.max.record.bytes.between.snapshots", c.MetadataLogMaxRecordBytesBetweenSnapshots},
		{"socket.request.max.bytes", int64(c.SocketRequestMaxBytes)},
		{"num.partitions", int64(c.NumPartitions)},
		{"controller.max.records.per.user.op", int64(c.ControllerMaxRecordsPerUserOp)},
		{"default.replication.factor", int64(c.DefaultReplicationFactor)},
		{"message.max.bytes", int64(c.MessageMaxBytes)},
		{"log.segment.bytes", int64(c.LogSegmentBytes)},
		{"log.roll.hours", int64(c.LogRollHours)},
		{"log.roll.ms", c.EffectiveLogRollMs()},
		{"log.retention.check.interval.ms", c.LogRetentionCheckIntervalMs},
		{"producer.id.expiration.ms", c.ProducerIDExpirationMs},
		{"producer.id.expiration.check.interval.ms", c.ProducerIDExpirationCheckIntervalMs},
		{"transaction.state.log.num.partitions", int64(c.TransactionStateLogNumPartitions)},
		{"transaction.state.log.replication.factor", int64(c.TransactionStateLogReplicationFactor)},
		{"transaction.state.log.min.isr", int64(c.TransactionStateLogMinISR)},
		{"transaction.state.log.segment.bytes", int64(c.TransactionStateLogSegmentBytes)},
		{"transaction.max.timeout.ms", int64(c.TransactionMaxTimeoutMs)},
		{"transactional.id.expiration.ms", c.TransactionalIDExpirationMs},
		{"replica.high.watermark.checkpoint.interval.ms", c.HighWatermarkCheckpointIntervalMs},
		{"log.flush.offset.checkpoint.interval.ms", c.RecoveryPointCheckpointIntervalMs},
		{"log.flush.start.offset.checkpoint.interval.ms", c.LogStartOffsetCheckpointIntervalMs},
		{"replica.lag.time.max.ms", c.ReplicaLagTimeMaxMs},
		{"min.insync.replicas", int64(c.MinInsyncReplicas)},
		{"num.replica.fetchers", int64(c.NumReplicaFetchers)},
		{"background.threads", int64(c.BackgroundThreads)},
		{"offsets.topic.num.partitions", int64(c.OffsetsTopicNumPartitions)},
		{"offsets.topic.replication.factor", int64(c.OffsetsTopicReplicationFactor)},
		{"offsets.topic.segment.bytes", int64(c.OffsetsTopicSegmentBytes)},
		{"offsets.retention.minutes", int64(c.OffsetsRetentionMinutes)},
		{"offsets.retention.check.interval.ms", c.OffsetsRetentionCheckIntervalMs},
		{"offsets.commit.timeout.ms", int64(c.OffsetsCommitTimeoutMs)},
		{"offset.metadata.max.bytes", int64(c.OffsetMetadataMaxBytes)},
		{"group.min.session.timeout.ms", int64(c.GroupMinSessionTimeoutMs)},
		{"group.max.session.timeout.ms", int64(c.GroupMaxSessionTimeoutMs)},
		{"group.max.size", int64(c.GroupMaxSize)},
		{"zookeeper.session.timeout.ms", int64(c.ZooKeeperSessionTimeoutMs)},
		{"zookeeper.max.in.flight.requests", int64(c.ZooKeeperMaxInFlightRequests)},
		{"controlled.shutdown.max.retries", int64(c.ControlledShutdownMaxRetries)},
	}
	for _, p := range positive {
		if p.value < 1 {
			return badValue(p.key, fmt.Sprint(p.value), "must be at least 1")
		}
	}
	nonNegative := []struct {
		key   string
		value int64
	}{
		{"controller.quorum.election.backoff.max.ms", int64(c.QuorumElectionBackoffMaxMs)},
		{"controller.quorum.append.linger.ms", int64(c.QuorumAppendLingerMs)},
		{"controller.quorum.retry.backoff.ms", int64(c.QuorumRetryBackoffMs)},
		{"metadata.log.max.snapshot.interval.ms", c.MetadataLogMaxSnapshotIntervalMs},
		{"metadata.max.idle.interval.ms", int64(c.MetadataMaxIdleIntervalMs)},
		{"controlled.shutdown.retry.backoff.ms", int64(c.ControlledShutdownRetryBackoffMs)},
		{"replica.fetch.wait.max.ms", int64(c.ReplicaFetchWaitMaxMs)},
		{"replica.fetch.min.bytes", int64(c.ReplicaFetchMinBytes)},
		{"replica.fetch.max.bytes", int64(c.ReplicaFetchMaxBytes)},
		{"replica.fetch.response.max.bytes", int64(c.ReplicaFetchResponseMaxBytes)},
		{"replica.fetch.backoff.ms", int64(c.ReplicaFetchBackoffMs)},
	}
	for _, p := range nonNegative {
		if p.value < 0 {
			return badValue(p.key, fmt.Sprint(p.value), "must not be negative")
		}
	}
	if int64(c.ReplicaFetchWaitMaxMs) > c.ReplicaLagTimeMaxMs {
		// Kafka's KafkaConfig requires it too: a follower parked longer than
		// the lag bound would fall out of the ISR while idle.
		return badValue("replica.fetch.wait.max.ms", fmt.Sprint(c.ReplicaFetchWaitMaxMs),
			fmt.Sprintf("must be at most replica.lag.time.max.ms (%d)", c.ReplicaLagTimeMaxMs))
	}
	if c.MetricsListener != "" {
		if _, _, err := splitHostPort(c.MetricsListener); err != nil {
			return badValue("metrics.listener", c.MetricsListener, err.Error())
		}
	}
	return nil
}

// checkConnections gives max.connections and connections.max.idle.ms Kafka's
// meaning where kraftd can, and refuses the values whose Kafka meaning would
// leave the node unreachable rather than letting them fall back to a default.
func (c *Config) checkConnections() error {
	if c.MaxConnections < 1 {
		// Kafka accepts 0 and then blocks every new connection outside the
		// inter-broker listener: clients and, on a controller, the quorum.
		return badValue("max.connections", fmt.Sprint(c.MaxConnections),
			"must be at least 1 (with 0 the node would accept no client connection)")
	}
	if c.ConnectionsMaxIdleMs == 0 {
		// Kafka closes a connection as soon as it is idle at 0; a negative value
		// (-1) turns idle closing off.
		return badValue("connections.max.idle.ms", "0",
			"would close every connection as soon as it is idle; use a positive number of milliseconds, or -1 never to close idle connections")
	}
	return nil
}

// checkDirs wants at least one data directory. As in Kafka, log.dirs set to
// an empty list is an error, not a fall back to log.dir.
func (c *Config) checkDirs() error {
	if len(c.dataDirs()) == 0 {
		if c.explicit["log.dirs"] {
			return invalid("log.dirs is set but names no directory; at least one log directory must be defined via log.dirs or log.dir")
		}
		return invalid("at least one log directory must be defined via log.dirs or log.dir")
	}
	return nil
}

// SecurityProtocol returns the security protocol of a listener. When
// listener.security.protocol.map was not set explicitly, controller
// listeners default to PLAINTEXT, as in Kafka's KRaft mode.
func (c *Config) SecurityProtocol(listener string) (string, bool) {
	if p, ok := c.ListenerSecurityProtocolMap[listener]; ok {
		return p, true
	}
	if !c.explicit["listener.security.protocol.map"] && contains(c.ControllerListenerNames, listener) {
		return "PLAINTEXT", true
	}
	return "", false
}

// checkListeners: unique names and ports, and every listener maps to a
// security protocol kraftd can serve.
func (c *Config) checkListeners() error {
	if len(c.Listeners) == 0 {
		return invalid("listeners must contain at least one endpoint")
	}
	names := make(map[string]bool)
	ports := make(map[int]bool)
	for _, l := range c.Listeners {
		if names[l.Name] {
			return invalid("each listener must have a different name, listeners: %s", joinEndpoints(c.Listeners))
		}
		names[l.Name] = true
		if l.Port != 0 && ports[l.Port] {
			return invalid("each listener must have a different port, listeners: %s", joinEndpoints(c.Listeners))
		}
		ports[l.Port] = true
	}
	for _, l := range append(append([]Endpoint(nil), c.Listeners...), c.AdvertisedListeners...) {
		proto, ok := c.SecurityProtocol(l.Name)
		if !ok {
			return invalid("no security protocol defined for listener %s in listener.security.protocol.map", l.Name)
		}
		if proto != "PLAINTEXT" {
			return invalid("listener %s uses security protocol %s; kraftd supports only PLAINTEXT", l.Name, proto)
		}
	}
	return nil
}

func (c *Config) checkKRaft() error {
	if c.NodeID < 0 {
		return invalid("node.id is required (a non-negative integer)")
	}
	if len(c.ProcessRoles) == 0 {
		return invalid("process.roles is required in kraft mode: broker, controller or broker,controller")
	}
	if len(c.ControllerListenerNames) == 0 {
		return invalid("controller.listener.names must not be empty when running in KRaft mode")
	}
	if len(c.QuorumVoters) == 0 && len(c.QuorumBootstrapServers) == 0 {
		return invalid("either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers " +
			"or controller.quorum.voters must contain a parseable set of controllers")
	}
	if c.HasRole(RoleController) {
		if err := c.checkControllerRole(); err != nil {
			return err
		}
	}
	if c.HasRole(RoleBroker) {
		return c.checkBrokerRole()
	}
	return nil
}

func (c *Config) checkControllerRole() error {
	if len(c.ControllerEndpoints()) == 0 {
		return invalid("controller.listener.names must contain at least one value appearing in the 'listeners' " +
			"configuration when running the KRaft controller role")
	}
	if !c.HasRole(RoleBroker) && len(c.BrokerEndpoints()) > 0 {
		return invalid("the listeners config must only contain KRaft controller listeners from " +
			"controller.listener.names when process.roles=controller")
	}
	if len(c.QuorumVoters) > 0 && !c.isVoter() {
		return invalid("if process.roles contains the 'controller' role, the node id %d must be included in "+
			"the set of voters controller.quorum.voters=%s", c.NodeID, joinVoters(c.QuorumVoters))
	}
	return nil
}

func (c *Config) checkBrokerRole() error {
	if !c.HasRole(RoleController) {
		if len(c.ControllerEndpoints()) > 0 {
			return invalid("controller.listener.names must not contain a value appearing in the 'listeners' " +
				"configuration when running KRaft with just the broker role")
		}
		if c.isVoter() {
			return invalid("if process.roles contains just the 'broker' role, the node id %d must not be "+
				"included in the set of voters controller.quorum.voters=%s", c.NodeID, joinVoters(c.QuorumVoters))
		}
	}
	if len(c.BrokerEndpoints()) == 0 {
		return invalid("the broker role needs a listener that is not in controller.listener.names")
	}
	for _, e := range c.EffectiveAdvertisedListeners() {
		if e.Name == c.InterBrokerListenerName {
			return nil
		}
	}
	return invalid("inter.broker.listener.name must be a listener name defined in advertised.listeners; "+
		"%q is not among %s", c.InterBrokerListenerName, joinEndpoints(c.EffectiveAdvertisedListeners()))
}

func (c *Config) checkZKLegacy() error {
	if c.NodeID < 0 {
		return invalid("node.id is required (a non-negative integer; it is the broker.id in zk-legacy mode)")
	}
	if c.ZooKeeperConnect == "" {
		return invalid("zookeeper.connect is required in zk-legacy mode")
	}
	if c.HasRole(RoleController) {
		return invalid("process.roles=controller is KRaft only; in zk-legacy mode the controller is elected through ZooKeeper")
	}
	if _, ok := c.LegacyListener(); !ok {
		return invalid("zk-legacy mode needs a broker listener (one not named in controller.listener.names) in listeners")
	}
	if _, _, err := legacyzk.ParseConnect(c.ZooKeeperConnect); err != nil {
		return badValue("zookeeper.connect", c.ZooKeeperConnect, err.Error())
	}
	return nil
}

// checkFaultInjection keeps legacyzk's fault switches to test clusters: they
// exist only in zk-legacy mode, and their HTTP endpoint is served only on a
// metrics.listener bound to loopback (App checks the bound address again).
func (c *Config) checkFaultInjection() error {
	if !c.FaultInjectionEnable {
		return nil
	}
	if c.Mode != ModeZKLegacy {
		return invalid("kraftd.fault.injection.enable is for zk-legacy mode (the ZooKeeper-era divergence cases); " +
			"kraft mode has no fault switches")
	}
	if c.MetricsListener == "" {
		return nil // the switches are reachable only in-process (tests)
	}
	host, _, _ := splitHostPort(c.MetricsListener) // checkRanges parsed it
	if !loopbackHost(host) {
		return invalid("kraftd.fault.injection.enable serves POST /faults on metrics.listener, which must then bind "+
			"a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), not %q", c.MetricsListener)
	}
	return nil
}

// checkPprof keeps the profiling endpoints off the network: they are served
// only on a metrics.listener bound to loopback (App checks the bound
// address again), as kraftd.fault.injection.enable's.
func (c *Config) checkPprof() error {
	if !c.PprofEnable {
		return nil
	}
	if c.MetricsListener == "" {
		return invalid("kraftd.pprof.enable serves /debug/pprof/ on metrics.listener, which is not set")
	}
	host, _, _ := splitHostPort(c.MetricsListener) // checkRanges parsed it
	if !loopbackHost(host) {
		return invalid("kraftd.pprof.enable serves /debug/pprof/ on metrics.listener, which must then bind "+
			"a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), not %q", c.MetricsListener)
	}
	return nil
}

// loopbackHost reports whether host names the loopback interface: localhost or
// a loopback IP. An empty host (all interfaces) is not.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Config) isVoter() bool {
	for _, v := range c.QuorumVoters {
		if v.ID == c.NodeID {
			return true
		}
	}
	return false
}

// ControllerEndpoints are the listeners named in controller.listener.names.
func (c *Config) ControllerEndpoints() []Endpoint {
	var out []Endpoint
	for _, l := range c.Listeners {
		if contains(c.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// BrokerEndpoints are the listeners that are not controller listeners.
func (c *Config) BrokerEndpoints() []Endpoint {
	var out []Endpoint
	for _, l := range c.Listeners {
		if !contains(c.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// EffectiveAdvertisedListeners is advertised.listeners, or, when unset, the
// broker listeners, as Kafka derives it.
func (c *Config) EffectiveAdvertisedListeners() []Endpoint {
	if len(c.AdvertisedListeners) > 0 {
		return c.AdvertisedListeners
	}
	return c.BrokerEndpoints()
}

func joinEndpoints(eps []Endpoint) string {
	parts := make([]string, len(eps))
	for i, e := range eps {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

func joinVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// EmbeddedDefaults are the settings `kraftd` runs with when given no
// arguments at all: one combined broker+controller on 127.0.0.1, data in
// ./kraftd-data.
func EmbeddedDefaults() []Setting {
	return []Setting{
		{"node.id", "1"},
		{"process.roles", "broker,controller"},
		{"listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
		{"controller.listener.names", "CONTROLLER"},
		{"controller.quorum.voters", "1@127.0.0.1:9093"},
		{"log.dirs", "./kraftd-data"},
		// One broker: __consumer_offsets at Kafka's default replication
		// factor 3, and __transaction_state at 3 with min ISR 2, could never
		// be created or written (Kafka's quickstart server.properties sets 1
		// too).
		{"offsets.topic.replication.factor", "1"},
		{"transaction.state.log.replication.factor", "1"},
		{"transaction.state.log.min.isr", "1"},
	}
}
