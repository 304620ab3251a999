package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// A port chosen for a node must stay free until the node, a process started
// later, binds it. Two things take such a port in between:
//
//  1. The kernel. A port it picked for "127.0.0.1:0" lies in Linux's
//     ephemeral range (32768-60999 by default); released, it goes back to
//     the pool the kernel draws from for every other process's bind to port
//     0 and for the local port of outgoing connections. A loaded machine
//     (tests beside the bench, each binding listeners on port 0; the
//     cluster's own nodes connecting to each other) hands it out again
//     within the second or so a node takes to start, and the node exits
//     with "bind: address already in use".
//  2. The picker itself: ports picked in two calls (the nodes', then their
//     metrics listeners') could repeat, the first call's listeners being
//     closed by the time of the second.
//
// portPicker avoids both: it draws from a span below the ephemeral range,
// which the kernel never hands out on its own, and never hands out a port
// twice. Something else binding that very port (a test of
// internal/testport, which keeps below 32000, or any program with a fixed
// port) can still take one; a cluster start or join therefore retries with
// fresh ports when a node exits with EADDRINUSE (errDevPortInUse).

// Ports portPicker draws from: just below Linux's default ephemeral range and
// above internal/testport's test ranges (4000-32000).
const (
	devPortLo = 32000
	devPortHi = 32768
)

// devPortAttempts bounds the starts of a cluster, or of one joining node, that
// a taken port may fail before the bench gives up.
const devPortAttempts = 3

// errDevPortInUse: a node exited because a port it was to bind was taken
// (EADDRINUSE); starting it again on other ports may succeed.
var errDevPortInUse = errors.New("dev: a node's port was taken before it could bind it")

// portPicker hands out loopback ports for the nodes of one kraftd dev or
// kraftd bench run: ports in [lo, hi) that nothing listens on when picked,
// and once that span is used up, ports the kernel picks. Safe for
// concurrent use.
//
// INVARIANTS: every port handed out is in handed; none is handed out twice.
type portPicker struct {
	lo, hi int
	mu     sync.Mutex
	handed map[int]bool
	rand   *rand.Rand
	// listen binds a loopback address (net.Listen; tests replace it).
	listen func(addr string) (net.Listener, error)
}

func newPortPicker() *portPicker {
	return &portPicker{lo: devPortLo, hi: devPortHi, handed: map[int]bool{},
		rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), listen: listenTCP}
}

func listenTCP(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// ports returns n ports never handed out before by p.
func (p *portPicker) ports(n int) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, n)
	for len(out) < n {
		port, err := p.pickLocked()
		if err != nil {
			return nil, err
		}
		p.handed[port] = true
		out = append(out, port)
	}
	return out, nil
}

// pickLocked finds one free port not handed out yet: of the span first,
// trying each of its ports once from a random one on, then the kernel's.
func (p *portPicker) pickLocked() (int, error) {
	span := p.hi - p.lo
	from := p.rand.IntN(span)
	for i := range span {
		port := p.lo + (from+i)%span
		if p.handed[port] {
			continue
		}
		ln, err := p.listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken by something else
		}
		ln.Close()
		return port, nil
	}
	for range 100 {
		ln, err := p.listen("127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("dev: finding a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !p.handed[port] {
			return port, nil
		}
	}
	return 0, errors.New("dev: finding a free port: the kernel kept picking ports handed out already")
}

// isAddrInUse reports whether a node's output line says a bind failed on
// EADDRINUSE (Go's net error text: "bind: address already in use").
func isAddrInUse(line []byte) bool {
	return bytes.Contains(line, []byte("bind: "+syscall.EADDRINUSE.Error()))
}
