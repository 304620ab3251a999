package app

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// limitConn is a raw client connection that sends ApiVersions v0 and
// reads the answers.
type limitConn struct {
	t  *testing.T
	nc net.Conn
}

func dialLimit(t *testing.T, addr net.Addr) *limitConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &limitConn{t: t, nc: nc}
}

func (c *limitConn) send(corr int32) {
	c.t.Helper()
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), corr)
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits up to wait for the answer to corr.
func (c *limitConn) recv(corr int32, wait time.Duration) error {
	c.nc.SetReadDeadline(time.Now().Add(wait))
	var hdr [8]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return errors.New("wrong correlation id")
	}
	_, err := io.CopyN(io.Discard, c.nc, int64(binary.BigEndian.Uint32(hdr[:]))-4)
	return err
}

func (c *limitConn) roundTrip(corr int32) {
	c.t.Helper()
	c.send(corr)
	if err := c.recv(corr, 5*time.Second); err != nil {
		c.t.Fatalf("ApiVersions %d: %v", corr, err)
	}
}

// TestConnectionLimitsPerServer: client connections that fill
// max.connections on the broker listener hold back further client
// connections (Kafka's acceptor waits), but the controller listener, which
// has a socket server and limits of its own, and the inter-broker
// listener, which max.connections does not hold back, still accept; the
// admitted clients are served throughout. One count for every listener
// used to close the controller and inter-broker connections instead.
func TestConnectionLimitsPerServer(t *testing.T) {
	a, err := New(ephemeralConfig(t,
		Setting{"listeners", "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
		Setting{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"},
		Setting{"inter.broker.listener.name", "INTERNAL"},
		Setting{"max.connections", "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(t.Context())
	plain := a.Addr("PLAINTEXT")
	p1, p2 := dialLimit(t, plain), dialLimit(t, plain)
	p1.roundTrip(1)
	p2.roundTrip(1)
	p3 := dialLimit(t, plain)
	p3.send(1)
	var ne net.Error
	if err := p3.recv(1, 50*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("third client connection: %v, want no answer while max.connections is reached", err)
	}
	for i := range 3 {
		apiVersions(t, a.Addr("CONTROLLER"))
		p2.roundTrip(int32(10 + i))
	}
	apiVersions(t, a.Addr("INTERNAL")) // let in past the limit; closes p1, the least recently active
	if err := p1.recv(2, 5*time.Second); err == nil {
		t.Fatal("p1 got an answer to nothing")
	} else if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("p1 was not closed to make room for the inter-broker connection")
	}
	if err := p3.recv(1, 5*time.Second); err != nil {
		t.Fatalf("third client connection not served once slots freed: %v", err)
	}
	p2.roundTrip(20)
}

// TestListenerMaxConnectionsKey: listener.name.<name>.max.connections in any
// case sets the limit of that listener, and 0 is refused.
func TestListenerMaxConnectionsKey(t *testing.T) {
	c := ephemeralConfig(t, Setting{"listener.name.plaintext.max.connections", "7"}, Setting{"queued.max.request.bytes", "-1"})
	if c.ListenerMaxConnections["PLAINTEXT"] != 7 || c.QueuedMaxRequestBytes != -1 {
		t.Fatalf("limits %v, queued %d", c.ListenerMaxConnections, c.QueuedMaxRequestBytes)
	}
	if DefaultConfig().QueuedMaxRequestBytes != 256<<20 {
		t.Fatalf("queued.max.request.bytes default %d", DefaultConfig().QueuedMaxRequestBytes)
	}
	var cfg Config
	for _, bad := range []Setting{
		{"listener.name.plaintext.max.connections", "0"},
		{"listener.name.plaintext.max.connections", "x"},
	} {
		if err := cfg.Set(bad.Key, bad.Value); !errors.Is(err, ErrBadValue) {
			t.Errorf("%s=%s: %v, want a bad value", bad.Key, bad.Value, err)
		}
	}
	for _, unknown := range []string{"listener.name..max.connections", "listener.name.a.b.max.connections", "listener.name.plaintext.max.connection"} {
		if err := cfg.Set(unknown, "1"); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s: %v, want unknown key", unknown, err)
		}
	}
	a, err := New(ephemeralConfig(t, Setting{"listener.name.plaintext.max.connections", "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(t.Context())
	first := dialLimit(t, a.Addr("PLAINTEXT"))
	first.roundTrip(1)
	second := dialLimit(t, a.Addr("PLAINTEXT"))
	second.send(1)
	var ne net.Error
	if err := second.recv(1, 50*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("second connection on a 1-connection listener: %v, want no answer yet", err)
	}
	first.nc.Close()
	if err := second.recv(1, 5*time.Second); err != nil {
		t.Fatalf("second connection not served once the first closed: %v", err)
	}
}
