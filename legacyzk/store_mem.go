package legacyzk

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemServer is an in-memory ZooKeeper for unit tests only: znodes with data
// versions and czxids, ephemerals tied to sessions, sequential names, and
// one-shot data/exists/child watches delivered per session, with the same
// semantics as the real server for everything the controller uses.
//
// INVARIANTS: every znode but "/" has its parent in nodes; an ephemeral's
// owner is a live session; zxid grows by one per successful write
// transaction (a Multi is one transaction).
type MemServer struct {
	// Now is the server's clock for znode creation times (default
	// time.Now); tests set it before use.
	Now func() time.Time

	mu       sync.Mutex
	nodes    map[string]*memNode
	zxid     int64
	nextSess int64
	sessions map[int64]*MemSession
}

type memNode struct {
	data     []byte
	stat     Stat
	children map[string]struct{}
	seq      int32 // next sequence number for sequential children
}

type watchKind int

const (
	watchData  watchKind = iota // Get and Exists on an existing node
	watchExist                  // Exists on a missing node
	watchChild
)

// NewMemServer returns a server holding only "/".
func NewMemServer() *MemServer {
	return &MemServer{
		Now:      time.Now,
		nodes:    map[string]*memNode{"/": {children: map[string]struct{}{}}},
		sessions: map[int64]*MemSession{},
	}
}

func (s *MemServer) nowMs() int64 { return s.Now().UnixMilli() }

// Connect opens a new session.
func (s *MemServer) Connect() *MemSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSess++
	ms := &MemSession{srv: s, id: s.nextSess, events: newEventQueue(),
		watches: map[watchKind]map[string]bool{watchData: {}, watchExist: {}, watchChild: {}}}
	s.sessions[ms.id] = ms
	return ms
}

// Expire ends session id as a session timeout would: its ephemerals are
// deleted (firing watches of other sessions) and it gets SessionExpired.
func (s *MemServer) Expire(id int64) {
	s.mu.Lock()
	ms := s.sessions[id]
	if ms == nil {
		s.mu.Unlock()
		return
	}
	s.dropSessionLocked(ms)
	s.mu.Unlock()
	ms.events.push(Event{Type: SessionExpired})
}

func (s *MemServer) dropSessionLocked(ms *MemSession) {
	delete(s.sessions, ms.id)
	ms.expired = true
	var eph []string
	for p, n := range s.nodes {
		if n.stat.EphemeralOwner == ms.id {
			eph = append(eph, p)
		}
	}
	if len(eph) > 0 {
		s.zxid++
	}
	for _, p := range eph {
		s.removeLocked(p)
	}
}

// Dump returns every path with its data, sorted, for test assertions.
func (s *MemServer) Dump() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.nodes))
	for p, n := range s.nodes {
		out[p] = string(n.data)
	}
	return out
}

func (s *MemServer) fire(kind watchKind, p string, ev EventType) {
	for _, ms := range s.sessions {
		if ms.watches[kind][p] {
			delete(ms.watches[kind], p)
			ms.events.push(Event{Type: ev, Path: p})
		}
	}
}

func (s *MemServer) removeLocked(p string) {
	delete(s.nodes, p)
	delete(s.nodes[path.Dir(p)].children, path.Base(p))
	s.fire(watchData, p, NodeDeleted)
	s.fire(watchChild, p, NodeDeleted)
	s.fire(watchChild, path.Dir(p), NodeChildrenChanged)
}

// MemSession is one session on a MemServer; it implements Store.
type MemSession struct {
	srv     *MemServer
	id      int64
	events  *eventQueue
	watches map[watchKind]map[string]bool // guarded by srv.mu
	expired bool                          // guarded by srv.mu
	closed  bool                          // guarded by srv.mu
}

var _ Store = (*MemSession)(nil)

func (ms *MemSession) check() error {
	if ms.closed {
		return ErrClosed
	}
	if ms.expired {
		return ErrSessionExpired
	}
	return nil
}

// Sync implements Store: one in-memory server is always in sync.
func (ms *MemSession) Sync(_ context.Context, _ string) error {
	ms.srv.mu.Lock()
	defer ms.srv.mu.Unlock()
	return ms.check()
}

// Get implements Store.
func (ms *MemSession) Get(_ context.Context, p string, watch bool) ([]byte, Stat, error) {
	s := ms.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ms.check(); err != nil {
		return nil, Stat{}, err
	}
	n, ok := s.nodes[p]
	if !ok {
		return nil, Stat{}, fmt.Errorf("get %s: %w", p, ErrNoNode)
	}
	if watch {
		ms.watches[watchData][p] = true
	}
	return slices.Clone(n.data), n.stat, nil
}

// Exists implements Store.
func (ms *MemSession) Exists(_ context.Context, p string, watch bool) (Stat, bool, error) {
	s := ms.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ms.check(); err != nil {
		return Stat{}, false, err
	}
	n, ok := s.nodes[p]
	if watch {
		if ok {
			ms.watches[watchData][p] = true
		} else {
			ms.watches[watchExist][p] = true
		}
	}
	if !ok {
		return Stat{}, false, nil
	}
	return n.stat, true, nil
}

// Children implements Store.
func (ms *MemSession) Children(_ context.Context, p string, watch bool) ([]string, error) {
	s := ms.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ms.check(); err != nil {
		return nil, err
	}
	n, ok := s.nodes[p]
	if !ok {
		return nil, fmt.Errorf("children %s: %w", p, ErrNoNode)
	}
	if watch {
		ms.watches[watchChild][p] = true
	}
	out := make([]string, 0, len(n.children))
	for c := range n.children {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// Create implements Store.
func (ms *MemSession) Create(ctx context.Context, p string, data []byte, mode CreateMode) (string, error) {
	res, err := ms.Multi(ctx, CreateOp{Path: p, Data: data, Mode: mode})
	if err != nil {
		return "", err
	}
	return res[0].Path, nil
}

// Set implements Store.
func (ms *MemSession) Set(ctx context.Context, p string, data []byte, version int32) (Stat, error) {
	res, err := ms.Multi(ctx, SetDataOp{Path: p, Data: data, Version: version})
	if err != nil {
		return Stat{}, err
	}
	return res[0].Stat, nil
}

// Delete implements Store.
func (ms *MemSession) Delete(ctx context.Context, p string, version int32) error {
	_, err := ms.Multi(ctx, DeleteOp{Path: p, Version: version})
	return err
}

// Multi implements Store: ops are validated against a scratch copy of the
// touched znodes first, then applied in one transaction.
func (ms *MemSession) Multi(_ context.Context, ops ...Op) ([]OpResult, error) {
	s := ms.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ms.check(); err != nil {
		return nil, err
	}
	if err := s.validate(ops); err != nil {
		return nil, err
	}
	s.zxid++
	out := make([]OpResult, len(ops))
	for i, op := range ops {
		out[i] = s.apply(ms, op)
	}
	return out, nil
}

// validate dry-runs ops in order over an overlay of existence and
// versions, so a Multi fails as a whole before anything changes.
func (s *MemServer) validate(ops []Op) error {
	exists := map[string]bool{}
	version := map[string]int32{}
	has := func(p string) bool {
		if v, ok := exists[p]; ok {
			return v
		}
		_, ok := s.nodes[p]
		return ok
	}
	ver := func(p string) int32 {
		if v, ok := version[p]; ok {
			return v
		}
		return s.nodes[p].stat.Version
	}
	for i, op := range ops {
		if err := s.validateOp(op, has, ver, exists, version); err != nil {
			return &MultiError{Index: i, Path: opPath(op), Err: err}
		}
	}
	return nil
}

func (s *MemServer) validateOp(op Op, has func(string) bool, ver func(string) int32,
	exists map[string]bool, version map[string]int32) error {
	{
		switch o := op.(type) {
		case CreateOp:
			parent := path.Dir(o.Path)
			seq := o.Mode == PersistentSequential // sequential names never collide
			switch {
			case !seq && has(o.Path):
				return fmt.Errorf("create %s: %w", o.Path, ErrNodeExists)
			case !has(parent):
				return fmt.Errorf("create %s: %w", o.Path, ErrNoNode)
			case s.nodes[parent] != nil && s.nodes[parent].stat.EphemeralOwner != 0:
				return fmt.Errorf("create %s: %w", o.Path, ErrNoChildrenForEphemerals)
			}
			if !seq {
				exists[o.Path], version[o.Path] = true, 0
			}
		case SetDataOp:
			if err := checkVersion("set", o.Path, o.Version, has, ver); err != nil {
				return err
			}
			version[o.Path] = ver(o.Path) + 1
		case CheckOp:
			if err := checkVersion("check", o.Path, o.Version, has, ver); err != nil {
				return err
			}
		case DeleteOp:
			if err := checkVersion("delete", o.Path, o.Version, has, ver); err != nil {
				return err
			}
			if n := s.nodes[o.Path]; n != nil && len(n.children) > 0 {
				return fmt.Errorf("delete %s: %w", o.Path, ErrNotEmpty)
			}
			exists[o.Path] = false
		}
	}
	return nil
}

func checkVersion(what, p string, want int32, has func(string) bool, ver func(string) int32) error {
	if !has(p) {
		return fmt.Errorf("%s %s: %w", what, p, ErrNoNode)
	}
	if want != -1 && ver(p) != want {
		return fmt.Errorf("%s %s: %w (have %d, want %d)", what, p, ErrBadVersion, ver(p), want)
	}
	return nil
}

func (s *MemServer) apply(ms *MemSession, op Op) OpResult {
	switch o := op.(type) {
	case CreateOp:
		parent := s.nodes[path.Dir(o.Path)]
		p := o.Path
		if o.Mode == PersistentSequential {
			p = fmt.Sprintf("%s%010d", o.Path, parent.seq)
			parent.seq++
		}
		n := &memNode{data: slices.Clone(o.Data), children: map[string]struct{}{}, stat: Stat{Czxid: s.zxid, CtimeMs: s.nowMs()}}
		if o.Mode == Ephemeral {
			n.stat.EphemeralOwner = ms.id
		}
		s.nodes[p] = n
		parent.children[path.Base(p)] = struct{}{}
		s.fire(watchExist, p, NodeCreated)
		s.fire(watchChild, path.Dir(p), NodeChildrenChanged)
		return OpResult{Path: p, Stat: n.stat}
	case SetDataOp:
		n := s.nodes[o.Path]
		n.data = slices.Clone(o.Data)
		n.stat.Version++
		s.fire(watchData, o.Path, NodeDataChanged)
		return OpResult{Stat: n.stat}
	case DeleteOp:
		s.removeLocked(o.Path)
	}
	return OpResult{}
}

// Events implements Store.
func (ms *MemSession) Events() <-chan Event { return ms.events.out }

// SessionID implements Store.
func (ms *MemSession) SessionID() int64 { return ms.id }

// Close ends the session cleanly: its ephemerals go at once.
func (ms *MemSession) Close() error {
	s := ms.srv
	s.mu.Lock()
	if !ms.closed {
		ms.closed = true
		if !ms.expired {
			s.dropSessionLocked(ms)
		}
	}
	s.mu.Unlock()
	ms.events.close()
	return nil
}

// isChildOf reports whether p is a direct child of dir.
func isChildOf(p, dir string) bool {
	return strings.HasPrefix(p, dir+"/") && !strings.Contains(p[len(dir)+1:], "/")
}
