package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/replica"
)

// Broker is a KRaft broker: a metadata publisher fed by the quorum, a
// lifecycle loop talking to the active controller, and the client API
// handlers answering from the last published image.
//
// Use: New, attach Listener() to the quorum Node before the Node starts,
// RegisterHandlers on the broker listener's Registry, Start, and finally
// Stop. Start does not wait for registration or unfencing (a combined node
// must serve its controller listener before any controller can answer);
// WaitState does.
//
// INVARIANTS: goroutines run only between Start and Stop; Stop waits for
// all of them.
type Broker struct {
	cfg  Config
	log  *zap.Logger
	rnd  *lockedRand
	pub  *publisher
	ch   *controllerChannel
	life *lifecycle
	api  *ClientAPI
	// fetchTransport carries follower fetches over a client per fetcher
	// (replication.go); set by Start.
	fetchTransport *FetchTransport
	// replicaImage is the image the replica manager was last synced to
	// (stored before SyncReplicas; Image() is ahead of it until the sync
	// returns).
	replicaImage atomic.Pointer[image.Image]

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc // stops publisher and lifecycle
	wg      sync.WaitGroup     // publisher, lifecycle
	bgCtx   context.Context    // parent of background requests; canceled by Stop
}

// New validates cfg and builds a broker. Nothing runs until Start.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cfg.Logger.Named("broker").With(zap.Int32("node", cfg.NodeID))
	b := &Broker{cfg: cfg, log: cfg.Logger, rnd: &lockedRand{r: cfg.Rand}}
	b.ch = newControllerChannel(&b.cfg)
	b.pub = newPublisher(b.log.Named("publisher"), b.ch.setLeader, cfg.OnFatal)
	b.pub.now = b.cfg.Now
	b.life = newLifecycle(&b.cfg, b.ch, b.rnd, b.pub.appliedOffset.Load)
	b.life.leadsNothing = func() bool { return b.Image().LeaderCount(cfg.NodeID) == 0 }
	// A broker in controlled shutdown whose image comes to show it leads
	// nothing asks again at once: the controller's answer to its last
	// heartbeat may have come before that image (its own publish of the
	// moves runs behind their commit), and it then slept a whole
	// heartbeat interval (2 s) before asking at the 50 ms pace
	// (lifecycle.onHeartbeat), however soon the other brokers reported.
	b.pub.onVisible = func(img *image.Image) {
		if b.life.State() == StatePendingControlledShutdown && img.LeaderCount(cfg.NodeID) == 0 {
			b.life.heartbeatSoon()
		}
	}
	b.pub.onPublished = func(prev, next *image.Image) {
		if controlledShutdownMoved(prev, next) {
			b.log.Info("applied metadata that moves a controlled shutdown; heartbeat now",
				zap.Int64("offset", next.Provenance().Offset))
			b.life.heartbeatSoon()
		}
	}
	var producerIDs ProducerIDSource
	if cfg.Replicas != nil {
		producerIDs = &producerIDBlocks{b: b, timeoutMs: int32(cfg.ControllerRequestTimeoutMs)}
		strays := false // checked; only the publisher goroutine touches it
		b.pub.onPublish = func(prev, next *image.Image) {
			// The replica manager judges ISR eligibility (fenced, shutting
			// down, broker epoch) by the image it is being synced to: a
			// leader recomputing its high watermark as the ISR shrinks must
			// already see the fenced broker as fenced.
			b.replicaImage.Store(next)
			SyncReplicas(cfg.Replicas, cfg.NodeID, prev, next, b.log)
			if !strays && b.life.State() >= StateRecovery {
				strays = true
				DeleteStrays(cfg.Replicas, cfg.NodeID, next, b.log)
			}
		}
	}
	b.api = newClientAPI(ClientAPIConfig{
		NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Metadata: b, Admin: b,
		Replicas: cfg.Replicas, ProducerIDs: producerIDs, MinInsyncReplicas: max(cfg.MinInsyncReplicas, DefaultMinInsyncReplicas),
		LogMessageTimestampType: cfg.LogMessageTimestampType,
		AutoCreateTopicsEnable:  cfg.AutoCreateTopicsEnable,
		DefaultNumPartitions:    cfg.DefaultNumPartitions, DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		AutoCreateTimeoutMs: int32(cfg.ControllerRequestTimeoutMs), Groups: cfg.Groups,
		Txns: cfg.Txns, InterBrokerListener: cfg.InterBrokerListenerName,
		StaticConfigs: cfg.staticConfigs(), StaticTopicDefaults: cfg.StaticTopicDefaults,
		MaxIncrementalFetchSessionCacheSlots: cfg.MaxIncrementalFetchSessionCacheSlots, Logger: b.log,
	}, b.rnd)
	b.bgCtx, b.cancel = context.WithCancel(context.Background())
	if len(b.cfg.LogDirs) == 0 {
		var dir [16]byte
		b.rnd.fill(dir[:])
		b.cfg.LogDirs = [][16]byte{dir}
	}
	return b, nil
}

// Listener is the quorum.Listener to Register on the quorum Node (the shared
// voter Node in a combined process). It never blocks the Node.
func (b *Broker) Listener() quorum.Listener { return b.pub }

// Image is the last published metadata image; never nil.
func (b *Broker) Image() *image.Image { return b.pub.image() }

// AppliedOffset is the offset of the last metadata record or batch that
// both Image and the replica manager applied (-1 before any), as sent in
// heartbeats: Image may be ahead of it while the replica manager follows.
func (b *Broker) AppliedOffset() int64 { return b.pub.appliedOffset.Load() }

// Replicas is the replica manager (Config.Replicas), or nil.
func (b *Broker) Replicas() *replica.Manager { return b.cfg.Replicas }

// State is the lifecycle state.
func (b *Broker) State() State { return b.life.State() }

// BrokerEpoch is the epoch the controller gave this broker, -1 before
// registration.
func (b *Broker) BrokerEpoch() int64 { return b.life.brokerEpoch.Load() }

// Fenced reports what the last heartbeat answer said (true until then).
func (b *Broker) Fenced() bool { return b.life.fenced.Load() }

// WaitState blocks until the broker reached want (e.g. StateRunning), the
// lifecycle gave up (the error says why), or ctx ends.
func (b *Broker) WaitState(ctx context.Context, want State) error {
	return b.life.waitState(ctx, want)
}

// WaitApplied blocks until AppliedOffset covers offset (the image and the
// replica manager).
func (b *Broker) WaitApplied(ctx context.Context, offset int64) error {
	return b.pub.waitApplied(ctx, offset)
}

// Start runs the publisher and the lifecycle loop. It returns at once.
func (b *Broker) Start(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return ErrStopped
	}
	if b.started {
		return nil
	}
	if err := b.startReplication(); err != nil {
		return err
	}
	b.started = true
	b.api.Start()
	b.wg.Go(func() { b.pub.run(b.bgCtx) })
	b.wg.Go(func() { b.life.run(b.bgCtx) })
	return nil
}

// Stop shuts the broker down: a controlled shutdown first (heartbeats with
// WantShutDown until the controller answers ShouldShutdown, bounded by ctx
// and ControlledShutdownTimeoutMs), then every goroutine stops. The
// publisher keeps applying during the controlled shutdown, because the
// controller waits for brokers to see the leadership moves. Safe to call
// more than once.
func (b *Broker) Stop(ctx context.Context) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	started := b.started
	b.mu.Unlock()
	var err error
	start := time.Now()
	released, replicationStopped := start, start
	if started {
		err = b.controlledShutdown(ctx)
		released = time.Now()
		b.stopReplication()
		replicationStopped = time.Now()
	}
	b.cancel()
	b.api.Close()
	b.wg.Wait() // the replica goroutine finishes the sync under way
	b.ch.close()
	ms := func(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }
	b.log.Info("broker stopped", zap.Float64("released_ms", ms(start, released)),
		zap.Float64("replication_stop_ms", ms(released, replicationStopped)),
		zap.Float64("goroutines_ms", ms(replicationStopped, time.Now())))
	return err
}

// Kill stops the broker as a crash would (kill -9): no controlled
// shutdown, so its leaderships move only when the controller fences it
// after broker.session.timeout.ms. Logs stay as written (the page cache
// survives a process crash). Later Stop calls return at once.
func (b *Broker) Kill() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	started := b.started
	b.mu.Unlock()
	if started {
		b.stopReplication()
	}
	b.cancel()
	b.api.Close()
	b.wg.Wait()
	b.ch.close()
}

func (b *Broker) controlledShutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ms(b.cfg.ControlledShutdownTimeoutMs))
	defer cancel()
	b.life.beginShutdown()
	select {
	case <-b.life.done:
		return nil
	case <-ctx.Done():
		b.log.Warn("controlled shutdown did not finish; stopping anyway",
			zap.Stringer("state", b.life.State()), zap.Error(ctx.Err()))
		return errors.Join(ErrStopped, ctx.Err())
	}
}

// RegisterHandlers serves the broker's client APIs on reg (the registry of
// a broker listener): the shared ClientAPI handlers plus the KRaft-only
// DescribeQuorum, UpdateFeatures, AddRaftVoter and RemoveRaftVoter (forwarded to
// the controller), and it decorates ApiVersions answers.
func (b *Broker) RegisterHandlers(reg *protocol.Registry) {
	b.api.Register(reg)
	reg.Register(55, 0, 2, b.handleDescribeQuorum)
	reg.Register(57, 0, 2, b.handleUpdateFeatures)
	reg.Register(80, 0, 1, b.handleAddRaftVoter)
	reg.Register(81, 0, 0, b.handleRemoveRaftVoter)
	reg.SetApiVersionsHook(b.apiVersionsHook)
}

// lockedRand shares one seeded generator between goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) fill(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range p {
		p[i] = byte(l.r.Uint32())
	}
}

// controlledShutdownMoved reports whether next, applied after prev, may
// carry part of another broker's controlled shutdown: some broker is in
// controlled shutdown and not fenced yet in next. The active controller
// lets that broker go only once every active broker reported an offset at
// or past the last record of its leadership moves and ISR removals
// (Kafka's BrokerHeartbeatManager: controlledShutdownOffset against
// lowestActiveOffset), and this broker cannot tell which applied image
// holds that record, so it reports each one at once (see
// lifecycle.heartbeatSoon). It used to report only the mark and the image
// that moved the last leadership: the ISR removals committed after it (at
// 100k partitions the moves span several batches, and a broker's last
// leadership need not be in the last of them) then waited for the next
// regular heartbeat, up to heartbeat.interval.ms (2 s), of every active
// broker. A fenced broker keeps its InControlledShutdown flag until it
// registers again but needs nothing more, so it asks for nothing.
func controlledShutdownMoved(prev, next *image.Image) bool {
	if prev == next {
		return false
	}
	for _, b := range next.Brokers() {
		if b.InControlledShutdown && !b.Fenced {
			return true
		}
	}
	return false
}
