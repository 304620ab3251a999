package protocol

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Request is one decoded request as handed to a Handler.
type Request struct {
	Key           int16
	Version       int16 // as sent by the client; see decodeRequest for ApiVersions
	CorrelationID int32
	ClientID      *string
	Body          kmsg.Request // decoded, version set
	Listener      string       // listener name, e.g. "PLAINTEXT", "CONTROLLER"
	RemoteAddr    net.Addr
}

// Handler answers one request. A non-nil error closes the connection without
// a response, as Kafka does for requests it cannot handle. A nil response
// with a nil error sends nothing and keeps the connection (Produce with
// acks=0 has no response). Handlers may block (e.g. a long-poll Fetch);
// requests on one connection are still answered strictly in order, other
// connections are unaffected. ctx is canceled when the connection dies or
// the server is closed.
type Handler func(ctx context.Context, req *Request) (kmsg.Response, error)

// ListenerConfig is one named listener: where to bind and what it serves.
type ListenerConfig struct {
	Name string
	Addr string // host:port; port 0 binds an ephemeral port (see Server.Addr)
	// Listener, when set, is the listener already bound to Addr (so that a
	// caller learns an ephemeral port before Start without releasing it to
	// anyone else); Start serves it instead of binding, and the Server closes
	// it, also when it is closed without having started.
	Listener net.Listener
	Registry *Registry
	// MaxConnections is listener.name.NAME.max.connections: at most this
	// many connections on this listener; 0 means no listener limit.
	MaxConnections int
}

// ServerConfig configures a Server. Zero values take Kafka's defaults
// (QueuedMaxRequestBytes takes kraftd's, see there).
//
// One Server is one Kafka SocketServer: its connection limits and its
// request memory pool are its own. A node that is both broker and
// controller runs two, as Kafka does, so that clients filling the broker
// listeners cannot lock voters and brokers out of the controller listener.
type ServerConfig struct {
	Listeners []ListenerConfig
	// MaxRequestBytes is socket.request.max.bytes (default 104857600).
	MaxRequestBytes int32
	// MaxConnections is max.connections (default math.MaxInt32): the
	// connections of all listeners together. As in Kafka's
	// ConnectionQuotas, a listener at its limit, or a server at this one,
	// stops accepting (the new connection waits, unanswered, until a
	// connection closes) rather than refusing; the one exception is the
	// inter-broker listener.
	MaxConnections int
	// InterBrokerListener is inter.broker.listener.name. When the server
	// has more than one listener, connections on this one are not held
	// back by MaxConnections (only by their listener's own limit), and one
	// that takes the server past MaxConnections closes the least recently
	// active connection of another listener, as Kafka does.
	InterBrokerListener string
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// requests being read or handled, over all connections, before reading
	// pauses (see requestPool). 0 takes kraftd's default of 256 MiB;
	// negative means no bound, which is Kafka's default (-1).
	QueuedMaxRequestBytes int64
	// IdleTimeout is connections.max.idle.ms (default 10 minutes): a
	// connection that completes no request for this long is closed, and
	// so is one whose peer stops reading our responses for this long.
	// Negative (IdleTimeoutNever) never closes a connection for being idle,
	// as Kafka's -1.
	IdleTimeout time.Duration
	// MaxBufferedBytesPerConn bounds encoded responses queued for one
	// connection (default 64 MiB). When full, that connection stops
	// reading requests until its peer reads responses.
	MaxBufferedBytesPerConn int
	Logger                  *zap.Logger
}

// Defaults for ServerConfig zero values.
const (
	DefaultMaxRequestBytes         = 104857600
	DefaultMaxConnections          = math.MaxInt32
	DefaultQueuedMaxRequestBytes   = 256 << 20
	DefaultIdleTimeout             = 10 * time.Minute
	DefaultMaxBufferedBytesPerConn = 64 << 20
)

// IdleTimeoutNever as ServerConfig.IdleTimeout keeps idle connections open
// (Kafka's connections.max.idle.ms=-1).
const IdleTimeoutNever time.Duration = -1

// idleDeadline is when a connection idle from now on times out; the zero
// time (no deadline) when IdleTimeout is negative.
func (cfg *ServerConfig) idleDeadline() time.Time {
	if cfg.IdleTimeout < 0 {
		return time.Time{}
	}
	return time.Now().Add(cfg.IdleTimeout)
}

// ControlFunc is a fault-injection hook, see Server.ControlKey.
type ControlFunc func(*Request) (kmsg.Response, error, bool)

// Server serves the Kafka protocol on one or more listeners.
//
// Goroutines: one accept loop per listener; per connection one reader
// (which also calls the Handler, so requests are processed one at a time
// in order) and one writer. All are tracked by wg; Close waits for them.
//
// INVARIANTS: once stopping is set no connection is added to conns; every
// conn in conns has a running serve goroutine counted in wg; each
// listener's count is the number of its conns in conns; evicting is the
// number of conns in conns with evicted set.
type Server struct {
	cfg    ServerConfig
	log    *zap.Logger
	ctx    context.Context // parent of every handler ctx; canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   requestPool
	stopCh chan struct{} // closed by stopAccepting: ends waits for a slot or for memory

	controls atomic.Pointer[map[int16]ControlFunc]
	bufPool  sync.Pool

	regionFileBytes atomic.Int64 // file-region bytes sent with sendfile
	regionCopyBytes atomic.Int64 // file-region bytes copied (no sendfile)

	mu        sync.Mutex
	listeners map[string]*listenerState
	conns     map[*conn]struct{}
	evicting  int
	slotCh    chan struct{} // closed and replaced when a connection goes, if an acceptor waits
	started   bool
	stopping  bool // Shutdown or Close called: accept nothing more
}

// listenerState is one listener's socket and connection count.
type listenerState struct {
	cfg     ListenerConfig
	ln      net.Listener
	count   int  // guarded by Server.mu
	waiting bool // guarded by Server.mu: the acceptor waits for a slot
}

// NewServer validates cfg and applies defaults. Nothing is bound until Start.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := validateServerConfig(&cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		ctx:       ctx,
		cancel:    cancel,
		stopCh:    make(chan struct{}),
		listeners: make(map[string]*listenerState),
		conns:     make(map[*conn]struct{}),
	}
	s.pool = requestPool{capacity: cfg.QueuedMaxRequestBytes, stop: s.stopCh}
	s.bufPool.New = func() any { b := make([]byte, 0, 512); return &b }
	return s, nil
}

func validateServerConfig(cfg *ServerConfig) error {
	if len(cfg.Listeners) == 0 {
		return fmt.Errorf("%w: no listeners", ErrBadConfig)
	}
	seen := make(map[string]bool)
	for _, l := range cfg.Listeners {
		if l.Name == "" || l.Registry == nil || seen[l.Name] {
			return fmt.Errorf("%w: listener %q: empty or duplicate name, or nil registry", ErrBadConfig, l.Name)
		}
		seen[l.Name] = true
		if l.MaxConnections < 0 {
			return fmt.Errorf("%w: listener %q: negative max connections", ErrBadConfig, l.Name)
		}
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxBufferedBytesPerConn <= 0 {
		cfg.MaxBufferedBytesPerConn = DefaultMaxBufferedBytesPerConn
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return nil
}

// Start binds every listener and starts the accept loops. If any bind
// fails, the ones already bound are closed and the error is returned.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopping {
		return fmt.Errorf("%w: Start called twice or after Close", ErrClosed)
	}
	for _, lc := range s.cfg.Listeners {
		ln, err := lc.Listener, error(nil)
		if ln == nil {
			ln, err = net.Listen("tcp", lc.Addr)
		}
		if err != nil {
			for _, bound := range s.listeners {
				bound.ln.Close()
			}
			clear(s.listeners)
			s.closePreBound()
			return fmt.Errorf("protocol: listener %s: %w", lc.Name, err)
		}
		s.listeners[lc.Name] = &listenerState{cfg: lc, ln: ln}
	}
	s.started = true
	for _, lc := range s.cfg.Listeners {
		ls := s.listeners[lc.Name]
		s.log.Info("listening", zap.String("listener", lc.Name), zap.Stringer("addr", ls.ln.Addr()))
		s.wg.Go(func() { s.acceptLoop(ls) })
	}
	return nil
}

// Addr returns the bound address of a listener, or nil if there is no such
// listener or the server is not started.
func (s *Server) Addr(listener string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls, ok := s.listeners[listener]; ok {
		return ls.ln.Addr()
	}
	return nil
}

func (s *Server) acceptLoop(ls *listenerState) {
	var backoff time.Duration
	for {
		nc, err := ls.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (EMFILE, ECONNABORTED): back off as net/http does
			// rather than spin or give up on the listener.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", zap.String("listener", ls.cfg.Name), zap.Error(err), zap.Duration("retry_in", backoff))
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		s.admit(nc, ls)
	}
}

// admit waits for a connection slot on the listener, as Kafka's acceptor
// does in ConnectionQuotas.inc: the accepted connection is held, unread,
// and the listener accepts nothing more until a slot frees (further
// connections wait in the kernel's backlog). Then it registers the
// connection and starts serving it. A connection on the protected
// inter-broker listener that takes the server past max.connections makes
// room by closing the least recently active connection of another
// listener. If the server stops meanwhile, the connection is closed.
func (s *Server) admit(nc net.Conn, ls *listenerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.stopping && !s.slotAvailable(ls) {
		if !ls.waiting {
			ls.waiting = true
			s.log.Warn("connection limit reached: not accepting until a connection closes",
				zap.String("listener", ls.cfg.Name), zap.Int("listener_connections", ls.count),
				zap.Int("listener_max_connections", ls.cfg.MaxConnections),
				zap.Int("connections", len(s.conns)), zap.Int("max_connections", s.cfg.MaxConnections))
		}
		if s.slotCh == nil {
			s.slotCh = make(chan struct{})
		}
		ch := s.slotCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.stopCh:
		}
		s.mu.Lock()
	}
	ls.waiting = false
	if s.stopping {
		nc.Close()
		return
	}
	c := newConn(s, nc, ls)
	s.conns[c] = struct{}{}
	ls.count++
	s.wg.Go(c.serve)
	if s.protected(ls) {
		s.evictForProtectedLocked()
	}
}

// slotAvailable is Kafka's ConnectionQuotas.connectionSlotAvailable: the
// listener's own limit always applies; the server-wide one does not apply
// to the protected inter-broker listener.
func (s *Server) slotAvailable(ls *listenerState) bool {
	if ls.cfg.MaxConnections > 0 && ls.count >= ls.cfg.MaxConnections {
		return false
	}
	return s.protected(ls) || len(s.conns)-s.evicting < s.cfg.MaxConnections
}

// protected is Kafka's protectedListener: the inter-broker listener of a
// server that has other listeners too.
func (s *Server) protected(ls *listenerState) bool {
	return ls.cfg.Name == s.cfg.InterBrokerListener && len(s.listeners) > 1
}

// evictForProtectedLocked closes least recently active connections of
// unprotected listeners while the server is past max.connections, as
// Kafka's processors do (closeExcessConnections) after an inter-broker
// connection was let in over the limit.
func (s *Server) evictForProtectedLocked() {
	for len(s.conns)-s.evicting > s.cfg.MaxConnections {
		var victim *conn
		for c := range s.conns {
			if c.evicted || s.protected(c.listener) {
				continue
			}
			if victim == nil || c.lastActive.Load() < victim.lastActive.Load() {
				victim = c
			}
		}
		if victim == nil {
			return
		}
		victim.evicted = true
		s.evicting++
		s.log.Warn("closing connection: max.connections reached, making room for the inter-broker listener",
			zap.String("listener", victim.listener.cfg.Name), zap.Stringer("remote", victim.nc.RemoteAddr()),
			zap.Int("max_connections", s.cfg.MaxConnections))
		victim.nc.Close()
	}
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	c.listener.count--
	if c.evicted {
		s.evicting--
	}
	if s.slotCh != nil {
		close(s.slotCh)
		s.slotCh = nil
	}
}

// stopAccepting closes the listeners and returns the live connections.
func (s *Server) stopAccepting() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		s.stopping = true
		close(s.stopCh)
	}
	for _, ls := range s.listeners {
		ls.ln.Close()
	}
	if !s.started {
		s.closePreBound()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// closePreBound closes the listeners handed in bound (ListenerConfig.Listener)
// that Start did not take over; mu held.
func (s *Server) closePreBound() {
	for _, lc := range s.cfg.Listeners {
		if lc.Listener != nil {
			if _, taken := s.listeners[lc.Name]; !taken {
				lc.Listener.Close()
			}
		}
	}
}

// Shutdown stops accepting, lets every connection finish the request it is
// processing and flush queued responses (no further requests are read),
// and waits for that until ctx is done. Then, or if ctx expires first, it
// closes everything as Close does. It returns ctx.Err() if ctx expired.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, c := range s.stopAccepting() {
		c.drain()
	}
	idle := make(chan struct{})
	var waiter sync.WaitGroup
	waiter.Go(func() {
		s.wg.Wait()
		close(idle)
	})
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	waiter.Wait()
	return err
}

// Close closes every listener and connection immediately, cancels handler
// contexts and waits for all goroutines. It is safe to call more than once.
func (s *Server) Close() error {
	conns := s.stopAccepting()
	s.cancel()
	for _, c := range conns {
		c.nc.Close()
	}
	s.wg.Wait()
	return nil
}
