package protocol

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest/observer"
)

// bigMetadata is a Metadata v1 request of about n KB: n topics of 1000
// bytes, each echoed back.
func bigMetadata(n int) *kmsg.MetadataRequest {
	names := make([]string, n)
	for i := range names {
		names[i] = strings.Repeat(string(rune('a'+i%26)), 1000)
	}
	return metadataReq(1, names...)
}

// TestQueuedMaxRequestBytes: while stalled half-sent requests hold the
// whole pool (queued.max.request.bytes), other connections are not read
// (the pool does not grow past its bound plus one request) and are served
// as soon as memory is released.
func TestQueuedMaxRequestBytes(t *testing.T) {
	const poolBytes, maxFrame = 256 << 10, 1 << 20
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) {
		cfg.QueuedMaxRequestBytes = poolBytes
		cfg.MaxRequestBytes = maxFrame
	})
	var stalled []*rawConn
	for range 3 {
		c := dialRaw(t, s.addr)
		frame := append(binary.BigEndian.AppendUint32(nil, maxFrame), make([]byte, 200<<10)...)
		c.write(frame) // 200 KB of a 1 MB frame, then silence
		stalled = append(stalled, c)
	}
	waitFor(t, "stalled frames to fill the pool", func() bool { return s.pool.usedBytes() > poolBytes })
	good := dialRaw(t, s.addr)
	good.send(metadataReq(1, "good"), 1)
	good.expectNoAnswerYet()
	if used := s.pool.usedBytes(); used > poolBytes+maxFrame {
		t.Fatalf("pool holds %d bytes, bound %d plus one %d-byte frame", used, poolBytes, maxFrame)
	}
	for _, c := range stalled {
		c.nc.Close()
	}
	checkEcho(t, good.recv(metadataReq(1), 1), "good")
	waitFor(t, "pool to empty", func() bool { return s.pool.usedBytes() == 0 })
}

// TestRequestLargerThanPool: a request larger than the whole pool is read
// through the overdraft instead of waiting forever, and so are two
// requests that each need most of the pool, sent interleaved.
func TestRequestLargerThanPool(t *testing.T) {
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.QueuedMaxRequestBytes = 64 << 10 })
	big := bigMetadata(200)
	a, b := dialRaw(t, s.addr), dialRaw(t, s.addr)
	checkBig := func(resp kmsg.Response) {
		t.Helper()
		if m := resp.(*kmsg.MetadataResponse); len(m.Topics) != len(big.Topics) {
			t.Fatalf("echoed %d topics, want %d", len(m.Topics), len(big.Topics))
		}
	}
	checkBig(a.roundTrip(big, 1))
	fa, fb := a.f.AppendRequest(nil, big, 2), b.f.AppendRequest(nil, big, 2)
	half := len(fa) / 2
	a.write(fa[:half])
	b.write(fb[:half])
	waitFor(t, "both halves read", func() bool { return s.pool.usedBytes() >= int64(half) })
	a.write(fa[half:])
	b.write(fb[half:])
	checkBig(a.recv(big, 2))
	checkBig(b.recv(big, 2))
	waitFor(t, "pool to empty", func() bool { return s.pool.usedBytes() == 0 })
}

// TestPoolWaitEndsAtIdleTimeout: a connection that cannot get request
// memory within connections.max.idle.ms is closed as idle, and so is the
// stalled one holding the memory.
func TestPoolWaitEndsAtIdleTimeout(t *testing.T) {
	// The waiting connection's request must go out well before its idle clock
	// (started at accept) ends, or it closes as plain idle, not waiting for
	// memory. On a loaded machine the setup can take longer than that: such a
	// run proves nothing, so it is run again with a longer timeout.
	for _, idle := range []time.Duration{1500 * time.Millisecond, 4 * time.Second, 10 * time.Second} {
		if poolWaitEndsAtIdleTimeout(t, idle) {
			return
		}
		t.Logf("setup took over half of connections.max.idle.ms %v: again with a longer one", idle)
	}
	t.Fatal("the setup never fitted in half of the idle timeout")
}

// poolWaitEndsAtIdleTimeout runs TestPoolWaitEndsAtIdleTimeout with the given
// idle timeout; false when the setup was too slow for the run to count.
func poolWaitEndsAtIdleTimeout(t *testing.T, idle time.Duration) bool {
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) {
		cfg.QueuedMaxRequestBytes = 16 << 10
		cfg.IdleTimeout = idle
	})
	defer s.Close()
	start := time.Now()
	waiting := dialRaw(t, s.addr) // first, so its idle clock ends first
	waitFor(t, "first connection accepted", func() bool { return s.connCount() == 1 })
	// The stalled connection's idle clock must end well after the waiting
	// one's: if the two ran out together, the stalled one's close could free
	// the memory first and the waiting request would be served.
	<-time.After(idle/4 - time.Since(start))
	stalled := dialRaw(t, s.addr)
	stalled.write(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 40<<10)...))
	waitFor(t, "stalled frame to hold the pool", func() bool { return s.pool.usedBytes() >= 32<<10 })
	waiting.send(metadataReq(1, "w"), 1)
	// The run counts only if the server read the request's size and began
	// to wait for memory well before the connection's idle clock ended.
	waitFor(t, "the waiting connection to wait for memory", func() bool { return s.pool.hasWaiter() || time.Since(start) > idle/2 })
	if time.Since(start) > idle/2 {
		return false
	}
	waiting.expectClosed()
	stalled.expectClosed()
	waitFor(t, "idle log lines", func() bool { return countLogs(s.logs, "idle timeout") == 2 })
	if countLogs(s.logs.FilterMessageSnippet("idle timeout").Filter(func(e observer.LoggedEntry) bool {
		return strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "queued.max.request.bytes")
	}), "idle") != 1 {
		t.Fatal("no idle-timeout line naming queued.max.request.bytes")
	}
	waitFor(t, "pool to empty", func() bool { return s.pool.usedBytes() == 0 })
	return true
}

// TestUnreadResponsesBounded: a peer that pipelines requests and reads no
// response stops being read once outQueueLen responses are queued, however
// small they are; then it gets every answer in order.
func TestUnreadResponsesBounded(t *testing.T) {
	s := startTestServer(t, nil)
	c := dialRaw(t, s.addr)
	name := strings.Repeat("n", 10<<10)
	const n = 1500
	var all []byte
	for i := range n {
		all = append(all, c.f.AppendRequest(nil, metadataReq(1, name), int32(i))...)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.nc.Write(all) })
	var sc *conn
	waitFor(t, "responses to fill the queue budget", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for cc := range s.conns {
			sc = cc
		}
		sc.budget.mu.Lock()
		defer sc.budget.mu.Unlock()
		return sc.budget.used == sc.budget.max
	})
	sc.qmu.Lock()
	queued := len(sc.queue)
	sc.qmu.Unlock()
	if queued > outQueueLen {
		t.Fatalf("%d responses queued, bound %d", queued, outQueueLen)
	}
	for i := range n {
		checkEcho(t, c.recv(metadataReq(1), int32(i)), name)
	}
}
