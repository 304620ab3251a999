// Package zkserver runs Debian's ZooKeeper (package zookeeper, or
// libzookeeper-java plus a JRE) as a child process: a standalone server on
// 127.0.0.1 with its own data directory, ready when its srvr four-letter
// command reports a Mode line. `kraftd dev --mode zk-legacy` and the test
// helper legacyzk/zktest use it; kraftd itself only ever connects to a
// ZooKeeper, it never embeds one.
//
// Goroutines: one per Server, waiting for the process to exit; Stop waits
// for it.
package zkserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Where Debian installs ZooKeeper's jars.
var jarCandidates = []string{"/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar"}

// ErrNotInstalled: java or the ZooKeeper jar is missing.
var ErrNotInstalled = errors.New("zkserver: ZooKeeper not installed (apt-get install zookeeper, or libzookeeper-java default-jre-headless)")

// Config says where and how to run the server. Zero values are usable.
type Config struct {
	// Dir holds zoo.cfg, the data directory and zookeeper.log. Required.
	Dir string
	// Port is the client port on 127.0.0.1; 0 picks a free one.
	Port int
	// TickMs is tickTime (default 2000, ZooKeeper's). Sessions from 2 ticks
	// up to 60 s are allowed, so tests can ask for short session timeouts.
	TickMs int
	// StartTimeoutMs bounds the wait for the server to serve (default 30000).
	StartTimeoutMs int
	// HeapMb is the JVM's -Xmx (default 256).
	HeapMb int
}

// Server is one running standalone ZooKeeper.
type Server struct {
	// Addr is host:port of the client port.
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// Find returns the java binary and the class path to run ZooKeeper.
func Find() (java, classpath string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", ErrNotInstalled
	}
	for _, j := range jarCandidates {
		if _, err := os.Stat(j); err == nil {
			cp := j
			if _, err := os.Stat("/usr/share/java/slf4j-nop.jar"); err == nil {
				cp += ":/usr/share/java/slf4j-nop.jar" // silence SLF4J's binding warning
			}
			return java, cp, nil
		}
	}
	return "", "", ErrNotInstalled
}

// RequireEnv names the environment variable that makes a missing ZooKeeper
// a test failure instead of a skip: CI sets KRAFTD_REQUIRE_ZK=1 (make test
// does), because its machine installs ZooKeeper (scripts/install-deps.sh)
// and a test that skipped there would hide a broken install.
const RequireEnv = "KRAFTD_REQUIRE_ZK"

// Required reports whether RequireEnv is set to 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// TB is the part of testing.TB that SkipOrFail uses (this package is not
// test-only, so it does not import testing).
type TB interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
}

// SkipOrFail ends a test that cannot run because ZooKeeper is missing
// (err, e.g. from Find): a failure when Required, else a skip.
func SkipOrFail(t TB, err error) {
	t.Helper()
	if Required() {
		t.Fatal(fmt.Sprintf("%v, and %s=1 requires it", err, RequireEnv))
		return
	}
	t.Skip(err)
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		return errors.New("zkserver: no directory")
	}
	if c.TickMs <= 0 {
		c.TickMs = 2000
	}
	if c.StartTimeoutMs <= 0 {
		c.StartTimeoutMs = 30000
	}
	if c.HeapMb <= 0 {
		c.HeapMb = 256
	}
	if c.Port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Port = p
	}
	return nil
}

// zooCfg renders zoo.cfg: 127.0.0.1 only, no admin server, no fsync
// (a test and dev server; durability across machine crashes is not its
// job), srvr and ruok allowed for readiness probes.
func (c *Config) zooCfg(data string) string {
	return fmt.Sprintf("tickTime=%d\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\nforceSync=no\nminSessionTimeout=%d\nmaxSessionTimeout=60000\n"+
		"4lw.commands.whitelist=srvr,ruok\n", c.TickMs, data, c.Port, 2*c.TickMs)
}

// Start runs a server and waits until it serves. The process gets SIGKILL
// if the thread that started it dies (Pdeathsig), so it never outlives a
// test binary or a killed `kraftd dev`.
func Start(cfg Config) (*Server, error) {
	java, cp, err := Find()
	if err != nil {
		return nil, err
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	data := filepath.Join(cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(cfg.Dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.zooCfg(data)), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(cfg.Dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(java, fmt.Sprintf("-Xmx%dm", cfg.HeapMb), "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port), cmd: cmd, dir: cfg.Dir, done: make(chan struct{})}
	go s.reap(logf) // owned by Server: ends when the process exits; Stop waits for it
	if err := s.waitReady(time.Duration(cfg.StartTimeoutMs) * time.Millisecond); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) reap(logf *os.File) {
	s.cmd.Wait()
	logf.Close()
	close(s.done)
}

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "zookeeper.log") }

// waitReady polls srvr until it prints a Mode line.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond) // poll interval of the readiness probe
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if Serving(s.Addr) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("zkserver: ZooKeeper exited during startup; see %s", s.LogPath())
		case <-tick.C:
		}
	}
	return fmt.Errorf("zkserver: ZooKeeper at %s not serving after %v", s.Addr, timeout)
}

// Serving reports whether srvr at addr answers with a Mode line.
func Serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Mode:") {
			return true
		}
	}
	return false
}

// Stop terminates the server (SIGTERM, SIGKILL after 5 s) and waits for it.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.cmd.Process.Kill()
		<-s.done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
