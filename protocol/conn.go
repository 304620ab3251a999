package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
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
// goroutine batches encoded responses into as few write syscalls as it can,
// so a pipelining client is not paying one syscall per response.
//
// INVARIANTS: only the reader sends on out and closes it; only the writer
// closes writerDone; bytes in out (plus those being written) <= budget max,
// except for a single response larger than the whole budget.
type conn struct {
	srv      *Server
	nc       net.Conn
	listener string
	reg      *Registry
	log      *zap.Logger

	ctx    context.Context // handler ctx; canceled when the conn dies
	cancel context.CancelFunc

	out        chan []byte // encoded response frames, reader -> writer
	writerDone chan struct{}
	budget     *byteBudget

	mu       sync.Mutex // orders drain against armReadDeadline
	draining bool
}

// outQueueLen bounds how many responses may be queued by count; the byte
// budget bounds them by size.
const outQueueLen = 256

func newConn(s *Server, nc net.Conn, lc ListenerConfig) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	return &conn{
		srv:        s,
		nc:         nc,
		listener:   lc.Name,
		reg:        lc.Registry,
		log:        s.log.With(zap.String("listener", lc.Name), zap.Stringer("remote", nc.RemoteAddr())),
		ctx:        ctx,
		cancel:     cancel,
		out:        make(chan []byte, outQueueLen),
		writerDone: make(chan struct{}),
		budget:     newByteBudget(s.cfg.MaxBufferedBytesPerConn),
	}
}

func (c *conn) serve() {
	defer c.srv.forget(c)
	var writer sync.WaitGroup
	writer.Go(c.writeLoop)
	c.readLoop()
	writer.Wait()
	c.cancel()
	c.nc.Close()
}

// drain asks the reader to stop after the request it is processing. The
// past read deadline wakes a reader blocked in Read; the mutex makes sure
// a reader that is just about to arm a fresh deadline sees draining first.
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
	c.nc.SetReadDeadline(c.srv.cfg.idleDeadline())
	return true
}

func (c *conn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

func (c *conn) readLoop() {
	defer close(c.out)
	br := bufio.NewReaderSize(c.nc, 32<<10)
	for c.armReadDeadline() {
		frame, err := readFrame(br, c.srv.cfg.MaxRequestBytes)
		if err != nil {
			c.logReadError(err)
			return
		}
		if !c.handleFrame(frame) {
			return
		}
	}
}

// handleFrame decodes, dispatches and queues the answer to one frame. It
// returns false when the connection must be closed (already logged).
func (c *conn) handleFrame(frame []byte) bool {
	req, h, err := decodeRequest(c.reg, frame)
	if err != nil {
		c.log.Warn("closing connection: bad request", zap.Error(err))
		return false
	}
	req.Listener, req.RemoteAddr = c.listener, c.nc.RemoteAddr()
	resp, err := c.dispatch(req, h)
	if err != nil {
		c.log.Warn("closing connection: request not handled",
			zap.String("api", kmsg.NameForKey(req.Key)), zap.Int16("version", req.Version),
			zap.Int32("correlation_id", req.CorrelationID), zap.Error(err))
		return false
	}
	if resp == nil {
		return true
	}
	bufp := c.srv.bufPool.Get().(*[]byte)
	*bufp = appendResponse((*bufp)[:0], req.CorrelationID, resp)
	return c.enqueue(*bufp)
}

func (c *conn) logReadError(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrFrameSize):
		c.log.Warn("closing connection: bad frame", zap.Error(err))
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("connection closed by peer")
	case errors.As(err, &ne) && ne.Timeout():
		if !c.isDraining() {
			c.log.Info("closing connection: idle timeout", zap.Duration("idle_timeout", c.srv.cfg.IdleTimeout))
		}
	default:
		c.log.Info("closing connection: read failed", zap.Error(err))
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

// enqueue hands an encoded response to the writer, waiting for budget.
func (c *conn) enqueue(frame []byte) bool {
	if !c.budget.acquire(len(frame), c.writerDone) {
		return false
	}
	select {
	case c.out <- frame:
		return true
	case <-c.writerDone:
		return false
	}
}

// writeLoop writes queued responses, flushing whenever the queue is empty
// so that a burst of pipelined responses leaves in one write.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	pending := 0
	for frame := range c.out {
		if pending == 0 {
			c.nc.SetWriteDeadline(c.srv.cfg.idleDeadline())
		}
		_, err := bw.Write(frame)
		pending += len(frame)
		c.recycle(frame)
		if err == nil && len(c.out) == 0 {
			err = bw.Flush()
			c.budget.release(pending)
			pending = 0
		}
		if err != nil {
			c.log.Info("closing connection: write failed", zap.Error(err))
			c.cancel()
			c.nc.Close()
			return
		}
	}
	if err := bw.Flush(); err != nil {
		c.log.Debug("final flush failed", zap.Error(err))
	}
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
