package quorum

import (
	"context"
	"time"
)

// NodeHost is the world around a Node's step machine: its clock, its network, and the
// threads its slow work runs on. The Node calls it only from its own events. The
// production host (liveHost) is a thin goroutine shell; the seeded simulator is
// another, which delivers every event from one queue, so one seed replays one run.
type NodeHost interface {
	// NowMs is the node's clock in milliseconds; it never goes backwards.
	NowMs() int64
	// Now is the same clock as a time, finer than a millisecond, for measurements
	// only (commit latency, how long a snapshot took).
	Now() time.Time
	// SendRequest sends outbound request m to node `to` at addr ("" when unknown).
	// Exactly one answer comes back through the node's response event: the peer's,
	// or a failure carrying Err once timeoutMs passed without one.
	SendRequest(m Message, to int32, addr string, timeoutMs int64)
	// Reply answers the inbound request whose id (from the request event) is
	// m.RequestID.
	Reply(m Message)
	// StartFlush runs work, a log fsync, off the node's loop; its result comes back
	// as the flush event. At most one flush is in flight.
	StartFlush(work func() error)
	// WaitFlush waits for the flush in flight and returns its result; no flush event
	// is delivered for it then.
	WaitFlush() error
	// StartRecord runs work, the write of the log's durable-end record
	// (raftlog.EndRecorder), off the node's loop, then done with its result as an
	// event on the loop; nothing when the node stopped meanwhile (the storage's Close
	// waits for the write). At most one is in flight; it may overlap a flush.
	StartRecord(work func() error, done func(error))
	// StartSnapshotWrite runs work (encode, write and fsync a snapshot) off the
	// node's loop, then done with its result as an event on the loop; abandoned
	// instead when the node stopped meanwhile. work calls pace after each batch it
	// wrote: a host may slow the writer there, or stop it with an error.
	StartSnapshotWrite(work func(pace func(batchBytes int) error) error, done func(error), abandoned func())
}

// liveHost is the production NodeHost: real time, a protocol client per request, the
// flusher and the snapshot writer on goroutines owned by the Node. Its channels and
// pending are the driver goroutine's (run).
type liveHost struct {
	n         *Node
	start     time.Time
	baseMs    int64
	pending   map[uint64]chan Message // inbound request id -> reply
	flushDone chan error
}

func newLiveHost() *liveHost {
	now := time.Now()
	return &liveHost{start: now, baseMs: now.UnixMilli(), pending: map[uint64]chan Message{}, flushDone: make(chan error, 1)}
}

// NowMs is wall-clock milliseconds that never go backwards within the process: the
// start time plus the monotonic time elapsed since. DescribeQuorum timestamps need wall
// clock; timers need monotonic time.
func (h *liveHost) NowMs() int64 { return h.baseMs + time.Since(h.start).Milliseconds() }

func (h *liveHost) Now() time.Time { return time.Now() }

// SendRequest sends on its own goroutine and posts the answer to the driver.
func (h *liveHost) SendRequest(m Message, to int32, addr string, timeoutMs int64) {
	n := h.n
	n.wg.Go(func() {
		ctx, cancel := context.WithTimeout(n.ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
		resp := n.roundTrip(ctx, addr, to, m)
		n.post(func() { n.onResponse(resp) })
	})
}

// Reply hands the answer to the handler waiting in Step, if it still waits.
func (h *liveHost) Reply(m Message) {
	if ch, ok := h.pending[m.RequestID]; ok {
		delete(h.pending, m.RequestID)
		ch <- m
	}
}

func (h *liveHost) StartFlush(work func() error) { h.n.wg.Go(func() { h.flushDone <- work() }) }

func (h *liveHost) WaitFlush() error { return <-h.flushDone }

// StartRecord runs the record write on its own goroutine, so that it overlaps the
// next flush's fsync instead of delaying it.
func (h *liveHost) StartRecord(work func() error, done func(error)) {
	n := h.n
	n.wg.Go(func() {
		err := work()
		n.post(func() { done(err) })
	})
}

// StartSnapshotWrite runs the writer on its own goroutine. Its pace: while the node
// is committing, encoding runs at about half a core and writes at most
// snapshotBusyBytesPerSec, so the driver and the log's fsyncs keep theirs (commit
// latency must not suffer from a snapshot); an idle node writes at full speed.
func (h *liveHost) StartSnapshotWrite(work func(pace func(int) error) error, done func(error), abandoned func()) {
	n := h.n
	n.wg.Go(func() {
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		batchStart := time.Now()
		pace := func(size int) error {
			if n.ctx.Err() != nil {
				return ErrNodeStopped
			}
			if h.NowMs()-n.busyMs.Load() < snapshotBusyWindow.Milliseconds() {
				wait := time.Since(batchStart)
				wait = max(wait, time.Duration(size)*time.Second/snapshotBusyBytesPerSec-time.Since(batchStart))
				timer.Reset(wait)
				<-timer.C
			}
			batchStart = time.Now()
			return nil
		}
		err := work(pace)
		if !n.post(func() { done(err) }) {
			abandoned()
		}
	})
}

// run is the driver loop: one event at a time, then settle.
func (n *Node) run() {
	defer close(n.done)
	h := n.live
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.settle()
		if n.ctx.Err() != nil {
			if n.flushing != nil {
				n.flushCompleted(<-h.flushDone) // storage closes after this goroutine
			}
			h.failPending()
			n.stopped()
			return
		}
		timer.Reset(max(time.Duration(n.nextDeadlineMs()-n.nowMs())*time.Millisecond, 0))
		select {
		case fn := <-n.events:
			fn()
		case err := <-h.flushDone:
			n.onFlushDone(err)
		case <-timer.C:
			n.onTick()
		case <-n.ctx.Done():
		}
	}
}

// failPending answers every waiting inbound request so no handler hangs on a stopped node.
func (h *liveHost) failPending() {
	for id, ch := range h.pending {
		close(ch)
		delete(h.pending, id)
	}
}
