package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// ZkConfig says how to reach ZooKeeper, with Kafka's property names.
type ZkConfig struct {
	// Connect is zookeeper.connect: "host:port[,host:port...][/chroot]".
	Connect string
	// SessionTimeoutMs is zookeeper.session.timeout.ms (Kafka default 18000
	// since 2.5, KIP-537). 0 means the default.
	SessionTimeoutMs int
	// ConnectTimeoutMs bounds the wait for the first connection (Kafka's
	// zookeeper.connection.timeout.ms defaults to the session timeout).
	ConnectTimeoutMs int
	// MaxInFlightRequests is zookeeper.max.in.flight.requests (default
	// 10): how many pipelined reads/writes a batch keeps outstanding.
	MaxInFlightRequests int
	Logger              *zap.Logger
}

// Defaults from Kafka's KafkaConfig.
const (
	DefaultSessionTimeoutMs    = 18000
	DefaultMaxInFlightRequests = 10
)

// Validate fills in defaults and checks the connect string.
func (c *ZkConfig) Validate() error {
	if c.SessionTimeoutMs == 0 {
		c.SessionTimeoutMs = DefaultSessionTimeoutMs
	}
	if c.ConnectTimeoutMs == 0 {
		c.ConnectTimeoutMs = c.SessionTimeoutMs
	}
	if c.MaxInFlightRequests == 0 {
		c.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if _, _, err := ParseConnect(c.Connect); err != nil {
		return err
	}
	if c.SessionTimeoutMs < 0 || c.MaxInFlightRequests < 0 {
		return fmt.Errorf("%w: negative zookeeper timeout or in-flight limit", ErrBadConfig)
	}
	return nil
}

// ParseConnect splits zookeeper.connect into servers and the chroot ("" if
// none). As in Kafka, the chroot follows the last server.
func ParseConnect(s string) (servers []string, chroot string, err error) {
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], strings.TrimSuffix(s[i:], "/")
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("%w: zookeeper.connect %q has no servers", ErrBadConfig, s)
	}
	return servers, chroot, nil
}

// ZkStore is a Store over a real ZooKeeper session (go-zookeeper/zk). A
// chroot is applied to every path. When the session expires it stays
// expired: the owner must Dial a new ZkStore, as Kafka re-creates its
// ZooKeeper client and re-registers (RegisterBrokerAndReelect).
type ZkStore struct {
	conn   *zk.Conn
	chroot string
	events *eventQueue
	log    *zap.Logger
	once   sync.Once
	// sessionTimeout bounds how long an op waits for a dropped connection
	// to come back before it fails (after that the session has expired).
	sessionTimeout time.Duration
	closing        atomic.Bool
	retries        atomic.Int64
}

var _ Store = (*ZkStore)(nil)

// DialZk opens a session and waits until it is connected.
func DialZk(ctx context.Context, cfg ZkConfig) (*ZkStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	servers, chroot, _ := ParseConnect(cfg.Connect)
	s := &ZkStore{chroot: chroot, events: newEventQueue(), log: cfg.Logger.Named("zk"),
		sessionTimeout: time.Duration(cfg.SessionTimeoutMs) * time.Millisecond}
	connected := make(chan struct{}, 1)
	cb := func(ev zk.Event) { s.onEvent(ev, connected) }
	conn, _, err := zk.Connect(servers, time.Duration(cfg.SessionTimeoutMs)*time.Millisecond,
		zk.WithEventCallback(cb), zk.WithLogger(zapPrintf{s.log}), zk.WithLogInfo(false))
	if err != nil {
		s.events.close()
		return nil, fmt.Errorf("legacyzk: connect %s: %w", cfg.Connect, err)
	}
	s.conn = conn
	timer := time.NewTimer(time.Duration(cfg.ConnectTimeoutMs) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-connected:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	case <-timer.C:
		s.Close()
		return nil, fmt.Errorf("legacyzk: connect %s: timed out after %d ms", cfg.Connect, cfg.ConnectTimeoutMs)
	}
	if chroot != "" {
		if err := s.ensureChroot(ctx, chroot); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// onEvent runs on go-zookeeper's receive loop and must not block.
func (s *ZkStore) onEvent(ev zk.Event, connected chan struct{}) {
	switch {
	case ev.Type == zk.EventSession && ev.State == zk.StateHasSession:
		select {
		case connected <- struct{}{}:
		default:
		}
	case ev.Type == zk.EventSession && ev.State == zk.StateExpired:
		s.events.push(Event{Type: SessionExpired})
	case ev.Type == zk.EventNodeCreated:
		s.events.push(Event{Type: NodeCreated, Path: s.unroot(ev.Path)})
	case ev.Type == zk.EventNodeDeleted:
		s.events.push(Event{Type: NodeDeleted, Path: s.unroot(ev.Path)})
	case ev.Type == zk.EventNodeDataChanged:
		s.events.push(Event{Type: NodeDataChanged, Path: s.unroot(ev.Path)})
	case ev.Type == zk.EventNodeChildrenChanged:
		s.events.push(Event{Type: NodeChildrenChanged, Path: s.unroot(ev.Path)})
	}
}

// ensureChroot creates the chroot path (Kafka does this at startup).
func (s *ZkStore) ensureChroot(ctx context.Context, chroot string) error {
	root := s.chroot
	s.chroot = ""
	defer func() { s.chroot = root }()
	return ensurePath(ctx, s, chroot)
}

func (s *ZkStore) root(p string) string {
	if s.chroot == "" {
		return p
	}
	if p == "/" {
		return s.chroot
	}
	return s.chroot + p
}

func (s *ZkStore) unroot(p string) string {
	if s.chroot == "" {
		return p
	}
	if p == s.chroot {
		return "/"
	}
	return strings.TrimPrefix(p, s.chroot)
}

// mapErr turns go-zookeeper errors into this package's sentinels.
func mapErr(op, p string, err error) error {
	var target error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		target = ErrNoNode
	case errors.Is(err, zk.ErrNodeExists):
		target = ErrNodeExists
	case errors.Is(err, zk.ErrBadVersion):
		target = ErrBadVersion
	case errors.Is(err, zk.ErrNotEmpty):
		target = ErrNotEmpty
	case errors.Is(err, zk.ErrNoChildrenForEphemerals):
		target = ErrNoChildrenForEphemerals
	case errors.Is(err, zk.ErrSessionExpired):
		target = ErrSessionExpired
	case errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrConnectionClosed):
		target = ErrClosed
	default:
		return fmt.Errorf("legacyzk: %s %s: %w", op, p, err)
	}
	return fmt.Errorf("%s %s: %w", op, p, target)
}

func statOf(st *zk.Stat) Stat {
	if st == nil {
		return Stat{}
	}
	return Stat{Czxid: st.Czxid, Version: st.Version, EphemeralOwner: st.EphemeralOwner, CtimeMs: st.Ctime}
}

// Get implements Store. ctx is not consulted: go-zookeeper requests are
// bounded by the session, not by contexts.
func (s *ZkStore) Get(ctx context.Context, p string, watch bool) ([]byte, Stat, error) {
	var (
		data []byte
		st   *zk.Stat
		err  error
	)
	err = s.retry(ctx, func() error {
		if watch {
			data, st, _, err = s.conn.GetW(s.root(p))
		} else {
			data, st, err = s.conn.Get(s.root(p))
		}
		return err
	})
	return data, statOf(st), mapErr("get", p, err)
}

// Sync implements Store.
func (s *ZkStore) Sync(ctx context.Context, p string) error {
	err := s.retry(ctx, func() error { _, err := s.conn.Sync(s.root(p)); return err })
	return mapErr("sync", p, err)
}

// Exists implements Store.
func (s *ZkStore) Exists(ctx context.Context, p string, watch bool) (Stat, bool, error) {
	var (
		ok  bool
		st  *zk.Stat
		err error
	)
	err = s.retry(ctx, func() error {
		if watch {
			ok, st, _, err = s.conn.ExistsW(s.root(p))
		} else {
			ok, st, err = s.conn.Exists(s.root(p))
		}
		return err
	})
	return statOf(st), ok, mapErr("exists", p, err)
}

// Children implements Store.
func (s *ZkStore) Children(ctx context.Context, p string, watch bool) ([]string, error) {
	var (
		kids []string
		err  error
	)
	err = s.retry(ctx, func() error {
		if watch {
			kids, _, _, err = s.conn.ChildrenW(s.root(p))
		} else {
			kids, _, err = s.conn.Children(s.root(p))
		}
		return err
	})
	return kids, mapErr("children", p, err)
}

// Create implements Store.
func (s *ZkStore) Create(ctx context.Context, p string, data []byte, mode CreateMode) (string, error) {
	var got string
	err := s.retry(ctx, func() (err error) {
		got, err = s.conn.Create(s.root(p), data, int32(mode), zk.WorldACL(zk.PermAll))
		return err
	})
	return s.unroot(got), mapErr("create", p, err)
}

// Set implements Store.
func (s *ZkStore) Set(ctx context.Context, p string, data []byte, version int32) (Stat, error) {
	var st *zk.Stat
	err := s.retry(ctx, func() (err error) {
		st, err = s.conn.Set(s.root(p), data, version)
		return err
	})
	return statOf(st), mapErr("set", p, err)
}

// Delete implements Store.
func (s *ZkStore) Delete(ctx context.Context, p string, version int32) error {
	return mapErr("delete", p, s.retry(ctx, func() error { return s.conn.Delete(s.root(p), version) }))
}

// Multi implements Store.
func (s *ZkStore) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	zops := make([]any, len(ops))
	for i, op := range ops {
		switch o := op.(type) {
		case CreateOp:
			zops[i] = &zk.CreateRequest{Path: s.root(o.Path), Data: o.Data, Acl: zk.WorldACL(zk.PermAll), Flags: int32(o.Mode)}
		case SetDataOp:
			zops[i] = &zk.SetDataRequest{Path: s.root(o.Path), Data: o.Data, Version: o.Version}
		case DeleteOp:
			zops[i] = &zk.DeleteRequest{Path: s.root(o.Path), Version: o.Version}
		case CheckOp:
			zops[i] = &zk.CheckVersionRequest{Path: s.root(o.Path), Version: o.Version}
		}
	}
	var res []zk.MultiResponse
	err := s.retry(ctx, func() (err error) {
		res, err = s.conn.Multi(zops...)
		return err
	})
	if err != nil {
		return nil, s.multiErr(ops, res, err)
	}
	out := make([]OpResult, len(res))
	for i, r := range res {
		out[i] = OpResult{Stat: statOf(r.Stat), Path: s.unroot(r.String)}
	}
	return out, nil
}

// multiErr names the first op that failed, as Kafka's checks do.
func (s *ZkStore) multiErr(ops []Op, res []zk.MultiResponse, err error) error {
	for i, r := range res {
		if r.Error != nil && i < len(ops) {
			return &MultiError{Index: i, Path: opPath(ops[i]), Err: mapErr("multi", opPath(ops[i]), r.Error)}
		}
	}
	return mapErr("multi", "", err)
}

func opPath(op Op) string {
	switch o := op.(type) {
	case CreateOp:
		return o.Path
	case SetDataOp:
		return o.Path
	case DeleteOp:
		return o.Path
	case CheckOp:
		return o.Path
	}
	return ""
}

// Events implements Store.
func (s *ZkStore) Events() <-chan Event { return s.events.out }

// SessionID implements Store.
func (s *ZkStore) SessionID() int64 { return s.conn.SessionID() }

// retry is Kafka's ZooKeeperClient.retryRequestsUntilConnected: an op
// whose connection dropped while it was in flight (go-zookeeper's
// ErrConnectionClosed; the session itself may well be alive, and the
// client reconnects on its own) is sent again once the session is
// connected, as long as the store is open, ctx lasts and the session
// timeout has not passed since the first failure (after that the session
// has expired, which the SessionExpired event reports). As in Kafka, a
// write that reached ZooKeeper before its connection dropped is sent
// again: a conditional write then fails with BADVERSION and a create with
// NODEEXISTS, which the callers treat as a lost race and re-read.
func (s *ZkStore) retry(ctx context.Context, op func() error) error {
	var deadline time.Time
	for {
		err := op()
		if !errors.Is(err, zk.ErrConnectionClosed) || s.closing.Load() {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.sessionTimeout)
		}
		if !s.waitConnected(ctx, deadline) {
			return err
		}
		s.retries.Add(1)
		s.log.Info("retrying a ZooKeeper request after the connection dropped", zap.Error(err))
	}
}

// waitConnected polls the session state until it is connected again
// (false: closed, ctx done, past deadline or expired).
func (s *ZkStore) waitConnected(ctx context.Context, deadline time.Time) bool {
	tick := time.NewTicker(10 * time.Millisecond) // poll interval of the reconnect wait
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		switch st := s.conn.State(); {
		case s.closing.Load(), st == zk.StateExpired, time.Now().After(deadline):
			return false
		case st == zk.StateHasSession:
			return true
		}
	}
}

// Retries counts ops sent again after their connection dropped.
func (s *ZkStore) Retries() int64 { return s.retries.Load() }

// Close closes the session: ZooKeeper deletes its ephemerals at once.
func (s *ZkStore) Close() error {
	s.closing.Store(true)
	s.once.Do(func() {
		if s.conn != nil {
			s.conn.Close()
		}
		s.events.close()
	})
	return nil
}

// zapPrintf adapts zap to go-zookeeper's Printf logger.
type zapPrintf struct{ l *zap.Logger }

func (z zapPrintf) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...))
}

// ensurePath creates p and its missing ancestors as empty persistent
// znodes, tolerating concurrent creators (Kafka's makeSurePersistentPathExists).
func ensurePath(ctx context.Context, st Store, p string) error {
	if p == "" || p == "/" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		if _, err := st.Create(ctx, cur, nil, Persistent); err != nil && !errors.Is(err, ErrNodeExists) {
			return err
		}
	}
	return nil
}
