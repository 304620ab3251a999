// Package zktest starts Debian's ZooKeeper for tests through
// legacyzk/zkserver: a standalone server on 127.0.0.1 with a free port and
// a temporary data directory. Tests that need it skip with a message when
// java or the jar is missing, or fail when KRAFTD_REQUIRE_ZK=1 (CI).
package zktest

import (
	"errors"
	"testing"
	"time"

	"github.com/kraftd/kraftd/legacyzk/zkserver"
)

// ErrNotInstalled: java or the ZooKeeper jar is missing.
var ErrNotInstalled = zkserver.ErrNotInstalled

// Server is one running standalone ZooKeeper.
type Server = zkserver.Server

// Find returns the java binary and the class path to run ZooKeeper.
func Find() (java, classpath string, err error) { return zkserver.Find() }

// Serving reports whether srvr at addr answers with a Mode line.
func Serving(addr string) bool { return zkserver.Serving(addr) }

// Start runs a server in a fresh directory under dir and waits until it
// serves (or timeout). tickMs sets tickTime; sessions from 2*tick up to
// 60 s are allowed, so tests can ask for short session timeouts.
func Start(dir string, tickMs int, timeout time.Duration) (*Server, error) {
	return zkserver.Start(zkserver.Config{Dir: dir, TickMs: tickMs, StartTimeoutMs: int(timeout.Milliseconds())})
}

// Run starts a server for a test, skipping it when ZooKeeper is not
// installed (failing it under KRAFTD_REQUIRE_ZK=1), and stops it at cleanup.
func Run(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir(), 200, 20*time.Second)
	if errors.Is(err, ErrNotInstalled) {
		zkserver.SkipOrFail(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}
