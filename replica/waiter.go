package replica

import "sync/atomic"

// A Waiter is one long-polling fetch's wake-up, as a watch key of Kafka's
// DelayedOperationPurgatory: registered with every partition the fetch reads
// (Partition.WakeOnChange, WakeOnAppend), it is signalled by the first of
// them to move, so the fetch waits on one channel however many partitions it
// holds (it used to select over one channel per partition).
//
// A partition drops its waiters when it wakes them; an idle partition drops
// stopped ones when its list would grow, so it keeps at most about twice the
// waiters still live on it.
type Waiter struct {
	ch      chan struct{} // capacity 1: "woken"
	stopped atomic.Bool
}

// NewWaiter returns a Waiter not yet woken.
func NewWaiter() *Waiter { return &Waiter{ch: make(chan struct{}, 1)} }

// C receives once the Waiter is woken (a wake before the receive is kept).
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Stop tells the partitions still holding w that nobody waits on it any more.
func (w *Waiter) Stop() { w.stopped.Store(true) }

func (w *Waiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// addWaiter appends w to ws, first sweeping out stopped waiters when ws is
// full, and growing it only when more than half of it is still live: each
// sweep is paid for by the appends since the last, so registering stays
// O(1) amortized.
func addWaiter(ws []*Waiter, w *Waiter) []*Waiter {
	if len(ws) > 0 && len(ws) == cap(ws) {
		live := ws[:0]
		for _, o := range ws {
			if !o.stopped.Load() {
				live = append(live, o)
			}
		}
		clear(ws[len(live):])
		ws = live
		if len(ws) > cap(ws)/2 {
			ws = append(make([]*Waiter, 0, 2*cap(ws)), ws...)
		}
	}
	return append(ws, w)
}

// wakeWaiters wakes every live waiter of ws and returns ws emptied.
func wakeWaiters(ws []*Waiter) []*Waiter {
	for _, w := range ws {
		if !w.stopped.Load() {
			w.wake()
		}
	}
	clear(ws)
	return ws[:0]
}
