package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/replica"
)

func TestDefaultConfigMatchesKafka(t *testing.T) {
	c := DefaultConfig()
	checks := []struct {
		name      string
		got, want int64
	}{
		{"election timeout", int64(c.QuorumElectionTimeoutMs), 1000},
		{"fetch timeout", int64(c.QuorumFetchTimeoutMs), 2000},
		{"election backoff", int64(c.QuorumElectionBackoffMaxMs), 1000},
		{"append linger", int64(c.QuorumAppendLingerMs), 25},
		{"request timeout", int64(c.QuorumRequestTimeoutMs), 2000},
		{"retry backoff", int64(c.QuorumRetryBackoffMs), 20},
		{"heartbeat", int64(c.BrokerHeartbeatIntervalMs), 2000},
		{"session", int64(c.BrokerSessionTimeoutMs), 9000},
		{"registration", c.InitialBrokerRegistrationTimeoutMs, 60000},
		{"segment bytes", c.MetadataLogSegmentBytes, 1 << 30},
		{"retention bytes", c.MetadataMaxRetentionBytes, 100 << 20},
		{"retention ms", c.MetadataMaxRetentionMs, 7 * 24 * 3600 * 1000},
		{"snapshot bytes", c.MetadataLogMaxRecordBytesBetweenSnapshots, 20 << 20},
		{"snapshot ms", c.MetadataLogMaxSnapshotIntervalMs, 3600000},
		{"idle", int64(c.MetadataMaxIdleIntervalMs), 500},
		{"request max", int64(c.SocketRequestMaxBytes), 100 << 20},
		{"idle conn", c.ConnectionsMaxIdleMs, 600000},
		{"partitions", int64(c.NumPartitions), 1},
		{"rf", int64(c.DefaultReplicationFactor), 1},
		{"zk session", int64(c.ZooKeeperSessionTimeoutMs), 18000},
		{"zk inflight", int64(c.ZooKeeperMaxInFlightRequests), 10},
		{"node id", int64(c.NodeID), -1},
		{"log roll", c.EffectiveLogRollMs(), 7 * 24 * 3600 * 1000},
		{"log retention", c.EffectiveLogRetentionMs(), 7 * 24 * 3600 * 1000},
		{"log retention bytes", c.LogRetentionBytes, -1},
		{"retention check", c.LogRetentionCheckIntervalMs, 300000},
		{"replica fetch wait", int64(c.ReplicaFetchWaitMaxMs), 500},
		{"replica fetch min bytes", int64(c.ReplicaFetchMinBytes), 1},
		{"replica fetch max bytes", int64(c.ReplicaFetchMaxBytes), 1 << 20},
		{"replica fetch response max bytes", int64(c.ReplicaFetchResponseMaxBytes), 10 << 20},
		{"replica fetch backoff", int64(c.ReplicaFetchBackoffMs), 1000},
		{"replica fetchers", int64(c.NumReplicaFetchers), 1},
		{"background threads", int64(c.BackgroundThreads), 10},
		{"producer id expiration", c.ProducerIDExpirationMs, 86400000},
		{"producer id expiration check", c.ProducerIDExpirationCheckIntervalMs, 600000},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %d, want %d", ch.name, ch.got, ch.want)
		}
	}
	if c.Mode != ModeKRaft || !c.AutoCreateTopicsEnable || c.InterBrokerListenerName != "PLAINTEXT" {
		t.Errorf("mode %q autocreate %v ibl %q", c.Mode, c.AutoCreateTopicsEnable, c.InterBrokerListenerName)
	}
}

func TestSetErrorsNameTheKey(t *testing.T) {
	var c Config
	err := c.Set("foo.bar", "1")
	if !errors.Is(err, ErrUnknownKey) || err.Error() != `config: unknown key "foo.bar"` {
		t.Errorf("unknown key: %v", err)
	}
	err = c.Set("node.id", "x")
	if !errors.Is(err, ErrBadValue) || err.Error() != `config: node.id: "x" is not an integer` {
		t.Errorf("bad int: %v", err)
	}
	bad := map[string]string{
		"process.roles":                  "broker,zookeeper",
		"listeners":                      "PLAINTEXT:/127.0.0.1:9092",
		"controller.quorum.voters":       "1@127.0.0.1",
		"auto.create.topics.enable":      "yes",
		"cluster.id":                     "not-a-uuid",
		"mode":                           "zk",
		"listener.security.protocol.map": "PLAINTEXT",
		"metadata.log.segment.bytes":     "1GB",
	}
	for key, value := range bad {
		err := c.Set(key, value)
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), key+":") {
			t.Errorf("Set(%q, %q) = %v, want ErrBadValue naming the key", key, value, err)
		}
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	file := "node.id=1\nnum.partitions=2\nbroker.rack=file\nlog.dirs=/file\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadPropertiesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flags := []Setting{{"num.partitions", "3"}, {"broker.rack", "flag"}}
	overrides := []Setting{{"broker.rack", "override"}}
	c, err := LoadConfig(fromFile, flags, overrides)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 1 || c.NumPartitions != 3 || c.BrokerRack != "override" || c.LogDirs[0] != "/file" {
		t.Errorf("got node %d partitions %d rack %q dirs %v", c.NodeID, c.NumPartitions, c.BrokerRack, c.LogDirs)
	}
	if c.QuorumFetchTimeoutMs != 2000 {
		t.Errorf("untouched key lost its default: %d", c.QuorumFetchTimeoutMs)
	}
	_, err = LoadConfig(fromFile, []Setting{{"no.such.key", "1"}})
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"no.such.key"`) {
		t.Errorf("unknown override: %v", err)
	}
}

func TestEveryKeyHasWorkingDefaultAndFlag(t *testing.T) {
	for _, k := range Keys() {
		var c Config
		if err := c.Set(k.Name, k.Default); err != nil {
			t.Errorf("%s default %q: %v", k.Name, k.Default, err)
		}
		if k.Doc == "" || strings.Contains(k.Flag(), ".") {
			t.Errorf("%s: doc %q flag %q", k.Name, k.Doc, k.Flag())
		}
	}
}

func embedded(t *testing.T, extra ...Setting) Config {
	t.Helper()
	c, err := LoadConfig(EmbeddedDefaults(), extra)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidateEmbeddedDefault(t *testing.T) {
	c := embedded(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Logger == nil {
		t.Error("Validate left Logger nil")
	}
	if got := c.ControllerEndpoints(); len(got) != 1 || got[0].Addr() != "127.0.0.1:9093" {
		t.Errorf("controller endpoints %v", got)
	}
	if p, ok := c.SecurityProtocol("CONTROLLER"); !ok || p != "PLAINTEXT" {
		t.Errorf("CONTROLLER protocol %q %v, want implicit PLAINTEXT", p, ok)
	}
	// One broker: consumer groups need __consumer_offsets at RF 1, as
	// Kafka's quickstart server.properties sets it.
	if c.OffsetsTopicReplicationFactor != 1 || DefaultConfig().OffsetsTopicReplicationFactor != 3 {
		t.Errorf("offsets.topic.replication.factor %d (Kafka's default %d), want 1 for the embedded node",
			c.OffsetsTopicReplicationFactor, DefaultConfig().OffsetsTopicReplicationFactor)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name  string
		extra []Setting
		want  string
	}{
		{"no node id", []Setting{{"node.id", "-1"}}, "node.id is required"},
		{"no roles", []Setting{{"process.roles", ""}}, "process.roles is required"},
		{"no quorum", []Setting{{"controller.quorum.voters", ""}}, "controller.quorum.bootstrap.servers"},
		{"no controller listener names", []Setting{{"controller.listener.names", ""}}, "controller.listener.names must not be empty"},
		{"controller listener missing", []Setting{{"controller.listener.names", "CTRL"}}, "controller.listener.names must contain at least one value"},
		{"not a voter", []Setting{{"node.id", "2"}}, "node id 2 must be included"},
		{"broker is voter", []Setting{{"process.roles", "broker"}, {"listeners", "PLAINTEXT://127.0.0.1:9092"}}, "must not be included in the set of voters"},
		{"controller-only with broker listener", []Setting{{"process.roles", "controller"}}, "must only contain KRaft controller listeners"},
		{"duplicate listener name", []Setting{{"listeners", "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2,CONTROLLER://127.0.0.1:3"}}, "different name"},
		{"duplicate port", []Setting{{"listeners", "PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:1"}}, "different port"},
		{"unmapped listener", []Setting{{"listeners", "FOO://127.0.0.1:1,CONTROLLER://127.0.0.1:2"}, {"inter.broker.listener.name", "FOO"}}, "no security protocol defined for listener FOO"},
		{"ssl", []Setting{{"listeners", "SSL://127.0.0.1:1,CONTROLLER://127.0.0.1:2"}, {"inter.broker.listener.name", "SSL"}}, "supports only PLAINTEXT"},
		{"inter broker", []Setting{{"inter.broker.listener.name", "OTHER"}}, "inter.broker.listener.name"},
		{"zero timeout", []Setting{{"controller.quorum.election.timeout.ms", "0"}}, "controller.quorum.election.timeout.ms"},
		{"fetch wait above lag", []Setting{{"replica.fetch.wait.max.ms", "30001"}}, "replica.fetch.wait.max.ms"},
		{"negative fetch backoff", []Setting{{"replica.fetch.backoff.ms", "-1"}}, "replica.fetch.backoff.ms"},
		{"no replica fetchers", []Setting{{"num.replica.fetchers", "0"}}, "num.replica.fetchers"},
		{"no background threads", []Setting{{"background.threads", "0"}}, "background.threads"},
		{"zk without connect", []Setting{{"mode", "zk-legacy"}, {"process.roles", "broker"}}, "zookeeper.connect is required"},
		{"zk controller", []Setting{{"mode", "zk-legacy"}, {"zookeeper.connect", "127.0.0.1:2181"}}, "KRaft only"},
	}
	for _, tc := range cases {
		c := embedded(t, tc.extra...)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestValidateAcceptsRoleSplits(t *testing.T) {
	controller := embedded(t, Setting{"process.roles", "controller"}, Setting{"listeners", "CONTROLLER://127.0.0.1:9093"},
		Setting{"advertised.listeners", ""})
	if err := controller.Validate(); err != nil {
		t.Errorf("controller only: %v", err)
	}
	broker := embedded(t, Setting{"process.roles", "broker"}, Setting{"node.id", "4"}, Setting{"listeners", "PLAINTEXT://127.0.0.1:9092"})
	if err := broker.Validate(); err != nil {
		t.Errorf("broker only: %v", err)
	}
	dynamic := embedded(t, Setting{"process.roles", "broker"}, Setting{"node.id", "4"}, Setting{"listeners", "PLAINTEXT://127.0.0.1:9092"},
		Setting{"controller.quorum.voters", ""}, Setting{"controller.quorum.bootstrap.servers", "127.0.0.1:9093"})
	if err := dynamic.Validate(); err != nil {
		t.Errorf("bootstrap servers: %v", err)
	}
	zk := embedded(t, Setting{"mode", "zk-legacy"}, Setting{"process.roles", ""}, Setting{"zookeeper.connect", "127.0.0.1:2181"})
	if err := zk.Validate(); err != nil {
		t.Errorf("zk-legacy: %v", err)
	}
}

func TestAllLogDirs(t *testing.T) {
	c := embedded(t, Setting{"log.dirs", "/a,/b"}, Setting{"metadata.log.dir", "/m"})
	if got := strings.Join(c.AllLogDirs(), ","); got != "/a,/b,/m" {
		t.Errorf("AllLogDirs = %s", got)
	}
	c, err := LoadConfig([]Setting{{"log.dir", "/single"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.AllLogDirs(), ","); got != "/single" || c.MetadataDir() != "/single" {
		t.Errorf("AllLogDirs = %s metadata %s", got, c.MetadataDir())
	}
	// As in Kafka, log.dirs set to nothing does not fall back to log.dir.
	c = embedded(t, Setting{"log.dirs", ""}, Setting{"log.dir", "/single"})
	if got := c.AllLogDirs(); len(got) != 0 || c.MetadataDir() != "" {
		t.Errorf("AllLogDirs = %v metadata %q", got, c.MetadataDir())
	}
}

// log.retention.ms wins over .minutes, which wins over .hours; negative
// values mean forever; log.roll.ms wins over log.roll.hours (Kafka's
// KafkaConfig precedence). Bad topic-default values are refused by name.
func TestLogRetentionAndRollPrecedence(t *testing.T) {
	for _, tc := range []struct {
		set                 map[string]string
		retentionMs, rollMs int64
	}{
		{map[string]string{"log.retention.hours": "1", "log.roll.hours": "2"}, 3600000, 7200000},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, 120000, 7 * 24 * 3600000},
		{map[string]string{"log.retention.minutes": "2", "log.retention.ms": "5", "log.roll.ms": "9", "log.roll.hours": "1"}, 5, 9},
		{map[string]string{"log.retention.ms": "-7"}, -1, 7 * 24 * 3600000},
	} {
		c := DefaultConfig()
		for k, v := range tc.set {
			if err := c.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if got, rolled := c.EffectiveLogRetentionMs(), c.EffectiveLogRollMs(); got != tc.retentionMs || rolled != tc.rollMs {
			t.Errorf("%v: retention %d roll %d, want %d %d", tc.set, got, rolled, tc.retentionMs, tc.rollMs)
		}
	}
	c := DefaultConfig()
	for k, v := range map[string]string{"log.cleanup.policy": "compact,delete", "compression.type": "ZSTD", "log.message.timestamp.type": "LogAppendTime"} {
		if err := c.Set(k, v); err != nil {
			t.Fatalf("%s=%s: %v", k, v, err)
		}
	}
	if c.LogCleanupPolicy != "compact,delete" || c.CompressionType != "zstd" || c.LogMessageTimestampType != "LogAppendTime" {
		t.Fatalf("policy %q codec %q timestamps %q", c.LogCleanupPolicy, c.CompressionType, c.LogMessageTimestampType)
	}
	for k, v := range map[string]string{"log.cleanup.policy": "shred", "compression.type": "brotli", "log.message.timestamp.type": "Now", "log.retention.ms": "x"} {
		if err := c.Set(k, v); !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want a bad value naming the key", k, v, err)
		}
	}
}

// TestReplicaFetchKeysReachTheFetchers: the replica.fetch.* keys and
// num.replica.fetchers become the replica manager's FetchConfig; a 0 stays 0
// (Kafka allows it) rather than becoming the default.
func TestReplicaFetchKeysReachTheFetchers(t *testing.T) {
	c := embedded(t, Setting{"replica.fetch.wait.max.ms", "250"}, Setting{"replica.fetch.min.bytes", "0"},
		Setting{"replica.fetch.max.bytes", "4096"}, Setting{"replica.fetch.response.max.bytes", "65536"},
		Setting{"replica.fetch.backoff.ms", "0"}, Setting{"num.replica.fetchers", "3"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1, Fetch: replicaFetchConfig(&c)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := replica.FetchConfig{MaxWaitMs: 250, MinBytes: 0, MaxBytes: 65536, PartitionMaxBytes: 4096, BackoffMs: 0, NumFetchers: 3}
	if got := m.FetchConfig(); got != want {
		t.Errorf("fetch config %+v, want %+v", got, want)
	}
	d := embedded(t)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	m2, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1, Fetch: replicaFetchConfig(&d)})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	want = replica.FetchConfig{MaxWaitMs: 500, MinBytes: 1, MaxBytes: 10 << 20, PartitionMaxBytes: 1 << 20, BackoffMs: 1000, NumFetchers: 1}
	if got := m2.FetchConfig(); got != want {
		t.Errorf("default fetch config %+v, want %+v", got, want)
	}
}

// unclean.leader.election.enable is off by default, as in Kafka, and
// reaches the controller's configuration.
func TestUncleanLeaderElectionKeyReachesController(t *testing.T) {
	for _, tc := range []struct {
		extra []Setting
		want  bool
	}{{nil, false}, {[]Setting{{"unclean.leader.election.enable", "true"}}, true}} {
		c := embedded(t, tc.extra...)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		r := &controllerRole{a: &App{cfg: c}}
		if got := r.controllerConfig().UncleanLeaderElectionEnable; got != tc.want {
			t.Errorf("%v: controller's UncleanLeaderElectionEnable %v, want %v", tc.extra, got, tc.want)
		}
	}
}

// TestBackgroundThreadsReachTheReplicaManager: background.threads is how many
// partition.metadata files the broker's replica manager (both modes build it
// with newReplicaManager) writes at once, 10 by default as in Kafka; the key
// is applied, not listed among the ignored Kafka settings.
func TestBackgroundThreadsReachTheReplicaManager(t *testing.T) {
	for _, tc := range []struct {
		extra []Setting
		want  int
	}{{nil, 10}, {[]Setting{{"background.threads", "3"}}, 3}} {
		c := embedded(t, append(tc.extra, Setting{"log.dirs", t.TempDir()})...)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if ignored := c.IgnoredKafkaKeys(); len(ignored) != 0 {
			t.Errorf("%v: ignored %v", tc.extra, ignored)
		}
		m, err := newReplicaManager(&c)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.BackgroundThreads(); got != tc.want {
			t.Errorf("%v: %d background writers, want %d", tc.extra, got, tc.want)
		}
		_ = m.Close()
	}
}
