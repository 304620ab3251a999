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
// controller listener address. While no leader is known, or after the
// believed leader answered NOT_CONTROLLER, requests go round-robin over
// every configured controller, so a broker still finds the controller when
// its own quorum replica has not heard of a leader yet.
//
// INVARIANTS: leader is -1 or a key of addrs; changed is closed exactly
// when leader changes (then replaced).
type controllerChannel struct {
	client *protocol.Client
	ownCl  bool
	log    *zap.Logger
	addrs  map[int32]string
	ids    []int32 // sorted keys of addrs

	mu      sync.Mutex
	leader  int32
	next    int // round-robin index into ids
	changed chan struct{}

	// versions is the last ApiVersions table of a controller we talked to,
	// used to cap the forwarded APIs we advertise (KIP-590).
	versions atomic.Pointer[map[int16][2]int16]
}

func newControllerChannel(cfg *Config) *controllerChannel {
	c := &controllerChannel{
		client:  cfg.ControllerClient,
		log:     cfg.Logger.Named("controller-channel"),
		addrs:   maps.Clone(cfg.ControllerAddrs),
		ids:     slices.Sorted(maps.Keys(cfg.ControllerAddrs)),
		leader:  -1,
		changed: make(chan struct{}),
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
	id := l.LeaderID
	if _, ok := c.addrs[id]; !ok {
		id = -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == c.leader {
		return
	}
	c.leader = id
	close(c.changed)
	c.changed = make(chan struct{})
}

// target returns the controller to try next and a channel closed when the
// leader changes.
func (c *controllerChannel) target() (int32, string, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.leader
	if id < 0 {
		id = c.ids[c.next%len(c.ids)]
	}
	return id, c.addrs[id], c.changed
}

// notController forgets id as the active controller (it said so, or did
// not answer) and moves the round-robin on.
func (c *controllerChannel) notController(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == id {
		c.leader = -1
	}
	if len(c.ids) > 0 && c.ids[c.next%len(c.ids)] == id {
		c.next++
	}
}

// send sends req to the current target once. The version is the lower of
// req's and the controller's max (so a forwarded request keeps every field
// both sides know); on return req's version is what was sent.
func (c *controllerChannel) send(ctx context.Context, req kmsg.Request) (int32, kmsg.Response, error) {
	id, addr, _ := c.target()
	versions, err := c.client.PeerVersions(ctx, addr)
	if err != nil {
		c.notController(id)
		return id, nil, err
	}
	c.versions.Store(&versions)
	want := req.GetVersion()
	if want < 0 {
		want = req.MaxVersion()
	}
	r, ok := versions[req.Key()]
	if !ok || r[0] > want {
		return id, nil, fmt.Errorf("%w: controller %d does not serve key %d at v%d",
			protocol.ErrUnsupportedVersion, id, req.Key(), want)
	}
	req.SetVersion(min(want, r[1]))
	resp, err := c.client.Request(ctx, addr, req)
	if err != nil {
		c.notController(id)
		return id, nil, err
	}
	return id, resp, nil
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
		id, resp, err := c.send(ctx, req)
		switch {
		case err == nil && !isNotController(resp):
			resp.SetVersion(clientVersion)
			return resp, nil
		case errors.Is(err, protocol.ErrUnsupportedVersion):
			return nil, err
		case err == nil:
			c.notController(id)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_, _, changed := c.target()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
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
