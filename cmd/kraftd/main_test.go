package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

const testClusterID = "MkU3OEVBNTcwNTJENDM2Qg"

func TestCLIPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	props := "node.id=1\nprocess.roles=broker,controller\n" +
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n" +
		"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n" +
		"num.partitions=2\nbroker.rack=file\nlog.dirs=" + dir + "\n"
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI("test", "", nil)
	args := []string{"--config", path, "--num-partitions", "3", "--broker-rack", "flag",
		"--override", "broker.rack=override", "--override", "controller.quorum.fetch.timeout.ms=5000", "--log-format", "json"}
	cfg, embedded, _, err := c.load(args, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if embedded {
		t.Error("embedded default used although configuration was given")
	}
	if cfg.NumPartitions != 3 || cfg.BrokerRack != "override" || cfg.QuorumFetchTimeoutMs != 5000 || cfg.NodeID != 1 {
		t.Errorf("partitions %d rack %q fetch %d node %d", cfg.NumPartitions, cfg.BrokerRack, cfg.QuorumFetchTimeoutMs, cfg.NodeID)
	}
}

func TestCLIErrorsNameTheKey(t *testing.T) {
	cases := map[string][]string{
		`config: unknown key "foo.bar"`:               {"--override", "foo.bar=1"},
		`config: node.id: "x" is not an integer`:      {"--node-id", "x"},
		`--override "nokey" is not key=value`:         {"--override", "nokey"},
		"controller.listener.names must not be empty": {"--node-id", "1", "--process-roles", "broker", "--controller-quorum-voters", "2@127.0.0.1:1"},
	}
	for want, args := range cases {
		_, _, status, err := newCLI("test", "", nil).load(args, os.Stderr)
		if err == nil || !strings.Contains(err.Error(), want) || status == exitOK {
			t.Errorf("%v: status %d err %v, want %q", args, status, err, want)
		}
	}
	if _, _, status, err := newCLI("test", "", nil).load([]string{"--no-such-flag"}, os.Stderr); status != exitUsage || err == nil {
		t.Errorf("unknown flag: status %d err %v", status, err)
	}
}

// TestCLIKafkaMeanings: flags take Kafka's meaning or fail with a message
// naming the key, instead of silently falling back to a default.
func TestCLIKafkaMeanings(t *testing.T) {
	base := []string{"--node-id", "1", "--process-roles", "broker,controller",
		"--listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"--controller-listener-names", "CONTROLLER", "--controller-quorum-voters", "1@127.0.0.1:9093"}
	refused := map[string][]string{
		"log.dirs is set but names no directory": {"--log-dirs", ""},
		"max.connections":                        {"--log-dirs", t.TempDir(), "--max-connections", "0"},
		"connections.max.idle.ms":                {"--log-dirs", t.TempDir(), "--connections-max-idle-ms", "0"},
	}
	for want, extra := range refused {
		_, _, status, err := newCLI("test", "", nil).load(append(slices.Clone(base), extra...), os.Stderr)
		if err == nil || !strings.Contains(err.Error(), want) || status != exitError {
			t.Errorf("%v: status %d err %v, want %q", extra, status, err, want)
		}
	}
	cfg, _, _, err := newCLI("test", "", nil).load(append(slices.Clone(base), "--log-dirs", t.TempDir(),
		"--connections-max-idle-ms", "-1"), os.Stderr)
	if err != nil || cfg.ConnectionsMaxIdleMs != -1 {
		t.Fatalf("--connections-max-idle-ms -1: %v (%d)", err, cfg.ConnectionsMaxIdleMs)
	}
}

// TestCLIStockKafkaFile: Kafka 3.7's config/kraft/server.properties goes
// through --config (its unused settings are not errors) and the flags move it
// onto a free directory; Kafka 4.x's combined file, whose controller belongs to
// a dynamic quorum (controller.quorum.bootstrap.servers only), loads and is
// formatted as Kafka's quickstart does it, with --standalone: the bootstrap
// snapshot names the advertised controller listener.
func TestCLIStockKafkaFile(t *testing.T) {
	file := filepath.Join("app", "testdata", "kafka", "3.7.0", "kraft", "server.properties")
	cfg, _, _, err := newCLI("test", "", nil).load([]string{"--config", file, "--log-dirs", t.TempDir()}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 1 || len(cfg.QuorumVoters) != 1 || !slices.Contains(cfg.IgnoredKafkaKeys(), "num.io.threads") {
		t.Fatalf("node %d voters %v ignored %v", cfg.NodeID, cfg.QuorumVoters, cfg.IgnoredKafkaKeys())
	}
	file = filepath.Join("app", "testdata", "kafka", "4.x", "server.properties")
	dir := t.TempDir()
	cfg, _, _, err = newCLI("test", "", nil).load([]string{"--config", file, "--log-dirs", dir}, os.Stderr)
	if err != nil || len(cfg.QuorumVoters) != 0 || len(cfg.QuorumBootstrapServers) != 1 {
		t.Fatalf("4.x server.properties: voters %v bootstrap %v, %v", cfg.QuorumVoters, cfg.QuorumBootstrapServers, err)
	}
	var out bytes.Buffer
	args := []string{"--config", file, "--log-dirs", dir, "-t", "MkU3OEVBNTcwNTJENDM2Qg"}
	if status := runFormat(args, &out, os.Stderr); status != exitError {
		t.Fatalf("format without --standalone: status %d, want %d", status, exitError)
	}
	if status := runFormat(append(args, "--standalone"), &out, os.Stderr); status != exitOK {
		t.Fatalf("format --standalone: status %d\n%s", status, out.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "__cluster_metadata-0", "00000000000000000000-0000000000.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := quorum.ParseSnapshot(raftlog.BootstrapSnapshotID, data)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := s.KRaft.Voters.Voter(1)
	if !ok || len(v.Endpoints) != 1 || v.Endpoints[0] != (quorum.Endpoint{Name: "CONTROLLER", Host: "localhost", Port: 9093}) {
		t.Fatalf("bootstrap voters %+v", s.KRaft.Voters)
	}
}

func TestCLIEmbeddedDefault(t *testing.T) {
	cfg, embedded, _, err := newCLI("test", "", nil).load([]string{"--log-level", "warn"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !embedded || cfg.NodeID != 1 || len(cfg.QuorumVoters) != 1 || cfg.MetadataDir() != "./kraftd-data" {
		t.Errorf("embedded %v node %d voters %v dir %s", embedded, cfg.NodeID, cfg.QuorumVoters, cfg.MetadataDir())
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	c := newCLI("kraftd", nodeUsage, nil)
	var buf bytes.Buffer
	c.fs.SetOutput(&buf)
	c.fs.Usage()
	for _, k := range app.Keys() {
		if !strings.Contains(buf.String(), "--"+k.Flag()) {
			t.Errorf("--help lacks --%s", k.Flag())
		}
		if k.Default != "" && !strings.Contains(buf.String(), `(default "`+k.Default+`")`) {
			t.Errorf("--help lacks the default of --%s", k.Flag())
		}
	}
}

// buildBinary compiles kraftd once per test that needs a real process.
func buildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kraftd")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=test-1", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePort hands out a loopback port for a child process to bind (testport.Cmd:
// below the ephemeral range, once per test binary).
func freePort(t testing.TB) int { return testport.Cmd.Port(t) }

// waitInBackground waits for a started command on a goroutine of its own. done
// gets Wait's result once; exited turns true just before. Callers ask exited, not
// cmd.ProcessState, which Wait writes: reading it from another goroutine is a race.
func waitInBackground(cmd *exec.Cmd) (done chan error, exited *atomic.Bool) {
	done, exited = make(chan error, 1), new(atomic.Bool)
	go func() {
		err := cmd.Wait()
		exited.Store(true)
		done <- err
	}()
	return done, exited
}

func TestProcessStorageAndSignalStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "kraftd test-1 (go") {
		t.Fatalf("version: %q %v", out, err)
	}
	out, err = exec.Command(bin, "storage", "random-uuid").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.ParseUUID(strings.TrimSpace(string(out))); err != nil {
		t.Fatalf("random-uuid printed %q: %v", out, err)
	}

	dir := t.TempDir()
	broker, controller := freePort(t), freePort(t)
	args := []string{
		"--node-id", "1", "--process-roles", "broker,controller",
		"--listeners", "PLAINTEXT://127.0.0.1:" + itoa(broker) + ",CONTROLLER://127.0.0.1:" + itoa(controller),
		"--controller-listener-names", "CONTROLLER",
		"--controller-quorum-voters", "1@127.0.0.1:" + itoa(controller),
		"--log-dirs", dir, "--log-format", "json",
	}
	// Without --cluster-id an unformatted directory is refused.
	res, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != exitError || !strings.Contains(string(res), "kraftd storage format") {
		t.Fatalf("unformatted start: exit %d\n%s", code, res)
	}
	cmd := exec.Command(bin, append(args, "--cluster-id", testClusterID)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // no-op once it has exited
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitForApiVersions(t, "127.0.0.1:"+itoa(broker), done)
	waitForApiVersions(t, "127.0.0.1:"+itoa(controller), done)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit after SIGTERM\n%s", stderr.String())
	}
	m, err := app.ReadMetaProperties(dir)
	if err != nil || m.ClusterID != testClusterID || m.NodeID != 1 {
		t.Fatalf("meta.properties %+v %v", m, err)
	}
	// Same directory, another node id: refused with both ids.
	bad := append(append([]string(nil), args...), "--override", "node.id=2",
		"--override", "controller.quorum.voters=2@127.0.0.1:"+itoa(controller))
	res, err = exec.Command(bin, bad...).CombinedOutput()
	if exitCode(err) != exitError || !strings.Contains(string(res), "node id 1") || !strings.Contains(string(res), "node id 2") {
		t.Fatalf("other node id: %v\n%s", err, res)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitForApiVersions polls addr until an ApiVersions request is answered,
// failing early if the process exits and after a deadline.
func waitForApiVersions(t *testing.T, addr string, exited <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := tryApiVersions(addr)
		if err == nil {
			return
		}
		select {
		case e := <-exited:
			t.Fatalf("kraftd exited before serving %s: %v", addr, e)
		case <-ctx.Done():
			t.Fatalf("ApiVersions on %s not answered in time: %v", addr, err)
		case <-tick.C:
		}
	}
}

func tryApiVersions(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	// Request header v1: key, version, correlation id, null client id.
	frame := binary.BigEndian.AppendUint16(nil, 18)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 7)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	frame = req.AppendTo(frame)
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	var size int32
	if err := binary.Read(r, binary.BigEndian, &size); err != nil {
		return err
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(r, payload); err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(payload[4:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(payload) != 7 || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return errors.New("bad ApiVersions response")
	}
	return nil
}
