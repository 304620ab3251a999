package replica

import (
	"sync"
	"sync/atomic"
)

// A Waiter is one long-polling fetch's wake-up, as a watch key of Kafka's
// DelayedOperationPurgatory: registered with every partition the fetch reads
// (Partition.WakeOnChange, WakeOnAppend), it is signalled by the first of
// them to move, so the fetch waits on one channel however many partitions it
// holds (it used to select over one channel per partition).
//
// A registration may carry a key (WakeOnChangeKey, WakeOnAppendKey): the
// Waiter then also records which registrations fired (Woken), so that a
// long-lived Waiter (an incremental fetch session's, which stays registered
// across requests) reads again only the partitions that moved, not every
// partition it watches (issue 17: ~33k per follower session at 100k
// partitions).
//
// A partition drops its waiters when it wakes them; an idle partition drops
// stopped ones when its list would grow, so it keeps at most about twice the
// waiters still live on it.
type Waiter struct {
	ch      chan struct{} // capacity 1: "woken"
	stopped atomic.Bool

	mu    sync.Mutex
	woken []Woken // the keyed registrations fired since the last Woken call
}

// Woken is a keyed registration that fired: its key, and whether it was an
// append registration (WakeOnAppendKey) or a change one (WakeOnChangeKey).
type Woken struct {
	Key    any
	Append bool
}

// waitRef is one registration on a partition.
type waitRef struct {
	w      *Waiter
	key    any // nil: not recorded
	append bool
}

// NewWaiter returns a Waiter not yet woken.
func NewWaiter() *Waiter { return &Waiter{ch: make(chan struct{}, 1)} }

// C receives once the Waiter is woken (a wake before the receive is kept).
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Stop tells the partitions still holding w that nobody waits on it any more.
func (w *Waiter) Stop() { w.stopped.Store(true) }

// Woken returns the keyed registrations that fired since the last call, in
// firing order, and forgets them. Each fired registration is reported once;
// it is gone from its partition, so its owner registers again to keep
// watching.
func (w *Waiter) Woken() []Woken {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.woken
	w.woken = nil
	return out
}

func (w *Waiter) wake(r waitRef) {
	if r.key != nil {
		w.mu.Lock()
		w.woken = append(w.woken, Woken{Key: r.key, Append: r.append})
		w.mu.Unlock()
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// addWaiter appends r to ws, first sweeping out stopped waiters when ws is
// full, and growing it only when more than half of it is still live: each
// sweep is paid for by the appends since the last, so registering stays
// O(1) amortized.
func addWaiter(ws []waitRef, r waitRef) []waitRef {
	if len(ws) > 0 && len(ws) == cap(ws) {
		live := ws[:0]
		for _, o := range ws {
			if !o.w.stopped.Load() {
				live = append(live, o)
			}
		}
		clear(ws[len(live):])
		ws = live
		if len(ws) > cap(ws)/2 {
			ws = append(make([]waitRef, 0, 2*cap(ws)), ws...)
		}
	}
	return append(ws, r)
}

// wakeWaiters wakes every live waiter of ws and returns ws emptied.
func wakeWaiters(ws []waitRef) []waitRef {
	for _, r := range ws {
		if !r.w.stopped.Load() {
			r.w.wake(r)
		}
	}
	clear(ws)
	return ws[:0]
}
