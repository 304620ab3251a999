package protocol

import (
	"errors"
	"net"
	"testing"
	"time"
)

func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// acceptWaiting reports whether the listener's acceptor is holding a
// connection back for want of a slot.
func (s *Server) acceptWaiting(listener string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listeners[listener].waiting
}

// expectNoAnswerYet checks that nothing has arrived on c for a moment. It
// can only pass wrongly (an answer later than the moment), never fail
// wrongly; the caller then proves the answer does come once allowed.
func (c *rawConn) expectNoAnswerYet() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.br.Peek(1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("got %v, want no answer while the connection waits for a slot", err)
	}
}

// TestMaxConnections is Kafka's ConnectionQuotas rule for max.connections:
// a connection past the limit is not served (the acceptor stops accepting)
// until another connection closes; then it is served.
func TestMaxConnections(t *testing.T) {
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.MaxConnections = 2 })
	a, b := dialRaw(t, s.addr), dialRaw(t, s.addr)
	checkEcho(t, a.roundTrip(metadataReq(1, "a"), 1), "a")
	checkEcho(t, b.roundTrip(metadataReq(1, "b"), 1), "b")
	extra := dialRaw(t, s.addr)
	extra.send(metadataReq(1, "c"), 1)
	waitFor(t, "acceptor to wait for a slot", func() bool { return s.acceptWaiting("PLAINTEXT") })
	extra.expectNoAnswerYet()
	checkEcho(t, b.roundTrip(metadataReq(1, "b2"), 2), "b2") // the admitted ones are served throughout
	if countLogs(s.logs, "connection limit reached") != 1 {
		t.Fatal("no connection-limit log line")
	}
	a.nc.Close()
	checkEcho(t, extra.recv(metadataReq(1), 1), "c")
	if s.acceptWaiting("PLAINTEXT") {
		t.Fatal("acceptor still waiting with a free slot")
	}
}

// twoListeners starts a server with PLAINTEXT and INTERNAL listeners that
// both serve echo Metadata.
func twoListeners(t *testing.T, tweak func(*ServerConfig)) (*testServer, string) {
	internal := NewRegistry()
	internal.Register(3, 0, 12, echoMetadata)
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) {
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "INTERNAL", Addr: "127.0.0.1:0", Registry: internal})
		tweak(cfg)
	})
	return s, s.Addr("INTERNAL").String()
}

// TestListenerMaxConnections: listener.name.NAME.max.connections holds
// back that listener only; the other keeps accepting.
func TestListenerMaxConnections(t *testing.T) {
	s, internalAddr := twoListeners(t, func(cfg *ServerConfig) { cfg.Listeners[0].MaxConnections = 2 })
	a, b := dialRaw(t, s.addr), dialRaw(t, s.addr)
	checkEcho(t, a.roundTrip(metadataReq(1, "a"), 1), "a")
	extra := dialRaw(t, s.addr)
	extra.send(metadataReq(1, "x"), 1)
	waitFor(t, "PLAINTEXT acceptor to wait for a slot", func() bool { return s.acceptWaiting("PLAINTEXT") })
	for i := range 5 {
		in := dialRaw(t, internalAddr)
		checkEcho(t, in.roundTrip(metadataReq(1, "in"), int32(i)), "in")
	}
	checkEcho(t, b.roundTrip(metadataReq(1, "b"), 1), "b")
	extra.expectNoAnswerYet()
	b.nc.Close()
	checkEcho(t, extra.recv(metadataReq(1), 1), "x")
}

// TestInterBrokerListenerProtected: with every slot of max.connections
// taken by client connections, the inter-broker listener still accepts,
// and the least recently active connection of another listener is closed
// to make room, as in Kafka; a further client connection waits.
func TestInterBrokerListenerProtected(t *testing.T) {
	s, internalAddr := twoListeners(t, func(cfg *ServerConfig) {
		cfg.MaxConnections = 3
		cfg.InterBrokerListener = "INTERNAL"
	})
	clients := []*rawConn{dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr)}
	for i, c := range clients {
		checkEcho(t, c.roundTrip(metadataReq(1, "c"), int32(i)), "c")
	}
	for i, c := range clients[1:] { // clients[0] is now the least recently active
		checkEcho(t, c.roundTrip(metadataReq(1, "again"), int32(10+i)), "again")
	}
	waitForActivityOrder(t, s, clients[0])
	broker := dialRaw(t, internalAddr)
	checkEcho(t, broker.roundTrip(metadataReq(1, "broker"), 1), "broker")
	clients[0].expectClosed()
	if countLogs(s.logs, "making room for the inter-broker listener") != 1 {
		t.Fatal("no eviction log line")
	}
	for i, c := range clients[1:] {
		checkEcho(t, c.roundTrip(metadataReq(1, "still"), int32(20+i)), "still")
	}
	waitFor(t, "evicted connection to go", func() bool { return s.connCount() == 3 })
	late := dialRaw(t, s.addr)
	late.send(metadataReq(1, "late"), 1)
	waitFor(t, "PLAINTEXT acceptor to wait for a slot", func() bool { return s.acceptWaiting("PLAINTEXT") })
	late.expectNoAnswerYet()
	broker.nc.Close()
	checkEcho(t, late.recv(metadataReq(1), 1), "late")
}

// waitForActivityOrder makes sure oldest's last request is strictly older
// than every other connection's (the clock could tick coarsely).
func waitForActivityOrder(t *testing.T, s *testServer, oldest *rawConn) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var old *conn
	for c := range s.conns {
		if c.nc.RemoteAddr().String() == oldest.nc.LocalAddr().String() {
			old = c
		}
	}
	for c := range s.conns {
		if c != old && c.lastActive.Load() <= old.lastActive.Load() {
			t.Fatalf("connection %v is not more recently active than the oldest", c.nc.RemoteAddr())
		}
	}
}

// TestSlotWaitEndsOnClose: an acceptor waiting for a slot does not keep
// Close from returning.
func TestSlotWaitEndsOnClose(t *testing.T) {
	s := startTestServer(t, func(cfg *ServerConfig, _ *Registry) { cfg.MaxConnections = 1 })
	dialRaw(t, s.addr).roundTrip(metadataReq(1, "a"), 1)
	extra := dialRaw(t, s.addr)
	waitFor(t, "acceptor to wait", func() bool { return s.acceptWaiting("PLAINTEXT") })
	s.Close()
	extra.expectClosed()
}
