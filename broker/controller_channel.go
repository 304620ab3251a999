package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// controllerChannel finds the active controller and sends it requests, as
// Kafka's NodeToControllerChannelManager does for a KRaft broker.
//
// The active controller is the quorum leader (KIP-631), reached on its
// controller listener address: the static voter's (controller.quorum.voters)
// or the endpoint the quorum learned from the leader's Fetch answers
// (controller.quorum.bootstrap.servers). While no leader is known, requests go
// round-robin over every configured controller address, so a broker still
// finds the controller when its own quorum replica has not heard of a leader
// yet.
//
// A quorum leader that answers NOT_CONTROLLER (or does not answer) is asked
// again, as Kafka's channel manager resends to the controller its metadata
// names: right after an election the new leader's controller refuses until
// its first commit in the new epoch activates it, a matter of milliseconds,
// and the other controllers are standbys that can only refuse too (one of
// them may be the dead former leader, whose address costs a dial). Only a
// leader that has refused for fallbackAfter (the broker's quorum view may lag
// the election) shares the attempts with the others, in turns.
//
// INVARIANTS: leader is -1 iff leaderAddr is ""; changed is closed exactly
// when leader changes (then replaced); bootstrap is not empty; refusedAt is
// zero while leader is -1.
type controllerChannel struct {
	client    *protocol.Client
	ownCl     bool
	log       *zap.Logger
	addrs     map[int32]string // static voters' addresses by id
	bootstrap []string         // round-robin targets while no leader is known
	// attemptTimeout is how long a forwarded request waits for the controller
	// it went to before the others are asked too (see forwardAttempt).
	attemptTimeout time.Duration

	// fallbackAfter is how long the quorum leader may keep refusing before
	// the other controllers are tried too (attemptTimeout).
	fallbackAfter time.Duration
	now           func() time.Time
	// onBackoff, when set (tests), is told each wait forward makes between
	// two attempts.
	onBackoff func(time.Duration)

	mu         sync.Mutex
	leader     int32
	leaderAddr string
	next       int // round-robin index into bootstrap
	changed    chan struct{}
	// refusedAt is when the quorum leader's current run of refusals began,
	// lastRefusedAt its latest (zero: it has not refused since it became
	// leader or last answered; a refusal more than fallbackAfter plus
	// maxForwardBackoff after the previous one, a heartbeat's, starts a new
	// run); turn counts
	// attempts once the run is older than fallbackAfter: even turns go to the
	// leader, odd ones round-robin over the others.
	refusedAt, lastRefusedAt time.Time
	turn                     int

	// versions is the last ApiVersions table of a controller we talked to,
	// used to cap the forwarded APIs we advertise (KIP-590).
	versions atomic.Pointer[map[int16][2]int16]
}

// ctrlTarget is one controller a request goes to; id is -1 for a bootstrap
// address whose node id is not known.
type ctrlTarget struct {
	id   int32
	addr string
}

func (t ctrlTarget) String() string {
	if t.id < 0 {
		return "controller at " + t.addr
	}
	return fmt.Sprintf("controller %d", t.id)
}

func newControllerChannel(cfg *Config) *controllerChannel {
	c := &controllerChannel{
		client:  cfg.ControllerClient,
		log:     cfg.Logger.Named("controller-channel"),
		addrs:   maps.Clone(cfg.ControllerAddrs),
		leader:  -1,
		changed: make(chan struct{}),
		// A quarter of the controller RPC timeout (500 ms by default): a live
		// controller answers a forwarded request well within it (commit p50
		// is a few ms), and asking the others early costs one NOT_CONTROLLER
		// answer each.
		attemptTimeout: max(time.Millisecond, time.Duration(cfg.ControllerRequestTimeoutMs)*time.Millisecond/4),
		now:            time.Now,
	}
	c.fallbackAfter = c.attemptTimeout
	for _, id := range slices.Sorted(maps.Keys(cfg.ControllerAddrs)) {
		c.bootstrap = append(c.bootstrap, cfg.ControllerAddrs[id])
	}
	if len(c.bootstrap) == 0 {
		c.bootstrap = slices.Clone(cfg.ControllerBootstrapServers)
	}
	if c.client == nil {
		c.client = protocol.NewClient(protocol.ClientConfig{
			ClientID: fmt.Sprintf("broker-%d-to-controller", cfg.NodeID),
			Logger:   cfg.Logger.Named("controller-client"),
		})
		c.ownCl = true
	}
	return c
}

// close closes the client if the channel opened it.
func (c *controllerChannel) close() {
	if c.ownCl {
		_ = c.client.Close()
	}
}

// setLeader records the quorum's leader. Called from the quorum driver
// goroutine: it only takes a short lock.
func (c *controllerChannel) setLeader(l quorum.LeaderAndEpoch) {
	id, addr := l.LeaderID, l.LeaderAddr
	if addr == "" {
		addr = c.addrs[id]
	}
	if id < 0 || addr == "" {
		id, addr = -1, ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == c.leader && addr == c.leaderAddr {
		return
	}
	c.leader, c.leaderAddr = id, addr
	c.refusedAt, c.lastRefusedAt, c.turn = time.Time{}, time.Time{}, 0
	close(c.changed)
	c.changed = make(chan struct{})
}

// target returns the controller to try next and a channel closed when the
// leader changes: the quorum leader, unless it has refused for longer than
// fallbackAfter and it is the others' turn (see controllerChannel).
func (c *controllerChannel) target() (ctrlTarget, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader >= 0 && (c.refusedAt.IsZero() || c.turn%2 == 0) {
		return ctrlTarget{c.leader, c.leaderAddr}, c.changed
	}
	addr := c.bootstrap[c.next%len(c.bootstrap)]
	if addr == c.leaderAddr && len(c.bootstrap) > 1 {
		c.next++
		addr = c.bootstrap[c.next%len(c.bootstrap)]
	}
	return c.idOf(addr), c.changed
}

// idOf names the controller at addr: a static voter's id, or -1.
func (c *controllerChannel) idOf(addr string) ctrlTarget {
	for vid, a := range c.addrs {
		if a == addr {
			return ctrlTarget{vid, addr}
		}
	}
	return ctrlTarget{-1, addr}
}

// notController records that t refused (NOT_CONTROLLER) or did not answer.
// The quorum leader stays the target (see controllerChannel); a refusal from
// another controller moves the round-robin on and gives the leader the next
// turn.
func (c *controllerChannel) notController(t ctrlTarget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.leader >= 0 && c.leaderAddr == t.addr {
		if c.refusedAt.IsZero() || now.Sub(c.lastRefusedAt) >= c.fallbackAfter+maxForwardBackoff {
			c.refusedAt, c.turn = now, 0 // a new run of refusals
		}
		c.lastRefusedAt = now
		if now.Sub(c.refusedAt) >= c.fallbackAfter {
			c.turn++
		}
		return
	}
	if c.bootstrap[c.next%len(c.bootstrap)] == t.addr {
		c.next++
	}
	if !c.refusedAt.IsZero() {
		c.turn++
	}
}

// answered records that t answered a request as the active controller: a
// quorum leader's run of refusals is over.
func (c *controllerChannel) answered(t ctrlTarget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader >= 0 && c.leaderAddr == t.addr {
		c.refusedAt, c.lastRefusedAt, c.turn = time.Time{}, time.Time{}, 0
	}
}

// send sends req to the current target once. The version is the lower of
// req's and the controller's max (so a forwarded request keeps every field
// both sides know); on return req's version is what was sent.
func (c *controllerChannel) send(ctx context.Context, req kmsg.Request) (ctrlTarget, kmsg.Response, error) {
	t, _ := c.target()
	resp, err := c.sendTo(ctx, t, req)
	return t, resp, err
}

// sendTo sends req to t once (see send).
func (c *controllerChannel) sendTo(ctx context.Context, t ctrlTarget, req kmsg.Request) (kmsg.Response, error) {
	versions, err := c.client.PeerVersions(ctx, t.addr)
	if err != nil {
		c.notController(t)
		return nil, err
	}
	c.versions.Store(&versions)
	want := req.GetVersion()
	if want < 0 {
		want = req.MaxVersion()
	}
	r, ok := versions[req.Key()]
	if !ok || r[0] > want {
		return nil, fmt.Errorf("%w: %s does not serve key %d at v%d",
			protocol.ErrUnsupportedVersion, t, req.Key(), want)
	}
	req.SetVersion(min(want, r[1]))
	resp, err := c.client.Request(ctx, t.addr, req)
	if err != nil {
		c.notController(t)
		return nil, err
	}
	return resp, nil
}

// sendUntilLeaderChange is sendTo t, given up as soon as the quorum names
// another leader (changed closes): a controller that stopped answering (a
// paused process, a partition) is replaced by the quorum within its fetch
// timeout, and the request goes to the new one instead of waiting out the
// client's whole timeout on the old one (Kafka's channel manager likewise
// sends a request that failed on one controller again to the next).
func (c *controllerChannel) sendUntilLeaderChange(ctx context.Context, t ctrlTarget, changed <-chan struct{},
	req kmsg.Request) (kmsg.Response, error) {
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (defers run last first): the watcher returns
	defer cancel()
	wg.Go(func() {
		select {
		case <-changed:
			cancel()
		case <-actx.Done():
		}
	})
	return c.sendTo(actx, t, req)
}

// forward sends req to the active controller until it gets an answer that
// is not NOT_CONTROLLER, retrying with backoff within ctx. isNotController
// inspects a response. The response comes back at the version the client
// used. A ctx that ends first gives ctx's error.
func (c *controllerChannel) forward(ctx context.Context, req kmsg.Request,
	isNotController func(kmsg.Response) bool) (kmsg.Response, error) {
	clientVersion := req.GetVersion()
	backoff := 20 * time.Millisecond
	for {
		req.SetVersion(clientVersion)
		t, changed := c.target()
		resp, err := c.forwardAttempt(ctx, t, changed, req, isNotController)
		switch {
		case err == nil && !isNotController(resp):
			c.answered(t)
			resp.SetVersion(clientVersion)
			return resp, nil
		case errors.Is(err, protocol.ErrUnsupportedVersion):
			return nil, err
		case err == nil:
			c.notController(t)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		select {
		case <-changed: // another leader is known (and cut the attempt short): try it at once
			continue
		default:
		}
		wait := backoff
		if err == nil && c.leaderActivating(t) {
			wait = activatingBackoff
		} else {
			backoff = min(2*backoff, maxForwardBackoff)
		}
		if c.onBackoff != nil {
			c.onBackoff(wait)
		}
		_, changed = c.target()
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-changed:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// maxForwardBackoff caps forward's wait between attempts.
const maxForwardBackoff = time.Second

// activatingBackoff is forward's wait after a NOT_CONTROLLER from the quorum
// leader within fallbackAfter of its first refusal: a leader just elected
// refuses only until its first commit in the new epoch activates its
// controller, a few milliseconds (one fsync and fetch round). Kafka's channel
// manager sends such a request again to the controller its metadata names at
// once. The doubling backoff (20, 40, 80, 160 ms) made a CreateTopics
// forwarded during a failover reach the controller up to one step after its
// activation: 137 ms after it in a traced kraftd bench failover (leader
// elected 11.486, active 11.576, the request arrived 11.713).
const activatingBackoff = 2 * time.Millisecond

// leaderActivating reports whether t is the quorum leader and its run of
// refusals is younger than fallbackAfter: it is expected to activate soon.
func (c *controllerChannel) leaderActivating(t ctrlTarget) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader >= 0 && c.leaderAddr == t.addr && !c.refusedAt.IsZero() &&
		c.now().Sub(c.refusedAt) < c.fallbackAfter
}

// forwardAttempt is one attempt of forward: req to t until the quorum names
// another leader (sendUntilLeaderChange). When t has not answered within
// attemptTimeout, the other controllers are asked too, each with a copy of
// req, one at a time with backoff, while t's attempt goes on: the first
// answer that is not NOT_CONTROLLER wins and t's attempt is given up.
//
// This is the per-attempt timeout a paused active controller needs: its
// connection stays up and its quorum replicas learn of the new leader only at
// their fetch timeout, and a broker's own quorum view can lag the election by
// another fetch timeout (its Fetch to the paused leader hangs), so waiting for
// the view alone held a forwarded CreateTopics for seconds after a new
// controller could serve it. Kafka's NodeToControllerChannelManager gives up an
// attempt at controller.socket.timeout.ms (30 s) and sends the request again
// to the controller its metadata names. The attempt to t is not given up here,
// because a live controller that is only slow would then get the request a
// second time (CreateTopics answering TOPIC_ALREADY_EXISTS for a topic its
// first copy created); the copies go only to the other controllers, which
// answer NOT_CONTROLLER unless they lead now.
func (c *controllerChannel) forwardAttempt(ctx context.Context, t ctrlTarget, changed <-chan struct{},
	req kmsg.Request, isNotController func(kmsg.Response) bool) (kmsg.Response, error) {
	others := c.othersThan(t)
	template := cloneRequest(req)
	if len(others) == 0 || template == nil {
		return c.sendUntilLeaderChange(ctx, t, changed, req)
	}
	type result struct {
		resp kmsg.Response
		err  error
	}
	primary := make(chan result, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (defers run last first): req is free again on return
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		resp, err := c.sendUntilLeaderChange(actx, t, changed, req)
		primary <- result{resp, err}
	})
	wait := time.NewTimer(c.attemptTimeout)
	defer wait.Stop()
	backoff := 20 * time.Millisecond
	for i := 0; ; i++ {
		select {
		case r := <-primary:
			return r.resp, r.err
		case <-wait.C:
		}
		o := others[i%len(others)]
		hctx, hcancel := context.WithTimeout(actx, c.attemptTimeout)
		resp, err := c.sendTo(hctx, o, cloneRequest(template))
		hcancel()
		if err == nil && !isNotController(resp) {
			c.log.Info("forwarded request answered by another controller; the one it went to did not answer",
				zap.Int16("key", req.Key()), zap.Stringer("silent", t), zap.Stringer("answered", o),
				zap.Duration("attempt_timeout", c.attemptTimeout))
			return resp, nil
		}
		if errors.Is(err, protocol.ErrUnsupportedVersion) {
			backoff = time.Second // that controller cannot take it; t still may
		}
		wait.Reset(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// othersThan is every configured controller address but t's.
func (c *controllerChannel) othersThan(t ctrlTarget) []ctrlTarget {
	var out []ctrlTarget
	for _, addr := range c.bootstrap {
		if addr == t.addr {
			continue
		}
		out = append(out, c.idOf(addr))
	}
	return out
}

// cloneRequest copies req at its version through its wire form, so a copy
// can go to another controller while req is in flight; nil if req does not
// encode and decode (never for a request that arrived on the wire) or has
// no version yet.
func cloneRequest(req kmsg.Request) kmsg.Request {
	out := kmsg.RequestForKey(req.Key())
	if out == nil || req.GetVersion() < 0 {
		return nil // a version to negotiate (the broker's own requests) has no wire form yet
	}
	out.SetVersion(req.GetVersion())
	if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil
	}
	return out
}

// isNotControllerCode reports whether code is NOT_CONTROLLER.
func isNotControllerCode(code int16) bool { return code == kerr.NotController.Code }

// maxVersion returns the controller's max version of key, or -1 if no
// controller has been contacted (or it does not serve key).
func (c *controllerChannel) maxVersion(key int16) int16 {
	v := c.versions.Load()
	if v == nil {
		return -1
	}
	r, ok := (*v)[key]
	if !ok {
		return -1
	}
	return r[1]
}
