package legacyzk

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// ReplicaState is what a LeaderAndIsr told this broker about one of its
// replicas (ReplicaManager's view: leader or follower, at which epoch).
type ReplicaState struct {
	TopicID         records.UUID
	Leader          int32
	LeaderEpoch     int32
	ISR             []int32
	Replicas        []int32
	PartitionEpoch  int32
	ControllerEpoch int32
}

// Broker is a ZooKeeper-era broker: it registers /brokers/ids/<id>,
// competes for /controller (running the legacy controller when it wins),
// answers the controller's pushes with controller-epoch, broker-epoch and
// leader-epoch fencing, and keeps its metadata cache as an *image.Image
// built from the UpdateMetadata pushes it accepted, so the broker
// package's client handlers can serve it exactly as in KRaft mode.
//
// Goroutines: the protocol server's, the controller event loop, one sender
// per live broker while this node is the controller, and the store's event
// pump. Close stops them all.
//
// With Config.DataPlane it is also Kafka 3.3's ReplicaManager side
// (data_plane.go): LeaderAndIsr and StopReplica drive the replica manager,
// topic configs come from ZooKeeper, producer ids in blocks from
// /latest_producer_id_block.
//
// INVARIANTS: cache only changes under mu, inside an accepted
// UpdateMetadata or when a topic's configs are (re)loaded from ZooKeeper;
// controllerEpoch never decreases; replicas[tp].LeaderEpoch only grows.
type Broker struct {
	cfg    Config
	log    *zap.Logger
	faults *Faults
	stats  *Stats
	server *protocol.Server
	client *protocol.Client
	ctrl   *controller
	// started is ctrl once Start has registered the broker: the push
	// handlers run from the moment the listener is bound, before that.
	started atomic.Pointer[controller]
	self    BrokerInfo
	closed  atomic.Bool
	// crashTimer closes the session of a crashed node; set on the
	// controller loop before it exits, read by Close after it exited.
	crashTimer *time.Timer

	clusterID   string
	brokerEpoch atomic.Int64 // czxid of our registration
	// zkControllerEpoch is the highest /controller_epoch verifyPush has
	// read: pushes up to it need no ZooKeeper read.
	zkControllerEpoch atomic.Int32
	cache             atomic.Pointer[image.Image]
	// umControllerID is the ControllerID of the last UpdateMetadata
	// accepted (-1 before the first): the controller this broker names in
	// Metadata and sends ControlledShutdown and AlterPartition to, as
	// Kafka's ZkMetadataCache.getControllerId. Its own /controller watch
	// (controller.activeID) only drives elections.
	umControllerID atomic.Int32

	mu              sync.Mutex
	controllerEpoch int32
	replicas        map[TopicPartition]ReplicaState
	cacheOffset     int64
	// topicConfigs: topics whose /config/topics znode was loaded into
	// the replica manager and the cache (data_plane.go).
	topicConfigs map[string]bool
	// lastConfigChange is the sequence number of the last /config/changes
	// notification processed (-1: none); written on the controller loop.
	lastConfigChange atomic.Int64

	dataReady  chan struct{} // closed by OpenDataPlane, after replicaMgr is set
	dataOnce   sync.Once
	replicaMgr atomic.Pointer[replica.Manager]

	// pidMu guards the producer id block: ids in [pidNext, pidEnd) are
	// this broker's and not handed out yet.
	pidMu           sync.Mutex
	pidNext, pidEnd int64
}

// NewBroker starts a broker: OpenBroker, then Start (registration and the
// competition for /controller at once; a broker with partition logs to
// load calls the two apart, loading them in between, as Kafka does).
func NewBroker(ctx context.Context, cfg Config) (*Broker, error) {
	b, err := OpenBroker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.Start(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// OpenBroker prepares a broker without registering it: binds its listener
// (it must know its port to register; the push APIs answer only after
// Start), opens a ZooKeeper session and creates the top-level paths and
// /cluster/id if missing, as KafkaServer.startup does before its log
// manager loads the logs. Start registers; Close undoes OpenBroker.
func OpenBroker(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: cfg.Logger.Named("legacyzk").With(zap.Int32("node", cfg.NodeID)),
		faults: &Faults{enabled: cfg.FaultInjection}, stats: &Stats{}, replicas: map[TopicPartition]ReplicaState{},
		topicConfigs: map[string]bool{}, dataReady: make(chan struct{})}
	b.lastConfigChange.Store(-1)
	b.cache.Store(image.Empty())
	b.umControllerID.Store(-1)
	if err := b.startServer(); err != nil {
		return nil, err
	}
	b.client = protocol.NewClient(protocol.ClientConfig{ClientID: "controller-" + strconv.Itoa(int(cfg.NodeID)), Logger: b.log})
	st, err := cfg.Dial(ctx)
	if err != nil {
		b.stopNet()
		return nil, err
	}
	if err := b.prepare(ctx, st); err != nil {
		st.Close()
		b.stopNet()
		return nil, err
	}
	b.ctrl = newController(cfg.NodeID, &b.cfg, st, b.client, b.faults, b.stats, b.registerSelf, b.onCrash)
	b.ctrl.onSession = b.processConfigChanges
	b.ctrl.log = b.log.Named("controller")
	return b, nil
}

// Start registers the broker (/brokers/ids/<id>, whose czxid is its broker
// epoch) and starts competing for /controller: KafkaServer.startup's
// registerBroker and kafkaController.startup, which come after its log
// manager loaded every partition log and its replica manager started, so
// the broker is listed only once it can take the controller's
// LeaderAndIsr. Only the first call counts.
func (b *Broker) Start(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if b.started.Load() != nil {
		return nil
	}
	if err := b.registerSelf(ctx, b.ctrl.currentStore()); err != nil {
		return err
	}
	b.started.Store(b.ctrl)
	b.ctrl.start()
	return nil
}

// RegionBytes is the broker's socket server's Server.RegionBytes: Fetch record
// bytes sent from segment files by sendfile and by copy (zero before Start).
func (b *Broker) RegionBytes() (sendfile, copied int64) {
	b.mu.Lock()
	srv := b.server
	b.mu.Unlock()
	if srv == nil {
		return 0, 0
	}
	return srv.RegionBytes()
}

func (b *Broker) startServer() error {
	reg := b.cfg.Registry
	if reg == nil {
		reg = protocol.NewRegistry()
	}
	reg.Register(4, LeaderAndIsrVersion, LeaderAndIsrVersion, b.handleLeaderAndIsr)
	reg.Register(5, StopReplicaVersion, StopReplicaVersion, b.handleStopReplica)
	reg.Register(6, UpdateMetadataVersion, UpdateMetadataVersion, b.handleUpdateMetadata)
	reg.Register(7, ControlledShutdownVersion, ControlledShutdownVersion, b.handleControlledShutdown)
	reg.Register(56, AlterPartitionMinVersion, AlterPartitionMaxVersion, b.handleAlterPartition)
	sc := b.cfg.Server
	if sc.Logger == nil {
		sc.Logger = b.log
	}
	sc.Listeners = []protocol.ListenerConfig{{Name: b.cfg.ListenerName, Addr: b.cfg.ListenAddr, Registry: reg,
		MaxConnections: b.cfg.ListenerMaxConnections}}
	srv, err := protocol.NewServer(sc)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	b.mu.Lock()
	b.server = srv // read by RegionBytes from the metrics goroutine
	b.mu.Unlock()
	host, port, _ := net.SplitHostPort(srv.Addr(b.cfg.ListenerName).String())
	n, _ := strconv.ParseUint(port, 10, 16)
	b.self = BrokerInfo{ID: b.cfg.NodeID, Rack: b.cfg.Rack,
		Endpoints: []records.BrokerEndpoint{{Name: b.cfg.ListenerName, Host: host, Port: uint16(n), SecurityProtocol: 0}}}
	return nil
}

// prepare creates the persistent paths and reads (or creates) the cluster
// id.
func (b *Broker) prepare(ctx context.Context, st Store) error {
	for _, p := range persistentPaths {
		if err := ensurePath(ctx, st, p); err != nil {
			return err
		}
	}
	id, err := ensureClusterID(ctx, st)
	if err != nil {
		return err
	}
	b.clusterID = id
	return nil
}

// ensureClusterID reads /cluster/id, creating it with a fresh id if absent.
func ensureClusterID(ctx context.Context, st Store) (string, error) {
	data, _, err := st.Get(ctx, ClusterIDPath, false)
	if errors.Is(err, ErrNoNode) {
		var u records.UUID
		_, _ = rand.Read(u[:])
		if err := ensurePath(ctx, st, "/cluster"); err != nil {
			return "", err
		}
		_, err = st.Create(ctx, ClusterIDPath, EncodeClusterID(u.String()), Persistent)
		if err != nil && !errors.Is(err, ErrNodeExists) {
			return "", err
		}
		data, _, err = st.Get(ctx, ClusterIDPath, false)
	}
	if err != nil {
		return "", err
	}
	return DecodeClusterID(data)
}

// registerSelf is KafkaZkClient.registerBroker: one Multi {create the
// ephemeral empty, setData version 0 with the JSON} so a retry can tell
// its own znode from another's (KAFKA-7165); the znode's czxid is the
// broker epoch.
func (b *Broker) registerSelf(ctx context.Context, st Store) error {
	p := BrokerPath(b.cfg.NodeID)
	res, err := st.Multi(ctx, CreateOp{Path: p, Mode: Ephemeral},
		SetDataOp{Path: p, Data: EncodeBroker(b.self, b.cfg.nowMs()), Version: 0})
	if err != nil {
		return fmt.Errorf("legacyzk: register broker %d: %w", b.cfg.NodeID, err)
	}
	b.brokerEpoch.Store(res[1].Stat.Czxid)
	b.log.Info("registered broker", zap.Int64("brokerEpoch", res[1].Stat.Czxid))
	return nil
}

// onCrash is the CrashAfterZkWrite fault: the whole node dies; its
// session lingers until "ZooKeeper expires it" (CrashSessionLingerMs).
// It runs on the controller loop, which exits right after.
func (b *Broker) onCrash() {
	b.server.Close()
	st := b.ctrl.currentStore()
	b.crashTimer = time.AfterFunc(time.Duration(b.cfg.CrashSessionLingerMs)*time.Millisecond, func() { st.Close() })
}

func (b *Broker) stopNet() {
	if b.server != nil {
		b.server.Close()
	}
	if b.client != nil {
		b.client.Close()
	}
}

// Close stops the broker without a controlled shutdown: the controller
// loop resigns (dropping queued pushes), the session closes (its
// ephemerals vanish at once) and the listener stops.
func (b *Broker) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.ctrl.stop()
	if b.crashTimer != nil {
		b.crashTimer.Stop()
	}
	b.ctrl.currentStore().Close()
	b.stopNet()
	return nil
}

// Kill stops the broker as kill -9 stops a process: the listener and the
// controller loop stop at once (no controlled shutdown, no resignation in
// ZooKeeper), and the session lingers CrashSessionLingerMs (the session
// timeout by default) before it closes, as ZooKeeper keeps a dead
// process's session, its /brokers/ids registration and, on the
// controller, /controller, until the session expires. Later Close and
// Shutdown calls do nothing more.
func (b *Broker) Kill() {
	if b.closed.Swap(true) {
		return
	}
	b.stopNet()
	b.ctrl.stop()
	st := b.ctrl.currentStore()
	b.log.Info("killed; the ZooKeeper session lingers until it would expire", zap.Int("lingerMs", b.cfg.CrashSessionLingerMs))
	time.AfterFunc(time.Duration(b.cfg.CrashSessionLingerMs)*time.Millisecond, func() { st.Close() })
}

// ID is broker.id.
func (b *Broker) ID() int32 { return b.cfg.NodeID }

// Addr is the bound client/inter-broker listener address.
func (b *Broker) Addr() string { return b.server.Addr(b.cfg.ListenerName).String() }

// ClusterID is the content of /cluster/id.
func (b *Broker) ClusterID() string { return b.clusterID }

// BrokerEpoch is the czxid of the current registration (KIP-380).
func (b *Broker) BrokerEpoch() int64 { return b.brokerEpoch.Load() }

// Image is the metadata cache built from accepted UpdateMetadata pushes.
// Its provenance offset counts accepted pushes; its epoch is the
// controller epoch of the last one.
func (b *Broker) Image() *image.Image { return b.cache.Load() }

// ControllerID is the controller the last accepted UpdateMetadata named
// (-1: none yet), as Kafka 3.3's broker takes it from its metadata cache:
// Metadata answers it and ControlledShutdown and AlterPartition go to it.
// A broker that a new controller has not pushed to yet still names the old
// one, whatever /controller says.
func (b *Broker) ControllerID() int32 { return b.umControllerID.Load() }

// IsController reports whether this broker is the active controller.
func (b *Broker) IsController() bool { return b.ctrl.activeEpoch.Load() > 0 }

// ActiveControllerEpoch is this broker's controller epoch while it is the
// active controller, else 0.
func (b *Broker) ActiveControllerEpoch() int32 { return b.ctrl.activeEpoch.Load() }

// SeenControllerEpoch is the highest controller epoch this broker accepted
// a push from.
func (b *Broker) SeenControllerEpoch() int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.controllerEpoch
}

// Replica returns what the last accepted LeaderAndIsr said about tp.
func (b *Broker) Replica(topic string, partition int32) (ReplicaState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.replicas[TopicPartition{topic, partition}]
	return r, ok
}

// Faults are this node's fault switches.
func (b *Broker) Faults() *Faults { return b.faults }

// Stats are this node's controller timings.
func (b *Broker) Stats() *Stats { return b.stats }

// Store is the current ZooKeeper session (replaced after an expiry).
func (b *Broker) Store() Store { return b.ctrl.currentStore() }

// LoseSession closes the ZooKeeper session under the broker, as a
// session expiry would (its ephemerals vanish). The controller loop then
// re-registers with a new session, unless it is frozen by a pause fault,
// in which case it notices only after Resume, like a zombie after a GC
// pause.
func (b *Broker) LoseSession() { b.ctrl.currentStore().Close() }
