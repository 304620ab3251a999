package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

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

	// StaticConfigs lists this broker's static settings for DescribeConfigs.
	StaticConfigs []StaticConfig

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
	// LogMessageTimestampType is the static log.message.timestamp.type
	// ("CreateTime" when empty); topic and cluster configs override it.
	LogMessageTimestampType string

	// Txns configures the transaction coordinator, which runs with Replicas.
	Txns TxnConfig
	// InterBrokerListener is the listener the transaction coordinator
	// reaches partition leaders on (WriteTxnMarkers).
	InterBrokerListener string

	// Rand backs the default ControllerID policy; nil is seeded from the
	// clock.
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
// (CreateTopics, DeleteTopics, CreatePartitions) to its Admin. It is the
// same code for KRaft brokers and for legacyzk brokers, so both modes look
// alike to clients by construction.
//
// Goroutines: one per Metadata request that auto-creates topics; Close
// cancels and waits for them.
type ClientAPI struct {
	cfg ClientAPIConfig
	log *zap.Logger
	rnd *lockedRand

	mu      sync.Mutex
	stopped bool
	// creatingTxnTopic: a __transaction_state CreateTopics is in flight.
	creatingTxnTopic bool
	txns             *txn.Coordinator
	txnDriver        sync.Once
	markerClient     *protocol.Client   // WriteTxnMarkers to other leaders; closed by Close
	wg               sync.WaitGroup     // auto-create requests, the transaction coordinator's driver
	bgCtx            context.Context    // parent of auto-create requests
	cancel           context.CancelFunc // cancels bgCtx; called by Close
}

// NewClientAPI validates cfg and builds the handlers; Register serves them.
func NewClientAPI(cfg ClientAPIConfig) (*ClientAPI, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newClientAPI(cfg, &lockedRand{r: cfg.Rand}), nil
}

func newClientAPI(cfg ClientAPIConfig, rnd *lockedRand) *ClientAPI {
	c := &ClientAPI{cfg: cfg, log: cfg.Logger, rnd: rnd}
	c.bgCtx, c.cancel = context.WithCancel(context.Background())
	if cfg.Replicas != nil && cfg.ProducerIDs != nil {
		c.newTxnCoordinator()
	}
	return c
}

// Register serves the client APIs on reg, the registry of a broker
// listener: Metadata v0-13, CreateTopics v0-7, DeleteTopics v0-6,
// DescribeConfigs v0-4, CreatePartitions v0-3, DescribeCluster v0-2; with a
// replica manager also Produce v3-11, Fetch v4-16, ListOffsets v1-8,
// InitProducerId v0-4, OffsetForLeaderEpoch v0-4, WriteTxnMarkers v0-1 and
// DescribeProducers v0.
func (c *ClientAPI) Register(reg *protocol.Registry) {
	if c.cfg.Replicas != nil {
		reg.Register(0, 3, 11, c.handleProduce)
		reg.Register(1, 4, 16, c.handleFetch)
		reg.Register(2, 1, 8, c.handleListOffsets)
		reg.Register(22, 0, 4, c.handleInitProducerID)
		reg.Register(23, 0, 4, c.handleOffsetForLeaderEpoch)
		reg.Register(27, 0, 1, c.handleWriteTxnMarkers)
		reg.Register(61, 0, 0, c.handleDescribeProducers)
		if c.txns != nil {
			reg.Register(10, 0, 4, c.handleFindCoordinator)
			reg.Register(24, 0, 4, c.handleAddPartitionsToTxn)
			reg.Register(26, 0, 3, c.handleEndTxn)
			reg.Register(65, 0, 0, c.handleDescribeTransactions)
			reg.Register(66, 0, 2, c.handleListTransactions)
			c.startTxnDriver()
		}
	}
	reg.Register(3, 0, 13, c.handleMetadata)
	reg.Register(19, 0, 7, c.handleCreateTopics)
	reg.Register(20, 0, 6, c.handleDeleteTopics)
	reg.Register(32, 0, 4, c.handleDescribeConfigs)
	reg.Register(37, 0, 3, c.handleCreatePartitions)
	reg.Register(60, 0, 2, c.handleDescribeCluster)
}

// Close cancels background auto-create requests and waits for them; later
// auto-creations are skipped. Handlers keep answering.
func (c *ClientAPI) Close() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
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
