package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kraftd/kraftd/legacyzk/zkserver"
	"github.com/kraftd/kraftd/legacyzk/zktest"
)

// sharedZk is one real ZooKeeper for the package's tests; each test works
// under its own chroot. Nil when ZooKeeper is not installed.
var (
	sharedZk    *zktest.Server
	sharedZkErr error
	chrootSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "legacyzk-zk")
	if err == nil {
		sharedZk, sharedZkErr = zktest.Start(dir, 200, 30*time.Second)
	} else {
		sharedZkErr = err
	}
	code := m.Run()
	stopBenchEnsemble()
	if sharedZk != nil {
		sharedZk.Stop()
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("time.Sleep")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needZk returns a zookeeper.connect string with a fresh chroot on the
// shared server, or skips the test (fails it under KRAFTD_REQUIRE_ZK=1).
func needZk(t testing.TB) string {
	t.Helper()
	if sharedZk == nil {
		if errors.Is(sharedZkErr, zktest.ErrNotInstalled) {
			zkserver.SkipOrFail(t, sharedZkErr)
		}
		t.Fatalf("ZooKeeper did not start: %v", sharedZkErr)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s/%s_%d", sharedZk.Addr, name, chrootSeq.Add(1))
}

const testSessionTimeoutMs = 2000

func newZkCluster(t *testing.T, ids ...int32) *cluster { return newZkClusterTB(t, ids...) }

func newZkClusterTB(t testing.TB, ids ...int32) *cluster { return newZkClusterOn(t, needZk(t), ids...) }

// newZkClusterOn is a cluster on the ZooKeeper at connect.
func newZkClusterOn(t testing.TB, connect string, ids ...int32) *cluster {
	zc := ZkConfig{Connect: connect, SessionTimeoutMs: testSessionTimeoutMs}
	dial := func(ctx context.Context) (Store, error) { return DialZk(ctx, zc) }
	admin, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: dial, admin: admin}
	t.Cleanup(func() { admin.Close() })
	for _, id := range ids {
		c.start(id)
	}
	return c
}
