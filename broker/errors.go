package broker

import "errors"

// Sentinel errors; returned errors wrap them with detail.
var (
	// ErrInvalidConfig is a Config that cannot run.
	ErrInvalidConfig = errors.New("broker: invalid config")
	// ErrStopped is returned by calls on a stopped broker.
	ErrStopped = errors.New("broker: stopped")
	// ErrRegistrationTimeout means no BrokerRegistration succeeded within
	// initial.broker.registration.timeout.ms.
	ErrRegistrationTimeout = errors.New("broker: initial registration timed out")
	// ErrApply is a committed metadata record the broker cannot apply. The
	// broker stops applying (its image stays at the last good batch) rather
	// than serve metadata that silently skipped a record.
	ErrApply = errors.New("broker: cannot apply metadata")
	// ErrNoController means no controller answered in time.
	ErrNoController = errors.New("broker: no active controller")
)
