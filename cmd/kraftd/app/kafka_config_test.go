package app

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// loadKafkaFile reads a stock Kafka file from testdata/kafka through the
// production path (ReadPropertiesFile, LoadConfig) with overrides on top.
func loadKafkaFile(t *testing.T, name string, overrides ...Setting) (Config, error) {
	t.Helper()
	file, err := ReadPropertiesFile(filepath.Join("testdata", "kafka", name))
	if err != nil {
		t.Fatal(err)
	}
	return LoadConfig(file, overrides)
}

// TestStockKafkaFiles: every stock broker/controller file Kafka 3.7, 3.9 and
// 4.x ships is read without an unknown-key error; the ones with a static voter
// set, the brokers and the controllers of a dynamic quorum (KIP-853, only
// controller.quorum.bootstrap.servers) validate. Kafka's settings kraftd does not
// use are listed, kraftd's own keys are not.
func TestStockKafkaFiles(t *testing.T) {
	cases := []struct {
		file  string
		extra []Setting
	}{
		{"3.7.0/kraft/server.properties", nil},
		{"3.7.0/kraft/broker.properties", nil},
		{"3.7.0/kraft/controller.properties", nil},
		{"3.7.0/server.properties", []Setting{{"mode", "zk-legacy"}}},
		{"3.9.0/kraft/server.properties", nil},
		{"3.9.0/kraft/broker.properties", nil},
		{"3.9.0/kraft/controller.properties", nil},
		{"3.9.0/kraft/reconfig-server.properties", nil},
		{"4.x/server.properties", nil},
		{"4.x/broker.properties", nil},
		{"4.x/controller.properties", nil},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			c, err := loadKafkaFile(t, tc.file, tc.extra...)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			ignored := c.IgnoredKafkaKeys()
			if !slices.Contains(ignored, "num.network.threads") || !slices.Contains(ignored, "num.io.threads") {
				t.Errorf("ignored keys %v lack num.network.threads or num.io.threads", ignored)
			}
			for _, k := range ignored {
				if _, ours := lookupKey(k); ours {
					t.Errorf("kraftd's own key %s listed as ignored", k)
				}
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// TestStockKafkaFileZooKeeperBrokerID: the ZooKeeper-era file names the node
// with broker.id, Kafka's synonym of node.id.
func TestStockKafkaFileZooKeeperBrokerID(t *testing.T) {
	c, err := loadKafkaFile(t, "3.7.0/server.properties", Setting{"mode", "zk-legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 0 || c.ZooKeeperConnect != "localhost:2181" {
		t.Fatalf("node id %d, zookeeper.connect %q", c.NodeID, c.ZooKeeperConnect)
	}
	if !slices.Contains(c.IgnoredKafkaKeys(), "zookeeper.connection.timeout.ms") {
		t.Errorf("ignored %v", c.IgnoredKafkaKeys())
	}
}

// TestStockKafkaServerPropertiesStarts: Kafka 3.x's combined KRaft file starts a
// node, with only its ports and directory moved to 127.0.0.1, kernel-chosen ports
// and a temporary directory; New says once, in one warning, which settings it
// ignores.
func TestStockKafkaServerPropertiesStarts(t *testing.T) {
	for _, file := range []string{"3.7.0/kraft/server.properties", "3.9.0/kraft/server.properties"} {
		t.Run(file, func(t *testing.T) {
			c, err := loadKafkaFile(t, file,
				Setting{"listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
				Setting{"advertised.listeners", "PLAINTEXT://127.0.0.1:0"},
				Setting{"controller.quorum.voters", "1@127.0.0.1:0"},
				Setting{"log.dirs", t.TempDir()},
				Setting{"cluster.id", testClusterID})
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			c.Logger = zap.New(core)
			a, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			warns := logs.FilterMessage("ignoring Kafka settings kraftd does not use").All()
			if len(warns) != 1 || logs.Len() != 1 {
				t.Fatalf("want exactly one warning, got %d (%d log lines)", len(warns), logs.Len())
			}
			keys, _ := warns[0].ContextMap()["keys"].([]any)
			if !slices.Contains(keys, any("num.network.threads")) || !slices.Contains(keys, any("socket.send.buffer.bytes")) {
				t.Errorf("warning lists %v", keys)
			}
			if err := a.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer a.Stop(t.Context())
			if resp := apiVersions(t, a.Addr("PLAINTEXT")); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions error %d", resp.ErrorCode)
			}
		})
	}
}

// TestKafkaKeysTyposAndPrefixes: a name neither kraftd nor Kafka defines is
// refused naming it (with the near key when there is one); Kafka's prefixed
// per-listener and plugin settings are accepted as unused.
func TestKafkaKeysTyposAndPrefixes(t *testing.T) {
	unknown := map[string]string{
		"num.netwrok.threads":            `config: unknown key "num.netwrok.threads" (did you mean "num.network.threads"?)`,
		"contoller.quorum.voters":        `config: unknown key "contoller.quorum.voters" (did you mean "controller.quorum.voters"?)`,
		"foo.bar":                        `config: unknown key "foo.bar"`,
		"listener.name.internal.nosuch":  `config: unknown key "listener.name.internal.nosuch"`,
		"listener.name..ssl.protocol":    `config: unknown key "listener.name..ssl.protocol"`,
		"kraftd.fault.injection.enabled": `config: unknown key "kraftd.fault.injection.enabled" (did you mean "kraftd.fault.injection.enable"?)`,
		"config.providers.":              `config: unknown key "config.providers."`,
	}
	for key, want := range unknown {
		var c Config
		if err := c.Set(key, "1"); !errors.Is(err, ErrUnknownKey) || err.Error() != want {
			t.Errorf("Set(%q) = %v, want %s", key, err, want)
		}
	}
	known := []string{
		"num.io.threads", "super.users", "unstable.api.versions.enable", "zookeeper.clientCnxnSocket",
		"listener.name.internal.ssl.keystore.location", "listener.name.CONTROLLER.connections.max.reauth.ms",
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", "config.providers",
		"config.providers.file.class", "rsm.config.bucket", "metrics.context.region",
		"group.share.enable", "transaction.two.phase.commit.enable",
	}
	var c Config
	for _, key := range known {
		if err := c.Set(key, "x"); err != nil {
			t.Errorf("Set(%q): %v", key, err)
		}
	}
	if got := c.IgnoredKafkaKeys(); !slices.Equal(got, slices.Sorted(slices.Values(known))) {
		t.Errorf("IgnoredKafkaKeys = %v", got)
	}
}

// TestKafkaKeysRefusedValues: settings that would promise a protection kraftd
// does not give are refused, naming the key.
func TestKafkaKeysRefusedValues(t *testing.T) {
	refused := map[string]string{
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"security.inter.broker.protocol": "SASL_SSL",
	}
	for key, value := range refused {
		var c Config
		if err := c.Set(key, value); !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), key+":") {
			t.Errorf("Set(%s=%s) = %v", key, value, err)
		}
	}
	var c Config
	if err := c.Set("authorizer.class.name", ""); err != nil {
		t.Error(err)
	}
	if err := c.Set("security.inter.broker.protocol", "plaintext"); err != nil {
		t.Error(err)
	}
}

func TestKafkaKeysSortedAndDistinct(t *testing.T) {
	if !slices.IsSorted(kafkaKeys) {
		t.Error("kafkaKeys is not sorted")
	}
	if len(slices.Compact(slices.Clone(kafkaKeys))) != len(kafkaKeys) {
		t.Error("kafkaKeys has duplicates")
	}
	for _, k := range []string{"broker.id", "node.id", "controller.quorum.voters", "num.network.threads",
		"zookeeper.connect", "share.coordinator.state.topic.min.isr"} {
		if !kafkaKeySet[k] {
			t.Errorf("%s missing", k)
		}
	}
}

func TestBrokerIDIsNodeIDSynonym(t *testing.T) {
	c, err := LoadConfig([]Setting{{"broker.id", "3"}})
	if err != nil || c.NodeID != 3 {
		t.Fatalf("broker.id alone: node id %d, %v", c.NodeID, err)
	}
	if c, err = LoadConfig([]Setting{{"broker.id", "3"}, {"node.id", "3"}}); err != nil || c.NodeID != 3 {
		t.Fatalf("equal ids: node id %d, %v", c.NodeID, err)
	}
	_, err = LoadConfig([]Setting{{"broker.id", "2"}}, []Setting{{"node.id", "1"}})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "same value as `broker.id`") {
		t.Fatalf("different ids: %v", err)
	}
}

// TestZeroValuesTakeKafkasMeaning: settings whose 0 means something in Kafka
// are not turned into kraftd's defaults on the way to the components, and
// settings whose Kafka meaning would leave the node unusable are refused.
func TestZeroValuesTakeKafkasMeaning(t *testing.T) {
	c := ephemeralConfig(t,
		Setting{"controller.quorum.append.linger.ms", "0"},
		Setting{"controller.quorum.election.backoff.max.ms", "0"},
		Setting{"controller.quorum.retry.backoff.ms", "0"},
		Setting{"metadata.max.idle.interval.ms", "0"},
		Setting{"metadata.log.segment.ms", "1234"})
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	rc := a.quorum.raftConfig()
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	if rc.AppendLingerMs != quorum.AppendLingerMsNone || rc.ElectionBackoffMaxMs != 1 || rc.RetryBackoffMs != 1 {
		t.Errorf("quorum linger %d, election backoff %d, retry backoff %d; want none, 1, 1",
			rc.AppendLingerMs, rc.ElectionBackoffMaxMs, rc.RetryBackoffMs)
	}
	cc := a.controller.controllerConfig()
	cc.ClusterID = testClusterID // Start reads it from storage
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	if cc.MaxIdleIntervalMs >= 0 {
		t.Errorf("metadata.max.idle.interval.ms=0 became %d ms of idle interval, want disabled", cc.MaxIdleIntervalMs)
	}
	if opts := metadataLogOptions(&a.cfg, zap.NewNop()); opts.SegmentMs != 1234 {
		t.Errorf("metadata.log.segment.ms reached the log as %d", opts.SegmentMs)
	}

	refused := map[string][]Setting{
		"max.connections":                        {{"max.connections", "0"}},
		"connections.max.idle.ms":                {{"connections.max.idle.ms", "0"}},
		"log.dirs is set but names no directory": {{"log.dirs", ""}},
		"at least one log directory":             {{"log.dirs", " , "}, {"metadata.log.dir", "/m"}},
	}
	for want, extra := range refused {
		c := embedded(t, extra...)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: Validate = %v, want it to name %q", extra, err, want)
		}
	}
}

// TestConnectionsMaxIdleNever: connections.max.idle.ms=-1 is Kafka's "never
// close idle connections": the node keeps a connection that has been idle
// longer than a reference server's 50 ms timeout.
func TestConnectionsMaxIdleNever(t *testing.T) {
	a, err := New(ephemeralConfig(t, Setting{"connections.max.idle.ms", "-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(t.Context())
	reg := protocol.NewRegistry()
	ref, err := protocol.NewServer(protocol.ServerConfig{IdleTimeout: 50 * time.Millisecond,
		Listeners: []protocol.ListenerConfig{{Name: "REF", Addr: "127.0.0.1:0", Registry: reg}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Start(); err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	kept := dialKafka(t, a.Addr("PLAINTEXT"))
	kept.apiVersions(t, 1)
	closed := dialKafka(t, ref.Addr("REF"))
	closed.apiVersions(t, 1)
	if _, err := closed.Read(make([]byte, 1)); err == nil {
		t.Fatal("the reference server sent bytes instead of closing the idle connection")
	}
	kept.apiVersions(t, 2) // idle for longer than the reference timeout, still served
}

// kafkaConn is a raw connection for several ApiVersions round trips.
type kafkaConn struct{ net.Conn }

func dialKafka(t *testing.T, addr net.Addr) kafkaConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return kafkaConn{nc}
}

// apiVersions sends ApiVersions v0 and reads the answer's correlation id.
func (c kafkaConn) apiVersions(t *testing.T, corr int32) {
	t.Helper()
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, byte(corr), 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		t.Fatalf("ApiVersions %d: %v", corr, err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("ApiVersions %d: %v", corr, err)
	}
	if got := int32(hdr[7]); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	size := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
	if _, err := io.ReadFull(c, make([]byte, size-4)); err != nil {
		t.Fatalf("ApiVersions %d body: %v", corr, err)
	}
}

// TestStockKafkaControllerAndBrokerStart: Kafka 3.7's separate controller and
// broker files start a controller and a broker that registers with it, with
// only addresses and directories moved.
func TestStockKafkaControllerAndBrokerStart(t *testing.T) {
	ctrlAddr := testport.App.Addr(t)
	voters := Setting{"controller.quorum.voters", "1@" + ctrlAddr}
	cc, err := loadKafkaFile(t, "3.7.0/kraft/controller.properties", voters,
		Setting{"listeners", "CONTROLLER://" + ctrlAddr},
		Setting{"log.dirs", t.TempDir()}, Setting{"cluster.id", testClusterID})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := loadKafkaFile(t, "3.7.0/kraft/broker.properties", voters,
		Setting{"listeners", "PLAINTEXT://127.0.0.1:0"}, Setting{"advertised.listeners", "PLAINTEXT://127.0.0.1:0"},
		Setting{"log.dirs", t.TempDir()}, Setting{"cluster.id", testClusterID})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{cc, bc} {
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(t.Context())
		if c.HasRole(RoleBroker) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
				t.Fatalf("the broker did not register and unfence: %v", err)
			}
		}
	}
}
