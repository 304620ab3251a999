//go:build linux

package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// stallingPeer is a Kafka-protocol peer that answers the client's ApiVersions
// handshake and then, once stall is closed, sends the 4-byte prefix of a
// response announcing size bytes and 8 bytes of it, and nothing more: a forged
// leader, controller or broker that a node dials.
type stallingPeer struct {
	ln    net.Listener
	size  uint32
	stall chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startStallingPeer(t *testing.T, size uint32) *stallingPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingPeer{ln: ln, size: size, stall: make(chan struct{})}
	p.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, nc)
			p.mu.Unlock()
			p.wg.Go(func() { p.serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, nc := range p.conns {
			nc.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallingPeer) serve(nc net.Conn) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return
	}
	req := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, req); err != nil || len(req) < 8 {
		return
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = int16(binary.BigEndian.Uint16(req[2:]))
	for _, key := range []int16{3, apiVersionsKey} {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MaxVersion = key, kmsg.RequestForKey(key).MaxVersion()
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if _, err := nc.Write(appendResponse(nil, int32(binary.BigEndian.Uint32(req[4:])), resp)); err != nil {
		return
	}
	<-p.stall
	stalled := binary.BigEndian.AppendUint32(nil, p.size)
	stalled = append(stalled, 0, 0, 0, 1, 0, 0, 0, 0)
	if _, err := nc.Write(stalled); err != nil {
		return
	}
	// Until the client closes; io.Discard would take an 8 KB buffer per
	// connection, counted in the client's footprint (same process).
	var one [1]byte
	for {
		if _, err := nc.Read(one[:]); err != nil {
			return
		}
	}
}

// unreadBytes is how many received bytes wait in nc's socket for the reader
// (FIONREAD).
func unreadBytes(t *testing.T, nc net.Conn) int {
	t.Helper()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("FIONREAD: %v", errno)
	}
	return int(n)
}

// TestClientAnnouncedResponseMemory: a peer the client dials announces a
// 100 MB response and sends 8 bytes of it. The client's buffer grows as the
// bytes arrive (the server's frameReader), so each such connection holds a
// few KB more than an idle one, not the announced size; it used to hold a
// 64 KB first buffer (and a 32 KB bufio.Reader for the connection's life).
func TestClientAnnouncedResponseMemory(t *testing.T) {
	const n = 40
	peer := startStallingPeer(t, 100<<20)
	addr := peer.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := footprint()
	clients := make([]*Client, n)
	socks := make([]net.Conn, n)
	for i := range clients {
		c := NewClient(ClientConfig{})
		clients[i] = c
		t.Cleanup(func() { c.Close() })
		if _, err := c.PeerVersions(ctx, addr); err != nil {
			t.Fatal(err)
		}
		p, err := c.peer(addr)
		if err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		socks[i] = p.cc.nc
		p.mu.Unlock()
	}
	before := footprint()
	t.Logf("idle client connection: %.0f B heap+stack (client, reader and writer)",
		(float64(before.heapStack)-float64(start.heapStack))/n)
	close(peer.stall)
	waitFor(t, "every client to read what its peer sent", func() bool {
		for _, nc := range socks {
			if unreadBytes(t, nc) > 0 {
				return false
			}
		}
		return true
	})
	after := footprint()
	perConn := (float64(after.heapStack) - float64(before.heapStack)) / n
	t.Logf("client connection with a 100 MB response announced, 8 bytes sent: %.0f B heap+stack more than idle", perConn)
	if perConn > 16<<10 {
		t.Fatalf("each stalled 100 MB response holds %.0f B more than an idle connection, want < 16 KB", perConn)
	}
	// The connections are still alive (the frames never complete); a request
	// on one is answered by its deadline, not by a crash.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(-1)
	if _, err := clients[0].Request(short, addr, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("request on a stalled connection: %v, want its deadline", err)
	}
}
