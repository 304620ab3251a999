package legacyzk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// storeConformance runs the same checks on both Store implementations, so
// the in-memory store used by unit tests behaves like ZooKeeper.
func storeConformance(t *testing.T, open func() Store) {
	ctx := context.Background()
	a, b := open(), open()
	defer a.Close()
	defer b.Close()

	if _, err := a.Create(ctx, "/x/y", nil, Persistent); !errors.Is(err, ErrNoNode) {
		t.Fatalf("create without parent: %v", err)
	}
	if _, err := a.Create(ctx, "/x", []byte("1"), Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "/x", nil, Persistent); !errors.Is(err, ErrNodeExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	data, st, err := b.Get(ctx, "/x", true) // arms b's data watch
	if err != nil || string(data) != "1" || st.Version != 0 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	if _, err := a.Set(ctx, "/x", []byte("2"), 5); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("stale set: %v", err)
	}
	st, err = a.Set(ctx, "/x", []byte("2"), 0)
	if err != nil || st.Version != 1 {
		t.Fatalf("set: %+v %v", st, err)
	}
	expectEvent(t, b, Event{Type: NodeDataChanged, Path: "/x"})
	// One-shot: a second change without re-arming fires nothing.
	if _, err := a.Set(ctx, "/x", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	// Child watch and ephemerals.
	if _, err := b.Children(ctx, "/x", true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, "/x/e", []byte("eph"), Ephemeral); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, b, Event{Type: NodeChildrenChanged, Path: "/x"})
	st2, ok, err := b.Exists(ctx, "/x/e", true)
	if err != nil || !ok || st2.EphemeralOwner != a.SessionID() || st2.Czxid == 0 {
		t.Fatalf("exists ephemeral: %+v %v %v", st2, ok, err)
	}
	if _, err := a.Create(ctx, "/x/e/child", nil, Persistent); !errors.Is(err, ErrNoChildrenForEphemerals) {
		t.Fatalf("child of ephemeral: %v", err)
	}
	if err := a.Delete(ctx, "/x", -1); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	// Multi is all or nothing and names the failing op.
	_, err = a.Multi(ctx, CreateOp{Path: "/x/m", Mode: Persistent}, CheckOp{Path: "/x", Version: 99})
	var me *MultiError
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, ErrBadVersion) {
		t.Fatalf("multi: %v", err)
	}
	if _, ok, _ := a.Exists(ctx, "/x/m", false); ok {
		t.Fatal("failed multi left a znode behind")
	}
	res, err := a.Multi(ctx, CheckOp{Path: "/x", Version: 2}, SetDataOp{Path: "/x", Data: []byte("4"), Version: 2})
	if err != nil || res[1].Stat.Version != 3 {
		t.Fatalf("multi set: %+v %v", res, err)
	}
	p, err := a.Create(ctx, "/x/seq_", nil, PersistentSequential)
	if err != nil || p != "/x/seq_0000000000" && len(p) != len("/x/seq_0000000000") {
		t.Fatalf("sequential: %q %v", p, err)
	}
	// Closing a's session removes its ephemeral and fires b's exists watch.
	a.Close()
	expectEvent(t, b, Event{Type: NodeDeleted, Path: "/x/e"})
	if _, ok, _ := b.Exists(ctx, "/x/e", false); ok {
		t.Fatal("ephemeral survived its session")
	}
}

func expectEvent(t *testing.T, s Store, want Event) {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case ev := <-s.Events():
			if ev == want {
				return
			}
			if ev.Type == NodeChildrenChanged && want.Type == NodeDeleted {
				continue // a parent child watch may fire first
			}
			t.Fatalf("event %+v, want %+v", ev, want)
		case <-timer.C:
			t.Fatalf("no event, want %+v", want)
		}
	}
}

func TestMemStoreConformance(t *testing.T) {
	srv := NewMemServer()
	storeConformance(t, func() Store { return srv.Connect() })
}

func TestZkStoreConformance(t *testing.T) {
	connect := needZk(t)
	storeConformance(t, func() Store {
		s, err := DialZk(context.Background(), ZkConfig{Connect: connect, SessionTimeoutMs: testSessionTimeoutMs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemExpireDeletesEphemeralsAndNotifies(t *testing.T) {
	srv := NewMemServer()
	a, b := srv.Connect(), srv.Connect()
	defer b.Close()
	ctx := context.Background()
	a.Create(ctx, "/e", nil, Ephemeral)
	b.Exists(ctx, "/e", true)
	srv.Expire(a.SessionID())
	expectEvent(t, a, Event{Type: SessionExpired})
	expectEvent(t, b, Event{Type: NodeDeleted, Path: "/e"})
	if _, _, err := a.Get(ctx, "/e", false); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("expired session still works: %v", err)
	}
	a.Close()
}

func TestParseConnect(t *testing.T) {
	s, root, err := ParseConnect("h1:2181,h2:2181/kafka/")
	if err != nil || len(s) != 2 || root != "/kafka" {
		t.Fatalf("%v %q %v", s, root, err)
	}
	if _, _, err := ParseConnect("/x"); !errors.Is(err, ErrBadConfig) {
		t.Fatal(err)
	}
}

var updateMetadataProbe = kmsg.UpdateMetadataRequest{}

func TestFaultsApply(t *testing.T) {
	f := Faults{enabled: true}
	for _, cmd := range []string{"crash-after-zk-write", "pause-before-push", "drop-update-metadata-to=3"} {
		if err := f.Apply(cmd); err != nil {
			t.Fatal(err)
		}
	}
	if !f.CrashAfterZkWrite.Load() || !f.PauseBeforePush.Load() || !f.dropsUpdateMetadataTo(3, &updateMetadataProbe) {
		t.Fatal("switches not set")
	}
	if err := f.Apply("clear"); err != nil || f.CrashAfterZkWrite.Load() || f.dropsUpdateMetadataTo(3, &updateMetadataProbe) {
		t.Fatalf("clear: %v", err)
	}
	if err := f.Apply("explode"); !errors.Is(err, ErrUnknownFault) {
		t.Fatal(err)
	}
}

// TestFaultsDisabled: without Config.FaultInjection no switch can be armed
// through Apply, and a switch set anyway does not fire.
func TestFaultsDisabled(t *testing.T) {
	var f Faults
	for _, cmd := range []string{"crash-after-zk-write", "pause-before-push", "drop-update-metadata-to=3", "clear"} {
		if err := f.Apply(cmd); !errors.Is(err, ErrFaultInjectionDisabled) {
			t.Fatalf("Apply(%q) = %v", cmd, err)
		}
	}
	if f.CrashAfterZkWrite.Load() || f.PauseBeforePush.Load() {
		t.Fatal("a disabled Apply armed a switch")
	}
	f.CrashAfterZkWrite.Store(true)
	f.DropUpdateMetadataTo(3)
	if f.fire(&f.CrashAfterZkWrite) || f.dropsUpdateMetadataTo(3, &updateMetadataProbe) {
		t.Fatal("a switch fired with fault injection disabled")
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{NodeID: 1, Zk: ZkConfig{Connect: "127.0.0.1:2181"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Zk.SessionTimeoutMs != 18000 || c.Zk.MaxInFlightRequests != 10 || c.ListenerName != "PLAINTEXT" ||
		c.ControlledShutdownMaxRetries != 3 || c.ControlledShutdownRetryBackoffMs != 5000 || c.CrashSessionLingerMs != 18000 {
		t.Fatalf("defaults %+v", c)
	}
	for _, bad := range []Config{{NodeID: -1, Zk: ZkConfig{Connect: "h:1"}}, {NodeID: 1}, {NodeID: 1, Zk: ZkConfig{Connect: "h:1", SessionTimeoutMs: -5}}} {
		if err := bad.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
