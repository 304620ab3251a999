package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every blocking wait in tests; healthy runs take
// milliseconds, so hitting it means a bug, not a slow machine.
const testTimeout = 5 * time.Second

// echoMetadata answers Metadata by echoing each requested topic name, so a
// test can tell which request a response belongs to.
func echoMetadata(_ context.Context, req *Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.MetadataRequest)
	resp := body.ResponseKind().(*kmsg.MetadataResponse)
	for _, t := range body.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// testServer is a started Server with one "PLAINTEXT" listener serving
// ApiVersions and echo Metadata v0-v12, plus an observed logger.
type testServer struct {
	*Server
	reg  *Registry
	addr string
	logs *observer.ObservedLogs
}

func startTestServer(t *testing.T, tweak func(*ServerConfig, *Registry)) *testServer {
	t.Helper()
	reg := NewRegistry()
	reg.Register(3, 0, 12, echoMetadata)
	core, logs := observer.New(zap.DebugLevel)
	cfg := ServerConfig{
		Listeners: []ListenerConfig{{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Registry: reg}},
		Logger:    zap.New(core),
	}
	if tweak != nil {
		tweak(&cfg, reg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, reg: reg, addr: s.Addr("PLAINTEXT").String(), logs: logs}
}

// rawConn is a test-side Kafka connection driven byte by byte.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	f  *kmsg.RequestFormatter
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
}

func (c *rawConn) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	c.write(c.f.AppendRequest(nil, req, corr))
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame returns the next response frame (without the size prefix).
func (c *rawConn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.br, b)
	return b, err
}

// recv reads one response for req and checks its correlation id and
// header shape (flexible responses other than ApiVersions carry one empty
// tag byte).
func (c *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response %d: %v", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	body := b[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		if body[0] != 0 {
			c.t.Fatalf("flexible response header tag byte %#x, want 0", body[0])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (c *rawConn) roundTrip(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	c.send(req, corr)
	return c.recv(req, corr)
}

// expectClosed asserts the server closes the connection without sending
// anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	b, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("got a %d-byte response, want the connection closed", len(b))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", testTimeout)
	}
}

func metadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// checkEcho asserts resp echoes exactly the topic name want.
func checkEcho(t *testing.T, resp kmsg.Response, want string) {
	t.Helper()
	m, ok := resp.(*kmsg.MetadataResponse)
	if !ok || len(m.Topics) != 1 || m.Topics[0].Topic == nil || *m.Topics[0].Topic != want {
		t.Fatalf("response %+v does not echo %q", resp, want)
	}
}

// waitFor polls cond until it holds; it fails the test after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(testTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// countLogs counts log entries whose message contains substr.
func countLogs(logs *observer.ObservedLogs, substr string) int {
	return logs.FilterMessageSnippet(substr).Len()
}

func frameOf(payload []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
}

func rawHeader(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
}
