package controller

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Quorum is the part of quorum.Node the controller uses.
type Quorum interface {
	// Propose appends records as ONE batch in quorumEpoch and returns the
	// offset of the last record once appended (not committed). It fails
	// with quorum.ErrNotLeader when this node does not lead that epoch.
	Propose(ctx context.Context, quorumEpoch int32, recs []raftlog.Record) (lastOffset int64, err error)
	// Resign hands quorum leadership over now (EndQuorumEpoch); it fails
	// with quorum.ErrNotLeader on a node that does not lead.
	Resign(ctx context.Context) error
}

// Voter is a controller's endpoint as DescribeCluster (EndpointType 2)
// reports it while no controller has registered (KIP-919 registrations need
// metadata.version 3.7-IV0).
type Voter struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

// Metadata versions (feature levels) that change what the controller writes.
const (
	mv32IV0 int16 = 3  // LeaderRecoveryState (KIP-704)
	mv33IV1 int16 = 5  // NoOpRecord
	mv33IV2 int16 = 6  // BrokerRegistrationChangeRecord replaces Fence/Unfence
	mv33IV3 int16 = 7  // InControlledShutdown
	mv34IV0 int16 = 8  // RegisterBrokerRecord v2
	mv36IV0 int16 = 12 // no leader epoch bump on ISR shrink (KAFKA-15021)
	mv36IV1 int16 = 13 // metadata transactions (KIP-868)
	mv36IV2 int16 = 14 // default: 3.6-IV2
	mv37IV0 int16 = 15 // controller registration (KIP-919)
	mv37IV2 int16 = 17 // directory assignment (KIP-858): not supported yet
	mvMin   int16 = 4  // 3.3-IV0, the oldest bootstrap level Kafka accepts
)

// DefaultMaxRecordsPerUserOp is Config.MaxRecordsPerUserOp's default:
// Kafka's MAX_RECORDS_PER_USER_OP (QuorumController, 10000, not
// configurable there), so that every request meets Kafka's answer at
// Kafka's boundary. A CreateTopics of one topic of 10,000 partitions is
// 10,001 records and is refused, as Kafka refuses it; 9,999 pass.
const DefaultMaxRecordsPerUserOp = 10000

// Config configures a Controller. Zero values take the defaults noted.
type Config struct {
	// NodeID is this controller's node.id. Required (>= 0).
	NodeID int32
	// ClusterID is the cluster id from meta.properties; registrations with
	// another id fail with INCONSISTENT_CLUSTER_ID. Required.
	ClusterID string
	// Quorum appends batches. Required.
	Quorum Quorum
	// OtherControllers asks every other controller of the quorum which feature
	// ranges it supports (ApiVersions on its controller listener), for
	// UpdateFeatures (Kafka's QuorumFeatures). nil asks none: this controller
	// checks only itself and the brokers.
	OtherControllers func(ctx context.Context) []ControllerSupport
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger

	// SessionTimeoutMs is broker.session.timeout.ms (default 9000): a broker
	// that has not heartbeated for longer is fenced.
	SessionTimeoutMs int64
	// HeartbeatIntervalMs is broker.heartbeat.interval.ms (default 2000).
	// The controller does not schedule anything from it; Validate only
	// checks that it is below SessionTimeoutMs, as a misconfiguration
	// otherwise fences every broker between two heartbeats.
	HeartbeatIntervalMs int64
	// MaxIdleIntervalMs is metadata.max.idle.interval.ms (default 500): the
	// active controller appends a NoOpRecord when it has appended nothing
	// for this long, so brokers' metadata offsets keep moving. Negative
	// disables it.
	MaxIdleIntervalMs int64
	// DefaultNumPartitions is num.partitions (default 1), used for
	// CreateTopics NumPartitions -1.
	DefaultNumPartitions int32
	// DefaultReplicationFactor is default.replication.factor (default 1),
	// used for ReplicationFactor -1.
	DefaultReplicationFactor int16
	// MetadataVersion is the metadata.version feature level bootstrapped
	// into an empty log (default 14 = 3.6-IV2). 3.6-IV2 is the newest level
	// that needs neither controller registration nor log directories
	// (KIP-858, 3.7-IV2), yet has metadata transactions, which large
	// operations rely on. Levels 4..16 are accepted.
	MetadataVersion int16
	// UncleanLeaderElectionEnable is the static
	// unclean.leader.election.enable (default false): whether a partition
	// whose ISR has no live member may elect a live out-of-sync replica
	// (losing what only the ISR had). The topic's config, else this node's
	// dynamic broker config, else the cluster-wide one, overrides it.
	UncleanLeaderElectionEnable bool
	// MaxRecordsPerBatch caps records per appended batch (default 10000,
	// Kafka's MAX_RECORDS_PER_BATCH); larger operations use a transaction.
	MaxRecordsPerBatch int
	// MaxBatchBytes caps the encoded size of one appended batch (default
	// 8 MiB, the quorum's own limit).
	MaxBatchBytes int
	// MaxRecordsPerUserOp caps the records one CreateTopics,
	// CreatePartitions, DeleteTopics, AlterConfigs or
	// IncrementalAlterConfigs request may produce (default 10000, Kafka's
	// fixed MAX_RECORDS_PER_USER_OP since 3.5; zero or negative takes the
	// default). Handlers count a topic's records before they build them,
	// so nothing proportional to an over-cap request is allocated. Past
	// the cap Kafka's answers are kept: CreateTopics and the config
	// requests are refused whole, POLICY_VIOLATION "Unable to perform
	// excessively large batch operation."; DeleteTopics and
	// CreatePartitions answer UNKNOWN_SERVER_ERROR (no message) for each
	// topic that did not fit and keep the others (Kafka catches the
	// BoundedListTooLongException per topic there). Raising it (a kraftd
	// extension) lets an operation over 10000 records be written as a
	// metadata transaction. Whatever the cap, a CreateTopics asking for
	// more than 10,000 partitions is refused as Kafka refuses it
	// (maxPartitionsPerCreate).
	MaxRecordsPerUserOp int
	// OnFatal, if set, is called once, from the event loop, when a committed
	// record (or a snapshot) cannot be applied. By then the controller has
	// stopped serving and, if it led the quorum, resigned; the process
	// should exit non-zero, as Kafka's fatal fault handler makes it.
	OnFatal func(error)
	// ReplayFault is fault injection for tests; nil in production. It sees
	// every committed batch before the controller applies it, and an error
	// fails the replay as an unappliable record would (see OnFatal).
	ReplayFault func(raftlog.Batch) error
	// Voters are the controllers DescribeCluster reports while none has
	// registered.
	Voters []Voter
	// Clock is the wall clock the event loop reads (default time.Now).
	Clock func() time.Time
	// Rand places replicas and draws topic ids (default: seeded from
	// crypto/rand). It is used only by the event loop.
	Rand *rand.Rand
}

// Validate fills in defaults and checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("%w: node id %d", ErrInvalidConfig, c.NodeID)
	case c.ClusterID == "":
		return fmt.Errorf("%w: empty cluster id", ErrInvalidConfig)
	case c.Quorum == nil:
		return fmt.Errorf("%w: nil quorum", ErrInvalidConfig)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	setDefault(&c.SessionTimeoutMs, 9000)
	setDefault(&c.HeartbeatIntervalMs, 2000)
	if c.MaxIdleIntervalMs == 0 {
		c.MaxIdleIntervalMs = 500
	}
	setDefault(&c.DefaultNumPartitions, 1)
	setDefault(&c.DefaultReplicationFactor, 1)
	setDefault(&c.MetadataVersion, mv36IV2)
	setDefault(&c.MaxRecordsPerBatch, 10000)
	setDefault(&c.MaxBatchBytes, 8<<20)
	setDefault(&c.MaxRecordsPerUserOp, DefaultMaxRecordsPerUserOp)
	if c.HeartbeatIntervalMs >= c.SessionTimeoutMs {
		return fmt.Errorf("%w: heartbeat interval %d ms not below session timeout %d ms",
			ErrInvalidConfig, c.HeartbeatIntervalMs, c.SessionTimeoutMs)
	}
	if c.MetadataVersion < mvMin || c.MetadataVersion >= mv37IV2 {
		return fmt.Errorf("%w: metadata.version level %d (supported %d..%d)",
			ErrInvalidConfig, c.MetadataVersion, mvMin, mv37IV2-1)
	}
	if c.MaxRecordsPerBatch < 3 || c.MaxBatchBytes < 1024 {
		return fmt.Errorf("%w: batch limits %d records / %d bytes too small",
			ErrInvalidConfig, c.MaxRecordsPerBatch, c.MaxBatchBytes)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Rand == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails (Go 1.24+)
		c.Rand = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	return nil
}

func setDefault[T int | int16 | int32 | int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
