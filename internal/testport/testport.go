// Package testport hands out loopback ports for tests that must know a port
// before the process (or node) that binds it starts, or that restart a node on
// the port it had.
//
// A port the kernel picked for "127.0.0.1:0" and that was then released lies in
// Linux's ephemeral range (32768-60999): before the node binds it, it can become
// the local port of any outgoing connection on the machine, and the node fails with
// "address already in use". Ports below that range are never chosen that way. Each
// test binary gets its own Range, disjoint from the others that `go test ./...`
// runs in parallel, and a Range never hands out a port twice.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// Range is a span [Lo, Hi) of ports owned by one test binary.
type Range struct {
	Lo, Hi int

	mu   sync.Mutex
	used map[int]bool
}

// The ranges of the test binaries that need one. Keep them disjoint and below 32768.
var (
	Quorum  = &Range{Lo: 4000, Hi: 7000}   // quorum's node tests
	App     = &Range{Lo: 7000, Hi: 9000}   // cmd/kraftd/app
	Interop = &Range{Lo: 10000, Hi: 21000} // interop
	Cmd     = &Range{Lo: 21000, Hi: 32000} // cmd/kraftd's process tests
)

// Port returns a port of r that nothing listens on now and that r has not handed
// out before. It fails the test when none is found.
func (r *Range) Port(t testing.TB) int {
	t.Helper()
	for range 1000 {
		p := r.Lo + rand.IntN(r.Hi-r.Lo)
		r.mu.Lock()
		if r.used == nil {
			r.used = map[int]bool{}
		}
		taken := r.used[p]
		r.used[p] = true
		r.mu.Unlock()
		if taken {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // in use by something else
		}
		ln.Close()
		return p
	}
	t.Fatalf("testport: no free port in %d-%d", r.Lo, r.Hi)
	return 0
}

// Addr is Port as "127.0.0.1:port".
func (r *Range) Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", r.Port(t))
}
