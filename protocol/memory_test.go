//go:build linux

package protocol

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// rawSockets opens n TCP connections to addr with plain syscalls, so the
// client side adds nothing to the Go heap being measured. Each socket
// first sends prefix when it is not empty. They are closed at cleanup.
func rawSockets(tb testing.TB, addr string, n int, prefix []byte) []int {
	tb.Helper()
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	fds := make([]int, 0, n)
	tb.Cleanup(func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	})
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			tb.Fatalf("socket: %v", err)
		}
		fds = append(fds, fd)
		if err := syscall.Connect(fd, sa); err != nil {
			tb.Fatalf("connect: %v", err)
		}
		if len(prefix) > 0 {
			if _, err := syscall.Write(fd, prefix); err != nil {
				tb.Fatalf("write: %v", err)
			}
		}
	}
	return fds
}

// memFootprint is what the Go runtime holds for the heap and goroutine
// stacks after a full collection, and the process's resident set.
type memFootprint struct{ heapStack, rss uint64 }

func footprint() memFootprint {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFootprint{heapStack: ms.HeapInuse + ms.StackInuse, rss: rssBytes()}
}

// rssBytes reads VmRSS from /proc/self/status (0 if unavailable).
func rssBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// idleConnCost opens n idle connections to a fresh server and returns the
// growth of heap+stacks and of RSS per connection. With external set, the
// client sockets live in a child process (see TestIdleClientProcess), so
// n can approach the process's whole descriptor limit.
func idleConnCost(tb testing.TB, n int, prefix []byte, external bool) (heapStackPerConn, rssPerConn float64) {
	s, err := NewServer(ServerConfig{Listeners: []ListenerConfig{{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Registry: fuzzRegistry()}}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	addr := s.Addr("PLAINTEXT").String()
	rawSockets(tb, addr, 10, nil) // warm up the accept path and runtime structures
	waitFor(tb, "warm-up connections", func() bool { return s.connCount() == 10 })
	before := footprint()
	if external {
		idleClientProcess(tb, addr, n)
	} else {
		rawSockets(tb, addr, n, prefix)
	}
	waitFor(tb, "connections accepted", func() bool { return s.connCount() == n+10 })
	after := footprint()
	return float64(after.heapStack-before.heapStack) / float64(n), (float64(after.rss) - float64(before.rss)) / float64(n)
}

// idleClientProcess runs this test binary again as TestIdleClientProcess,
// which opens n connections to addr and holds them until its stdin closes
// (at cleanup).
func idleClientProcess(tb testing.TB, addr string, n int) {
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestIdleClientProcess$")
	cmd.Env = append(os.Environ(), "KRAFTD_IDLE_CLIENT_ADDR="+addr, "KRAFTD_IDLE_CLIENT_N="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
}

// TestIdleClientProcess is the child side of idleClientProcess; it does
// nothing in a normal test run.
func TestIdleClientProcess(t *testing.T) {
	addr := os.Getenv("KRAFTD_IDLE_CLIENT_ADDR")
	if addr == "" {
		t.Skip("only run as the child of idleClientProcess")
	}
	n, _ := strconv.Atoi(os.Getenv("KRAFTD_IDLE_CLIENT_N"))
	rawSockets(t, addr, n, nil)
	io.Copy(io.Discard, os.Stdin) // hold the sockets until the parent closes stdin
}

// TestIdleConnectionMemory bounds what an idle connection costs the server
// (heap plus goroutine stacks): under 20 KB, so 10,000 idle connections
// fit in 200 MB. It used to be ~96 KB (bufio buffers, a 256-slot channel).
func TestIdleConnectionMemory(t *testing.T) {
	perConn, rss := idleConnCost(t, 2000, nil, false)
	t.Logf("idle connection: %.0f B heap+stack, %.0f B RSS", perConn, rss)
	if perConn > 20<<10 {
		t.Fatalf("an idle connection costs %.0f B of heap and stack, want < 20 KB", perConn)
	}
}

// TestAnnouncedFrameMemory: 40 connections that announce 100 MB frames and
// send 8 bytes of them must not make the server allocate 4 GB (it used to
// allocate each announced frame up front); the buffer grows as the body
// arrives. Other connections are served meanwhile.
func TestAnnouncedFrameMemory(t *testing.T) {
	const n = 40
	s := startTestServer(t, nil)
	good := dialRaw(t, s.addr)
	checkEcho(t, good.roundTrip(metadataReq(1, "before"), 1), "before")
	prefix := binary.BigEndian.AppendUint32(nil, 100<<20)
	prefix = append(prefix, 0, 3, 0, 1, 0, 0, 0, 1) // 8 bytes of a Metadata v1 header
	before := footprint()
	rawSockets(t, s.addr, n, prefix)
	waitFor(t, "stalled connections accepted", func() bool { return s.connCount() == n+1 })
	waitFor(t, "their 8 bytes read", func() bool { return s.pool.usedBytes() >= n*readaheadBytes })
	after := footprint()
	perConn := (float64(after.heapStack) - float64(before.heapStack)) / n
	t.Logf("connection with a 100 MB frame announced, 8 bytes sent: %.0f B heap+stack, %.0f B RSS, pool %d B",
		perConn, (float64(after.rss)-float64(before.rss))/n, s.pool.usedBytes())
	if perConn > 1<<20 {
		t.Fatalf("each stalled 100 MB frame holds %.0f B, want < 1 MB", perConn)
	}
	for i := range 10 {
		checkEcho(t, good.roundTrip(metadataReq(1, "during"), int32(10+i)), "during")
	}
	fresh := dialRaw(t, s.addr)
	checkEcho(t, fresh.roundTrip(metadataReq(1, "fresh"), 1), "fresh")
}

// BenchmarkIdleConnections reports the cost of 10,000 idle connections
// (run with -benchtime 1x; the connections are opened once).
func BenchmarkIdleConnections(b *testing.B) {
	const n = 10000
	var perConn, rss float64
	for range b.N {
		perConn, rss = idleConnCost(b, n, nil, true)
	}
	b.ReportMetric(perConn, "heap+stack_B/conn")
	b.ReportMetric(rss, "rss_B/conn")
	b.ReportMetric(perConn*n/(1<<20), "heap+stack_MiB/10k")
}
