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
	// ForceSync is ZooKeeper's forceSync: fsync the transaction log before
	// acknowledging a write, as production ZooKeeper (and Kafka's
	// deployment guidance) has it. Off by default for tests and dev, whose
	// durability across machine crashes does not matter.
	ForceSync bool

	// peers and myID make the server one member of an ensemble
	// (StartEnsemble): the server.N lines and this server's N.
	peers string
	myID  int
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

// zooCfg renders zoo.cfg: 127.0.0.1 only, no admin server, forceSync as
// configured, srvr and ruok allowed for readiness probes, and for an
// ensemble member the server.N lines (initLimit and syncLimit in ticks).
func (c *Config) zooCfg(data string) string {
	sync := "no"
	if c.ForceSync {
		sync = "yes"
	}
	cfg := fmt.Sprintf("tickTime=%d\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\nforceSync=%s\nminSessionTimeout=%d\nmaxSessionTimeout=60000\n"+
		"4lw.commands.whitelist=srvr,ruok\n", c.TickMs, data, c.Port, sync, 2*c.TickMs)
	if c.peers != "" {
		cfg += "initLimit=50\nsyncLimit=25\n" + c.peers
	}
	return cfg
}

// Start runs a server and waits until it serves. The process gets SIGKILL
// if the thread that started it dies (Pdeathsig), so it never outlives a
// test binary or a killed `kraftd dev`.
func Start(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s, err := launch(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(time.Duration(cfg.StartTimeoutMs) * time.Millisecond); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// launch writes cfg's zoo.cfg (and myid for an ensemble member) and starts
// the process without waiting for it to serve.
func launch(cfg Config) (*Server, error) {
	java, cp, err := Find()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if cfg.myID > 0 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", cfg.myID)), 0o644); err != nil {
			return nil, err
		}
	}
	cfgPath := filepath.Join(cfg.Dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.zooCfg(data)), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(cfg.Dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	args := []string{fmt.Sprintf("-Xmx%dm", cfg.HeapMb)}
	if cfg.peers != "" {
		// Members start together and look for each other: cap the leader
		// election's notification backoff (60 s by default) at a second,
		// so a member that was up before its peers does not sit out.
		args = append(args, "-Dzookeeper.fastleader.minNotificationInterval=200",
			"-Dzookeeper.fastleader.maxNotificationInterval=1000")
	}
	cmd := exec.Command(java, append(args, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port), cmd: cmd, dir: cfg.Dir, done: make(chan struct{})}
	go s.reap(logf) // owned by Server: ends when the process exits; Stop waits for it
	return s, nil
}

// Ensemble is n ZooKeeper servers on 127.0.0.1 forming one quorum.
type Ensemble struct {
	// Servers are the members, server.1 first.
	Servers []*Server
	// Addr is the connect string naming every member.
	Addr      string
	forceSync bool
}

// StartEnsemble runs n servers as one ensemble (server.1..n, each in
// cfg.Dir/s<N> with its own client, peer and election ports; cfg.Port is
// ignored) and waits until every one serves, i.e. a leader was elected and
// each member follows or leads it. cfg.ForceSync applies to every member.
func StartEnsemble(cfg Config, n int) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zkserver: an ensemble of %d servers", n)
	}
	if cfg.Dir == "" {
		return nil, errors.New("zkserver: no directory")
	}
	var peers strings.Builder
	members := make([]Config, n)
	for i := range members {
		ports := make([]int, 3)
		for j := range ports {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			ports[j] = p
		}
		m := cfg
		m.Dir, m.Port, m.myID = filepath.Join(cfg.Dir, fmt.Sprintf("s%d", i+1)), ports[0], i+1
		if err := m.defaults(); err != nil {
			return nil, err
		}
		members[i] = m
		if n > 1 {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[1], ports[2])
		}
	}
	e := &Ensemble{forceSync: cfg.ForceSync}
	var addrs []string
	for _, m := range members {
		m.peers = peers.String()
		if n == 1 {
			m.myID = 0
		}
		s, err := launch(m)
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
		addrs = append(addrs, s.Addr)
	}
	e.Addr = strings.Join(addrs, ",")
	for _, s := range e.Servers {
		if err := s.waitReady(time.Duration(members[0].StartTimeoutMs) * time.Millisecond); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// Describe says what the ensemble is, for benchmark output: "3-server
// ensemble, forceSync=yes".
func (e *Ensemble) Describe() string {
	sync := "no"
	if e.forceSync {
		sync = "yes"
	}
	if len(e.Servers) == 1 {
		return "standalone server, forceSync=" + sync
	}
	return fmt.Sprintf("%d-server ensemble, forceSync=%s", len(e.Servers), sync)
}

// Stop stops every member and waits for them.
func (e *Ensemble) Stop() {
	for _, s := range e.Servers {
		s.Stop()
	}
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
func Serving(addr string) bool { return Mode(addr) != "" }

// Mode is the server's Mode as srvr reports it (standalone, leader or
// follower), "" when it does not answer or does not serve.
func Mode(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode:"); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
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
