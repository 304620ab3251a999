package controller

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Controller is the quorum controller: it implements quorum.Listener (to
// see commits and leader changes) and serves the controller-listener APIs
// registered by RegisterHandlers.
//
// INVARIANTS:
//   - only the loop goroutine touches core;
//   - inbox is appended by the quorum's driver under mu and drained by the
//     loop; HandleCommit and HandleLeaderChange never block on the loop.
type Controller struct {
	cfg  Config
	log  *zap.Logger
	core *core

	ctx    context.Context // canceled by Close; bounds Propose calls
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	inbox   []any // raftlog batches ([]raftlog.Batch) and quorum.LeaderAndEpoch, in arrival order
	started bool
	closed  bool
	wake    chan struct{} // cap 1: inbox has items
	ops     chan op
	// deferred are ops received while core was busy appending a large
	// operation that could not be served then; the loop runs them, in
	// arrival order, before receiving more. Each connection has at most one
	// request in flight, so there are at most as many as connections.
	deferred []op

	// published is the committed image, for readers outside the loop.
	published sync.Mutex
	image     *image.Image
	offset    int64
	fatal     error // set once committed metadata could not be applied
}

// op is one request handed to the loop; reply has capacity 1 so the loop
// never blocks on a handler that went away.
type op struct {
	req   kmsg.Request
	reply chan kmsg.Response
	// tick asks the loop to run the periodic duties now (tests).
	tick bool
}

// New validates cfg and returns a Controller that is not yet running.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{
		cfg: cfg, log: cfg.Logger.Named("controller").With(zap.Int32("node", cfg.NodeID)),
		ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), ops: make(chan op),
		image: image.Empty(), offset: -1,
	}
	cfg.Logger = c.log
	c.core = newCore(cfg, func(epoch int32, recs []raftlog.Record) (int64, error) {
		return cfg.Quorum.Propose(ctx, epoch, recs)
	})
	c.core.onCommit = c.publish
	c.core.onFatal = c.stop
	c.core.stepAppends = true
	return c, nil
}

// Start runs the event loop. Register the Controller with the quorum node
// before starting the node, so no commit is missed.
func (c *Controller) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.started:
		return ErrStarted
	}
	c.started = true
	c.wg.Go(c.loop)
	return nil
}

// Close stops the loop; requests still waiting get NOT_CONTROLLER. It is
// safe to call more than once.
func (c *Controller) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// HandleCommit implements quorum.Listener; it only queues.
func (c *Controller) HandleCommit(batches []raftlog.Batch) { c.enqueue(batches) }

// HandleLeaderChange implements quorum.Listener; it only queues.
func (c *Controller) HandleLeaderChange(l quorum.LeaderAndEpoch) { c.enqueue(l) }

func (c *Controller) enqueue(item any) {
	c.mu.Lock()
	c.inbox = append(c.inbox, item)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// CommittedImage is the image of the committed log with any open metadata
// transaction held back, and the last committed offset (control batches
// included). It is what a broker replaying the same log would publish.
func (c *Controller) CommittedImage() (*image.Image, int64) {
	c.published.Lock()
	defer c.published.Unlock()
	return c.image, c.offset
}

var _ quorum.Listener = (*Controller)(nil)

func (c *Controller) nowMs() int64 { return c.cfg.Clock().UnixMilli() }

// loop is the only goroutine touching core.
func (c *Controller) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if c.core.busy() {
			if !c.stepBusy() {
				return
			}
			continue
		}
		if len(c.deferred) > 0 {
			o := c.deferred[0]
			c.deferred = c.deferred[1:]
			c.runOp(o)
			continue
		}
		c.armTimer(timer)
		select {
		case <-c.ctx.Done():
			c.core.shutdown()
			return
		case <-c.wake:
			c.drainInbox()
		case o := <-c.ops:
			c.runOp(o)
		case <-timer.C:
			c.core.tick(c.nowMs())
		}
	}
}

// maxOpsPerBusyStep bounds the requests stepBusy takes between two batches.
const maxOpsPerBusyStep = 64

// stepBusy is one loop step while core appends a large operation batch by
// batch: adopt commits and leader changes, answer the requests that write
// nothing (steady heartbeats, DescribeCluster) and set the others aside,
// then append the next batch. A heartbeat thus waits for one batch, not for
// a 100,000-partition create. It returns false when the controller closes.
func (c *Controller) stepBusy() bool {
	select {
	case <-c.ctx.Done():
		c.core.shutdown()
		return false
	case <-c.wake:
		c.drainInbox()
	default:
	}
	// Bounded, so that heartbeats answered at once and sent again cannot
	// starve the append.
	for n, more := 0, true; more && n < maxOpsPerBusyStep; n++ {
		select {
		case o := <-c.ops:
			if !o.tick && c.core.writesNothing(o.req) {
				c.runOp(o)
			} else {
				c.deferred = append(c.deferred, o)
			}
		default:
			more = false
		}
	}
	if c.core.busy() { // leadership may have gone with the inbox
		c.core.appendNext(c.nowMs())
	}
	return true
}

func (c *Controller) armTimer(t *time.Timer) {
	d := time.Hour
	if next := c.core.nextDeadlineMs(); next < 1<<62 {
		d = max(time.Duration(next-c.nowMs())*time.Millisecond, 0)
	}
	t.Reset(d)
}

func (c *Controller) drainInbox() {
	c.mu.Lock()
	items := c.inbox
	c.inbox = nil
	c.mu.Unlock()
	for _, it := range items {
		switch v := it.(type) {
		case []raftlog.Batch:
			_ = c.core.commit(v, c.nowMs()) // logged by core; the controller stays inactive
		case quorum.LeaderAndEpoch:
			c.core.leaderChange(v, c.nowMs())
		case quorum.Snapshot:
			c.core.loadSnapshot(v, c.nowMs())
		}
	}
}

func (c *Controller) runOp(o op) {
	if o.tick {
		c.core.tick(c.nowMs())
		o.reply <- nil
		return
	}
	c.core.handle(o.req, c.nowMs(), func(r kmsg.Response) { o.reply <- r })
}

// resignTimeout bounds the wait for the quorum driver when a failed
// controller resigns.
const resignTimeout = 5 * time.Second

// stop runs on the loop when committed metadata cannot be applied: record
// the failure for Failed, hand quorum leadership over if this node holds
// it, and report the error (the process exits).
func (c *Controller) stop(err error, leading bool) {
	c.published.Lock()
	c.fatal = err
	c.published.Unlock()
	if leading {
		ctx, cancel := context.WithTimeout(c.ctx, resignTimeout)
		rerr := c.cfg.Quorum.Resign(ctx)
		cancel()
		c.log.Error("resigned quorum leadership after a metadata replay failure", zap.NamedError("resignError", rerr))
	}
	if c.cfg.OnFatal != nil {
		c.cfg.OnFatal(err)
	}
}

// Failed returns the error that stopped the controller (a committed record
// or snapshot it could not apply), or nil.
func (c *Controller) Failed() error {
	c.published.Lock()
	defer c.published.Unlock()
	return c.fatal
}

// publish makes a committed image visible to CommittedImage; core calls it
// before releasing the responses that commit answers.
func (c *Controller) publish(img *image.Image, offset int64) {
	c.published.Lock()
	c.image, c.offset = img, offset
	c.published.Unlock()
}

// submit hands req to the loop and waits for its response. A closed
// controller answers NOT_CONTROLLER, so a broker retries elsewhere; a
// canceled ctx (the connection died) returns ctx's error.
func (c *Controller) submit(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	o := op{req: req, reply: make(chan kmsg.Response, 1)}
	select {
	case c.ops <- o:
	case <-c.ctx.Done():
		return notController(req), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-o.reply:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Tick makes the loop run its periodic duties (session expiry, NoOpRecord)
// now, with the configured Clock; tests with a fake clock use it instead
// of waiting for the timer.
func (c *Controller) Tick(ctx context.Context) error {
	o := op{tick: true, reply: make(chan kmsg.Response, 1)}
	select {
	case c.ops <- o:
	case <-c.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-o.reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
