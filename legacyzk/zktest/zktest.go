// Package zktest starts Debian's ZooKeeper (package zookeeper, or
// libzookeeper-java plus a JRE) for tests: a standalone server on
// 127.0.0.1 with a free port and a temporary data directory, ready when
// its srvr four-letter command reports a Mode line. Tests that need it
// skip with a message when java or the jar is missing.
package zktest

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
	"testing"
	"time"
)

// Where Debian installs ZooKeeper's jars.
var jarCandidates = []string{"/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar"}

// ErrNotInstalled: java or the ZooKeeper jar is missing.
var ErrNotInstalled = errors.New("zktest: ZooKeeper not installed (apt-get install zookeeper, or libzookeeper-java default-jre-headless)")

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

// Start runs a server in a fresh directory under dir and waits until it
// serves (or timeout). tickMs sets tickTime; sessions from 2*tick up to
// 60 s are allowed, so tests can ask for short session timeouts.
func Start(dir string, tickMs int, timeout time.Duration) (*Server, error) {
	java, cp, err := Find()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=%d\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\nforceSync=no\nminSessionTimeout=%d\nmaxSessionTimeout=60000\n"+
		"4lw.commands.whitelist=srvr,ruok\n", tickMs, data, port, 2*tickMs)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(java, "-Xmx256m", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir, done: make(chan struct{})}
	go s.reap(logf) // owned by Server: ends when the process exits; Stop waits for it
	if err := s.waitReady(timeout); err != nil {
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

// waitReady polls srvr until it prints a Mode line.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("zktest: ZooKeeper exited during startup; see %s", filepath.Join(s.dir, "zookeeper.log"))
		default:
		}
		if Serving(s.Addr) {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // poll interval of the readiness probe
	}
	return fmt.Errorf("zktest: ZooKeeper at %s not serving after %v", s.Addr, timeout)
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

// Stop terminates the server and waits for it.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Run starts a server for a test, skipping it when ZooKeeper is not
// installed, and stops it at cleanup.
func Run(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir(), 200, 20*time.Second)
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
