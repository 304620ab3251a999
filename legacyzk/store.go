package legacyzk

import (
	"context"
	"fmt"
	"sync"
)

// Stat is the part of a znode's ZooKeeper stat that Kafka uses.
type Stat struct {
	// Czxid is the zxid of the create; for /brokers/ids/<id> it is the
	// broker epoch (KIP-380).
	Czxid int64
	// Version is the data version: the fencing token of conditional writes
	// (the partition epoch of a state znode, epochZkVersion of
	// /controller_epoch).
	Version int32
	// EphemeralOwner is the owning session id, 0 for persistent znodes.
	EphemeralOwner int64
	// CtimeMs is when the znode was created (the server's clock, epoch ms).
	CtimeMs int64
}

// CreateMode says what kind of znode Create makes.
type CreateMode int32

// Create modes, numerically equal to ZooKeeper's flags.
const (
	Persistent           CreateMode = 0
	Ephemeral            CreateMode = 1
	PersistentSequential CreateMode = 2
)

// EventType is the kind of a store Event.
type EventType int

// Event types. Node events come from one-shot watches armed by a read with
// watch=true; SessionExpired means every ephemeral of the session is gone
// and every watch is lost.
const (
	NodeCreated EventType = iota + 1
	NodeDeleted
	NodeDataChanged
	NodeChildrenChanged
	SessionExpired
)

func (t EventType) String() string {
	switch t {
	case NodeCreated:
		return "NodeCreated"
	case NodeDeleted:
		return "NodeDeleted"
	case NodeDataChanged:
		return "NodeDataChanged"
	case NodeChildrenChanged:
		return "NodeChildrenChanged"
	case SessionExpired:
		return "SessionExpired"
	}
	return "Unknown"
}

// Event is a watch or session notification. As in Kafka's ZooKeeperClient
// the event says only which path changed: handlers re-read current state.
type Event struct {
	Type EventType
	Path string
}

// Op is one operation of a Multi: CreateOp, SetDataOp, DeleteOp or CheckOp.
type Op interface{ isOp() }

// CreateOp creates a znode.
type CreateOp struct {
	Path string
	Data []byte
	Mode CreateMode
}

// SetDataOp writes data if the version matches (-1 = any).
type SetDataOp struct {
	Path    string
	Data    []byte
	Version int32
}

// DeleteOp deletes a znode if the version matches (-1 = any).
type DeleteOp struct {
	Path    string
	Version int32
}

// CheckOp fails the whole Multi unless the znode has this version; the
// controller puts CheckOp{/controller_epoch, epochZkVersion} in front of
// every write (KAFKA-6082).
type CheckOp struct {
	Path    string
	Version int32
}

func (CreateOp) isOp()  {}
func (SetDataOp) isOp() {}
func (DeleteOp) isOp()  {}
func (CheckOp) isOp()   {}

// OpResult is one Multi result: Stat is set for SetDataOp, Path for CreateOp.
type OpResult struct {
	Stat Stat
	Path string
}

// Store is one ZooKeeper session: the operations Kafka's KafkaZkClient
// needs. It is safe for concurrent use, and concurrent calls are pipelined
// on the one session (Kafka's async ZooKeeperClient, KAFKA-5642).
//
// Watches are one-shot and are armed by passing watch=true to a read; the
// resulting Event is delivered on Events(), never on a per-call channel, so
// one goroutine can multiplex every watch (like ZooKeeperClient's single
// watcher). A version argument of -1 matches any version.
type Store interface {
	Get(ctx context.Context, path string, watch bool) ([]byte, Stat, error)
	// Exists returns ok=false and no error for a missing znode; with watch
	// it then fires NodeCreated when the znode appears.
	Exists(ctx context.Context, path string, watch bool) (Stat, bool, error)
	Children(ctx context.Context, path string, watch bool) ([]string, error)
	// Create returns the created path (with the sequence suffix for
	// PersistentSequential).
	Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error)
	Set(ctx context.Context, path string, data []byte, version int32) (Stat, error)
	Delete(ctx context.Context, path string, version int32) error
	// Multi applies every op or none; the error is that of the first
	// failing op.
	Multi(ctx context.Context, ops ...Op) ([]OpResult, error)
	// Sync makes this session's server catch up with the ensemble's
	// leader, so that reads after it see every write committed before it
	// (ZooKeeper's sync; reads alone may lag other sessions' writes).
	Sync(ctx context.Context, path string) error
	// Events delivers watch and session events in order. The channel is
	// closed by Close.
	Events() <-chan Event
	// SessionID identifies the session (the EphemeralOwner of its
	// ephemerals).
	SessionID() int64
	Close() error
}

// eventQueue is an unbounded FIFO in front of an events channel. Store
// implementations push from callbacks that must not block (go-zookeeper's
// event callback runs on its receive loop); one pump goroutine feeds the
// channel.
//
// INVARIANTS: out is closed exactly once, after close(); events pushed
// before close() are still delivered if the consumer keeps reading.
type eventQueue struct {
	mu     sync.Mutex
	buf    []Event
	wake   chan struct{} // 1-buffered: "buf may be non-empty"
	done   chan struct{}
	out    chan Event
	closed bool
	wg     sync.WaitGroup
}

func newEventQueue() *eventQueue {
	q := &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan Event)}
	q.wg.Go(q.pump)
	return q
}

func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	if !q.closed {
		q.buf = append(q.buf, ev)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) pump() {
	defer close(q.out)
	for {
		q.mu.Lock()
		batch := q.buf
		q.buf = nil
		q.mu.Unlock()
		for _, ev := range batch {
			select {
			case q.out <- ev:
			case <-q.done:
				return
			}
		}
		select {
		case <-q.wake:
		case <-q.done:
			return
		}
	}
}

// close stops the pump without waiting for a consumer.
func (q *eventQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	close(q.done)
	q.wg.Wait()
}

// MultiError says which op of a Multi failed; it unwraps to the sentinel
// (ErrBadVersion, ErrNoNode, ...). The controller uses Index to tell a
// failed epoch check (op 0: the controller moved) from a failed write.
type MultiError struct {
	Index int
	Path  string
	Err   error
}

func (e *MultiError) Error() string {
	return fmt.Sprintf("multi op %d on %s: %v", e.Index, e.Path, e.Err)
}

func (e *MultiError) Unwrap() error { return e.Err }
