package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// conn is one accepted connection.
//
// The reader goroutine (serve -> readLoop) reads a frame, decodes it, calls
// the Handler and encodes the response, one request at a time: this is
// Kafka's "mute the channel until the response is sent" rule, which keeps
// responses in request order without any reordering buffer. The writer
// goroutine writes every queued response in as few writes as it can, so a
// pipelining client is not paying one syscall per response.
//
// An idle connection holds little besides its two goroutines: no read
// buffer (see frameReader), no write buffer (responses are written from
// the frames themselves), an empty queue, and no logger of its own (one is
// built when there is something to log).
//
// INVARIANTS: only the reader appends to queue and sets closing; only the
// writer closes writerDone; the cost of the responses in queue (plus those
// being written) <= budget max, except for a single response larger than
// the whole budget; so at most outQueueLen responses are queued.
type conn struct {
	srv      *Server
	nc       net.Conn
	listener *listenerState

	ctx    context.Context // handler ctx; canceled when the conn dies
	cancel context.CancelFunc

	fr frameReader

	qmu        sync.Mutex
	queue      []outFrame    // encoded response frames, reader -> writer
	closing    bool          // the reader is done: the writer exits once queue is empty
	wake       chan struct{} // capacity 1: queue or closing changed
	writerDone chan struct{}
	budget     byteBudget

	lastActive atomic.Int64 // unix ns of the last request: the least recent is closed first
	evicted    bool         // guarded by srv.mu: closed to make room, not yet forgotten

	mu       sync.Mutex // orders drain against armReadDeadline
	draining bool
}

func newConn(s *Server, nc net.Conn, ls *listenerState) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		srv:        s,
		nc:         nc,
		listener:   ls,
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
		budget:     byteBudget{max: s.cfg.MaxBufferedBytesPerConn},
	}
	c.fr = frameReader{src: nc, pool: &s.pool, ctx: ctx}
	c.lastActive.Store(time.Now().UnixNano())
	return c
}

// log returns the connection's logger; it is built only when a line is
// written, since most connections never log.
func (c *conn) log() *zap.Logger {
	return c.srv.log.With(zap.String("listener", c.listener.cfg.Name), zap.Stringer("remote", c.nc.RemoteAddr()))
}

func (c *conn) serve() {
	defer c.srv.forget(c)
	var writer sync.WaitGroup
	writer.Go(c.writeLoop)
	c.readLoop()
	c.fr.close()
	writer.Wait()
	// A writer that failed left frames queued: release their file regions.
	leftover, _ := c.take(nil)
	for i := range leftover {
		leftover[i].done(c)
	}
	c.cancel()
	c.nc.Close()
}

// drain asks the reader to stop after the request it is processing. The
// past read deadline wakes a reader blocked in Read; the mutex makes sure
// a reader that is just about to arm a fresh deadline sees draining first.
// A reader waiting for pool memory is woken by the server's stop channel.
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	c.nc.SetReadDeadline(time.Unix(1, 0))
}

// armReadDeadline starts the idle clock for the next request; false means
// the connection is draining and no further request may be read.
func (c *conn) armReadDeadline() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return false
	}
	c.fr.deadline = c.srv.cfg.idleDeadline()
	c.nc.SetReadDeadline(c.fr.deadline)
	return true
}

func (c *conn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

func (c *conn) readLoop() {
	defer c.closeQueue()
	for c.armReadDeadline() {
		frame, err := c.fr.next(c.srv.cfg.MaxRequestBytes)
		if err != nil {
			c.logReadError(err)
			return
		}
		c.lastActive.Store(time.Now().UnixNano())
		ok := c.handleFrame(frame)
		c.fr.releaseBody()
		if !ok {
			return
		}
	}
}

// handleFrame decodes, dispatches and queues the answer to one frame. It
// returns false when the connection must be closed (already logged).
func (c *conn) handleFrame(frame []byte) bool {
	req, h, err := decodeRequest(c.listener.cfg.Registry, frame)
	if err != nil {
		c.log().Warn("closing connection: bad request", zap.Error(err))
		return false
	}
	req.Listener, req.RemoteAddr = c.listener.cfg.Name, c.nc.RemoteAddr()
	resp, err := c.dispatch(req, h)
	if err != nil {
		c.log().Warn("closing connection: request not handled",
			zap.String("api", kmsg.NameForKey(req.Key)), zap.Int16("version", req.Version),
			zap.Int32("correlation_id", req.CorrelationID), zap.Error(err))
		return false
	}
	if resp == nil {
		return true
	}
	bufp := c.srv.bufPool.Get().(*[]byte)
	f, err := appendFrame((*bufp)[:0], req.CorrelationID, resp)
	if err != nil {
		c.log().Warn("closing connection: response not encoded",
			zap.String("api", kmsg.NameForKey(req.Key)), zap.Int16("version", req.Version), zap.Error(err))
		return false
	}
	if !c.enqueue(f) {
		f.done(c)
		return false
	}
	return true
}

func (c *conn) logReadError(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrFrameSize):
		c.log().Warn("closing connection: bad frame", zap.Error(err))
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, ErrClosed):
		if ce := c.srv.log.Check(zap.DebugLevel, "connection closed"); ce != nil {
			c.log().Debug("connection closed", zap.Error(err))
		}
	case errors.As(err, &ne) && ne.Timeout():
		if !c.isDraining() {
			c.log().Info("closing connection: idle timeout", zap.Duration("idle_timeout", c.srv.cfg.IdleTimeout), zap.Error(err))
		}
	default:
		c.log().Info("closing connection: read failed", zap.Error(err))
	}
}

// dispatch runs the control hook and the Handler. A panic in either is
// recovered and reported as an error, so it closes only this connection.
func (c *conn) dispatch(req *Request, h Handler) (resp kmsg.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	if fn := c.srv.control(req.Key); fn != nil {
		resp, err, handled := fn(req)
		if handled {
			return c.checkResponse(req, resp, err)
		}
	}
	resp, err = h(c.ctx, req)
	return c.checkResponse(req, resp, err)
}

// checkResponse makes sure we never put a response of the wrong key or
// version on the wire. The response version is forced to the request
// version; ApiVersions is exempt because its KIP-511 fallback answers v0.
func (c *conn) checkResponse(req *Request, resp kmsg.Response, err error) (kmsg.Response, error) {
	if err != nil || resp == nil {
		return nil, err
	}
	if resp.Key() != req.Key {
		return nil, fmt.Errorf("handler returned %s response to %s request",
			kmsg.NameForKey(resp.Key()), kmsg.NameForKey(req.Key))
	}
	if req.Key != apiVersionsKey {
		resp.SetVersion(req.Version)
	}
	return resp, nil
}

// outQueueLen bounds how many responses may be queued by count, besides
// the byte budget: a response costs at least 1/outQueueLen of the budget,
// so a peer that pipelines tiny requests and reads nothing cannot queue
// millions of small buffers.
const outQueueLen = 256

// cost is what a queued response takes from the budget: its size on the
// wire, file regions included.
func (c *conn) cost(frame outFrame) int {
	return max(frame.size, c.budget.max/outQueueLen)
}

// enqueue hands an encoded response to the writer, waiting for budget.
func (c *conn) enqueue(frame outFrame) bool {
	if !c.budget.acquire(c.cost(frame), c.writerDone) {
		return false
	}
	c.qmu.Lock()
	c.queue = append(c.queue, frame)
	c.qmu.Unlock()
	c.signal()
	return true
}

// closeQueue tells the writer that nothing more will be queued.
func (c *conn) closeQueue() {
	c.qmu.Lock()
	c.closing = true
	c.qmu.Unlock()
	c.signal()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take removes every queued response; done reports that the queue is
// empty and the reader has finished.
func (c *conn) take(spare []outFrame) (frames []outFrame, done bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	frames, c.queue = c.queue, spare[:0]
	if len(frames) == 0 {
		c.queue = nil // an idle connection keeps no queue array
	}
	return frames, len(frames) == 0 && c.closing
}

// writeLoop writes every queued response at once, so a burst of pipelined
// responses leaves together.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	var spare []outFrame
	for range c.wake {
		for {
			frames, done := c.take(spare)
			if done {
				return
			}
			if len(frames) == 0 {
				break
			}
			if !c.write(frames) {
				return
			}
			clear(frames)
			spare = frames
		}
		spare = nil // idle: hold no array
	}
}

// write sends frames, recycles them and returns their budget; false means
// the connection is dead (already logged and closed).
func (c *conn) write(frames []outFrame) bool {
	total := 0
	for _, f := range frames {
		total += c.cost(f)
	}
	c.nc.SetWriteDeadline(c.srv.cfg.idleDeadline())
	var err error
	if len(frames) == 1 && len(frames[0].splices) == 0 {
		_, err = c.nc.Write(frames[0].buf)
	} else {
		err = c.writeCoalesced(frames)
	}
	for i := range frames {
		frames[i].done(c)
	}
	c.budget.release(total)
	if err != nil {
		c.log().Info("closing connection: write failed", zap.Error(err))
		c.cancel()
		c.nc.Close()
		return false
	}
	return true
}

// writeBufBytes is the size of the pooled buffer that several small
// responses are copied into, so that they leave in one write. (Plain
// writes rather than writev: the race detector orders a peer's read after
// a write(2), which tests that check handler side effects rely on. A
// spliced frame starts with write(2) bytes too, its size prefix.)
const writeBufBytes = 64 << 10

var writeBufPool = sync.Pool{New: func() any { b := make([]byte, 0, writeBufBytes); return &b }}

// writeCoalesced writes frames through one buffer; a file region flushes
// what precedes it and goes by sendRegion.
func (c *conn) writeCoalesced(frames []outFrame) error {
	bp := writeBufPool.Get().(*[]byte)
	defer writeBufPool.Put(bp)
	w := coalescer{nc: c.nc, buf: (*bp)[:0]}
	for _, f := range frames {
		at := 0
		for _, sp := range f.splices {
			if err := w.write(f.buf[at:sp.At]); err != nil {
				return err
			}
			if err := w.flush(); err != nil {
				return err
			}
			if err := c.sendRegion(sp.Region); err != nil {
				return err
			}
			at = sp.At
		}
		if err := w.write(f.buf[at:]); err != nil {
			return err
		}
	}
	return w.flush()
}

// recycle returns small response buffers to the server's pool.
func (c *conn) recycle(frame []byte) {
	if cap(frame) <= 64<<10 {
		frame = frame[:0]
		c.srv.bufPool.Put(&frame)
	}
}

// byteBudget is a counting semaphore measured in bytes.
//
// INVARIANTS: 0 <= used; used <= max unless a single acquire larger than
// max was admitted while used was 0 (so one huge response cannot wedge
// the connection forever).
type byteBudget struct {
	mu     sync.Mutex
	used   int
	max    int
	waitCh chan struct{} // closed and replaced on release if anyone waits
}

func newByteBudget(maxBytes int) *byteBudget {
	return &byteBudget{max: maxBytes}
}

// acquire takes n bytes, blocking until they fit or done is closed.
func (b *byteBudget) acquire(n int, done <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if b.waitCh == nil {
			b.waitCh = make(chan struct{})
		}
		ch := b.waitCh
		b.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.waitCh != nil {
		close(b.waitCh)
		b.waitCh = nil
	}
}
