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
	Name     string
	Addr     string // host:port; port 0 binds an ephemeral port (see Server.Addr)
	Registry *Registry
}

// ServerConfig configures a Server. Zero values take Kafka's defaults.
type ServerConfig struct {
	Listeners []ListenerConfig
	// MaxRequestBytes is socket.request.max.bytes (default 104857600).
	MaxRequestBytes int32
	// MaxConnections is max.connections (default math.MaxInt32).
	MaxConnections int
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
// conn in conns has a running serve goroutine counted in wg.
type Server struct {
	cfg    ServerConfig
	log    *zap.Logger
	ctx    context.Context // parent of every handler ctx; canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	controls atomic.Pointer[map[int16]ControlFunc]
	bufPool  sync.Pool

	mu        sync.Mutex
	listeners map[string]net.Listener
	conns     map[*conn]struct{}
	started   bool
	stopping  bool // Shutdown or Close called: accept nothing more
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
		listeners: make(map[string]net.Listener),
		conns:     make(map[*conn]struct{}),
	}
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
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
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
		ln, err := net.Listen("tcp", lc.Addr)
		if err != nil {
			for _, bound := range s.listeners {
				bound.Close()
			}
			clear(s.listeners)
			return fmt.Errorf("protocol: listener %s: %w", lc.Name, err)
		}
		s.listeners[lc.Name] = ln
	}
	s.started = true
	for _, lc := range s.cfg.Listeners {
		ln := s.listeners[lc.Name]
		s.log.Info("listening", zap.String("listener", lc.Name), zap.Stringer("addr", ln.Addr()))
		s.wg.Go(func() { s.acceptLoop(ln, lc) })
	}
	return nil
}

// Addr returns the bound address of a listener, or nil if there is no such
// listener or the server is not started.
func (s *Server) Addr(listener string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ln, ok := s.listeners[listener]; ok {
		return ln.Addr()
	}
	return nil
}

func (s *Server) acceptLoop(ln net.Listener, lc ListenerConfig) {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (EMFILE, ECONNABORTED): back off as net/http does
			// rather than spin or give up on the listener.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", zap.String("listener", lc.Name), zap.Error(err), zap.Duration("retry_in", backoff))
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
		s.admit(nc, lc)
	}
}

// admit registers a freshly accepted connection and starts serving it, or
// closes it at once if the server is stopping or max.connections is hit.
func (s *Server) admit(nc net.Conn, lc ListenerConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		s.log.Warn("closing connection: max.connections reached",
			zap.String("listener", lc.Name), zap.Stringer("remote", nc.RemoteAddr()),
			zap.Int("max_connections", s.cfg.MaxConnections))
		nc.Close()
		return
	}
	c := newConn(s, nc, lc)
	s.conns[c] = struct{}{}
	s.wg.Go(c.serve)
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// stopAccepting closes the listeners and returns the live connections.
func (s *Server) stopAccepting() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
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
