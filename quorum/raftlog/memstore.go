package raftlog

import (
	"fmt"
	"slices"
	"sync"
)

// MemStorage is an in-memory Storage for tests and the quorum simulator. It keeps
// two copies of the log: the current one, which Append and TruncateTo change, and
// the durable one, which Sync copies the current one into. Crash throws away the
// difference, the way a machine losing power loses whatever was not fsynced.
//
// The quorum state is durable as soon as SaveQuorumState returns, as with the file
// storage (which fsyncs it).
//
// It is safe for concurrent use, so a simulator may call Crash from another
// goroutine than the one driving the node.
//
// INVARIANTS: cur and durable are each contiguous from start with non-decreasing
// epochs.
type MemStorage struct {
	mu      sync.Mutex
	start   int64
	cur     []Batch
	durable []Batch
	state   QuorumState
	failed  error
	// recovery is the recovery marker (nil: none); durable at once.
	recovery *Recovery
}

var _ Storage = (*MemStorage)(nil)

// NewMemStorage returns an empty storage of a freshly formatted node.
func NewMemStorage() *MemStorage {
	return &MemStorage{state: EmptyQuorumState()}
}

// Load implements Storage.
func (m *MemStorage) Load() (Loaded, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loaded(m.cur), nil
}

func (m *MemStorage) loaded(batches []Batch) Loaded {
	st := m.state
	st.CurrentVoters = slices.Clone(st.CurrentVoters)
	l := Loaded{State: st, Batches: slices.Clone(batches), StartOffset: m.start}
	if m.recovery != nil {
		r := *m.recovery
		l.Recovery = &r
	}
	return l
}

// SetRecovery writes (nil: removes) the recovery marker, as Recover does on disk.
func (m *MemStorage) SetRecovery(r *Recovery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovery = r
}

// ClearRecovery implements RecoveryClearer.
func (m *MemStorage) ClearRecovery() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return m.failed
	}
	m.recovery = nil
	return nil
}

// Append implements Storage with the same checks as FileStorage.
func (m *MemStorage) Append(batches []Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return m.failed
	}
	for _, b := range batches {
		end, lastEpoch := m.endLocked()
		if b.BaseOffset != end {
			return fmt.Errorf("%w: base offset %d, log end offset %d", ErrNonContiguous, b.BaseOffset, end)
		}
		if b.Epoch < lastEpoch {
			return fmt.Errorf("%w: epoch %d after %d", ErrEpochRegression, b.Epoch, lastEpoch)
		}
		m.cur = append(m.cur, b)
	}
	return nil
}

func (m *MemStorage) endLocked() (end int64, lastEpoch int32) {
	if n := len(m.cur); n > 0 {
		return m.cur[n-1].NextOffset(), m.cur[n-1].Epoch
	}
	return m.start, -1
}

// TruncateTo implements Storage: it removes every batch holding an offset at or
// above offset.
func (m *MemStorage) TruncateTo(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return m.failed
	}
	if offset < m.start {
		return fmt.Errorf("%w: truncate to %d, log start %d", ErrBelowLogStart, offset, m.start)
	}
	keep := len(m.cur)
	for keep > 0 && m.cur[keep-1].LastOffset >= offset {
		keep--
	}
	m.cur = m.cur[:keep] // durable is a separate copy, so reusing the array is safe
	return nil
}

// Sync implements Storage: the current log becomes the durable one.
func (m *MemStorage) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return m.failed
	}
	m.durable = slices.Clone(m.cur)
	return nil
}

// PrepareSync implements AsyncSyncer: work makes durable what the log holds now, not
// what is appended while it runs, as an fsync started now would. Between the two the
// owner may only Append, so the log then is a prefix of the log later.
func (m *MemStorage) PrepareSync() (work func() error, finish func(error) error) {
	m.mu.Lock()
	captured := slices.Clone(m.cur)
	m.mu.Unlock()
	work = func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.failed != nil {
			return m.failed
		}
		if len(captured) > len(m.durable) {
			m.durable = captured
		}
		return nil
	}
	return work, func(err error) error { return err }
}

// SaveQuorumState implements Storage; the state is durable at once.
func (m *MemStorage) SaveQuorumState(st QuorumState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return m.failed
	}
	m.state = st
	m.state.CurrentVoters = slices.Clone(st.CurrentVoters)
	return nil
}

// Close implements Storage. A MemStorage stays usable after Close, so a simulated
// node can be restarted on the same storage.
func (m *MemStorage) Close() error { return nil }

// Crash models a power loss: every Append and TruncateTo since the last Sync is
// undone (an unsynced truncation may come back, as on a real disk), and the
// storage is usable again, as after a reboot. It returns what the restarted node
// will Load.
func (m *MemStorage) Crash() Loaded {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = slices.Clone(m.durable)
	m.failed = nil
	return m.loaded(m.cur)
}

// Fail makes every later write return err wrapped in ErrStorageFailed, as a disk
// failure does to a FileStorage, until Crash. It lets tests exercise the node's
// reaction to a failed fsync.
func (m *MemStorage) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = fmt.Errorf("%w: %w", ErrStorageFailed, err)
}

// Durable returns the batches that would survive a crash now.
func (m *MemStorage) Durable() []Batch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.durable)
}
