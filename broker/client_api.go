package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// MetadataSource is where client answers come from: the KRaft broker's
// published image, or a ZooKeeper-era broker's metadata cache (legacyzk
// keeps it as an *image.Image too). Image must never return nil and must
// be safe to call from any goroutine.
type MetadataSource interface {
	Image() *image.Image
}

// Admin carries out the admin requests clients send to a broker. A KRaft
// broker forwards them to the active controller (KIP-590); a ZooKeeper-era
// broker writes ZooKeeper itself and waits for its cache. Both answer with
// the same error codes. An Admin error that is not the client's context
// ending turns into UNKNOWN_SERVER_ERROR on every topic of the request,
// as Kafka's request handler does with an unexpected exception.
type Admin interface {
	CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error)
	DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error)
	CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error)
	ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, error)
}

// StaticConfig is one static broker setting shown by DescribeConfigs for
// this broker (source STATIC_BROKER_CONFIG, read-only).
type StaticConfig struct {
	Name, Value string
	Type        kmsg.ConfigType
}

// ClientAPIConfig configures the client-API handlers shared by KRaft and
// ZooKeeper-era brokers.
type ClientAPIConfig struct {
	// NodeID is this broker's id (DescribeConfigs BROKER resources).
	NodeID int32
	// ClusterID is returned in Metadata and DescribeCluster. Required.
	ClusterID string
	// Metadata and Admin are required.
	Metadata MetadataSource
	Admin    Admin
	// ControllerID is what Metadata and DescribeCluster report as the
	// controller. nil is KRaft's policy: a random alive broker having the
	// request's listener, since KRaft brokers forward admin requests and
	// the real controller is not reachable by clients (KIP-590). ZooKeeper-era
	// brokers report the real controller id from their cache.
	ControllerID func(img *image.Image, listener string) int32

	// AutoCreateTopicsEnable is auto.create.topics.enable; auto-created
	// topics take DefaultNumPartitions (default 1) and
	// DefaultReplicationFactor (default 1), and their CreateTopics carries
	// AutoCreateTimeoutMs (0: answer without waiting for the topic).
	AutoCreateTopicsEnable   bool
	DefaultNumPartitions     int32
	DefaultReplicationFactor int16
	AutoCreateTimeoutMs      int32

	// FetchCopyRecords makes Fetch read records into memory and encode
	// them, instead of sending them from the segment files with sendfile
	// (the default, as Kafka; see fetch_splice.go). For comparisons.
	FetchCopyRecords bool

	// StaticConfigs lists this broker's static settings for DescribeConfigs.
	StaticConfigs []StaticConfig
	// StaticTopicDefaults are the broker settings behind topic configs
	// (log.retention.ms, log.segment.bytes, ...; retention and roll in ms)
	// that server.properties sets: DescribeConfigs shows them as a topic's
	// STATIC_BROKER_CONFIG values. A setting left to Kafka's default is
	// not listed (DEFAULT_CONFIG).
	StaticTopicDefaults []StaticConfig

	// Replicas is the replica manager holding this broker's partition logs.
	// With it, Register also serves the data plane: Produce, Fetch,
	// ListOffsets, OffsetForLeaderEpoch and InitProducerId (which needs
	// ProducerIDs). nil serves metadata and admin APIs only.
	Replicas *replica.Manager
	// ProducerIDs hands out producer ids for InitProducerId; required with
	// Replicas.
	ProducerIDs ProducerIDSource
	// MinInsyncReplicas is the static min.insync.replicas (default 1); topic
	// and cluster configs in the image override it.
	MinInsyncReplicas int
	// MaxVersions caps the versions Register serves, by API key (a
	// zk-legacy broker serves the data plane at Kafka 3.3's versions, so
	// its clients get no KIP-951 leader hints, as from Kafka 3.3); keys
	// not in it are served in full.
	MaxVersions map[int16]int16
	// LogMessageTimestampType is the static log.message.timestamp.type
	// ("CreateTime" when empty); topic and cluster configs override it.
	LogMessageTimestampType string

	// Groups configures the group coordinator, which serves with Replicas
	// (FindCoordinator, the group APIs, OffsetCommit/OffsetFetch).
	Groups GroupConfig
	// Txns configures the transaction coordinator, which serves with
	// Replicas (FindCoordinator for transactional ids, AddPartitionsToTxn,
	// EndTxn, DescribeTransactions, ListTransactions).
	Txns TxnConfig
	// InterBrokerListener is the listener the transaction coordinator
	// reaches partition leaders on (WriteTxnMarkers) and partition leaders
	// reach the coordinator on (AddPartitionsToTxn VerifyOnly); required
	// with Replicas unless Txns.Disabled.
	InterBrokerListener string

	// MaxIncrementalFetchSessionCacheSlots is
	// max.incremental.fetch.session.cache.slots: how many incremental fetch
	// sessions (KIP-227) the broker keeps. Zero:
	// DefaultMaxIncrementalFetchSessionCacheSlots; negative: none (every
	// fetch is full, answered with SessionID 0).
	MaxIncrementalFetchSessionCacheSlots int

	// Rand backs the default ControllerID policy and fetch session ids; nil
	// is seeded from the clock.
	Rand   *rand.Rand
	Logger *zap.Logger
}

// validate checks c and fills in defaults.
func (c *ClientAPIConfig) validate() error {
	switch {
	case c.ClusterID == "":
		return fmt.Errorf("%w: client API without a cluster id", ErrInvalidConfig)
	case c.Metadata == nil || c.Admin == nil:
		return fmt.Errorf("%w: client API needs a metadata source and an admin", ErrInvalidConfig)
	case c.Replicas != nil && c.ProducerIDs == nil:
		return fmt.Errorf("%w: a data plane needs a producer id source", ErrInvalidConfig)
	case c.Replicas != nil && !c.Txns.Disabled && c.InterBrokerListener == "":
		// The transaction coordinator reaches the other partition
		// leaders on it (markers, AddPartitionsToTxn VerifyOnly):
		// without it every transaction spanning brokers hangs.
		return fmt.Errorf("%w: a transaction coordinator needs the inter-broker listener's name", ErrInvalidConfig)
	}
	for _, a := range clientAPIs {
		if v, ok := c.MaxVersions[a.key]; ok && v < a.min {
			return fmt.Errorf("%w: API %d capped at v%d, below its oldest served version v%d", ErrInvalidConfig, a.key, v, a.min)
		}
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if c.DefaultNumPartitions <= 0 {
		c.DefaultNumPartitions = 1
	}
	if c.DefaultReplicationFactor <= 0 {
		c.DefaultReplicationFactor = 1
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(c.NodeID)))
	}

	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// ClientAPI answers the client APIs a broker serves from its metadata
// (Metadata, DescribeCluster, DescribeConfigs) and hands admin requests
// (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders) to its Admin. It is the
// same code for KRaft brokers and for legacyzk brokers, so both modes look
// alike to clients by construction.
//
// Goroutines: one per Metadata request that auto-creates topics, one
// CreateTopics of __consumer_offsets and one of __transaction_state at a
// time, and with a replica manager the group coordinator's (started by
// Start) and the transaction coordinator's driver (started by Register);
// Close cancels and waits for them all.
type ClientAPI struct {
	cfg ClientAPIConfig
	log *zap.Logger
	rnd *lockedRand

	sessions *fetchSessionCache // incremental fetch sessions (KIP-227)
	// copyRecords: Fetch reads records into memory instead of sending them
	// from the segment files (ClientAPIConfig.FetchCopyRecords; tests flip it).
	copyRecords atomic.Bool
	// fetchWaiting counts the fetches parked in their long poll (Kafka's
	// Fetch purgatory size).
	fetchWaiting atomic.Int64
	// fetchReads counts the partitions fetch passes read (issue 17: an
	// incremental session's pass reads what changed, not every partition).
	fetchReads atomic.Int64

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup     // auto-create requests, the transaction coordinator's driver
	bgCtx   context.Context    // parent of auto-create requests
	cancel  context.CancelFunc // cancels bgCtx; called by Close

	creatingOffsets bool               // a CreateTopics of __consumer_offsets is in flight; mu
	groups          *group.Coordinator // with Replicas; started by Start, stopped by Close

	creatingTxnTopic bool             // a CreateTopics of __transaction_state is in flight; mu
	txns             *txn.Coordinator // with Replicas; its driver started by Register, stopped by Close
	txnDriver        sync.Once
	markerClient     *protocol.Client // WriteTxnMarkers to other leaders; closed by Close
}

// NewClientAPI validates cfg and builds the handlers; Register serves them.
func NewClientAPI(cfg ClientAPIConfig) (*ClientAPI, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newClientAPI(cfg, &lockedRand{r: cfg.Rand}), nil
}

func newClientAPI(cfg ClientAPIConfig, rnd *lockedRand) *ClientAPI {
	cfg.Groups.setDefaults()
	c := &ClientAPI{cfg: cfg, log: cfg.Logger, rnd: rnd}
	c.copyRecords.Store(cfg.FetchCopyRecords)
	c.sessions = newFetchSessionCache(sessionSlots(cfg.MaxIncrementalFetchSessionCacheSlots),
		func() int32 { return int32(rnd.intN(1<<31-1)) + 1 })
	c.bgCtx, c.cancel = context.WithCancel(context.Background())
	if cfg.Replicas != nil && !cfg.Groups.Disabled {
		if err := c.newGroupCoordinator(); err != nil {
			// Only a missing replica manager fails it, checked above.
			panic("broker: group coordinator: " + err.Error())
		}
	}
	if cfg.Replicas != nil && cfg.ProducerIDs != nil && !cfg.Txns.Disabled {
		c.newTxnCoordinator()
	}
	return c
}

// Start runs the group coordinator's driver (session and rebalance timers,
// loading __consumer_offsets partitions as leadership arrives).
func (c *ClientAPI) Start() {
	if c.groups != nil {
		c.groups.Start()
	}
}

// Register serves the client APIs on reg, the registry of a broker
// listener: Metadata v0-13, CreateTopics v0-7, DeleteTopics v0-6,
// DescribeConfigs v0-4, CreatePartitions v0-3, ElectLeaders v0-2,
// DescribeCluster v0-2; with a
// replica manager also Produce v3-11, Fetch v4-16, ListOffsets v1-8,
// DeleteRecords v0-2, InitProducerId v0-4, OffsetForLeaderEpoch v0-4,
// DescribeLogDirs v0-4, WriteTxnMarkers v0-1 and DescribeProducers v0; with the group coordinator (a replica manager and
// Groups not Disabled) also the group APIs: OffsetCommit v0-8, OffsetFetch
// v0-8, JoinGroup v0-9, Heartbeat v0-4, LeaveGroup v0-5, SyncGroup v0-5,
// DescribeGroups v0-5, ListGroups v0-4, DeleteGroups v0-2, OffsetDelete v0;
// with the transaction coordinator (a replica manager and Txns not
// Disabled) also AddPartitionsToTxn v0-4, AddOffsetsToTxn v0-3, EndTxn v0-3, DescribeTransactions
// v0 and ListTransactions v0-2; with both coordinators TxnOffsetCommit
// v0-3; with either coordinator FindCoordinator v0-4.
func (c *ClientAPI) Register(reg *protocol.Registry) {
	for _, a := range clientAPIs {
		if !served(a.needs, c.cfg.Replicas != nil, c.groups != nil, c.txns != nil) {
			continue
		}
		reg.Register(a.key, a.min, capVersion(a.key, a.max, c.cfg.MaxVersions), a.handler(c))
	}
	c.registerConfigAdmin(reg)
	c.startTxnDriver()
}

// capVersion is max lowered to caps[key] when caps has one (never below
// the oldest version served).
func capVersion(key, maxV int16, caps map[int16]int16) int16 {
	if v, ok := caps[key]; ok && v < maxV {
		return v
	}
	return maxV
}

// What an API needs besides the metadata: nothing, the replica manager (the
// data plane), the group coordinator, the transaction coordinator, or either
// coordinator (FindCoordinator). Both coordinators run over the replica
// manager, so each implies it.
const (
	needsNothing = iota
	needsReplicas
	needsGroups
	needsTxns
	needsCoordinator
	needsGroupsAndTxns
)

// clientAPIs is what Register serves.
var clientAPIs = []struct {
	key, min, max int16
	needs         int
	handler       func(*ClientAPI) protocol.Handler
}{
	{0, 3, 11, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleProduce }},
	{1, 4, 16, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleFetch }},
	{2, 1, 8, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleListOffsets }},
	{22, 0, 4, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleInitProducerID }},
	{23, 0, 4, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleOffsetForLeaderEpoch }},
	{21, 0, 2, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleDeleteRecords }},
	{35, 0, 4, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleDescribeLogDirs }},
	{27, 0, 1, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleWriteTxnMarkers }},
	{61, 0, 0, needsReplicas, func(c *ClientAPI) protocol.Handler { return c.handleDescribeProducers }},
	{8, 0, 8, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleOffsetCommit }},
	{9, 0, 8, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleOffsetFetch }},
	{10, 0, 4, needsCoordinator, func(c *ClientAPI) protocol.Handler { return c.handleFindCoordinator }},
	{11, 0, 9, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleJoinGroup }},
	{12, 0, 4, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleHeartbeat }},
	{13, 0, 5, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleLeaveGroup }},
	{14, 0, 5, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleSyncGroup }},
	{15, 0, 5, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleDescribeGroups }},
	{16, 0, 4, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleListGroups }},
	{42, 0, 2, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleDeleteGroups }},
	{47, 0, 0, needsGroups, func(c *ClientAPI) protocol.Handler { return c.handleOffsetDelete }},
	{24, 0, 4, needsTxns, func(c *ClientAPI) protocol.Handler { return c.handleAddPartitionsToTxn }},
	{25, 0, 3, needsTxns, func(c *ClientAPI) protocol.Handler { return c.handleAddOffsetsToTxn }},
	{26, 0, 3, needsTxns, func(c *ClientAPI) protocol.Handler { return c.handleEndTxn }},
	{28, 0, 3, needsGroupsAndTxns, func(c *ClientAPI) protocol.Handler { return c.handleTxnOffsetCommit }},
	{65, 0, 0, needsTxns, func(c *ClientAPI) protocol.Handler { return c.handleDescribeTransactions }},
	{66, 0, 2, needsTxns, func(c *ClientAPI) protocol.Handler { return c.handleListTransactions }},
	{3, 0, 13, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleMetadata }},
	{19, 0, 7, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleCreateTopics }},
	{20, 0, 6, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleDeleteTopics }},
	{32, 0, 4, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleDescribeConfigs }},
	{37, 0, 3, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleCreatePartitions }},
	{43, 0, 2, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleElectLeaders }},
	{60, 0, 2, needsNothing, func(c *ClientAPI) protocol.Handler { return c.handleDescribeCluster }},
}

// served says whether an API needing what needs is served with the data
// plane, the group coordinator and the transaction coordinator as given.
func served(needs int, dataPlane, groups, txns bool) bool {
	switch needs {
	case needsNothing:
		return true
	case needsReplicas:
		return dataPlane
	case needsGroups:
		return dataPlane && groups
	case needsTxns:
		return dataPlane && txns
	case needsCoordinator:
		return dataPlane && (groups || txns)
	case needsGroupsAndTxns:
		return dataPlane && groups && txns
	}
	return false
}

// ClientAPIVersions are the keys and version ranges Register serves, with
// the data plane or without, with the group and transaction coordinators or
// without (both need the data plane) and with maxVersions as
// ClientAPIConfig's, for a listener that must advertise them before its
// ClientAPI exists (a ZooKeeper-era broker binds its listener before it
// knows the cluster id).
func ClientAPIVersions(dataPlane, groups, txns bool, maxVersions map[int16]int16) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, a := range clientAPIs {
		if served(a.needs, dataPlane, groups, txns) {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min,
				MaxVersion: capVersion(a.key, a.max, maxVersions)})
		}
	}
	return out
}

// Close cancels background auto-create requests and waits for them; later
// auto-creations are skipped. Handlers keep answering.
func (c *ClientAPI) Close() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.groups != nil {
		c.groups.Close()
	}
	if c.txns != nil {
		c.txns.Close()
		c.markerClient.Close()
	}
}

// controllerID applies the configured ControllerID policy.
func (c *ClientAPI) controllerID(img *image.Image, listener string) int32 {
	if c.cfg.ControllerID != nil {
		return c.cfg.ControllerID(img, listener)
	}
	return c.randomAliveBroker(img, listener)
}

// adminFailed is the answer to an Admin error: the client's connection is
// closed if it is gone, else every topic says UNKNOWN_SERVER_ERROR.
func adminFailed(ctx context.Context, err error, failure func(code int16, msg string) kmsg.Response) (kmsg.Response, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return failure(kerr.UnknownServerError.Code, err.Error()), nil
}
