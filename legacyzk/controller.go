package legacyzk

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
)

// controller is Kafka's KafkaController as it runs on every ZooKeeper-era
// broker: one event goroutine that owns the broker's ZooKeeper session,
// competes for /controller, and, while it holds it, runs the partition and
// replica state machines and the channel manager. Everything below runs on
// that goroutine (Kafka's single controller-event thread, KAFKA-5028);
// other goroutines talk to it through calls.
//
// INVARIANTS: active implies epoch > 0 and chans != nil; while !active the
// view is empty and no sender runs; every ZooKeeper write made while
// active is a Multi led by CheckOp{/controller_epoch, epochZkVersion}.
type controller struct {
	id       int32
	cfg      *Config
	log      *zap.Logger
	faults   *Faults
	stats    *Stats
	client   *protocol.Client
	register func(context.Context, Store) error // (re)creates /brokers/ids/<id>
	onCrash  func()                             // CrashAfterZkWrite fired
	// onSession runs on the loop at start and after each new session, and
	// at each change of /config/changes' children (it re-arms that watch).
	onSession func(context.Context, Store)

	ctx    context.Context // canceled by stop
	cancel context.CancelFunc
	calls  chan func()
	exited chan struct{} // closed when run returns (stop, crash, or a lost session it cannot replace)
	wg     sync.WaitGroup

	storeMu sync.Mutex
	store   Store // written by the loop only, read elsewhere under storeMu

	// Published for other goroutines (handlers, tests).
	activeID    atomic.Int32 // broker id in /controller as last read, -1 none
	activeEpoch atomic.Int32 // our epoch while active, else 0
	crashed     atomic.Bool

	// Loop-owned state.
	active         bool
	epoch          int32
	epochZkVersion int32
	view           ClusterView
	chans          *channelManager
}

func newController(id int32, cfg *Config, st Store, client *protocol.Client, faults *Faults, stats *Stats,
	register func(context.Context, Store) error, onCrash func()) *controller {
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{id: id, cfg: cfg, log: cfg.Logger.Named("controller"), faults: faults, stats: stats,
		client: client, register: register, onCrash: onCrash, ctx: ctx, cancel: cancel,
		calls: make(chan func()), exited: make(chan struct{}), store: st}
	c.activeID.Store(-1)
	return c
}

func (c *controller) start() { c.wg.Go(c.run) }

// stop resigns (dropping queued pushes) and ends the loop; the store is the
// caller's to close.
func (c *controller) stop() {
	c.cancel()
	c.wg.Wait()
}

func (c *controller) currentStore() Store {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	return c.store
}

// call runs fn on the loop and waits; ErrClosed if the loop is gone.
func (c *controller) call(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case c.calls <- func() { fn(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.exited:
		return ErrClosed
	}
	select {
	case <-done:
		return nil
	case <-c.exited:
		return ErrClosed
	}
}

func (c *controller) run() {
	defer close(c.exited)
	defer c.resign()
	c.sessionStarted()
	c.elect()
	for {
		events := c.store.Events()
		select {
		case ev, ok := <-events:
			if !ok {
				ev = Event{Type: SessionExpired} // the store was closed under us
			}
			if !c.handleZk(ev) {
				return
			}
		case fn := <-c.calls:
			fn()
		case <-c.ctx.Done():
			return
		}
		if c.crashed.Load() {
			return
		}
	}
}

// handleZk dispatches one watch event; false ends the loop.
func (c *controller) handleZk(ev Event) bool {
	switch {
	case ev.Type == SessionExpired:
		return c.expire()
	case ev.Path == ControllerPath:
		// Reelect and ControllerChange both start from a fresh read: the
		// event may be stale (e.g. our own delete of /controller after we
		// already won again), so only current state decides.
		c.maybeResign()
		return true
	case ev.Path == ConfigChangesPath:
		c.sessionStarted()
		return true
	case !c.active:
		return true
	case ev.Path == BrokerIDsPath:
		c.guard(c.processBrokerChange())
	case ev.Path == BrokerTopicsPath:
		c.guard(c.processTopicChange())
	case ev.Path == DeleteTopicsPath:
		c.guard(c.processTopicDeletion())
	case isChildOf(ev.Path, BrokerTopicsPath) && ev.Type == NodeDataChanged:
		c.guard(c.processPartitionModification(ev.Path[len(BrokerTopicsPath)+1:]))
	case isChildOf(ev.Path, BrokerIDsPath):
		c.guard(c.processBrokerModification(ev.Path))
	}
	return true
}

// sessionStarted runs onSession with the current session.
func (c *controller) sessionStarted() {
	if c.onSession != nil {
		c.onSession(c.ctx, c.store)
	}
}

// guard turns an error from a controller operation into Kafka's reaction:
// a fenced write (ControllerMovedException) resigns; anything else is
// logged and the controller carries on, as the event thread does.
func (c *controller) guard(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrControllerMoved):
		c.log.Info("controller moved; resigning", zap.Error(err))
		c.resign()
		c.releaseControllerZnode()
		c.maybeResign()
	case errors.Is(err, ErrCrashed):
	default:
		c.log.Warn("controller event failed", zap.Error(err))
	}
}

// releaseControllerZnode deletes /controller if our session still owns
// it after we were fenced (someone moved /controller_epoch without taking
// /controller), so that a fresh election can settle who leads; otherwise
// nobody would be active. Kafka reaches the same state through
// triggerControllerMove.
func (c *controller) releaseControllerZnode() {
	st, ok, err := c.store.Exists(c.ctx, ControllerPath, false)
	if err != nil || !ok || st.EphemeralOwner != c.store.SessionID() {
		return
	}
	if err := c.store.Delete(c.ctx, ControllerPath, -1); err != nil {
		c.log.Warn("releasing /controller failed", zap.Error(err))
	}
}

func (c *controller) rearm(p string) {
	if _, _, err := c.store.Exists(c.ctx, p, true); err != nil {
		c.log.Debug("re-arm watch failed", zap.String("path", p), zap.Error(err))
	}
}

// expire handles a lost session (Kafka's Expire then
// RegisterBrokerAndReelect): resign, open a new session, re-register the
// broker (a new czxid, so a new broker epoch), and run for controller.
func (c *controller) expire() bool {
	c.resign()
	c.activeID.Store(-1)
	if c.cfg.Dial == nil {
		return false
	}
	for c.ctx.Err() == nil {
		st, err := c.cfg.Dial(c.ctx)
		if err == nil {
			if err = c.register(c.ctx, st); err == nil {
				old := c.store
				c.storeMu.Lock()
				c.store = st
				c.storeMu.Unlock()
				old.Close()
				c.sessionStarted()
				c.elect()
				return true
			}
			st.Close()
		}
		c.log.Warn("re-registration after session loss failed; retrying", zap.Error(err))
		t := time.NewTimer(c.cfg.retryBackoff())
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
	return false
}

// onPushResponse runs on a sender goroutine: it only logs, as Kafka's
// callbacks only enqueue an event whose handling is logging for these keys.
func (c *controller) onPushResponse(target int32, req kmsg.Request, resp kmsg.Response) {
	code := int16(0)
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		code = r.ErrorCode
	case *kmsg.UpdateMetadataResponse:
		code = r.ErrorCode
	case *kmsg.StopReplicaResponse:
		code = r.ErrorCode
	}
	if code != 0 {
		c.stats.observeRejected(code)
		c.log.Info("broker rejected push", zap.Int32("target", target), zap.Int16("key", req.Key()), zap.Int16("error", code))
	}
}
