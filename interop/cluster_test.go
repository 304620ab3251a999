package interop

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/internal/testport"
)

// cluster is a KRaft cluster of in-process kraftd nodes on 127.0.0.1, each an
// app.App with its own data directory, built like `kraftd` processes would be.
type cluster struct {
	t           testing.TB
	clusterID   string
	controllers []int32
	voters      string
	ctrlPorts   map[int32]int
	brokerPorts map[int32]int
	dirs        map[int32]string
	nodes       map[int32]*app.App
	// overrides are the Override options, applied on every (re)start.
	overrides []app.Setting
	// bootstrapBrokers: brokers know the controllers only through
	// controller.quorum.bootstrap.servers, not controller.quorum.voters.
	bootstrapBrokers bool
}

type clusterOpts struct {
	controllers, brokers int
	overrides            []app.Setting
	bootstrapBrokers     bool
	noWaitBrokers        bool
}

// Opt configures newCluster (STYLE rule 18: options for the test builder only).
type Opt func(*clusterOpts)

func Controllers(n int) Opt { return func(o *clusterOpts) { o.controllers = n } }
func Brokers(n int) Opt     { return func(o *clusterOpts) { o.brokers = n } }

// BootstrapBrokers gives brokers controller.quorum.bootstrap.servers (every
// controller's address) instead of controller.quorum.voters.
func BootstrapBrokers() Opt { return func(o *clusterOpts) { o.bootstrapBrokers = true } }

// NoWaitBrokers returns from newCluster as soon as every node started, before the
// brokers are registered and unfenced (tests of the startup itself).
func NoWaitBrokers() Opt { return func(o *clusterOpts) { o.noWaitBrokers = true } }
func Override(key, value string) Opt {
	return func(o *clusterOpts) { o.overrides = append(o.overrides, app.Setting{Key: key, Value: value}) }
}

// freePort picks a port a node binds later (testport.Interop: below the ephemeral
// range, so no outgoing connection can take it first, once per test binary).
func freePort(t testing.TB) int { return testport.Interop.Port(t) }

// newCluster starts controllers 1..C (controller role) and brokers C+1..C+B (broker
// role) with short timeouts, and stops them all when the test ends.
func newCluster(t testing.TB, opts ...Opt) *cluster {
	o := clusterOpts{controllers: 1, brokers: 1}
	for _, opt := range opts {
		opt(&o)
	}
	id, err := app.RandomUUID(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, clusterID: id.String(), ctrlPorts: map[int32]int{}, brokerPorts: map[int32]int{},
		dirs: map[int32]string{}, nodes: map[int32]*app.App{}, overrides: o.overrides, bootstrapBrokers: o.bootstrapBrokers}
	var vs []string
	for i := 1; i <= o.controllers; i++ {
		nid := int32(i)
		c.controllers = append(c.controllers, nid)
		c.ctrlPorts[nid] = freePort(t)
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", nid, c.ctrlPorts[nid]))
	}
	c.voters = strings.Join(vs, ",")
	for i := 1; i <= o.brokers; i++ {
		c.brokerPorts[int32(o.controllers+i)] = freePort(t)
	}
	// Directories first: cleanups run last-registered first, so the nodes stop
	// before their directories are removed.
	for nid := range c.ctrlPorts {
		c.dirs[nid] = t.TempDir()
	}
	for nid := range c.brokerPorts {
		c.dirs[nid] = t.TempDir()
	}
	t.Cleanup(c.stopAll)
	for nid := range c.ctrlPorts {
		c.start(nid, o.overrides)
	}
	for nid := range c.brokerPorts {
		c.start(nid, o.overrides)
	}
	if len(c.brokerPorts) > 0 && !o.noWaitBrokers {
		// As Kafka's test clusters do: a test's first CreateTopics must not meet a
		// broker that is not registered and unfenced yet (INVALID_REPLICATION_FACTOR
		// for a replication factor over the unfenced brokers, seen in CI).
		c.waitBrokersListed(t)
	}
	return c
}

func (c *cluster) settings(nid int32) []app.Setting {
	if c.dirs[nid] == "" {
		c.dirs[nid] = c.t.TempDir()
	}
	s := []app.Setting{
		{Key: "node.id", Value: fmt.Sprint(nid)},
		{Key: "controller.listener.names", Value: "CONTROLLER"},
		{Key: "controller.quorum.voters", Value: c.voters},
		{Key: "log.dirs", Value: c.dirs[nid]},
		{Key: "cluster.id", Value: c.clusterID},
		{Key: "controller.quorum.election.timeout.ms", Value: "300"},
		{Key: "controller.quorum.fetch.timeout.ms", Value: "600"},
		{Key: "controller.quorum.election.backoff.max.ms", Value: "200"},
		{Key: "broker.heartbeat.interval.ms", Value: "200"},
		{Key: "broker.session.timeout.ms", Value: "1500"},
	}
	if p, ok := c.ctrlPorts[nid]; ok {
		return append(s, app.Setting{Key: "process.roles", Value: "controller"},
			app.Setting{Key: "listeners", Value: fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p)})
	}
	if c.bootstrapBrokers {
		var servers []string
		for _, id := range c.controllers {
			servers = append(servers, fmt.Sprintf("127.0.0.1:%d", c.ctrlPorts[id]))
		}
		s[2] = app.Setting{Key: "controller.quorum.bootstrap.servers", Value: strings.Join(servers, ",")}
	}
	return append(s, app.Setting{Key: "process.roles", Value: "broker"},
		app.Setting{Key: "listeners", Value: fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", c.brokerPorts[nid])})
}

func (c *cluster) start(nid int32, overrides []app.Setting) *app.App {
	c.t.Helper()
	cfg, err := app.LoadConfig(c.settings(nid), overrides)
	if err != nil {
		c.t.Fatal(err)
	}
	if os.Getenv("KRAFTD_TEST_LOG") != "" {
		l, _ := zap.NewDevelopment()
		cfg.Logger = l.With(zap.Int32("node", nid))
	}
	a, err := app.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		c.t.Fatalf("node %d: %v", nid, err)
	}
	c.nodes[nid] = a
	return a
}

func (c *cluster) stop(nid int32) {
	a := c.nodes[nid]
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		c.t.Logf("stopping node %d: %v", nid, err)
	}
	delete(c.nodes, nid)
}

// stopAll stops brokers first (their controlled shutdown needs the controllers).
func (c *cluster) stopAll() {
	for nid := range c.brokerPorts {
		c.stop(nid)
	}
	for nid := range c.ctrlPorts {
		c.stop(nid)
	}
}

// bootstrap is the brokers' client addresses.
// waitBrokersListed waits until every running broker's Metadata lists every
// running broker (KRaft: registered and unfenced; zk-legacy: pushed by the
// controller). Clients that bootstrap once from an empty broker list give up
// without asking again (sarama's idempotent producer: "run out of available
// brokers"), which a loaded machine made happen right after the start.
func (c *cluster) waitBrokersListed(t testing.TB) {
	t.Helper()
	var ids []int32
	for nid := range c.nodes {
		if _, ok := c.brokerPorts[nid]; ok {
			ids = append(ids, nid)
		}
	}
	slices.Sort(ids)
	waitFor(t, "every broker to list every broker", 20*time.Second, func() bool {
		for _, nid := range ids {
			if !slices.Equal(listBrokers(c.brokerAddr(nid)), ids) {
				return false
			}
		}
		return true
	})
}

func (c *cluster) bootstrap() []string {
	var out []string
	for nid, p := range c.brokerPorts {
		if c.nodes[nid] != nil {
			out = append(out, fmt.Sprintf("127.0.0.1:%d", p))
		}
	}
	return out
}

func (c *cluster) brokerAddr(nid int32) string {
	return fmt.Sprintf("127.0.0.1:%d", c.brokerPorts[nid])
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}
