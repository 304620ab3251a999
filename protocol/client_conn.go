package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// clientConn is one negotiated client connection.
//
// The writer assigns correlation ids in the order it writes, registers the
// request in inflight, and flushes when its queue is empty, so concurrent
// callers share write syscalls. The reader matches each response to
// inflight by correlation id (a Kafka server answers in order, but a map
// also copes with responses a test server dropped on purpose) and decodes
// it with the request's ResponseKind.
//
// INVARIANTS: every pending in inflight has been written (or is being
// written) and has corr < nextCorr; once dead is closed inflight is empty
// and stays empty.
type clientConn struct {
	c        *Client
	peer     *peer
	addr     string
	nc       net.Conn
	fr       frameReader        // read by the handshake, then by readLoop only
	versions map[int16][2]int16 // immutable after handshake

	queue chan *pending

	mu       sync.Mutex
	inflight map[int32]*pending
	nextCorr int32

	dead     chan struct{}
	deadErr  error // set before dead is closed
	failOnce sync.Once
}

// pending is one request waiting for its response.
//
// The request is encoded and its response allocated by the caller's goroutine in
// roundTrip, so that neither the writer nor the reader ever touches the caller's
// kmsg.Request: a caller whose ctx ends may reuse it at once, while its late response
// is still being read (the broker's forwarder resets the version right away).
type pending struct {
	frame    []byte        // the whole request with correlation id 0, patched when sent
	resp     kmsg.Response // empty response of the request's key and version
	corr     int32
	canceled bool // guarded by clientConn.mu
	done     chan result
}

type result struct {
	resp kmsg.Response
	err  error
}

// handshakeVersion is the ApiVersions version we open with: v3 is the
// first flexible one, carries the software name (KIP-511) and is what
// every broker since 2.4 serves.
const handshakeVersion = 3

// handshake negotiates ApiVersions on a fresh connection, synchronously,
// before the reader and writer exist.
func (c *Client) handshake(nc net.Conn, p *peer) (*clientConn, error) {
	nc.SetDeadline(time.Now().Add(c.cfg.DialTimeout))
	cc := &clientConn{
		c:        c,
		peer:     p,
		addr:     p.addr,
		nc:       nc,
		fr:       frameReader{src: nc},
		queue:    make(chan *pending, 64),
		inflight: make(map[int32]*pending),
		dead:     make(chan struct{}),
	}
	resp, err := cc.apiVersions(handshakeVersion)
	var fallback *fallbackError
	if errors.As(err, &fallback) {
		resp, err = cc.apiVersions(fallback.version)
	}
	if err != nil {
		cc.fr.close()
		return nil, err
	}
	cc.versions = make(map[int16][2]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		cc.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	nc.SetDeadline(time.Time{})
	return cc, nil
}

// fallbackError is an UNSUPPORTED_VERSION answer to ApiVersions: retry at
// version, the highest the peer listed for key 18 (KIP-511), or v0.
type fallbackError struct{ version int16 }

func (e *fallbackError) Error() string {
	return fmt.Sprintf("ApiVersions unsupported, retry at v%d", e.version)
}

// apiVersions does one blocking ApiVersions round trip.
func (cc *clientConn) apiVersions(version int16) (*kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	req.ClientSoftwareName = cc.c.cfg.SoftwareName
	req.ClientSoftwareVersion = cc.c.cfg.SoftwareVersion
	corr := cc.nextCorr
	cc.nextCorr++
	if _, err := cc.nc.Write(cc.c.formatter.AppendRequest(nil, req, corr)); err != nil {
		return nil, err
	}
	frame, err := cc.fr.next(cc.c.cfg.MaxResponseBytes)
	cc.fr.releaseBody()
	if err != nil {
		return nil, err
	}
	if len(frame) < 6 || int32(binary.BigEndian.Uint32(frame)) != corr {
		return nil, fmt.Errorf("%w: bad ApiVersions response header", ErrCorrelation)
	}
	body := frame[4:] // ApiVersions response header is always v0
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if code := int16(binary.BigEndian.Uint16(body)); code == kerr.UnsupportedVersion.Code && version > 0 {
		// The answer is a v0 body whatever we sent (KIP-511).
		resp.SetVersion(0)
		if err := resp.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
		}
		return nil, &fallbackError{version: fallbackVersion(resp, version)}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

// fallbackVersion picks the ApiVersions version to retry with after an
// UNSUPPORTED_VERSION answer to tried.
func fallbackVersion(resp *kmsg.ApiVersionsResponse, tried int16) int16 {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == apiVersionsKey && k.MaxVersion < tried && k.MaxVersion >= 0 {
			return k.MaxVersion
		}
	}
	return 0
}

func (cc *clientConn) isDead() bool {
	select {
	case <-cc.dead:
		return true
	default:
		return false
	}
}

// roundTrip queues req and waits for its response, ctx, or connection death.
func (cc *clientConn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	p := &pending{
		frame: cc.c.formatter.AppendRequest(nil, req, 0),
		resp:  req.ResponseKind(),
		done:  make(chan result, 1),
	}
	select {
	case cc.queue <- p:
	case <-cc.dead:
		return nil, cc.deadErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.resp, r.err
	case <-cc.dead:
		select {
		case r := <-p.done: // answered just before the connection died
			return r.resp, r.err
		default:
			return nil, cc.deadErr
		}
	case <-ctx.Done():
		cc.forget(p)
		return nil, ctx.Err()
	}
}

// forget drops a request whose caller gave up; its response, if it ever
// comes, is discarded by the reader.
func (cc *clientConn) forget(p *pending) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	p.canceled = true
	if cc.inflight[p.corr] == p {
		delete(cc.inflight, p.corr)
	}
}

// register assigns the next correlation id and records p as in flight;
// false means p was canceled while queued and must not be sent.
func (cc *clientConn) register(p *pending) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if p.canceled {
		return false
	}
	p.corr = cc.nextCorr
	cc.nextCorr++
	cc.inflight[p.corr] = p
	return true
}

func (cc *clientConn) writeLoop() {
	bw := bufio.NewWriterSize(cc.nc, 64<<10)
	batching := false
	for {
		var p *pending
		select {
		case p = <-cc.queue:
		case <-cc.dead:
			return
		case <-cc.c.ctx.Done():
			cc.fail(ErrClosed)
			return
		}
		if !cc.register(p) {
			continue
		}
		if !batching {
			cc.nc.SetWriteDeadline(time.Now().Add(cc.c.cfg.RequestTimeout))
			batching = true
		}
		// int32 size, int16 key, int16 version, then the correlation id.
		binary.BigEndian.PutUint32(p.frame[8:12], uint32(p.corr))
		_, err := bw.Write(p.frame)
		if err == nil && len(cc.queue) == 0 {
			err = bw.Flush()
			batching = false
		}
		if err != nil {
			cc.fail(err)
			return
		}
	}
}

// readLoop reads responses through the frameReader, whose buffer grows as a
// response's bytes arrive (MaxResponseBytes caps one response), so a peer
// that announces 100 MB and sends 8 bytes costs the client 8 KB. An idle
// connection holds no read buffer.
func (cc *clientConn) readLoop() {
	defer cc.fr.close()
	for {
		frame, err := cc.fr.next(cc.c.cfg.MaxResponseBytes)
		cc.fr.releaseBody() // no pool: nothing is accounted; the frame is the caller's
		if err != nil {
			cc.fail(err)
			return
		}
		if err := cc.deliver(frame); err != nil {
			cc.fail(err)
			return
		}
	}
}

// deliver decodes one response frame and hands it to its waiter. An error
// return is fatal to the connection (framing can no longer be trusted).
func (cc *clientConn) deliver(frame []byte) error {
	if len(frame) < 4 {
		return fmt.Errorf("%w: %d-byte response", ErrBadHeader, len(frame))
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	cc.mu.Lock()
	p, ok := cc.inflight[corr]
	delete(cc.inflight, corr)
	issued := corr >= 0 && corr < cc.nextCorr
	cc.mu.Unlock()
	if !ok {
		if issued { // the caller gave up on it; nothing is wrong
			return nil
		}
		return fmt.Errorf("%w: response for %d, never sent", ErrCorrelation, corr)
	}
	p.done <- decodeResponse(p.resp, frame[4:])
	return nil
}

// decodeResponse parses a response body (after the correlation id) into resp, an
// empty response of the request's key and version. A body that does not decode fails
// only that request.
func decodeResponse(resp kmsg.Response, b []byte) result {
	r := kbin.Reader{Src: b}
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return result{err: fmt.Errorf("%w: response header tags", ErrBadHeader)}
		}
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return result{err: fmt.Errorf("%w: %s v%d response: %v", ErrBadBody, kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)}
	}
	return result{resp: resp}
}

// fail kills the connection once: it records why, wakes every waiter,
// closes the socket (which stops the reader) and tells the peer to redial
// with backoff on next use.
func (cc *clientConn) fail(cause error) {
	cc.failOnce.Do(func() {
		err := cause
		if !errors.Is(cause, ErrClosed) {
			err = fmt.Errorf("%w: %s: %v", ErrConnClosed, cc.addr, cause)
			cc.c.log.Debug("connection failed", zap.String("addr", cc.addr), zap.Error(cause))
		}
		cc.mu.Lock()
		cc.deadErr = err
		// An idle connection the server closed (connections.max.idle.ms)
		// is not a failure worth a backoff before the next dial.
		idleClose := len(cc.inflight) == 0 && errors.Is(cause, io.EOF)
		clear(cc.inflight)
		cc.mu.Unlock()
		close(cc.dead)
		cc.nc.Close()
		cc.peer.mu.Lock()
		if cc.peer.cc == cc {
			cc.peer.cc = nil
			if !idleClose {
				cc.peer.failures = max(cc.peer.failures, 1)
			}
		}
		cc.peer.mu.Unlock()
	})
}
