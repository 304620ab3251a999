package protocol

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// ClientConfig configures a Client. Zero values take the documented
// defaults.
type ClientConfig struct {
	ClientID string // sent in every request header
	// SoftwareName and SoftwareVersion go in ApiVersions v3+ (KIP-511).
	// Defaults: "kraftd" and the kraftd module version (or "dev").
	SoftwareName, SoftwareVersion string
	DialTimeout                   time.Duration // default 5s; also bounds the ApiVersions handshake
	RequestTimeout                time.Duration // deadline for a request whose ctx has none; default 30s
	BackoffMin, BackoffMax        time.Duration // reconnect backoff, defaults 20ms and 1s, with jitter
	MaxResponseBytes              int32         // default 104857600
	Logger                        *zap.Logger
	// FailWhileBackingOff makes a request to a peer in its reconnect backoff
	// fail at once with ErrBackingOff instead of waiting the backoff out
	// before dialing; the first request after the backoff dials. Kafka's
	// NetworkClient behaves so (a node in reconnect backoff is not ready, and
	// InterBrokerSendThread completes its requests as disconnected), which lets
	// a caller with other peers to try (a raft observer looking for the
	// leader) ask one of them instead of queueing behind a dead one.
	FailWhileBackingOff bool
}

// Client defaults.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultBackoffMin     = 20 * time.Millisecond
	DefaultBackoffMax     = time.Second
)

// Client sends requests to Kafka-protocol peers over one pooled, pipelined
// connection per address.
//
// Goroutines: per live connection one writer and one reader; per dial in
// progress one dialer. All are counted in wg and stop when the connection
// dies or the client is closed; Close waits for them.
type Client struct {
	cfg       ClientConfig
	log       *zap.Logger
	formatter *kmsg.RequestFormatter
	ctx       context.Context // canceled by Close; parent of all dials
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu     sync.Mutex
	peers  map[string]*peer
	closed bool

	rngMu sync.Mutex
	rng   *rand.Rand
}

// peer is the connection state for one address.
//
// INVARIANTS: at most one dial in flight (dial != nil); cc, if set, was
// negotiated successfully; failures counts consecutive failed dials or
// dead connections since the last successful negotiation.
type peer struct {
	addr     string
	mu       sync.Mutex
	cc       *clientConn
	dial     *dialAttempt
	failures int
	// failedAt is when the last dial failed (zero: none since the last
	// connection): the reconnect backoff counts from it.
	failedAt time.Time
	// retryAt is when the next dial may start after a failed one
	// (FailWhileBackingOff only; zero: at once).
	retryAt time.Time
}

// dialAttempt is a dial shared by every Request that arrives while it runs.
type dialAttempt struct {
	done chan struct{} // closed when cc or err is set
	cc   *clientConn
	err  error
}

// NewClient returns a Client; it dials lazily, on first use of an address.
func NewClient(cfg ClientConfig) *Client {
	applyClientDefaults(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	opts := []kmsg.RequestFormatterOpt{}
	if cfg.ClientID != "" {
		opts = append(opts, kmsg.FormatterClientID(cfg.ClientID))
	}
	seed := uint64(time.Now().UnixNano())
	return &Client{
		cfg:       cfg,
		log:       cfg.Logger,
		formatter: kmsg.NewRequestFormatter(opts...),
		ctx:       ctx,
		cancel:    cancel,
		peers:     make(map[string]*peer),
		rng:       rand.New(rand.NewPCG(seed, seed>>1|1)),
	}
}

func applyClientDefaults(cfg *ClientConfig) {
	if cfg.SoftwareName == "" {
		cfg.SoftwareName = "kraftd"
	}
	if cfg.SoftwareVersion == "" {
		cfg.SoftwareVersion = moduleVersion()
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxRequestBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
}

// moduleVersion is the kraftd module version as a string Kafka accepts in
// ClientSoftwareVersion; "(devel)" and pseudo-versions with '+' do not
// match the pattern, so they fall back to "dev".
func moduleVersion() string {
	const module = "github.com/kraftd/kraftd"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	if info.Main.Path == module {
		v = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			v = d.Version
		}
	}
	if len(v) > 1 && v[0] == 'v' {
		v = v[1:]
	}
	if !validSoftwareString(v) {
		return "dev"
	}
	return v
}

// Request sends req to addr and waits for its response.
//
// Version convention: if req.GetVersion() < 0 the version is negotiated:
// the client sets it to min(kmsg's max for the key, the peer's advertised
// max) and fails with ErrUnsupportedVersion if that is below the peer's
// min or the peer does not serve the key. If req.GetVersion() >= 0 the
// version is pinned: it is sent as is, and ErrUnsupportedVersion is
// returned without sending if the peer does not advertise it. Note that
// kmsg's NewPtrXRequest constructors leave the version at 0, i.e. pinned
// to v0: call req.SetVersion(-1) to negotiate. After the call
// req.GetVersion() is the version that was used.
//
// Requests are pipelined: concurrent calls share the connection and are
// matched to responses by correlation id. If ctx has no deadline,
// RequestTimeout applies. A canceled or timed-out request leaves the
// connection up; its late response is discarded. req must not be used by
// another goroutine until Request returns.
func (c *Client) Request(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	cc, err := c.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	if err := chooseVersion(req, cc.versions); err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return cc.roundTrip(ctx, req)
}

// PeerVersions returns the version table addr advertised in ApiVersions
// (key -> [min, max]), connecting first if needed. The map is a copy.
func (c *Client) PeerVersions(ctx context.Context, addr string) (map[int16][2]int16, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	cc, err := c.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	out := make(map[int16][2]int16, len(cc.versions))
	for k, v := range cc.versions {
		out[k] = v
	}
	return out, nil
}

// Close closes every connection, fails pending requests with ErrClosed and
// waits for the client's goroutines. Safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	peers := make([]*peer, 0, len(c.peers))
	for _, p := range c.peers {
		peers = append(peers, p)
	}
	c.mu.Unlock()
	c.cancel()
	// A writer blocked in a socket write would not see ctx; closing the
	// sockets unblocks it.
	for _, p := range peers {
		p.mu.Lock()
		cc := p.cc
		p.mu.Unlock()
		if cc != nil {
			cc.fail(ErrClosed)
		}
	}
	c.wg.Wait()
	return nil
}

// chooseVersion applies the negotiate/pinned convention of Request.
func chooseVersion(req kmsg.Request, versions map[int16][2]int16) error {
	key := req.Key()
	peerRange, ok := versions[key]
	if !ok {
		return fmt.Errorf("%w: peer does not serve %s", ErrUnsupportedVersion, kmsg.NameForKey(key))
	}
	if v := req.GetVersion(); v >= 0 {
		if v < peerRange[0] || v > peerRange[1] || v > req.MaxVersion() {
			return fmt.Errorf("%w: %s v%d pinned, peer serves v%d-v%d, kmsg max v%d",
				ErrUnsupportedVersion, kmsg.NameForKey(key), v, peerRange[0], peerRange[1], req.MaxVersion())
		}
		return nil
	}
	v := min(req.MaxVersion(), peerRange[1])
	if v < peerRange[0] {
		return fmt.Errorf("%w: %s: peer serves v%d-v%d, kmsg max v%d",
			ErrUnsupportedVersion, kmsg.NameForKey(key), peerRange[0], peerRange[1], req.MaxVersion())
	}
	req.SetVersion(v)
	return nil
}

// peer returns the state for addr, creating it on first use.
func (c *Client) peer(addr string) (*peer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	p, ok := c.peers[addr]
	if !ok {
		p = &peer{addr: addr}
		c.peers[addr] = p
	}
	return p, nil
}

// conn returns a live negotiated connection to addr, joining or starting a
// dial if there is none.
func (c *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	p, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.cc != nil && !p.cc.isDead() {
		cc := p.cc
		p.mu.Unlock()
		return cc, nil
	}
	p.cc = nil
	d := p.dial
	if d == nil && c.cfg.FailWhileBackingOff && time.Now().Before(p.retryAt) {
		wait := time.Until(p.retryAt)
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %s for another %v", ErrBackingOff, addr, wait.Round(time.Millisecond))
	}
	if d == nil {
		d = &dialAttempt{done: make(chan struct{})}
		if err := c.startDial(p, d); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		p.dial = d
	}
	p.mu.Unlock()
	select {
	case <-d.done:
		return d.cc, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("protocol: connecting to %s: %w", addr, ctx.Err())
	}
}

// startDial launches the dialer goroutine unless the client is closed.
// Holding c.mu while calling wg.Go keeps it from racing Close's wg.Wait.
func (c *Client) startDial(p *peer, d *dialAttempt) error {
	delay := c.dialDelay(p, time.Now())
	if c.cfg.FailWhileBackingOff {
		delay = 0 // requests failed fast until retryAt instead
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.wg.Go(func() { c.runDial(p, d, delay) })
	return nil
}

// backoff is the wait before the next dial after n consecutive failures:
// 0 for the first dial, else BackoffMin doubling up to BackoffMax, with
// the wait drawn uniformly from [d/2, d] so that many clients of one
// restarted server do not reconnect in lockstep.
func (c *Client) backoff(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	d := c.cfg.BackoffMin
	for i := 1; i < failures && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.BackoffMax)
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return d/2 + time.Duration(c.rng.Int64N(int64(d/2)+1))
}

// dialDelay is how long a dial to p starting at now waits: what is left of
// the backoff after p's failures, counted from the last failure, as Kafka's
// ClusterConnectionStates blacks a node out for reconnect.backoff.ms after
// its last connection attempt. A peer that failed long ago is dialed at
// once: counting the backoff from the new dial held a forwarded request for
// up to BackoffMax when a controller that had been down came back as the
// new leader (issue 17: 190 ms of a failover's recovery in
// BenchmarkControllerFailover). p.mu held.
func (c *Client) dialDelay(p *peer, now time.Time) time.Duration {
	if p.failures == 0 {
		return 0
	}
	return max(0, c.backoff(p.failures)-now.Sub(p.failedAt))
}

func (c *Client) runDial(p *peer, d *dialAttempt, delay time.Duration) {
	cc, err := c.waitAndDial(p, delay)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failures++
		p.failedAt = time.Now()
		d.err = err
		if c.cfg.FailWhileBackingOff {
			p.retryAt = time.Now().Add(c.backoff(p.failures))
		}
		c.log.Debug("dial failed", zap.String("addr", p.addr), zap.Int("failures", p.failures), zap.Error(err))
	} else {
		p.failures, p.failedAt = 0, time.Time{}
		p.cc, d.cc = cc, cc
	}
	p.dial = nil
	close(d.done)
}

func (c *Client) waitAndDial(p *peer, delay time.Duration) (*clientConn, error) {
	addr := p.addr
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
	}
	dialer := net.Dialer{Timeout: c.cfg.DialTimeout}
	nc, err := dialer.DialContext(c.ctx, "tcp", addr)
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("protocol: dial %s: %w", addr, err)
	}
	// The handshake reads with a deadline but no ctx: make Close abort it.
	stop := context.AfterFunc(c.ctx, func() { nc.Close() })
	cc, err := c.handshake(nc, p)
	if !stop() && err == nil {
		err = ErrClosed
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("protocol: ApiVersions with %s: %w", addr, err)
	}
	c.wg.Go(cc.writeLoop)
	c.wg.Go(cc.readLoop)
	return cc, nil
}
