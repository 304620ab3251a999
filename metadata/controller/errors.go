package controller

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Start after Close, and by handlers whose
	// controller was closed while they waited.
	ErrClosed = errors.New("controller: closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("controller: already started")
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("controller: invalid config")
	// ErrOffsetMismatch means the quorum appended a batch somewhere other
	// than where the controller expected: some other writer is appending,
	// so the controller resigns rather than hand out wrong broker epochs.
	ErrOffsetMismatch = errors.New("controller: appended offset mismatch")
	// ErrReplay means a committed record could not be applied; the log is
	// unusable past it and the controller stops acting on it.
	ErrReplay = errors.New("controller: replay failed")
	// ErrTransactionState is a transaction marker out of order (an End or
	// Abort without Begin, or a nested Begin).
	ErrTransactionState = errors.New("controller: transaction marker out of order")
)

// ReplayError says which committed record could not be applied. It wraps
// ErrReplay and the cause.
type ReplayError struct {
	// Offset is the record's offset in the metadata log.
	Offset int64
	// Record is the record as kafka-dump-log prints it (SCRAM key material
	// redacted), or its hex bytes if it could not be decoded.
	Record string
	Err    error
}

func (e *ReplayError) Error() string {
	return fmt.Sprintf("%v: offset %d: %s: %v", ErrReplay, e.Offset, e.Record, e.Err)
}

func (e *ReplayError) Unwrap() []error { return []error{ErrReplay, e.Err} }
