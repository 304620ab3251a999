package legacyzk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Faults are the switches that reproduce the ZooKeeper era's divergence
// cases (zk-era.md section 5). They are safe to flip from any goroutine;
// the app can expose them on an admin endpoint. They act only when the
// broker was started with Config.FaultInjection: otherwise Apply refuses
// every switch and the controller and senders ignore them. The zero value
// injects nothing.
type Faults struct {
	// enabled is Config.FaultInjection; it never changes after NewBroker.
	enabled bool

	// CrashAfterZkWrite: the next time the controller has written a state
	// change to ZooKeeper and is about to push it, it crashes instead:
	// nothing is sent and the node's ZooKeeper session is closed (its
	// /controller and /brokers/ids ephemerals vanish), as a process dying
	// between the write and the push. The switch resets when it fires.
	CrashAfterZkWrite atomic.Bool

	// dropUM holds broker id + 1 of a broker that loses every
	// UpdateMetadata the senders would send it (0 = none).
	dropUM atomic.Int32

	// PauseBeforePush: the next time the controller is about to push, it
	// freezes (event loop and senders) with the requests queued, as a
	// long GC pause would: a zombie. Resume lets it continue with its old
	// epoch. The switch resets when it fires.
	PauseBeforePush atomic.Bool

	// ZkWriteAckLost: the next partition state write of the controller's
	// state machine lands in ZooKeeper but the controller takes it as
	// failed (its answer lost, as with a connection or session lost after
	// the server applied it): its in-memory state keeps the old leader and
	// ISR and it pushes nothing for it. ZkWriteLost is the reverse: the
	// next such write never reaches ZooKeeper but the controller takes it
	// as applied, keeps the new state and pushes it. Either leaves
	// ZooKeeper and the controller's view disagreeing (the seed
	// documents' third divergence case) until a failover re-reads
	// ZooKeeper. One-shot.
	ZkWriteAckLost atomic.Bool
	ZkWriteLost    atomic.Bool

	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed by Resume
}

// DropUpdateMetadataTo makes the senders drop every UpdateMetadata meant
// for broker id; -1 clears it.
func (f *Faults) DropUpdateMetadataTo(id int32) { f.dropUM.Store(id + 1) }

func (f *Faults) dropsUpdateMetadataTo(target int32, req kmsg.Request) bool {
	return f.enabled && f.dropUM.Load() == target+1 && req.Key() == 6
}

// fire reports whether an armed one-shot switch fires now, disarming it.
func (f *Faults) fire(sw *atomic.Bool) bool {
	return f.enabled && sw.CompareAndSwap(true, false)
}

// pause freezes the senders and returns the channel Resume closes.
func (f *Faults) pause() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused == nil {
		f.paused = make(chan struct{})
	}
	return f.paused
}

// Paused reports whether a pause fault is holding the controller.
func (f *Faults) Paused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused != nil
}

// Resume ends a pause.
func (f *Faults) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused != nil {
		close(f.paused)
		f.paused = nil
	}
}

// waitUnpaused blocks while paused; false if ctx ends first.
func (f *Faults) waitUnpaused(ctx context.Context) bool {
	f.mu.Lock()
	ch := f.paused
	f.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// ErrUnknownFault: Faults.Apply got a switch name it does not know.
var ErrUnknownFault = errors.New("legacyzk: unknown fault switch")

// ErrFaultInjectionDisabled: Faults.Apply on a broker started without
// Config.FaultInjection.
var ErrFaultInjectionDisabled = errors.New("legacyzk: fault injection is disabled")

// Apply flips a switch by name, for an admin endpoint or a flag:
//
//	crash-after-zk-write          arm CrashAfterZkWrite
//	drop-update-metadata-to=<id>  drop UpdateMetadata to broker id (-1: stop)
//	pause-before-push             arm PauseBeforePush
//	lose-zk-write-ack             arm ZkWriteAckLost
//	lose-zk-write                 arm ZkWriteLost
//	resume                        end a pause
//	clear                         disarm everything and resume
func (f *Faults) Apply(cmd string) error {
	if !f.enabled {
		return fmt.Errorf("%w (kraftd.fault.injection.enable): %q", ErrFaultInjectionDisabled, cmd)
	}
	name, arg, _ := strings.Cut(cmd, "=")
	switch name {
	case "crash-after-zk-write":
		f.CrashAfterZkWrite.Store(true)
	case "drop-update-metadata-to":
		id, err := strconv.ParseInt(arg, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: %q needs a broker id", ErrUnknownFault, cmd)
		}
		f.DropUpdateMetadataTo(int32(id))
	case "pause-before-push":
		f.PauseBeforePush.Store(true)
	case "lose-zk-write-ack":
		f.ZkWriteAckLost.Store(true)
	case "lose-zk-write":
		f.ZkWriteLost.Store(true)
	case "resume":
		f.Resume()
	case "clear":
		f.CrashAfterZkWrite.Store(false)
		f.PauseBeforePush.Store(false)
		f.ZkWriteAckLost.Store(false)
		f.ZkWriteLost.Store(false)
		f.DropUpdateMetadataTo(-1)
		f.Resume()
	default:
		return fmt.Errorf("%w: %q", ErrUnknownFault, cmd)
	}
	return nil
}
