package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// lifecycleHarness is a broker talking to a standby controller 3000 (always
// NOT_CONTROLLER) and the active controller 3001.
func lifecycleHarness(t *testing.T, mutate func(*Config)) (*harness, *fakeController, *fakeController) {
	t.Helper()
	standby := newFakeController(t, false, nil)
	active := newFakeController(t, true, nil)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: standby.addr, 3001: active.addr}
		c.HeartbeatIntervalMs = 50
		if mutate != nil {
			mutate(c)
		}
	})
	active.attach(h.b.Listener(), 0)
	standby.attach(h.b.Listener(), 0)
	return h, standby, active
}

func waitState(t *testing.T, b *Broker, s State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.WaitState(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestLifecycleRegisterCatchUpUnfence walks a broker through KIP-631's
// bring-up: register (after a NOT_CONTROLLER from the standby), heartbeat
// fenced with WantFence while not caught up, then RECOVERY and RUNNING once
// its metadata reaches the registration record; then a controlled shutdown.
func TestLifecycleRegisterCatchUpUnfence(t *testing.T) {
	h, standby, active := lifecycleHarness(t, nil)
	active.setHold(true) // the quorum does not deliver the registration yet
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	active.waitFor("5 heartbeats", func() bool { return len(active.heartbeats) >= 5 })
	active.mu.Lock()
	for _, hb := range active.heartbeats {
		if !hb.WantFence || hb.WantShutdown || hb.BrokerEpoch != 0 || hb.CurrentMetadataOffset != -1 {
			t.Errorf("heartbeat before catch-up: %+v", hb)
		}
	}
	active.mu.Unlock()
	if s := h.b.State(); s != StateStarting || !h.b.Fenced() || h.b.BrokerEpoch() != 0 {
		t.Fatalf("before catch-up: state %s fenced %v epoch %d", s, h.b.Fenced(), h.b.BrokerEpoch())
	}
	standby.mu.Lock()
	if standby.regs == 0 || active.regs != 1 {
		t.Errorf("registrations: standby %d active %d", standby.regs, active.regs)
	}
	standby.mu.Unlock()

	active.setHold(false)
	waitState(t, h.b, StateRunning)
	if h.b.Fenced() {
		t.Error("RUNNING but fenced")
	}
	// The heartbeat answer (RUNNING) can arrive before the publisher has applied the
	// unfence record, so wait for the image rather than read it once.
	active.waitFor("the unfence record in the broker's image", func() bool {
		self, ok := h.b.Image().Broker(1)
		return ok && !self.Fenced && self.Epoch == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := h.b.State(); s != StateShuttingDown {
		t.Errorf("after Stop: %s", s)
	}
	active.mu.Lock()
	last := active.heartbeats[len(active.heartbeats)-1]
	active.mu.Unlock()
	if !last.WantShutdown || last.WantFence {
		t.Errorf("last heartbeat %+v, want WantShutdown without WantFence", last)
	}
}

// TestLifecycleFollowsQuorumLeader: with the leader known from the quorum,
// the broker goes straight to it.
func TestLifecycleFollowsQuorumLeader(t *testing.T) {
	h, standby, _ := lifecycleHarness(t, nil)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 4, EpochStartOffset: -1})
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.b, StateRunning)
	standby.mu.Lock()
	defer standby.mu.Unlock()
	if standby.regs != 0 || len(standby.heartbeats) != 0 {
		t.Errorf("standby got %d registrations, %d heartbeats; the quorum leader is 3001", standby.regs, len(standby.heartbeats))
	}
}

// TestLifecycleRegistrationTimeout: no active controller at all gives up
// after initial.broker.registration.timeout.ms and reports it.
func TestLifecycleRegistrationTimeout(t *testing.T) {
	standby := newFakeController(t, false, nil)
	fatal := make(chan error, 1)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: standby.addr}
		c.InitialRegistrationTimeoutMs = 300
		c.OnFatal = func(err error) { fatal <- err }
	})
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, ErrRegistrationTimeout) {
			t.Fatalf("fatal %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no registration timeout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.b.WaitState(ctx, StateRunning); !errors.Is(err, ErrRegistrationTimeout) {
		t.Errorf("WaitState after timeout: %v", err)
	}
}

// TestStopBeforeRegistration: Stop while registration keeps failing
// returns promptly.
func TestStopBeforeRegistration(t *testing.T) {
	standby := newFakeController(t, false, nil)
	h := newHarness(t, func(c *Config) { c.ControllerAddrs = map[int32]string{3000: standby.addr} })
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	standby.waitFor("a registration", func() bool { return standby.regs > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.b.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
}

// TestHeartbeatRequestShape pins the wire fields Kafka's controller reads.
func TestHeartbeatRequestShape(t *testing.T) {
	h, _, active := lifecycleHarness(t, func(c *Config) { c.Rack = "rack-a" })
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})
	reg := h.b.life.registrationRequest()
	if reg.ClusterID != testCluster || reg.BrokerID != 1 || reg.Rack == nil || *reg.Rack != "rack-a" ||
		len(reg.Listeners) != 1 || reg.Listeners[0].Name != "PLAINTEXT" || len(reg.LogDirs) != 1 ||
		len(reg.Features) != 2 || reg.Features[0].MinSupportedVersion != 7 || reg.PreviousBrokerEpoch != -1 ||
		reg.Features[1].Name != "kraft.version" || reg.Features[1].MinSupportedVersion != 0 || reg.Features[1].MaxSupportedVersion != 1 {
		t.Errorf("registration request %+v", reg)
	}
	if reg.IncarnationID == ([16]byte{}) {
		t.Error("zero incarnation id")
	}
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.b, StateRunning)
	active.mu.Lock()
	defer active.mu.Unlock()
	var sawUnfenceAsk bool
	for _, hb := range active.heartbeats {
		sawUnfenceAsk = sawUnfenceAsk || (!hb.WantFence && hb.CurrentMetadataOffset >= 0)
	}
	if !sawUnfenceAsk {
		t.Error("no heartbeat asked to be unfenced after catching up")
	}
}

// TestControlledShutdownAsksAgainSoon: in PENDING_CONTROLLED_SHUTDOWN the
// heartbeat after the controller's first "not yet" comes 50 ms later, not a
// heartbeat interval later (Kafka's BrokerLifecycleManager); later ones at
// the interval; ShouldShutdown ends the loop.
func TestControlledShutdownAsksAgainSoon(t *testing.T) {
	cfg := &Config{Logger: zap.NewNop(), HeartbeatIntervalMs: 2000}
	l := newLifecycle(cfg, nil, nil, func() int64 { return 0 })
	l.setState(StatePendingControlledShutdown)
	notYet := kmsg.NewPtrBrokerHeartbeatResponse()
	for i, want := range []time.Duration{50 * time.Millisecond, 2 * time.Second, 2 * time.Second} {
		if d, done := l.onHeartbeat(notYet); d != want || done {
			t.Fatalf("answer %d without ShouldShutdown: next heartbeat in %v (done %v), want %v", i, d, done, want)
		}
	}
	// Once its own image shows it leads nothing, it asks every 50 ms.
	leadsNothing := true
	l.leadsNothing = func() bool { return leadsNothing }
	for i := range 3 {
		if d, _ := l.onHeartbeat(notYet); d != 50*time.Millisecond {
			t.Fatalf("answer %d, leading nothing: next heartbeat in %v, want 50ms", i, d)
		}
	}
	stop := kmsg.NewPtrBrokerHeartbeatResponse()
	stop.ShouldShutdown = true
	if _, done := l.onHeartbeat(stop); !done || l.State() != StateShuttingDown {
		t.Fatalf("ShouldShutdown: done %v, state %v", done, l.State())
	}
}

// TestHeartbeatSoonOnControlledShutdown: a broker that applies metadata
// marking another broker in controlled shutdown heartbeats at once (its
// offset is what the controller waits for), not at the end of its interval
// (here 60 s).
func TestHeartbeatSoonOnControlledShutdown(t *testing.T) {
	h, _, active := lifecycleHarness(t, func(c *Config) { c.HeartbeatIntervalMs = 60000 })
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.b, StateRunning)
	active.mu.Lock()
	off := active.commitLocked(brokerRecord(2, 7, false, nil, ep("PLAINTEXT", 9999)))
	active.mu.Unlock()
	if err := h.b.WaitApplied(context.Background(), off); err != nil {
		t.Fatal(err)
	}
	active.mu.Lock()
	before := len(active.heartbeats)
	// Broker 2 starts its controlled shutdown.
	off = active.commitLocked(&records.BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 7, InControlledShutdown: 1})
	active.mu.Unlock()
	active.waitFor("a heartbeat reporting the controlled shutdown's offset", func() bool {
		n := len(active.heartbeats)
		return n > before && active.heartbeats[n-1].CurrentMetadataOffset >= off
	})
}

// TestControlledShutdownAsksAtOnceWhenItLeadsNothing: a broker in controlled
// shutdown whose heartbeat was answered "not yet" while its image still
// showed it leading a partition (the controller's moves commit before the
// broker publishes them) sleeps a heartbeat interval; the publish that shows
// it leads nothing wakes it, and it asks at once. Before, it asked only at
// the end of the interval (2 s by default; 60 s here, so the wait for the
// next heartbeat times out after 5 s without the wake).
func TestControlledShutdownAsksAtOnceWhenItLeadsNothing(t *testing.T) {
	h, _, active := lifecycleHarness(t, func(c *Config) { c.HeartbeatIntervalMs = 60000 })
	if err := h.b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.b, StateRunning)
	topic := uuid(7)
	active.mu.Lock()
	active.commitLocked(brokerRecord(2, 7, false, nil, ep("PLAINTEXT", 9999)), topicRecord("led", topic),
		partitionRecord(topic, 0, 1, []int32{1, 2}, []int32{1, 2}))
	active.holdShutdown = true
	active.mu.Unlock()
	asks := func() int {
		n := 0
		for _, hb := range active.heartbeats {
			if hb.WantShutdown {
				n++
			}
		}
		return n
	}
	answered := h.b.life.heartbeats.Load()
	stopped := make(chan error, 1)
	go func() { stopped <- h.b.Stop(context.Background()) }()
	// The first "not yet" brings a second ask 50 ms later; answered while
	// the broker still leads its partition, that one is followed by the
	// interval. The moves commit only once the broker took that answer
	// (onHeartbeat runs right after the count; the sleep covers it), or
	// it would see them and ask again without the wake.
	active.waitFor("two heartbeats asking to shut down", func() bool { return asks() >= 2 })
	for h.b.life.heartbeats.Load() < answered+2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	active.mu.Lock()
	before := asks()
	change := records.NewPartitionChangeRecord()
	change.TopicID, change.PartitionID, change.Leader, change.ISR = topic, 0, 2, []int32{2}
	active.commitLocked(change)
	active.mu.Unlock()
	active.waitFor("an ask once the image shows it leads nothing", func() bool { return asks() > before })
	active.mu.Lock()
	active.holdShutdown = false
	active.mu.Unlock()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return once the controller let the broker go")
	}
}

// TestHeartbeatBackoffWithoutController: heartbeats that no controller takes
// (NOT_CONTROLLER while the new one is being elected, a refused connection
// to the killed one) are retried within a second however many fail, as
// Kafka's controller channel resends them to the quorum's leader itself;
// only timeouts back off up to half the session (Kafka's
// BrokerLifecycleManager). Before, every failure doubled the wait up to
// 4.5 s, and a broker of the 10k kraftd bench was fenced after a controller
// failover.
func TestHeartbeatBackoffWithoutController(t *testing.T) {
	session := 9 * time.Second
	unreachable := []error{
		fmt.Errorf("controller 3: %w", kerr.NotController),
		fmt.Errorf("controller 2: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
	}
	for _, err := range unreachable {
		backoff, longest := initialBackoff, time.Duration(0)
		for range 10 {
			var wait time.Duration
			wait, backoff = nextHeartbeatBackoff(backoff, err, session)
			longest = max(longest, wait)
		}
		if longest > time.Second {
			t.Errorf("%v: waited up to %v between heartbeats, want at most 1 s", err, longest)
		}
	}
	timeout := fmt.Errorf("controller 3: %w", context.DeadlineExceeded)
	backoff, longest := initialBackoff, time.Duration(0)
	for range 10 {
		var wait time.Duration
		wait, backoff = nextHeartbeatBackoff(backoff, timeout, session)
		longest = max(longest, wait)
	}
	if longest != session/2 {
		t.Errorf("timeouts: waited up to %v, want half the session (%v)", longest, session/2)
	}
	// A failover after timeouts: the next unreachable controller is asked within a second.
	if wait, _ := nextHeartbeatBackoff(session/2, unreachable[0], session); wait > time.Second {
		t.Errorf("NOT_CONTROLLER after timeouts: wait %v, want at most 1 s", wait)
	}
}

// TestRegistrationRetriesAtOnceOnNewLeader: a restarted broker's first
// registration goes round-robin to a controller before its quorum observer
// knows the leader. When the leader becomes known while that attempt is
// out and the answer is NOT_CONTROLLER, the next attempt goes to the leader
// at once, as Kafka's channel manager resends once the controller is known;
// it used to wait its 100 ms backoff first (the sleep only woke for a later
// leader change).
func TestRegistrationRetriesAtOnceOnNewLeader(t *testing.T) {
	active := newFakeController(t, true, nil)
	var b *Broker
	reg := protocol.NewRegistry()
	var standbyRegs atomic.Int32
	reg.Register(62, 0, 4, func(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
		standbyRegs.Add(1)
		// The broker's observer learns the leader while this attempt is out.
		b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})
		resp := req.Body.(*kmsg.BrokerRegistrationRequest).ResponseKind().(*kmsg.BrokerRegistrationResponse)
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	})
	srv, err := protocol.NewServer(protocol.ServerConfig{
		Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: "127.0.0.1:0", Registry: reg}},
		Logger:    zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	core, logs := observer.New(zap.InfoLevel)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: srv.Addr("CONTROLLER").String(), 3001: active.addr}
		c.HeartbeatIntervalMs = 50
		c.Logger = zap.New(core)
	})
	b = h.b
	active.attach(b.Listener(), 0)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, b, StateRunning)
	failed := logs.FilterMessage("broker registration failed; will retry").All()
	if standbyRegs.Load() != 1 || len(failed) != 1 {
		t.Fatalf("%d registrations at the standby, %d failures logged; want 1 each", standbyRegs.Load(), len(failed))
	}
	if wait := failed[0].ContextMap()["backoff"]; wait != time.Duration(0) {
		t.Errorf("after NOT_CONTROLLER with the leader known meanwhile: waited %v, want 0", wait)
	}
}

// TestControlledShutdownMovedEveryImage: while another broker is in
// controlled shutdown and not fenced, every image applied is one to report
// at once (controlledShutdownMoved), the ISR removals committed after its
// last leadership moved included: the controller waits for every active
// broker to report the last record of the shutdown's moves, and those
// removals used to wait for the next regular heartbeat (2 s). Before the
// mark and once the broker is fenced (its InControlledShutdown flag stays
// until it registers again), no image is.
func TestControlledShutdownMovedEveryImage(t *testing.T) {
	topic := uuid(9)
	offset := int64(100) // past testImage's
	apply := func(prev *image.Image, msgs ...records.Message) *image.Image {
		t.Helper()
		d := image.NewDelta(prev)
		for _, m := range msgs {
			offset++
			if err := d.Replay(offset, 1, records.Record{Version: versionFor(m), Message: m}); err != nil {
				t.Fatal(err)
			}
		}
		return d.Apply()
	}
	change := func(p, leader int32, isr ...int32) *records.PartitionChangeRecord {
		r := records.NewPartitionChangeRecord()
		r.TopicID, r.PartitionID, r.Leader, r.ISR = topic, p, leader, isr
		return r
	}
	base := testImage(t, brokerRecord(1, 10, false, nil), brokerRecord(2, 11, false, nil), brokerRecord(3, 12, false, nil),
		topicRecord("a", topic), partitionRecord(topic, 0, 2, []int32{2, 1, 3}, []int32{2, 1, 3}),
		partitionRecord(topic, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	steady := apply(base, change(0, records.NoLeaderChange, 2, 1))
	marked := apply(steady, &records.BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, InControlledShutdown: 1})
	lastLeadership := apply(marked, change(0, 1, 1, 3))
	isrRemoval := apply(lastLeadership, change(1, records.NoLeaderChange, 1, 3))
	fenced := apply(isrRemoval, &records.BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, Fenced: records.FenceChangeFence})
	later := apply(fenced, change(1, records.NoLeaderChange, 1))
	for _, tc := range []struct {
		name       string
		prev, next *image.Image
		want       bool
	}{
		{"no broker in controlled shutdown", base, steady, false},
		{"the mark", steady, marked, true},
		{"its last leadership moved", marked, lastLeadership, true},
		{"an ISR removal after its last leadership moved", lastLeadership, isrRemoval, true},
		{"the moves applied as one sync", steady, isrRemoval, true},
		{"the same image", isrRemoval, isrRemoval, false},
		{"it is fenced", isrRemoval, fenced, false},
		{"after its fencing", fenced, later, false},
	} {
		if got := controlledShutdownMoved(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: controlledShutdownMoved %v, want %v", tc.name, got, tc.want)
		}
	}
}
