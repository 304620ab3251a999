package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/metadata/controller"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// Component is a role part that App starts and stops in order: the quorum
// driver, the controller, the broker lifecycle. Start must return once the
// component is ready to serve the handlers it registered; Stop must stop
// every goroutine the component started before returning.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// preparer is a component with work to do before any component starts: building
// itself once the cluster id is known, registering handlers and quorum listeners.
type preparer interface {
	Prepare(ctx context.Context) error
}

// resolveEphemeralPorts replaces port 0 in listeners (and the matching advertised
// listeners and voters) with a port bound now, so that what a broker registers
// and what voters dial are real addresses. The bound listeners are returned by
// name and served as they are (protocol.ListenerConfig.Listener): releasing the
// port until Start let another process's connection take it ("address already in
// use" at Start, seen in CI).
func resolveEphemeralPorts(cfg *Config) (map[string]net.Listener, error) {
	bound := map[string]net.Listener{}
	for i, l := range cfg.Listeners {
		if l.Port != 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, "0"))
		if err != nil {
			for _, b := range bound {
				b.Close()
			}
			return nil, fmt.Errorf("app: choosing a port for listener %s: %w", l.Name, err)
		}
		bound[l.Name] = ln
		port := ln.Addr().(*net.TCPAddr).Port
		cfg.Listeners[i].Port = port
		for j, al := range cfg.AdvertisedListeners {
			if al.Name == l.Name && al.Port == 0 {
				cfg.AdvertisedListeners[j].Port = port
			}
		}
		for j, v := range cfg.QuorumVoters {
			if v.ID == cfg.NodeID && v.Port == 0 && contains(cfg.ControllerListenerNames, l.Name) {
				cfg.QuorumVoters[j].Port = port
			}
		}
	}
	return bound, nil
}

type lifecycle int

const (
	lifecycleNew lifecycle = iota
	lifecycleStarted
	lifecycleStopped
)

// App is one kraftd node.
//
// Start order: storage (format or verify meta.properties), components in the
// order they were added, the metrics listener, then the protocol server, so
// that no request is accepted before the code answering it runs. Stop goes
// in reverse: the server drains first, then metrics, then components from
// last to first.
//
// INVARIANTS: registries has exactly one entry per configured listener and
// never changes after New; state only moves forward (new -> started ->
// stopped).
type App struct {
	cfg        Config
	log        *zap.Logger
	registries map[string]*protocol.Registry
	// server serves the broker listeners and controllerServer the
	// controller listeners: two SocketServers, as in Kafka, each with its
	// own connection limits and request memory, so that clients filling
	// max.connections on the broker listeners cannot lock voters and
	// brokers out of the controller listener. Either is nil without such
	// listeners.
	server           *protocol.Server
	controllerServer *protocol.Server
	metrics          *metricsServer

	quorum     *quorumRole
	controller *controllerRole
	broker     *brokerRole
	snapshots  *snapshotRole
	legacy     *legacyRole
	// fatal receives the first error that must stop the process (a failed fsync, a
	// broken quorum invariant); main waits on it next to the signals.
	fatal     chan error
	fatalOnce sync.Once

	mu         sync.Mutex
	state      lifecycle
	clusterID  string
	components []namedComponent
	started    int // how many components Start has started
}

type namedComponent struct {
	name string
	c    Component
}

// New validates cfg and prepares one protocol.Registry per listener (each
// already answers ApiVersions). Roles register their handlers through
// Registry before Start. Nothing touches the disk or the network yet.
func New(cfg Config) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &App{
		cfg:        cfg,
		log:        cfg.Logger.Named("app").With(zap.Int32("node", cfg.NodeID)),
		registries: make(map[string]*protocol.Registry, len(cfg.Listeners)),
	}
	if ignored := cfg.IgnoredKafkaKeys(); len(ignored) > 0 {
		// Kafka's stock server.properties sets thread counts, socket buffers,
		// retention of data topics...: accepted, but said once.
		a.log.Warn("ignoring Kafka settings kraftd does not use", zap.Strings("keys", ignored))
	}
	a.metrics = newMetrics(a.log)
	a.fatal = make(chan error, 1)
	bound, err := resolveEphemeralPorts(&a.cfg)
	if err != nil {
		return nil, err
	}
	cfg = a.cfg
	var brokerListeners, controllerListeners []protocol.ListenerConfig
	legacy, _ := cfg.LegacyListener()
	for _, l := range cfg.Listeners {
		reg := protocol.NewRegistry()
		a.registries[l.Name] = reg
		if cfg.Mode == ModeZKLegacy && l.Name == legacy.Name {
			// Bound and served by the legacy broker (legacy_role.go), which
			// binds its address itself.
			if ln := bound[l.Name]; ln != nil {
				ln.Close()
			}
			continue
		}
		lc := protocol.ListenerConfig{Name: l.Name, Addr: l.Addr(), Listener: bound[l.Name], Registry: reg,
			MaxConnections: int(cfg.ListenerMaxConnections[l.Name])}
		if contains(cfg.ControllerListenerNames, l.Name) {
			controllerListeners = append(controllerListeners, lc)
		} else {
			brokerListeners = append(brokerListeners, lc)
		}
	}
	for name := range cfg.ListenerMaxConnections {
		if _, ok := a.registries[name]; !ok {
			a.log.Warn("listener.name.<name>.max.connections names no listener", zap.String("listener", name))
		}
	}
	a.addRoles()
	closeBound := func() {
		for _, ln := range bound {
			ln.Close()
		}
	}
	if a.server, err = a.newServer(brokerListeners, cfg.InterBrokerListenerName, "protocol"); err != nil {
		closeBound()
		return nil, err
	}
	if a.controllerServer, err = a.newServer(controllerListeners, "", "protocol.controller"); err != nil {
		closeBound()
		return nil, err
	}
	return a, nil
}

// newServer builds one socket server for listeners (nil when there are
// none, e.g. zk-legacy with its one listener served by legacyzk).
func (a *App) newServer(listeners []protocol.ListenerConfig, interBroker, logName string) (*protocol.Server, error) {
	if len(listeners) == 0 {
		return nil, nil
	}
	sc := a.cfg.serverConfig(interBroker, logName)
	sc.Listeners = listeners
	srv, err := protocol.NewServer(sc)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return srv, nil
}

// serverConfig is a socket server's limits from the node's settings
// (socket.request.max.bytes, max.connections, queued.max.request.bytes,
// connections.max.idle.ms), without listeners: App's servers and the
// zk-legacy broker's own get the same.
func (c *Config) serverConfig(interBroker, logName string) protocol.ServerConfig {
	queued := c.QueuedMaxRequestBytes
	if queued <= 0 {
		queued = -1 // Kafka's meaning of -1 and 0: no pool
	}
	return protocol.ServerConfig{
		MaxRequestBytes:       c.SocketRequestMaxBytes,
		MaxConnections:        int(c.MaxConnections),
		InterBrokerListener:   interBroker,
		QueuedMaxRequestBytes: queued,
		IdleTimeout:           time.Duration(c.ConnectionsMaxIdleMs) * time.Millisecond,
		Logger:                c.Logger.Named(logName),
	}
}

// addRoles adds the components of the configured roles. Every role is built in its
// Prepare, before anything starts, so the controller and the broker's metadata
// publisher are registered as quorum listeners before the first committed batch.
// Start order is quorum, controller, broker; Stop runs in reverse, so a broker's
// controlled shutdown still reaches a running controller and quorum, and the quorum
// resigns its leadership last.
func (a *App) addRoles() {
	if a.cfg.Mode == ModeZKLegacy {
		a.legacy = &legacyRole{a: a}
		a.components = append(a.components, namedComponent{name: "legacy-broker", c: a.legacy})
		a.metrics.registerFetchRegionMetrics(a.cfg.NodeID, func() (int64, int64) {
			if b := a.legacy.Broker(); b != nil {
				return b.RegionBytes()
			}
			return 0, 0
		})
		return
	}
	if a.cfg.Mode != ModeKRaft || !(a.cfg.HasRole(RoleController) || a.cfg.HasRole(RoleBroker)) {
		return
	}
	a.quorum = newQuorumRole(a)
	a.metrics.registry.MustRegister(a.quorum.metrics)
	a.components = append(a.components, namedComponent{name: "quorum", c: a.quorum})
	if a.cfg.HasRole(RoleController) {
		a.controller = &controllerRole{a: a}
		a.controller.metrics = newControllerMetrics(a.controller, a.quorum, a.cfg.NodeID)
		a.metrics.registry.MustRegister(a.controller.metrics)
		a.components = append(a.components, namedComponent{name: "controller", c: a.controller})
	}
	if a.cfg.HasRole(RoleBroker) {
		a.broker = &brokerRole{a: a}
		a.components = append(a.components, namedComponent{name: "broker", c: a.broker})
		// a.server is built after addRoles: read at each scrape.
		a.metrics.registerFetchRegionMetrics(a.cfg.NodeID, func() (int64, int64) {
			if a.server == nil {
				return 0, 0
			}
			return a.server.RegionBytes()
		})
	}
	a.snapshots = newSnapshotRole(a)
	a.metrics.registry.MustRegister(newSnapshotMetrics(a.snapshots, a.cfg.NodeID))
	a.quorum.addListener(a.snapshots)
	a.components = append(a.components, namedComponent{name: "snapshots", c: a.snapshots})
}

// Fatal delivers the first error after which the node cannot go on safely. The
// process should stop (with a non-zero status) when it fires.
func (a *App) Fatal() <-chan error { return a.fatal }

func (a *App) reportFatal(err error) {
	a.fatalOnce.Do(func() { a.fatal <- err })
}

// Broker is the node's broker (nil before Start or without the broker role).
func (a *App) Broker() *broker.Broker {
	if a.broker == nil {
		return nil
	}
	return a.broker.Broker()
}

// LegacyBroker is the node's ZooKeeper-era broker (nil before Start or in
// kraft mode): its cache, faults, stats and ZooKeeper session.
func (a *App) LegacyBroker() *legacyzk.Broker {
	if a.legacy == nil {
		return nil
	}
	return a.legacy.Broker()
}

// Controller is the node's metadata controller (nil before Start or without the
// controller role).
func (a *App) Controller() *controller.Controller {
	if a.controller == nil {
		return nil
	}
	return a.controller.Controller()
}

// SnapshotsWritten is how many metadata snapshots this node wrote since Start.
func (a *App) SnapshotsWritten() int64 {
	if a.snapshots == nil {
		return 0
	}
	return a.snapshots.written.Load()
}

// SnapshotDue reports whether this node is writing a metadata snapshot or has
// committed enough since its last one to start the next: work it still owes.
// Benchmarks that pack several nodes on a few cores wait for it to clear.
func (a *App) SnapshotDue() bool {
	if a.snapshots == nil {
		return false
	}
	s := a.snapshots
	return s.busy.Load() || s.pending.Load() >= s.maxBytes
}

// Quorum is the node's running KRaft replica (nil before Start or in zk-legacy mode).
func (a *App) Quorum() *quorum.Node {
	if a.quorum == nil {
		return nil
	}
	return a.quorum.Node()
}

// Config returns the validated configuration.
func (a *App) Config() Config { return a.cfg }

// Registry returns the API registry of a listener (e.g. "CONTROLLER",
// "PLAINTEXT"), or nil for an unknown listener name.
func (a *App) Registry(listener string) *protocol.Registry { return a.registries[listener] }

// Server returns the socket server of the broker listeners or, on a node
// without them (a controller-only node), of the controller listeners; nil
// in zk-legacy mode when the legacy broker serves the only listener
// (legacyzk binds it itself). For fault-injection hooks on every listener
// use ControlKey.
func (a *App) Server() *protocol.Server {
	if a.server != nil {
		return a.server
	}
	return a.controllerServer
}

// Servers returns the node's socket servers: the broker listeners' and the
// controller listeners', those that exist.
func (a *App) Servers() []*protocol.Server {
	var out []*protocol.Server
	for _, s := range []*protocol.Server{a.server, a.controllerServer} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// ControlKey installs a fault-injection hook for one API key on every
// listener of the node (see protocol.Server.ControlKey).
func (a *App) ControlKey(key int16, fn func(*protocol.Request) (kmsg.Response, error, bool)) {
	for _, s := range a.Servers() {
		s.ControlKey(key, fn)
	}
}

// Metrics is the node's Prometheus registry; roles register collectors
// here. It is served on metrics.listener when that is set.
func (a *App) Metrics() *prometheus.Registry { return a.metrics.registry }

// MetricsAddr is the bound metrics address, nil when metrics.listener is
// unset or before Start.
func (a *App) MetricsAddr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.metrics.addr()
}

// AddComponent appends a component to the start order. It must be called
// before Start.
func (a *App) AddComponent(name string, c Component) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != lifecycleNew {
		return fmt.Errorf("%w: AddComponent(%s) after Start", ErrAppState, name)
	}
	a.components = append(a.components, namedComponent{name: name, c: c})
	return nil
}

// ClusterID is the cluster id found or written by Start ("" before Start).
func (a *App) ClusterID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clusterID
}

// Addr returns the bound address of a listener once started, which is how
// callers learn an ephemeral port (listeners with port 0).
func (a *App) Addr(listener string) net.Addr {
	for _, s := range a.Servers() {
		if addr := s.Addr(listener); addr != nil {
			return addr
		}
	}
	if lb := a.LegacyBroker(); lb != nil {
		if l, _ := a.cfg.LegacyListener(); l.Name == listener {
			addr, err := net.ResolveTCPAddr("tcp", lb.Addr())
			if err == nil {
				return addr
			}
		}
	}
	return nil
}

// Start prepares storage, starts the components and then the listeners. On
// failure everything already started is stopped again before returning.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != lifecycleNew {
		return fmt.Errorf("%w: Start called twice or after Stop", ErrAppState)
	}
	a.state = lifecycleStarted
	if a.cfg.Mode != ModeZKLegacy { // zk-legacy: the cluster id comes from ZooKeeper (legacy_role.go)
		clusterID, err := PrepareStorage(&a.cfg)
		if err != nil {
			return err
		}
		a.clusterID = clusterID
	}
	for _, nc := range a.components {
		if p, ok := nc.c.(preparer); ok {
			if err := p.Prepare(ctx); err != nil {
				return fmt.Errorf("app: preparing %s: %w", nc.name, err)
			}
		}
	}
	for _, nc := range a.components {
		if err := nc.c.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("app: starting %s: %w", nc.name, err), a.stopComponents(ctx))
		}
		a.started++
	}
	if a.cfg.MetricsListener != "" {
		if a.cfg.PprofEnable {
			a.metrics.handlePprof()
		}
		if err := a.metrics.start(a.cfg.MetricsListener); err != nil {
			return errors.Join(err, a.stopComponents(ctx))
		}
	}
	for i, srv := range a.Servers() {
		if err := srv.Start(); err != nil {
			for _, started := range a.Servers()[:i] {
				started.Close()
			}
			return errors.Join(fmt.Errorf("app: %w", err), a.metrics.stop(ctx), a.stopComponents(ctx))
		}
	}
	a.log.Info("kraftd started", zap.String("cluster_id", a.clusterID), zap.String("mode", string(a.cfg.Mode)),
		zap.Any("roles", a.cfg.ProcessRoles))
	return nil
}

// Stop drains the listeners (in-flight requests finish until ctx expires,
// then connections are cut) and stops components in reverse order. It is
// safe to call more than once and before Start. Its last line says how long
// each stage took: a controlled shutdown is timed from the signal until
// the controller lets the broker go and until the process exits, and the
// difference is this node's own work (issue 17).
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == lifecycleStopped {
		return nil
	}
	a.state = lifecycleStopped
	start := time.Now()
	var errs []error
	// A broker's controlled shutdown goes first, while every listener still serves:
	// on a combined node the controller it asks to move leaderships off is this very
	// process (Kafka's BrokerServer shuts down the same way). Its Stop is idempotent.
	if a.broker != nil && a.started > 0 {
		if b := a.broker.Broker(); b != nil {
			if err := b.Stop(ctx); err != nil && !errors.Is(err, broker.ErrStopped) {
				errs = append(errs, fmt.Errorf("app: broker controlled shutdown: %w", err))
			}
		}
	}
	// Shutdown falls back to closing every connection when ctx expires.
	// The broker listeners go first, the controller listeners last.
	brokerDone := time.Now()
	for _, srv := range a.Servers() {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("app: shutting down listeners: %w", err))
		}
	}
	listenersDone := time.Now()
	errs = append(errs, a.metrics.stop(ctx))
	errs = append(errs, a.stopComponents(ctx))
	a.log.Info("kraftd stopped", zap.Float64("controlled_shutdown_ms", msBetween(start, brokerDone)),
		zap.Float64("listeners_ms", msBetween(brokerDone, listenersDone)),
		zap.Float64("components_ms", msBetween(listenersDone, time.Now())))
	return errors.Join(errs...)
}

// msBetween is b - a in milliseconds, to the microsecond.
func msBetween(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }

// slowComponentStop: a component whose Stop takes longer is logged with
// its time (stopComponents), to tell a slow shutdown's parts apart.
const slowComponentStop = 50 * time.Millisecond

// Kill stops the node as kill -9 would, for failure tests: every listener
// closes at once (in-flight requests are cut), a broker stops without a
// controlled shutdown, and the components stop without waiting for anyone.
func (a *App) Kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == lifecycleStopped {
		return
	}
	a.state = lifecycleStopped
	for _, srv := range a.Servers() {
		srv.Close()
	}
	if a.broker != nil && a.started > 0 {
		if b := a.broker.Broker(); b != nil {
			b.Kill()
		}
	}
	if a.legacy != nil && a.started > 0 {
		a.legacy.Kill()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.metrics.stop(ctx)
	_ = a.stopComponents(ctx)
	a.log.Info("kraftd killed")
}

// stopComponents stops the started components, last first. Callers hold mu.
func (a *App) stopComponents(ctx context.Context) error {
	var errs []error
	for ; a.started > 0; a.started-- {
		nc := a.components[a.started-1]
		start := time.Now()
		if err := nc.c.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("app: stopping %s: %w", nc.name, err))
		}
		if d := time.Since(start); d >= slowComponentStop {
			a.log.Info("component stopped slowly", zap.String("component", nc.name), zap.Float64("elapsed_ms", msBetween(start, start.Add(d))))
		}
	}
	return errors.Join(errs...)
}
