package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum"
)

// Lifecycle timing constants from Kafka's BrokerLifecycleManager.
const (
	startingHeartbeatInterval = 10 * time.Millisecond // while STARTING, until caught up
	// firstShutdownHeartbeatDelay follows the first answer that leaves the
	// broker in controlled shutdown: its leaderships are being moved, which
	// at kraftd's speed is done long before a heartbeat interval.
	firstShutdownHeartbeatDelay = 50 * time.Millisecond
	initialBackoff              = 100 * time.Millisecond // registration/heartbeat retry, doubled each time
)

// lifecycle is the broker's side of KIP-631: register with the active
// controller, heartbeat, follow the fenced/unfenced decisions, and shut
// down in a controlled way. One goroutine (run) owns the conversation;
// everything other goroutines read is atomic.
//
// States: STARTING (registering, then heartbeating every 10 ms with
// WantFence until the controller says IsCaughtUp) -> RECOVERY (caught up;
// kraftd has no log recovery, so it is at once ready to be unfenced and
// heartbeats with WantFence=false) -> RUNNING (the controller unfenced it).
// Stop moves any state to PENDING_CONTROLLED_SHUTDOWN (WantShutDown=true)
// until the controller answers ShouldShutdown -> SHUTTING_DOWN.
//
// INVARIANTS: brokerEpoch is -1 until a registration succeeds and then
// never changes (Kafka does not re-register a running broker); state only
// moves forward in the order above.
type lifecycle struct {
	cfg         *Config
	log         *zap.Logger
	ch          *controllerChannel
	appliedFn   func() int64
	rnd         *lockedRand
	incarnation [16]byte

	state       atomic.Int32 // State
	fenced      atomic.Bool
	brokerEpoch atomic.Int64
	heartbeats  atomic.Int64 // heartbeat requests answered without error
	failures    atomic.Int64 // registration/heartbeat attempts that failed

	shutdown     chan struct{} // closed by beginShutdown
	shutdownOnce sync.Once
	done         chan struct{} // closed when run returns

	// gotShutdownAnswer is set by the first heartbeat answer in
	// PENDING_CONTROLLED_SHUTDOWN; only the heartbeat goroutine uses it.
	gotShutdownAnswer bool
	// leadsNothing reports whether the published image shows this broker
	// leading no partition; nil: unknown.
	leadsNothing func() bool
	// kick (capacity 1) wakes the heartbeat loop for a heartbeat now.
	kick chan struct{}
	// The bring-up's stages, for the "broker unfenced" log line; only the
	// run goroutine uses them.
	startedAt, registeredAt, caughtUpAt time.Time

	stMu      sync.Mutex
	stChanged chan struct{} // closed and replaced on every state change
	err       error         // why run gave up, if it did
}

func newLifecycle(cfg *Config, ch *controllerChannel, rnd *lockedRand, appliedFn func() int64) *lifecycle {
	l := &lifecycle{
		cfg:       cfg,
		rnd:       rnd,
		log:       cfg.Logger.Named("lifecycle"),
		ch:        ch,
		appliedFn: appliedFn,
		shutdown:  make(chan struct{}),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		stChanged: make(chan struct{}),
	}
	_, _ = rand.Read(l.incarnation[:]) // a random incarnation per start (KIP-631)
	l.state.Store(int32(StateNotRunning))
	l.fenced.Store(true)
	l.brokerEpoch.Store(-1)
	return l
}

// State is the current lifecycle state.
func (l *lifecycle) State() State { return State(l.state.Load()) }

func (l *lifecycle) setState(s State) {
	old := State(l.state.Swap(int32(s)))
	if old == s {
		return
	}
	l.log.Info("broker state changed", zap.Stringer("from", old), zap.Stringer("to", s))
	l.stMu.Lock()
	close(l.stChanged)
	l.stChanged = make(chan struct{})
	l.stMu.Unlock()
}

// waitState blocks until the state is at least want (in lifecycle order),
// the loop gave up, or ctx ends.
func (l *lifecycle) waitState(ctx context.Context, want State) error {
	for {
		l.stMu.Lock()
		ch, err := l.stChanged, l.err
		l.stMu.Unlock()
		if s := l.State(); s >= want {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker state %s, waiting for %s: %w", l.State(), want, ctx.Err())
		case <-ch:
		}
	}
}

func (l *lifecycle) fail(err error) {
	l.stMu.Lock()
	l.err = err
	close(l.stChanged)
	l.stChanged = make(chan struct{})
	l.stMu.Unlock()
	l.log.Error("broker lifecycle stopped", zap.Error(err))
	if l.cfg.OnFatal != nil {
		l.cfg.OnFatal(err)
	}
}

// beginShutdown asks run for a controlled shutdown.
func (l *lifecycle) beginShutdown() { l.shutdownOnce.Do(func() { close(l.shutdown) }) }

// run is the lifecycle loop; it returns after SHUTTING_DOWN, on ctx end, or
// when registration times out.
func (l *lifecycle) run(ctx context.Context) {
	defer close(l.done)
	l.startedAt = l.cfg.Now()
	l.setState(StateStarting)
	if !l.register(ctx) {
		return
	}
	l.heartbeatLoop(ctx)
}

// register retries BrokerRegistration with exponential backoff until it
// succeeds; false means give up (shutdown, ctx, or the initial timeout).
// The backoff is the heartbeat's (nextHeartbeatBackoff): one no controller
// took waits at most a second, and none at all when the quorum named a new
// leader while the attempt was out (retryWait).
func (l *lifecycle) register(ctx context.Context) bool {
	deadline := time.Now().Add(ms(l.cfg.InitialRegistrationTimeoutMs))
	backoff := initialBackoff
	for {
		_, changed := l.ch.target()
		epoch, err := l.sendRegistration(ctx)
		if err == nil {
			l.brokerEpoch.Store(epoch)
			l.registeredAt = l.cfg.Now()
			l.log.Info("registered with the controller", zap.Int64("brokerEpoch", epoch))
			return true
		}
		l.failures.Add(1)
		var wait time.Duration
		wait, backoff = l.retryWait(backoff, err, changed)
		l.log.Info("broker registration failed; will retry", zap.Duration("backoff", wait), zap.Error(err))
		if time.Now().After(deadline) {
			l.fail(fmt.Errorf("%w after %d ms: %w", ErrRegistrationTimeout, l.cfg.InitialRegistrationTimeoutMs, err))
			return false
		}
		if l.sleep(ctx, l.jitter(wait), l.shutdown) != wakeTimer {
			return false
		}
	}
}

// retryWait is the wait before the next registration or heartbeat after
// one that failed with err, and the backoff after that
// (nextHeartbeatBackoff). changed is the controller channel's leader-change
// signal taken before the attempt: when the quorum named a new leader while
// the attempt was out, the next goes to it at once, as Kafka's
// NodeToControllerChannelManager resends a request once the controller
// changes. A restarted broker's first registration goes round-robin to a
// controller before its observer knows the leader; answered NOT_CONTROLLER
// after the leader became known, it used to wait its 100 ms backoff anyway
// (the sleep only wakes for a later change).
func (l *lifecycle) retryWait(backoff time.Duration, err error, changed <-chan struct{}) (wait, next time.Duration) {
	wait, next = nextHeartbeatBackoff(backoff, err, ms(l.cfg.SessionTimeoutMs))
	select {
	case <-changed:
		return 0, next
	default:
		return wait, next
	}
}

// heartbeatLoop sends heartbeats until the controller lets the broker shut
// down or ctx ends.
func (l *lifecycle) heartbeatLoop(ctx context.Context) {
	var (
		delay    time.Duration // first heartbeat at once (Kafka: "heartbeat immediately")
		backoff  = initialBackoff
		stopping = l.shutdown
	)
	for {
		switch l.sleep(ctx, delay, stopping) {
		case wakeCtx:
			return
		case wakeShutdown:
			stopping = nil
			l.setState(StatePendingControlledShutdown)
		}
		_, changed := l.ch.target()
		resp, err := l.sendHeartbeat(ctx)
		if err != nil {
			l.failures.Add(1)
			var wait time.Duration
			wait, backoff = l.retryWait(backoff, err, changed)
			l.log.Info("broker heartbeat failed; will retry", zap.Duration("backoff", wait), zap.Error(err))
			delay = l.jitter(wait)
			continue
		}
		backoff = initialBackoff
		l.heartbeats.Add(1)
		var done bool
		delay, done = l.onHeartbeat(resp)
		if done {
			return
		}
	}
}

// unreachableBackoffMax bounds the wait before the next heartbeat after
// one that no controller took (NOT_CONTROLLER, a refused or broken
// connection): Kafka's reconnect.backoff.max.ms.
const unreachableBackoffMax = time.Second

// heartbeatBackoffMax is the longest wait before the next heartbeat after
// one that failed with err. A heartbeat that timed out backs off up to half
// the session, as Kafka's BrokerLifecycleManager does after a timeout. One
// that no controller took is retried within a second: in Kafka it never
// reaches the lifecycle manager, because NodeToControllerChannelManager
// queues it again and sends it to the quorum's leader once known. Backing
// off up to half the session there too, a broker at the 10k-partition
// kraftd bench waited 4.5 s after a controller failover, then 4.5 s again
// after a refused connection to the killed controller, and was fenced for
// a missed session.
func heartbeatBackoffMax(err error, sessionTimeout time.Duration) time.Duration {
	if errors.Is(err, context.DeadlineExceeded) {
		return sessionTimeout / 2
	}
	return min(unreachableBackoffMax, sessionTimeout/2)
}

// nextHeartbeatBackoff is the wait before the heartbeat after one that
// failed with err, given the current backoff, and the backoff after that:
// doubling, within heartbeatBackoffMax(err).
func nextHeartbeatBackoff(backoff time.Duration, err error, sessionTimeout time.Duration) (wait, next time.Duration) {
	limit := heartbeatBackoffMax(err, sessionTimeout)
	wait = min(backoff, limit)
	return wait, min(2*wait, limit)
}

// onHeartbeat moves the state machine on a successful answer and returns
// the delay before the next heartbeat; done means shut down now.
func (l *lifecycle) onHeartbeat(resp *kmsg.BrokerHeartbeatResponse) (time.Duration, bool) {
	if was := l.fenced.Swap(resp.IsFenced); was != resp.IsFenced {
		l.log.Info("controller changed our fencing", zap.Bool("fenced", resp.IsFenced))
	}
	interval := ms(l.cfg.HeartbeatIntervalMs)
	switch l.State() {
	case StateStarting:
		if !resp.IsCaughtUp {
			return startingHeartbeatInterval, false
		}
		// Caught up: kraftd has no log recovery to run, so RECOVERY is
		// immediately ready to unfence; ask at once (Kafka's
		// setReadyToUnfence schedules an immediate heartbeat).
		l.caughtUpAt = l.cfg.Now()
		l.setState(StateRecovery)
		return 0, false
	case StateRecovery:
		if !resp.IsFenced {
			l.setState(StateRunning)
			l.logBringUp()
		}
	case StatePendingControlledShutdown:
		if resp.ShouldShutdown {
			l.setState(StateShuttingDown)
			return 0, true
		}
		// As Kafka's BrokerLifecycleManager: ask again soon after the
		// first answer (the controller may let the broker go as soon as
		// its leaderships moved and every active broker saw it), then at
		// the usual interval. Before, a controlled shutdown always took at
		// least one full heartbeat interval.
		// While the controller still waits for other brokers to report
		// the leader moves, a broker that sees it leads nothing any more
		// keeps asking at that pace: the answer turns with the others'
		// next heartbeats (see heartbeatSoon), not with ours. One answered
		// before its image showed that sleeps the interval until the
		// image's publish wakes it (Broker's onVisible).
		if !l.gotShutdownAnswer || (l.leadsNothing != nil && l.leadsNothing()) {
			l.gotShutdownAnswer = true
			return firstShutdownHeartbeatDelay, false
		}
	}
	return interval, false
}

// logBringUp logs how long each stage of the bring-up took, from the
// lifecycle's start: registered (the RegisterBrokerRecord written), caught
// up (the controller saw the applied offset, which covers the replica
// manager's open of the logs, reach that record) and unfenced (the
// controller committed the unfence); the rest of a restart (the other
// brokers applying the unfence) happens elsewhere.
func (l *lifecycle) logBringUp() {
	since := func(t time.Time) float64 { return float64(t.Sub(l.startedAt).Microseconds()) / 1000 }
	l.log.Info("broker unfenced", zap.Int64("brokerEpoch", l.brokerEpoch.Load()),
		zap.Float64("registered_ms", since(l.registeredAt)), zap.Float64("caught_up_ms", since(l.caughtUpAt)),
		zap.Float64("unfenced_ms", since(l.cfg.Now())), zap.Int64("heartbeats", l.heartbeats.Load()))
}

func (l *lifecycle) sendRegistration(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, ms(l.cfg.ControllerRequestTimeoutMs))
	defer cancel()
	req := l.registrationRequest()
	req.SetVersion(-1)
	t, kresp, err := l.ch.send(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", t, err)
	}
	resp := kresp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if isNotControllerCode(resp.ErrorCode) {
			l.ch.notController(t)
		}
		return -1, fmt.Errorf("%s: %w", t, err)
	}
	return resp.BrokerEpoch, nil
}

// registrationRequest builds BrokerRegistration: listeners, the supported
// metadata.version range, rack and log directories (KIP-631, KIP-858).
func (l *lifecycle) registrationRequest() *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = l.cfg.NodeID
	req.ClusterID = l.cfg.ClusterID
	req.IncarnationID = l.incarnation
	for _, e := range l.cfg.Listeners {
		lr := kmsg.NewBrokerRegistrationRequestListener()
		lr.Name, lr.Host, lr.Port, lr.SecurityProtocol = e.Name, e.Host, e.Port, e.SecurityProtocol
		req.Listeners = append(req.Listeners, lr)
	}
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name = "metadata.version"
	f.MinSupportedVersion, f.MaxSupportedVersion = l.cfg.MinMetadataVersion, l.cfg.MaxMetadataVersion
	req.Features = append(req.Features, f)
	// kraft.version (KIP-853): the controller upgrades it only once every broker
	// supports the level (KAFKA-16538); a kraftd broker replays both levels.
	kf := kmsg.NewBrokerRegistrationRequestFeature()
	kf.Name = quorum.KRaftVersionFeatureName
	kf.MinSupportedVersion, kf.MaxSupportedVersion = quorum.KRaftVersionStatic, quorum.KRaftVersionMax
	req.Features = append(req.Features, kf)
	if l.cfg.Rack != "" {
		rack := l.cfg.Rack
		req.Rack = &rack
	}
	req.LogDirs = l.cfg.LogDirs
	req.PreviousBrokerEpoch = -1
	return req
}

func (l *lifecycle) sendHeartbeat(ctx context.Context) (*kmsg.BrokerHeartbeatResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, ms(l.cfg.ControllerRequestTimeoutMs))
	defer cancel()
	state := l.State()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(-1)
	req.BrokerID = l.cfg.NodeID
	req.BrokerEpoch = l.brokerEpoch.Load()
	req.CurrentMetadataOffset = l.appliedFn()
	// readyToUnfence is set on reaching RECOVERY and stays set.
	req.WantFence = state == StateStarting
	req.WantShutdown = state == StatePendingControlledShutdown
	t, kresp, err := l.ch.send(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	resp := kresp.(*kmsg.BrokerHeartbeatResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if isNotControllerCode(resp.ErrorCode) {
			l.ch.notController(t)
		}
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return resp, nil
}

// heartbeatSoon makes the heartbeat loop send its next heartbeat now
// instead of at the end of the interval. The broker calls it when it has
// applied an image while another broker is in controlled shutdown (see
// controlledShutdownMoved): the controller lets the shutting-down broker go
// only once every active broker has reported an offset past its leader
// moves and ISR removals, and a heartbeat interval (2 s) of waiting for
// each to report is most of a controlled shutdown; and, in controlled
// shutdown itself, when its image comes to show it leads nothing. Never
// blocks.
func (l *lifecycle) heartbeatSoon() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// wake says why sleep returned.
type wake int

const (
	wakeTimer wake = iota
	wakeShutdown
	wakeCtx
)

// sleep waits d, or less: a closed shutdown channel, a new quorum leader
// (worth retrying at once) or ctx end cut it short. A leader change counts
// as the timer firing.
func (l *lifecycle) sleep(ctx context.Context, d time.Duration, shutdown <-chan struct{}) wake {
	if ctx.Err() != nil {
		return wakeCtx
	}
	select {
	case <-shutdown:
		return wakeShutdown
	default:
	}
	if d <= 0 {
		return wakeTimer
	}
	_, leaderChanged := l.ch.target()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return wakeCtx
	case <-shutdown:
		return wakeShutdown
	case <-leaderChanged:
		return wakeTimer
	case <-l.kick:
		return wakeTimer
	case <-t.C:
		return wakeTimer
	}
}

// jitter spreads d by +-2%, as Kafka's ExponentialBackoff does.
func (l *lifecycle) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.98 + 0.04*l.rnd.float64()))
}
