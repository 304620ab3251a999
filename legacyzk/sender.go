package legacyzk

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
)

// sendRetryBackoff is the fixed pause before a failed request is sent
// again (RequestSendThread's 100 ms).
const sendRetryBackoff = 100 * time.Millisecond

// queuedPush is one item of a sender queue.
type queuedPush struct {
	push       Push
	enqueuedAt time.Time
	tracker    *pushTracker // nil unless part of a timed group
}

// sender is Kafka's ControllerBrokerStateInfo + RequestSendThread for one
// target broker: an unbounded FIFO and one goroutine that sends the head
// item, waits for its response (one request in flight), and on any error
// retries the same item after 100 ms, until the sender is closed. Closing
// drops whatever is queued, as Kafka does on broker removal and controller
// resignation.
//
// INVARIANTS: at most one request of this sender is on the wire; items
// leave the queue in FIFO order, only after a response or a drop fault.
type sender struct {
	target int32
	addr   string
	client *protocol.Client
	faults *Faults
	log    *zap.Logger
	stats  *Stats
	onResp func(target int32, req kmsg.Request, resp kmsg.Response)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	mu    sync.Mutex
	queue []queuedPush
	size  atomic.Int64
}

func newSender(target int32, addr string, client *protocol.Client, faults *Faults, stats *Stats,
	log *zap.Logger, onResp func(int32, kmsg.Request, kmsg.Response)) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sender{target: target, addr: addr, client: client, faults: faults, stats: stats, onResp: onResp,
		log: log.With(zap.Int32("target", target)), ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	s.wg.Go(s.run)
	return s
}

func (s *sender) enqueue(p Push, tr *pushTracker) {
	s.mu.Lock()
	s.queue = append(s.queue, queuedPush{push: p, enqueuedAt: time.Now(), tracker: tr})
	s.size.Store(int64(len(s.queue)))
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) head() (queuedPush, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return queuedPush{}, false
	}
	return s.queue[0], true
}

func (s *sender) pop() {
	s.mu.Lock()
	s.queue[0] = queuedPush{}
	s.queue = s.queue[1:]
	s.size.Store(int64(len(s.queue)))
	s.mu.Unlock()
}

func (s *sender) run() {
	for {
		item, ok := s.head()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		if !s.faults.waitUnpaused(s.ctx) {
			return
		}
		if s.faults.dropsUpdateMetadataTo(s.target, item.push.Req) {
			s.log.Info("fault: dropped UpdateMetadata")
			s.pop()
			item.tracker.answered()
			continue
		}
		if !s.sendOne(item) {
			return
		}
	}
}

// sendOne sends item until it gets a response; false when closed.
func (s *sender) sendOne(item queuedPush) bool {
	for {
		resp, err := s.client.Request(s.ctx, s.addr, item.push.Req)
		if err == nil {
			s.stats.observePush(item.push.Req.Key(), time.Since(item.enqueuedAt))
			s.pop()
			item.tracker.answered()
			if s.onResp != nil {
				s.onResp(s.target, item.push.Req, resp)
			}
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
		s.log.Debug("push failed, retrying", zap.Int16("key", item.push.Req.Key()), zap.Error(err))
		t := time.NewTimer(sendRetryBackoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return false
		}
	}
}

// close stops the goroutine and drops the queue.
func (s *sender) close() {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	s.queue = nil
	s.size.Store(0)
	s.mu.Unlock()
}

// channelManager is ControllerChannelManager: one sender per live broker.
// It is owned by the controller event loop; only that goroutine calls its
// methods.
type channelManager struct {
	client   *protocol.Client
	listener string
	faults   *Faults
	stats    *Stats
	log      *zap.Logger
	onResp   func(int32, kmsg.Request, kmsg.Response)
	senders  map[int32]*sender
}

func (m *channelManager) addBroker(b BrokerInfo) {
	if _, ok := m.senders[b.ID]; ok {
		return
	}
	e, ok := b.Endpoint(m.listener)
	if !ok {
		m.log.Warn("broker has no inter-broker listener; not sending to it", zap.Int32("broker", b.ID), zap.String("listener", m.listener))
		return
	}
	addr := joinHostPort(e.Host, e.Port)
	m.senders[b.ID] = newSender(b.ID, addr, m.client, m.faults, m.stats, m.log, m.onResp)
}

func (m *channelManager) removeBroker(id int32) {
	if s, ok := m.senders[id]; ok {
		s.close()
		delete(m.senders, id)
	}
}

// send queues pushes; tr (optional) is told about each answer. A push to a
// broker without a sender counts as answered: nothing will ever send it.
func (m *channelManager) send(pushes []Push, tr *pushTracker) {
	for _, p := range pushes {
		if s, ok := m.senders[p.Broker]; ok {
			s.enqueue(p, tr)
		} else {
			tr.answered()
		}
	}
}

// queueSizes is the per-broker QueueSize metric.
func (m *channelManager) queueSizes() map[int32]int64 {
	out := make(map[int32]int64, len(m.senders))
	for id, s := range m.senders {
		out[id] = s.size.Load()
	}
	return out
}

// drain waits until every sender's queue is empty (or timeout or ctx).
func (m *channelManager) drain(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		empty := true
		for _, s := range m.senders {
			empty = empty && s.size.Load() == 0
		}
		if empty {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (m *channelManager) shutdown() {
	for id := range m.senders {
		m.removeBroker(id)
	}
}
