package legacyzk

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// cluster is a set of legacy brokers on one store backend for tests.
type cluster struct {
	t       testing.TB
	brokers map[int32]*Broker
	dial    func(context.Context) (Store, error)
	mem     *MemServer // nil when on a real ZooKeeper
	admin   Store      // a session for assertions
}

func memDial(srv *MemServer) func(context.Context) (Store, error) {
	return func(context.Context) (Store, error) { return srv.Connect(), nil }
}

func testLoggerNop() *zap.Logger { return zap.NewNop() }

func testLogger(t testing.TB) *zap.Logger {
	if testing.Verbose() {
		return zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	}
	return zap.NewNop()
}

func newMemCluster(t *testing.T, ids ...int32) *cluster {
	srv := NewMemServer()
	c := &cluster{t: t, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	t.Cleanup(func() { c.admin.Close() })
	for _, id := range ids {
		c.start(id)
	}
	return c
}

func (c *cluster) start(id int32) *Broker { return c.startWith(id, nil) }

// startWith starts broker id with tweak applied to its configuration.
func (c *cluster) startWith(id int32, tweak func(*Config)) *Broker {
	c.t.Helper()
	cfg := Config{NodeID: id, Dial: c.dial, Logger: testLogger(c.t).With(zap.Int32("id", id)),
		ControlledShutdownRetryBackoffMs: 50, RetryBackoffMs: 20, CrashSessionLingerMs: 800, FaultInjection: true}
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := NewBroker(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("start broker %d: %v", id, err)
	}
	c.brokers[id] = b
	c.t.Cleanup(func() { b.Close() })
	return b
}

// waitFor polls cond until it holds or the deadline passes, then fails
// with the last reason it gave.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s: %s", what, why)
		case <-tick.C:
		}
	}
}

// controller waits until exactly one live broker is the active controller
// and every live broker knows it.
func (c *cluster) controller() *Broker {
	c.t.Helper()
	var active *Broker
	waitFor(c.t, 10*time.Second, "a controller", func() (bool, string) {
		active = nil
		for _, b := range c.brokers {
			if b.closed.Load() || b.ctrl.crashed.Load() {
				continue
			}
			if b.IsController() {
				if active != nil {
					return false, "two active controllers"
				}
				active = b
			}
		}
		if active == nil {
			return false, "none active"
		}
		for _, b := range c.brokers {
			if !b.closed.Load() && !b.ctrl.crashed.Load() && b.ControllerID() != active.ID() {
				return false, fmt.Sprintf("broker %d thinks %d", b.ID(), b.ControllerID())
			}
		}
		return true, ""
	})
	return active
}

// converged waits until every live broker's cache agrees with ZooKeeper.
func (c *cluster) converged() {
	c.t.Helper()
	waitFor(c.t, 10*time.Second, "caches to match ZooKeeper", func() (bool, string) {
		var diffs []string
		for _, b := range c.liveBrokers() {
			d, err := Diverge(context.Background(), c.admin, b.ID(), b.Image())
			if err != nil {
				return false, err.Error()
			}
			diffs = append(diffs, d...)
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
}

func (c *cluster) liveBrokers() []*Broker {
	var out []*Broker
	for _, id := range sortedKeys(c.brokers) {
		if b := c.brokers[id]; !b.closed.Load() && !b.ctrl.crashed.Load() {
			out = append(out, b)
		}
	}
	return out
}
