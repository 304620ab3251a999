package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// readaheadBytes is the size of the pooled buffer a connection reads into
// while requests are arriving: big enough to take a burst of pipelined
// small requests in one read, small enough to hold per active connection.
// An idle connection holds none.
const readaheadBytes = 8 << 10

var readaheadPool = sync.Pool{New: func() any { b := make([]byte, readaheadBytes); return &b }}

// frameReader reads size-prefixed frames from one connection without
// trusting the size prefix: memory is taken as bytes arrive and is reserved
// in the server's requestPool first. The server reads requests with it; the
// client reads responses with it and a nil pool (no bound, no accounting),
// so a peer the client dials cannot make it allocate what it announces
// either.
//
//   - Waiting for a request, it holds no buffer: the size prefix is read
//     straight into hdr, so an idle connection costs no read buffer.
//   - A frame up to readaheadBytes is read through a pooled read-ahead
//     buffer, which also picks up the requests pipelined behind it, and
//     then copied into a body of exactly its size.
//   - A larger frame gets a body that starts at readaheadBytes and doubles
//     as its bytes arrive (capped at the announced size), read straight
//     from the socket. A peer that announces 100 MB and sends 8 bytes has
//     cost 8 KB, not 100 MB.
//
// INVARIANTS: buf == nil iff r == w == 0; r <= w <= len(*buf); bufHeld is
// readaheadBytes while buf != nil and 0 otherwise; bodyHeld is the
// capacity of the body being read or last returned by next, until
// releaseBody.
type frameReader struct {
	src      io.Reader
	pool     *requestPool
	ctx      context.Context // canceled when the connection dies: ends a wait for memory
	deadline time.Time       // of the request being read: ends a wait for memory too

	hdr      [4]byte
	buf      *[]byte
	r, w     int
	bufHeld  int64
	bodyHeld int64
}

// next reads one frame. A size of zero, a negative size or a size above
// maxBytes is rejected before any body byte is read, as Kafka's
// NetworkReceive does. The returned slice is owned by the caller (kmsg's
// decoders alias into it); its bytes stay reserved in the pool until
// releaseBody.
func (fr *frameReader) next(maxBytes int32) ([]byte, error) {
	if err := fr.readSize(); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(fr.hdr[:]))
	if size <= 0 || size > maxBytes {
		return nil, fmt.Errorf("%w: %d (max %d)", ErrFrameSize, size, maxBytes)
	}
	body, err := fr.readBody(int(size))
	fr.pool.endFrame(fr)
	return body, err
}

// readSize fills hdr, from the read-ahead buffer while it has bytes and
// straight from the socket otherwise.
func (fr *frameReader) readSize() error {
	for n := 0; n < len(fr.hdr); {
		if fr.w > fr.r {
			c := copy(fr.hdr[n:], (*fr.buf)[fr.r:fr.w])
			fr.r += c
			n += c
			fr.dropBufferIfEmpty()
			continue
		}
		m, err := fr.src.Read(fr.hdr[n:])
		n += m
		if err != nil {
			if n > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (fr *frameReader) readBody(size int) ([]byte, error) {
	if size <= readaheadBytes {
		if err := fr.fill(size); err != nil {
			return nil, err
		}
		if err := fr.reserveBody(int64(size)); err != nil {
			return nil, err
		}
		body := make([]byte, size)
		fr.r += copy(body, (*fr.buf)[fr.r:fr.w])
		fr.dropBufferIfEmpty()
		return body, nil
	}
	body, err := fr.growBody(nil, min(size, max(fr.w-fr.r, readaheadBytes)))
	if err != nil {
		return nil, err
	}
	if fr.buf != nil {
		body = append(body, (*fr.buf)[fr.r:fr.w]...)
		fr.r = fr.w
		fr.dropBufferIfEmpty()
	}
	for len(body) < size {
		if len(body) == cap(body) {
			if body, err = fr.growBody(body, min(size, 2*cap(body))); err != nil {
				return nil, err
			}
		}
		m, err := fr.src.Read(body[len(body):cap(body)])
		body = body[:len(body)+m]
		if err != nil && len(body) < size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// growBody moves body into a new slice of capacity newCap, reserving the
// difference in the pool first (this is where a reader waits when the
// pool is spent).
func (fr *frameReader) growBody(body []byte, newCap int) ([]byte, error) {
	if err := fr.reserveBody(int64(newCap - cap(body))); err != nil {
		return nil, err
	}
	grown := make([]byte, len(body), newCap)
	copy(grown, body)
	return grown, nil
}

func (fr *frameReader) reserveBody(n int64) error {
	if err := fr.pool.reserve(fr, n); err != nil {
		return err
	}
	fr.bodyHeld += n
	return nil
}

// fill reads into the read-ahead buffer until it holds at least n bytes
// (n <= readaheadBytes), taking a buffer from the pool if it has none.
func (fr *frameReader) fill(n int) error {
	if fr.buf == nil {
		if err := fr.pool.reserve(fr, readaheadBytes); err != nil {
			return err
		}
		fr.bufHeld = readaheadBytes
		fr.buf = readaheadPool.Get().(*[]byte)
	}
	buf := *fr.buf
	if fr.r > 0 && len(buf)-fr.r < n {
		fr.w = copy(buf, buf[fr.r:fr.w])
		fr.r = 0
	}
	for fr.w-fr.r < n {
		m, err := fr.src.Read(buf[fr.w:])
		fr.w += m
		if err != nil && fr.w-fr.r < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// dropBufferIfEmpty returns an empty read-ahead buffer to the pool, so a
// connection waiting for its next request holds none.
func (fr *frameReader) dropBufferIfEmpty() {
	if fr.buf == nil || fr.r < fr.w {
		return
	}
	readaheadPool.Put(fr.buf)
	fr.buf, fr.r, fr.w = nil, 0, 0
	fr.pool.release(fr.bufHeld)
	fr.bufHeld = 0
}

// releaseBody returns the bytes of the last frame to the pool, once the
// request they hold has been handled.
func (fr *frameReader) releaseBody() {
	fr.pool.release(fr.bodyHeld)
	fr.bodyHeld = 0
}

// close returns everything the reader holds; the connection is done.
func (fr *frameReader) close() {
	fr.releaseBody()
	if fr.buf != nil {
		fr.r = fr.w
		fr.dropBufferIfEmpty()
	}
	fr.pool.endFrame(fr)
}

// requestPool bounds the bytes of requests that are being read or handled
// on one Server: Kafka's queued.max.request.bytes memory pool. Past the
// bound a reader waits (the connection stops being read) instead of
// allocating. As in Kafka's non-strict SimpleMemoryPool, one request at a
// time may go past the bound (the overdraft): otherwise two large
// requests, each holding half the pool, would wait for each other forever.
// The overdraft ends when that request is fully read, so the most the pool
// can hold is its capacity plus one request (socket.request.max.bytes).
//
// INVARIANTS: used >= 0; used <= capacity unless overdraft != nil (and
// then by at most the overdraft reader's frame); capacity <= 0, or a nil
// pool, means no bound and no accounting.
type requestPool struct {
	capacity int64
	stop     <-chan struct{} // closed when the server stops: ends every wait

	mu        sync.Mutex
	used      int64
	overdraft *frameReader
	waitCh    chan struct{} // closed and replaced on release if anyone waits
}

// errNoMemory ends a wait for pool memory that outlived the request's
// idle deadline; it is a timeout, so the connection closes as idle.
var errNoMemory = fmt.Errorf("waiting for request memory (queued.max.request.bytes): %w", os.ErrDeadlineExceeded)

// reserve takes n bytes for fr, waiting while they do not fit and another
// reader holds the overdraft.
func (p *requestPool) reserve(fr *frameReader, n int64) error {
	if p == nil || p.capacity <= 0 || n <= 0 {
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		if p.used+n <= p.capacity || p.overdraft == fr || p.overdraft == nil {
			if p.used+n > p.capacity {
				p.overdraft = fr
			}
			p.used += n
			p.mu.Unlock()
			return nil
		}
		if p.waitCh == nil {
			p.waitCh = make(chan struct{})
		}
		ch := p.waitCh
		p.mu.Unlock()
		var expired <-chan time.Time
		if !fr.deadline.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(fr.deadline))
			}
			expired = timer.C
		}
		select {
		case <-ch:
		case <-fr.ctx.Done():
			return ErrClosed
		case <-p.stop:
			return ErrClosed
		case <-expired:
			return errNoMemory
		}
	}
}

func (p *requestPool) release(n int64) {
	if p == nil || p.capacity <= 0 || n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	p.wakeLocked()
}

// endFrame ends fr's overdraft, if it holds it.
func (p *requestPool) endFrame(fr *frameReader) {
	if p == nil || p.capacity <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overdraft == fr {
		p.overdraft = nil
		p.wakeLocked()
	}
}

func (p *requestPool) wakeLocked() {
	if p.waitCh != nil {
		close(p.waitCh)
		p.waitCh = nil
	}
}

// hasWaiter reports whether a reader waits for memory, for tests.
func (p *requestPool) hasWaiter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitCh != nil
}

// usedBytes is the number of bytes reserved, for tests.
func (p *requestPool) usedBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}
