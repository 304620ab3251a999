package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/legacyzk/zktest"
	"github.com/kraftd/kraftd/protocol"
)

// The zk-legacy side of "the same client-visible scenario passes in both
// modes": the very same scenario and clients as TestClientScenarios, run
// against brokers started through app with mode zk-legacy on a real
// ZooKeeper, plus the divergence check that only ZooKeeper mode needs.

// newLegacyCluster starts a real ZooKeeper (skipping the test when it is
// not installed) and brokers 1..n in zk-legacy mode, each an app.App with
// its own log directory. It returns a *cluster, so every helper and client
// adapter written for KRaft clusters works unchanged; it has no
// controllers (the controller is whichever broker wins /controller).
func newLegacyCluster(t testing.TB, n int, extra ...app.Setting) (*cluster, *zktest.Server) {
	zk := zktest.Run(t)
	c := &cluster{t: t, ctrlPorts: map[int32]int{}, brokerPorts: map[int32]int{},
		dirs: map[int32]string{}, nodes: map[int32]*app.App{}}
	for i := 1; i <= n; i++ {
		nid := int32(i)
		c.brokerPorts[nid] = freePort(t)
		c.dirs[nid] = t.TempDir()
	}
	t.Cleanup(c.stopAll) // runs before zktest's cleanup stops ZooKeeper
	for i := 1; i <= n; i++ {
		startLegacy(c, int32(i), zk.Addr, extra...)
	}
	c.clusterID = c.nodes[1].ClusterID()
	for nid, a := range c.nodes {
		if a.ClusterID() != c.clusterID {
			t.Fatalf("broker %d has cluster id %s, broker 1 %s", nid, a.ClusterID(), c.clusterID)
		}
	}
	return c, zk
}

// startLegacy starts broker nid of c in zk-legacy mode against zkAddr, with
// extra settings on top.
func startLegacy(c *cluster, nid int32, zkAddr string, extra ...app.Setting) *app.App {
	c.t.Helper()
	cfg, err := app.LoadConfig([]app.Setting{
		{Key: "mode", Value: "zk-legacy"},
		{Key: "node.id", Value: fmt.Sprint(nid)},
		{Key: "listeners", Value: fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", c.brokerPorts[nid])},
		{Key: "log.dirs", Value: c.dirs[nid]},
		{Key: "zookeeper.connect", Value: zkAddr},
		{Key: "zookeeper.session.timeout.ms", Value: "4000"},
		// Kafka's 5 s between ControlledShutdown attempts would dominate
		// every test that stops the controller while others stop too.
		{Key: "controlled.shutdown.retry.backoff.ms", Value: "200"},
	}, extra)
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
		c.t.Fatalf("broker %d: %v", nid, err)
	}
	c.nodes[nid] = a
	return a
}

// legacyBrokerIDs waits until every running broker's Metadata lists every
// running broker, and returns them sorted.
func legacyBrokerIDs(t testing.TB, c *cluster) []int32 {
	t.Helper()
	ids := slices.Sorted(maps.Keys(c.nodes))
	waitFor(t, "every broker to list all brokers", 15*time.Second, func() bool {
		for _, nid := range ids {
			if !slices.Equal(listBrokers(c.brokerAddr(nid)), ids) {
				return false
			}
		}
		return true
	})
	return ids
}

// legacyController is the running broker that is the active controller.
func legacyController(t testing.TB, c *cluster) int32 {
	t.Helper()
	var id int32 = -1
	waitFor(t, "an active controller", 15*time.Second, func() bool {
		for nid, a := range c.nodes {
			if lb := a.LegacyBroker(); lb != nil && lb.IsController() {
				id = nid
				return true
			}
		}
		return false
	})
	return id
}

// TestLegacyClientScenarios runs TestClientScenarios's scenario, with every
// client, against 3 zk-legacy brokers.
func TestLegacyClientScenarios(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 3)
	env := scenarioEnv{clusterID: c.clusterID, brokerIDs: legacyBrokerIDs(t, c),
		helper: newFranzAdmin(t, c), timeout: 15 * time.Second}
	var table resultTable
	var names []string
	for _, sc := range scenarioClients {
		names = append(names, sc.name)
		t.Run(sc.name, func(t *testing.T) {
			table.record(sc.name, runScenario(t, env, clientSlug(sc.name), sc.newAdmin(t, c)))
		})
	}
	t.Logf("client x step (zk-legacy):\n%s", table.markdown(names, "zk-legacy"))
}

// TestLegacyTopicsSameOnEveryBroker: kadm creates a topic through one
// broker; every broker's Metadata shows it with the same leaders and
// leader epochs; after the delete no broker lists it.
func TestLegacyTopicsSameOnEveryBroker(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 3)
	ids := legacyBrokerIDs(t, c)
	// Without kraftd.fault.injection.enable the fault switches stay off.
	if err := c.nodes[ids[0]].LegacyBroker().Faults().Apply("pause-before-push"); !errors.Is(err, legacyzk.ErrFaultInjectionDisabled) {
		t.Fatalf("fault switch without kraftd.fault.injection.enable: %v", err)
	}
	adm := adminFor(t, c.brokerAddr(ids[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, 2, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var want map[int32][2]int32
	waitFor(t, "every broker to show orders alike", 10*time.Second, func() bool {
		var views []map[int32][2]int32
		for _, nid := range ids {
			v, err := partitionView(t, c.brokerAddr(nid), "orders")
			if err != nil || len(v) != 4 {
				return false
			}
			views = append(views, v)
		}
		for _, v := range views[1:] {
			if !maps.Equal(v, views[0]) {
				return false
			}
		}
		want = views[0]
		return true
	})
	for p, le := range want {
		if !slices.Contains(ids, le[0]) {
			t.Errorf("orders-%d leader %d is not a broker", p, le[0])
		}
	}
	if _, err := adm.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no broker to list orders", 10*time.Second, func() bool {
		for _, nid := range ids {
			if _, err := partitionView(t, c.brokerAddr(nid), "orders"); err == nil {
				return false
			}
		}
		return true
	})
}

// TestLegacyDivergenceSeenAndHealed reproduces the dropped-UpdateMetadata
// case of the ZooKeeper era through the fault switch, checks that
// app.CheckDivergence (what `kraftd check-divergence` runs) names exactly
// the deaf broker, and that a controller failover heals it.
func TestLegacyDivergenceSeenAndHealed(t *testing.T) {
	t.Parallel()
	c, zk := newLegacyCluster(t, 3, app.Setting{Key: "kraftd.fault.injection.enable", Value: "true"})
	ids := legacyBrokerIDs(t, c)
	check := func() *app.DivergenceReport {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, err := app.CheckDivergence(ctx, app.DivergenceConfig{Bootstrap: c.bootstrap(),
			ZooKeeperConnect: zk.Addr, SettleMs: 100})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := check(); rep.Divergent() || rep.Mode != app.ModeZKLegacy || len(rep.Brokers) != 3 {
		t.Fatalf("fresh cluster: %+v", rep)
	}

	ctrl := legacyController(t, c)
	deaf := ids[0]
	if deaf == ctrl {
		deaf = ids[1]
	}
	if err := c.nodes[ctrl].LegacyBroker().Faults().Apply(fmt.Sprintf("drop-update-metadata-to=%d", deaf)); err != nil {
		t.Fatal(err)
	}
	adm := adminFor(t, c.brokerAddr(ctrl))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "drift"); err != nil {
		t.Fatal(err)
	}
	rep := check()
	for _, b := range rep.Brokers {
		switch {
		case b.ID == deaf && b.Status != "divergent":
			t.Errorf("deaf broker %d: %s", b.ID, b.Status)
		case b.ID != deaf && b.Status != "in sync":
			t.Errorf("broker %d: %s %v", b.ID, b.Status, b.Differences)
		}
	}
	if len(rep.Brokers) != 3 || !rep.Divergent() || !strings.Contains(strings.Join(rep.Brokers[slices.Index(ids, deaf)].Differences, "\n"), "drift") {
		t.Fatalf("dropped UpdateMetadata not reported: %+v", rep)
	}

	// Heal: the controller goes (controlled shutdown); the next one reads
	// everything back from ZooKeeper and pushes it to every broker.
	c.stop(ctrl)
	legacyController(t, c)
	waitFor(t, "the failover to heal the deaf broker", 15*time.Second, func() bool {
		_, err := partitionView(t, c.brokerAddr(deaf), "drift")
		return err == nil
	})
	if rep := check(); rep.Divergent() || len(rep.Brokers) != 2 {
		t.Fatalf("after failover: %+v", rep)
	}
}

// TestKRaftCheckDivergenceInSync: on a KRaft cluster the same check reads
// the quorum's high watermark and each broker's image offset; a settled
// cluster has every broker in sync and no divergence.
func TestKRaftCheckDivergenceInSync(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3))
	waitRunning(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adminFor(t, c.bootstrap()...).CreateTopic(ctx, 3, 2, nil, "audit"); err != nil {
		t.Fatal(err)
	}
	var rep *app.DivergenceReport
	waitFor(t, "every broker in sync", 10*time.Second, func() bool {
		var err error
		rep, err = app.CheckDivergence(ctx, app.DivergenceConfig{Bootstrap: c.bootstrap()[:1], Rounds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range rep.Brokers {
			if b.Status != "in sync" {
				return false
			}
		}
		return len(rep.Brokers) == 3
	})
	if rep.Divergent() || rep.Mode != app.ModeKRaft || !strings.HasPrefix(rep.Truth, "metadata log high watermark") {
		t.Fatalf("KRaft report: %+v", rep)
	}
	// A stopped broker stays registered, fenced: Metadata hides it, the
	// check still lists it (DescribeCluster with fenced brokers), as
	// unreachable, not divergent.
	c.stop(4)
	rep, err := app.CheckDivergence(ctx, app.DivergenceConfig{Bootstrap: c.bootstrap(), Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Brokers) != 3 || rep.Brokers[2].ID != 4 || rep.Brokers[2].Status != "unreachable" || rep.Divergent() {
		t.Fatalf("after stopping broker 4: %+v", rep)
	}
}

// TestKRaftCheckDivergenceLaggingBroker: a KRaft broker whose metadata
// fetches the controller drops falls behind the log; the check reports it
// as "behind at offset N", not as divergent, although its Metadata lacks a
// topic the others serve; once its fetches flow again it is in sync.
func TestKRaftCheckDivergenceLaggingBroker(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3))
	waitRunning(t, c)
	const lagging = 4
	c.nodes[1].Server().ControlKey(1, func(req *protocol.Request) (kmsg.Response, error, bool) {
		f := req.Body.(*kmsg.FetchRequest)
		id := f.ReplicaID
		if f.Version >= 15 {
			id = f.ReplicaState.ID
		}
		return nil, nil, id == lagging // drop: a lost answer, the broker waits and retries
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adminFor(t, c.brokerAddr(2)).CreateTopic(ctx, 2, 1, nil, "late"); err != nil {
		t.Fatal(err)
	}
	statuses := func() map[int32]string {
		rep, err := app.CheckDivergence(ctx, app.DivergenceConfig{Bootstrap: []string{c.brokerAddr(2)}, Rounds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Divergent() {
			t.Fatalf("divergent: %+v", rep)
		}
		out := map[int32]string{}
		for _, b := range rep.Brokers {
			out[b.ID] = b.Status
		}
		return out
	}
	waitFor(t, "broker 4 behind, 2 and 3 in sync", 10*time.Second, func() bool {
		s := statuses()
		return strings.HasPrefix(s[lagging], "behind at offset ") && s[2] == "in sync" && s[3] == "in sync"
	})
	if _, err := partitionView(t, c.brokerAddr(lagging), "late"); err == nil {
		t.Fatal("the lagging broker serves the new topic")
	}
	c.nodes[1].Server().ControlKey(1, nil)
	waitFor(t, "broker 4 to catch up", 15*time.Second, func() bool {
		s := statuses()
		return s[2] == "in sync" && s[3] == "in sync" && s[lagging] == "in sync"
	})
}
