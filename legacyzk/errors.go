package legacyzk

import "errors"

// Store errors. Both Store implementations return exactly these (wrapped
// with context), so callers never see a go-zookeeper error value.
var (
	// ErrNoNode: the znode does not exist.
	ErrNoNode = errors.New("legacyzk: znode does not exist")
	// ErrNodeExists: create of a znode that exists.
	ErrNodeExists = errors.New("legacyzk: znode already exists")
	// ErrBadVersion: a conditional write's expected version did not match.
	ErrBadVersion = errors.New("legacyzk: znode version conflict")
	// ErrNotEmpty: delete of a znode that has children.
	ErrNotEmpty = errors.New("legacyzk: znode has children")
	// ErrNoChildrenForEphemerals: create under an ephemeral znode.
	ErrNoChildrenForEphemerals = errors.New("legacyzk: ephemeral znodes may not have children")
	// ErrSessionExpired: the store's session is gone; its ephemerals are
	// deleted and it must be replaced by a new session.
	ErrSessionExpired = errors.New("legacyzk: session expired")
	// ErrClosed: the store, controller or broker was closed.
	ErrClosed = errors.New("legacyzk: closed")
)

// Controller and broker errors.
var (
	// ErrControllerMoved: this node is not (or no longer) the active
	// controller; Kafka's ControllerMovedException. A controller that sees
	// it on a fenced ZooKeeper write resigns.
	ErrControllerMoved = errors.New("legacyzk: controller moved")
	// ErrBadConfig: a Config field is invalid.
	ErrBadConfig = errors.New("legacyzk: invalid config")
	// ErrBadZnode: znode data that does not parse as Kafka writes it.
	ErrBadZnode = errors.New("legacyzk: malformed znode data")
	// ErrCrashed: the CrashAfterZkWrite fault fired.
	ErrCrashed = errors.New("legacyzk: crashed by fault switch")
)
