package legacyzk

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
)

// Config configures a legacy (ZooKeeper-mode) Broker. Zero values take
// Kafka's defaults where Kafka has one.
type Config struct {
	// NodeID is broker.id; required, >= 0.
	NodeID int32
	// Zk is the ZooKeeper connection (zookeeper.connect and friends). Used
	// by the default Dial.
	Zk ZkConfig
	// Dial opens a new ZooKeeper session; called at start and after every
	// session expiry. Default: DialZk(ctx, Zk). Unit tests pass a
	// MemServer's Connect.
	Dial func(ctx context.Context) (Store, error)

	// ListenerName is the name of the one listener this broker serves
	// (default "PLAINTEXT"); it is also the inter-broker listener the
	// controller dials.
	ListenerName string
	// ListenAddr is where to bind (default "127.0.0.1:0"); the bound port
	// is what gets registered in /brokers/ids/<id>.
	ListenAddr string
	// Registry, if set, holds the client-API handlers to serve next to the
	// push APIs (keys 4-7), which the broker registers into it. Default: a
	// fresh registry with only ApiVersions and the push APIs.
	Registry *protocol.Registry
	// Server carries the socket server's limits, as a KRaft broker's
	// server gets them: MaxRequestBytes (socket.request.max.bytes),
	// MaxConnections (max.connections), QueuedMaxRequestBytes
	// (queued.max.request.bytes), IdleTimeout (connections.max.idle.ms),
	// InterBrokerListener. Its Listeners are ignored (the broker serves
	// the one listener above) and a nil Logger is the broker's. Zero values
	// take package protocol's defaults.
	Server protocol.ServerConfig
	// ListenerMaxConnections is listener.name.<ListenerName>.max.connections
	// (0: no limit of the listener's own).
	ListenerMaxConnections int
	// Rack is broker.rack (nil: none).
	Rack *string

	// NumPartitions is num.partitions (default 1) and
	// DefaultReplicationFactor default.replication.factor (default 1), used
	// by CreateTopics when the request says -1.
	NumPartitions            int32
	DefaultReplicationFactor int16

	// MaxRecordsPerUserOp caps what one CreateTopics, CreatePartitions or
	// DeleteTopics may ask for, counted as the KRaft controller counts
	// metadata records (one per topic, topic config and new partition; one
	// per topic to delete). A request over it is answered POLICY_VIOLATION
	// "Unable to perform excessively large batch operation." for every
	// topic, validate-only too, before anything is placed or written.
	// Kafka's ZooKeeper-era brokers had no such cap (a CreateTopics for
	// 2^31-1 partitions ran them out of memory); this is kraftd's
	// protection, set from controller.max.records.per.user.op when that
	// key is set (its default, Kafka's KRaft cap of 10000, is not applied
	// here). Default DefaultMaxRecordsPerUserOp.
	MaxRecordsPerUserOp int

	// ControlledShutdownMaxRetries (default 3) and
	// ControlledShutdownRetryBackoffMs (default 5000) are Kafka's
	// controlled.shutdown.* settings.
	ControlledShutdownMaxRetries     int
	ControlledShutdownRetryBackoffMs int
	// RetryBackoffMs paces internal retries such as re-registration after
	// a session loss (default 100).
	RetryBackoffMs int

	// FaultInjection arms the fault switches (Broker.Faults); without it
	// they are inert and Faults.Apply refuses them. For test clusters only
	// (kraftd.fault.injection.enable).
	FaultInjection bool

	// CrashSessionLingerMs is how long the ZooKeeper session of a node
	// killed by the CrashAfterZkWrite fault outlives it: a dead process's
	// ephemerals go only when ZooKeeper expires its session. Default: the
	// session timeout (Zk.SessionTimeoutMs, 18000 if unset).
	CrashSessionLingerMs int

	// DataPlane says this broker will host partition logs: LeaderAndIsr
	// and StopReplica wait until OpenDataPlane hands it the replica
	// manager, then drive it, and topic configs from ZooKeeper feed it
	// (Kafka 3.3's ReplicaManager side). false: metadata only, StopReplica
	// just forgets the replica.
	DataPlane bool

	Logger *zap.Logger
	// Now is the wall clock for znode timestamps (default time.Now).
	Now func() time.Time
}

// Validate fills in defaults and rejects impossible values.
func (c *Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("%w: broker.id %d", ErrBadConfig, c.NodeID)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Dial == nil {
		if err := c.Zk.Validate(); err != nil {
			return err
		}
		zc := c.Zk
		c.Dial = func(ctx context.Context) (Store, error) { return DialZk(ctx, zc) }
	} else if c.Zk.MaxInFlightRequests == 0 {
		c.Zk.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	defaults(&c.ListenerName, "PLAINTEXT")
	defaults(&c.ListenAddr, "127.0.0.1:0")
	defaults(&c.NumPartitions, 1)
	defaults(&c.DefaultReplicationFactor, 1)
	defaults(&c.ControlledShutdownMaxRetries, 3)
	defaults(&c.ControlledShutdownRetryBackoffMs, 5000)
	defaults(&c.RetryBackoffMs, 100)
	defaults(&c.MaxRecordsPerUserOp, DefaultMaxRecordsPerUserOp)
	defaults(&c.CrashSessionLingerMs, c.Zk.SessionTimeoutMs)
	defaults(&c.CrashSessionLingerMs, DefaultSessionTimeoutMs)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxRecordsPerUserOp < 0 {
		return fmt.Errorf("%w: negative max records per user operation", ErrBadConfig)
	}
	if c.NumPartitions < 0 || c.DefaultReplicationFactor < 0 {
		return fmt.Errorf("%w: negative num.partitions or default.replication.factor", ErrBadConfig)
	}
	return nil
}

func defaults[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (c *Config) retryBackoff() time.Duration {
	return time.Duration(c.RetryBackoffMs) * time.Millisecond
}

func (c *Config) nowMs() int64 { return c.Now().UnixMilli() }
