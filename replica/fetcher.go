package replica

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"go.uber.org/zap"
)

// Follower fetchers, as Kafka's ReplicaFetcherManager / ReplicaFetcherThread:
// num.replica.fetchers goroutines per leader broker this broker follows
// partitions of (a partition goes to fetcher fetcherID(tp), Kafka's
// getFetcherId), each sending one Fetch at a time for its partitions
// (long-polled by the leader) and appending the answers. A partition's fetch
// position is its log end and its last fetched epoch the log's latest epoch,
// read when the partition's fetch state may have changed. A fetcher left
// without partitions (its leader is no longer followed) stops, as Kafka's
// shutdownIdleFetcherThreads.
//
// Incremental rounds (issue 17): with an IncrementalFetchTransport a round
// costs O(partitions whose fetch state changed), not O(partitions
// followed), as the transport's fetch session sends only those (KIP-227).
// A partition's fetch state (offset, log start, last fetched epoch, leader
// epoch) changes only through:
//   - the fetcher's own work on an answer: append, truncation on a
//     DivergingEpoch, out-of-range repair, the leader's log start taken
//     (handle marks every partition it applied an answer to);
//   - put and drop (a new or replaced entry is changed, a dropped one
//     forgotten);
//   - a backoff starting (forgotten, as before: a backing-off partition is
//     not asked) or ending (changed);
//   - the follower's log start moving locally: retention
//     (Partition.deleteOldSegments calls fetchStateMoved).
// Nothing else moves a followed log: AppendAsLeader, transaction markers,
// DeleteRecords and the leader epoch's start (AssignEpochStartOffset) act
// only while leading (checked under the partition's mu), and a partition
// that leads is dropped from its fetcher (a later follower role puts a new
// entry); a checkpointed log start is set when the log opens, before it is
// followed; compaction moves no log start, end or epoch.
// Nothing scans all partitions per round: backoffs wait in a min-heap by
// their end, and only a full request (a session starting or starting
// over, or a transport without sessions) reads every partition.
//
// Backoff: a partition backs off replica.fetch.backoff.ms after an error from
// a leader it has fetched from at this leader epoch. A partition that has
// just learned of its leader from the metadata fetches at once, and while the
// leader has not answered it successfully yet, the errors that mean "the
// leader has not applied that metadata yet" (UNKNOWN_LEADER_EPOCH,
// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION) are retried after
// catchUpRetryMs, doubling up to the backoff: the leader reads the same
// metadata log and is usually a few milliseconds behind, and a full backoff
// there held the high watermark (and every acks=-1 produce) for a second
// after each leader change. Nor does a new partition wait behind a fetch the
// leader holds (put interrupts it; the next fetch goes out on a new
// connection). A fetch out of range asks the leader's log end and start
// (ListOffsets) and repairs the log (Partition.HandleOutOfRange).

// catchUpRetryMs is the first retry of a partition whose new leader has not
// caught up with the metadata naming it; it doubles up to
// replica.fetch.backoff.ms.
const catchUpRetryMs = 5

// fetchEntry is one partition a fetcher fetches: one per followed replica,
// its fields ordered to fit 72 bytes (the 80-byte size class; in the order
// they came it was 88, in 96).
//
// INVARIANTS: heapIdx >= 0 exactly while the entry backs off (it is then
// f.delayed[heapIdx] and not dirty); dirty entries are in f.dirty; asked
// and fetchOffset are the fetcher goroutine's alone.
type fetchEntry struct {
	p       *Partition
	f       *fetcher // the fetcher holding it; set by put
	topicID [16]byte
	// delayUntilMs is the end of a backoff; established is set at the first
	// answer without an error from the leader at leaderEpoch; retryMs is the
	// next catch-up retry while not established. Guarded by the fetcher's mu,
	// as are heapIdx (-1: not backing off) and dirty (its fetch state may
	// have changed since it was last read for a request).
	delayUntilMs int64
	retryMs      int64
	heapIdx      int
	// asked says the entry's state was read for a request; fetchOffset is
	// the offset read last (what the leader's session holds for it: an
	// answer appends there). Only the fetcher goroutine uses them.
	fetchOffset int64
	leaderEpoch int32
	established bool
	dirty       bool
	asked       bool
}

// fetcherKey names a fetcher: its leader and its index among the
// num.replica.fetchers fetchers of that leader.
type fetcherKey struct {
	leader int32
	id     int
}

// fetcher fetches from one leader.
//
// INVARIANTS: parts holds only partitions whose metadata names leader as the
// leader; an entry is replaced (never mutated but for its backoff and dirty
// fields) when the leader epoch changes, so an answer to a request built
// from an old entry is recognised and dropped. ready counts the entries of
// parts not backing off; delayed is a min-heap by delayUntilMs of those
// backing off. Every entry of parts whose fetch state differs from what the
// fetcher last handed the transport for it is dirty (or not ready), and
// every partition handed over and since dropped or backing off is in
// forgotten. A fetcher with no parts is removed from its set and its
// goroutine stopped (cancel); done is closed when the goroutine has
// returned.
type fetcher struct {
	key    fetcherKey
	connID int64 // FetchRequest.ConnID: unique in the set
	leader int32
	set    *fetcherSet
	cancel context.CancelFunc // nil until the goroutine starts
	done   chan struct{}

	mu        sync.Mutex
	parts     map[TopicPartition]*fetchEntry
	ready     int
	delayed   delayHeap
	dirty     []*fetchEntry // may hold entries no longer dirty or current: skipped
	forgotten map[TopicPartition]struct{}
	wake      chan struct{} // capacity 1: "parts changed"
	// inflight cancels the fetch being sent (nil when none); interrupted
	// says put canceled it; reconnect makes the next fetch ask for a new
	// connection.
	inflight    context.CancelFunc
	interrupted bool
	reconnect   bool
	// opening is FetchRequest.Opening of the fetch in flight: put does
	// not interrupt a fetch that opens a session.
	opening atomic.Bool
	// visits counts the entries a round looked at (read or scanned), for
	// the tests that an idle round costs O(1).
	visits atomic.Int64
}

// delayHeap orders backing-off entries by the end of their backoff
// (container/heap); each entry knows its index.
type delayHeap []*fetchEntry

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].delayUntilMs < h[j].delayUntilMs }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *delayHeap) Push(x any) {
	e := x.(*fetchEntry)
	e.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *delayHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heapIdx = -1
	return e
}

// fetcherSet owns the fetchers of a manager.
//
// INVARIANTS: a partition is in at most one fetcher (assigned says which);
// every fetcher in byKey has at least one partition; fetcher goroutines run
// only between start and stop.
type fetcherSet struct {
	m *Manager

	mu       sync.Mutex
	repl     *Replication
	byKey    map[fetcherKey]*fetcher
	assigned map[TopicPartition]fetcherKey
	conns    int64 // the last fetcher's connID
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func newFetcherSet(m *Manager) *fetcherSet {
	return &fetcherSet{m: m, byKey: map[fetcherKey]*fetcher{}, assigned: map[TopicPartition]fetcherKey{}}
}

// fetcherID is Kafka's AbstractFetcherManager.getFetcherId: the partition's
// fetcher among n, from the Java hash code of its topic name.
func fetcherID(tp TopicPartition, n int) int {
	if n <= 1 {
		return 0
	}
	var h int32
	for _, c := range utf16.Encode([]rune(tp.Topic)) {
		h = 31*h + int32(c)
	}
	v := 31*h + tp.Partition
	if v == math.MinInt32 { // Kafka's Utils.abs
		v = 0
	} else if v < 0 {
		v = -v
	}
	return int(v) % n
}

// add makes st.Leader's fetcher fetch p at st.LeaderEpoch (moving it from
// another leader's fetcher, which stops if it has nothing left).
func (s *fetcherSet) add(p *Partition, st PartitionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fetcherKey{leader: st.Leader, id: fetcherID(st.TopicPartition, s.m.cfg.Fetch.NumFetchers)}
	if old, ok := s.assigned[st.TopicPartition]; ok && old != key {
		s.dropLocked(old, st.TopicPartition)
	}
	f := s.byKey[key]
	if f == nil {
		s.conns++
		f = &fetcher{key: key, connID: s.conns, leader: st.Leader, set: s, parts: map[TopicPartition]*fetchEntry{},
			forgotten: map[TopicPartition]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
		s.byKey[key] = f
		s.startLocked(f)
	}
	s.assigned[st.TopicPartition] = key
	f.put(&fetchEntry{p: p, leaderEpoch: st.LeaderEpoch, topicID: st.TopicID, heapIdx: -1})
}

// remove stops fetching tp.
func (s *fetcherSet) remove(tp TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.assigned[tp]; ok {
		s.dropLocked(old, tp)
		delete(s.assigned, tp)
	}
}

// dropLocked takes tp from fetcher key and stops the fetcher when it has no
// partition left; mu held.
func (s *fetcherSet) dropLocked(key fetcherKey, tp TopicPartition) {
	f := s.byKey[key]
	if f.drop(tp) > 0 {
		return
	}
	delete(s.byKey, key)
	if f.cancel != nil {
		f.cancel()
		if c, ok := s.repl.Fetch.(FetcherConnCloser); ok {
			c.CloseFetcher(f.connID)
		}
	}
}

// startLocked starts f's goroutine when replication runs; mu held.
func (s *fetcherSet) startLocked(f *fetcher) {
	if s.ctx == nil || s.ctx.Err() != nil || f.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	f.cancel = cancel
	repl := s.repl
	s.wg.Go(func() {
		defer close(f.done)
		f.run(ctx, repl)
	})
}

// fetcherFor is the running fetcher of key, if any (tests).
func (s *fetcherSet) fetcherFor(key fetcherKey) *fetcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

func (s *fetcherSet) start(r Replication) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil {
		return
	}
	s.repl = &r
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, f := range s.byKey {
		s.startLocked(f)
	}
}

// stop cancels the fetchers (under mu, so add starts no goroutine after it)
// and waits for them; they cannot be started again.
func (s *fetcherSet) stop() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	} else {
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// put adds or replaces e's partition, ready and changed. A new entry
// interrupts a fetch in flight: the leader may hold that fetch for
// replica.fetch.wait.max.ms when none of its partitions has data, and the
// new partition (a leader change: acks=-1 produces wait for it) must not
// wait behind it.
//
// The partition points at e (fetchStateMoved) before e is in parts, both
// under mu: a log start moved before the pointer is read by e's first
// request, one moved after finds e in parts and marks it.
func (f *fetcher) put(e *fetchEntry) {
	f.mu.Lock()
	if old := f.parts[e.p.tp]; old == nil || old.p != e.p || old.leaderEpoch != e.leaderEpoch {
		e.f, e.heapIdx = f, -1
		if old != nil {
			f.unreadyLocked(old)
			old.p.fetching.CompareAndSwap(old, nil)
		}
		e.p.fetching.Store(e)
		f.parts[e.p.tp] = e
		f.ready++
		f.markDirtyLocked(e)
		if f.inflight != nil && !f.opening.Load() {
			f.inflight()
			f.inflight, f.interrupted = nil, true
		}
	}
	f.mu.Unlock()
	f.poke()
}

// send sends req to the leader, interruptible by put. It reports whether
// put interrupted it; the next request then asks for a new connection
// (FetchRequest.Reconnect), since the leader may still hold the abandoned
// one and a connection serves one request at a time.
func (f *fetcher) send(ctx context.Context, r *Replication, req *FetchRequest) ([]FetchedPartition, bool, error) {
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.mu.Lock()
	f.inflight = cancel
	f.opening.Store(false)
	req.Opening = &f.opening
	req.Reconnect, f.reconnect = f.reconnect, false
	f.mu.Unlock()
	answers, err := r.Fetch.Fetch(reqCtx, f.leader, req)
	f.mu.Lock()
	interrupted := f.interrupted && err != nil
	f.inflight, f.interrupted = nil, false
	f.reconnect = f.reconnect || interrupted
	f.mu.Unlock()
	return answers, interrupted, err
}

// drop removes tp (forgotten by the next request) and returns how many
// partitions are left.
func (f *fetcher) drop(tp TopicPartition) int {
	f.mu.Lock()
	if e := f.parts[tp]; e != nil {
		f.unreadyLocked(e)
		delete(f.parts, tp)
		e.p.fetching.CompareAndSwap(e, nil)
	}
	n := len(f.parts)
	f.mu.Unlock()
	f.poke()
	return n
}

// unreadyLocked takes e out of the ready count or the backoff heap, and
// makes the next request forget its partition; mu held.
func (f *fetcher) unreadyLocked(e *fetchEntry) {
	if e.heapIdx >= 0 {
		heap.Remove(&f.delayed, e.heapIdx)
	} else {
		f.ready--
	}
	e.dirty = false
	f.forgotten[e.p.tp] = struct{}{}
}

// markDirtyLocked records that e's fetch state may have changed; a
// backing-off entry is marked when its backoff ends; mu held.
func (f *fetcher) markDirtyLocked(e *fetchEntry) {
	if e.heapIdx >= 0 || e.dirty {
		return
	}
	e.dirty = true
	f.dirty = append(f.dirty, e)
	delete(f.forgotten, e.p.tp)
}

// markDirty is markDirtyLocked for e if it is still its partition's entry.
func (f *fetcher) markDirty(e *fetchEntry) {
	f.mu.Lock()
	if f.parts[e.p.tp] == e {
		f.markDirtyLocked(e)
	}
	f.mu.Unlock()
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run is the fetcher goroutine.
func (f *fetcher) run(ctx context.Context, r *Replication) {
	log := f.set.m.log.With(zap.Int32("leader", f.leader), zap.Int("fetcher", f.key.id))
	cfg := f.set.m.cfg.Fetch
	_, incremental := r.Fetch.(IncrementalFetchTransport)
	for ctx.Err() == nil {
		if waitMs, ready := f.expire(); !ready {
			f.idle(ctx, waitMs)
			continue
		}
		req := f.request(incremental, r.BrokerEpoch(), cfg)
		answers, interrupted, err := f.send(ctx, r, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if interrupted {
				continue // with the new partition, at once
			}
			log.Debug("fetch from leader failed", zap.Error(err))
			f.delayAll(cfg.BackoffMs)
			continue
		}
		f.handle(ctx, r, answers, log)
	}
}

// expire ends the backoffs due (those entries are ready and changed) and
// reports whether an entry is ready, else how long until the next backoff
// ends (-1: none backs off).
func (f *fetcher) expire() (int64, bool) {
	nowMs := f.set.m.hooks.nowMs()
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.delayed) > 0 && f.delayed[0].delayUntilMs <= nowMs {
		e := heap.Pop(&f.delayed).(*fetchEntry)
		f.ready++
		f.markDirtyLocked(e)
	}
	if f.ready > 0 {
		return 0, true
	}
	if len(f.delayed) == 0 {
		return -1, false
	}
	return f.delayed[0].delayUntilMs - nowMs, false
}

// idle waits for a partition change, a backoff's end or ctx.
func (f *fetcher) idle(ctx context.Context, waitMs int64) {
	var timeout <-chan time.Time
	if waitMs >= 0 {
		t := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
	case <-f.wake:
	case <-timeout:
	}
}

// delayLocked backs e off until untilMs; the next request forgets it; mu
// held.
func (f *fetcher) delayLocked(e *fetchEntry, untilMs int64) {
	if e.heapIdx >= 0 {
		return
	}
	f.unreadyLocked(e)
	e.delayUntilMs = untilMs
	heap.Push(&f.delayed, e)
}

// delayAll backs every ready entry off for backoffMs, after a failed send
// (the transport starts over with a full request).
func (f *fetcher) delayAll(backoffMs int64) {
	until := f.set.m.hooks.nowMs() + backoffMs
	f.mu.Lock()
	for _, e := range f.parts {
		f.delayLocked(e, until)
	}
	f.visits.Add(int64(len(f.parts)))
	f.mu.Unlock()
}

// failed backs e off after the leader answered it with err: the full backoff
// once the leader has served it at this leader epoch, else (the leader may
// not have applied the metadata naming it yet) the next catch-up retry.
func (f *fetcher) failed(e *fetchEntry, err error, backoffMs int64) {
	nowMs := f.set.m.hooks.nowMs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parts[e.p.tp] != e {
		return
	}
	if e.established || !leaderBehind(err) {
		f.delayLocked(e, nowMs+backoffMs)
		return
	}
	e.retryMs = min(max(e.retryMs*2, catchUpRetryMs), backoffMs)
	f.delayLocked(e, nowMs+e.retryMs)
}

// served records the leader's first good answer for e.
func (f *fetcher) served(e *fetchEntry) {
	f.mu.Lock()
	e.established, e.retryMs = true, 0
	f.mu.Unlock()
}

// leaderBehind reports whether a leader's partition error means it has not
// caught up with the metadata that named it leader at our leader epoch.
func leaderBehind(err error) bool {
	return errors.Is(err, ErrUnknownLeaderEpoch) || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnknownPartition)
}

// request is the next Fetch: with an incremental transport the partitions
// whose fetch state changed and those forgotten since the previous one
// (Full at hand), else every ready partition.
func (f *fetcher) request(incremental bool, brokerEpoch int64, cfg FetchConfig) *FetchRequest {
	req := &FetchRequest{ReplicaID: f.set.m.cfg.BrokerID, BrokerEpoch: brokerEpoch, ConnID: f.connID,
		MaxWaitMs: cfg.MaxWaitMs, MinBytes: cfg.MinBytes, MaxBytes: cfg.MaxBytes}
	if !incremental {
		req.Partitions = f.full(cfg)
		return req
	}
	req.Incremental = true
	req.Full = func() []FetchPartition { return f.full(cfg) }
	f.mu.Lock()
	changed := make([]*fetchEntry, 0, len(f.dirty))
	for _, e := range f.dirty {
		// An entry no longer dirty was forgotten, or already taken from
		// an earlier place in the list; one no longer current was dropped.
		if e.dirty && f.parts[e.p.tp] == e {
			e.dirty = false
			changed = append(changed, e)
		}
	}
	clear(f.dirty)
	f.dirty = f.dirty[:0]
	for tp := range f.forgotten {
		req.Forgotten = append(req.Forgotten, tp)
	}
	clear(f.forgotten)
	f.mu.Unlock()
	// Read after the marks are cleared: a change from now on marks the
	// entry again, for the next request.
	req.Partitions = make([]FetchPartition, len(changed))
	for i, e := range changed {
		req.Partitions[i] = f.read(e, cfg)
	}
	return req
}

// full reads every ready partition: the base of the next request's
// changes (none dirty, none forgotten).
func (f *fetcher) full(cfg FetchConfig) []FetchPartition {
	f.mu.Lock()
	entries := make([]*fetchEntry, 0, f.ready)
	for _, e := range f.parts {
		if e.heapIdx < 0 {
			e.dirty = false
			entries = append(entries, e)
		}
	}
	f.visits.Add(int64(len(f.parts)))
	clear(f.dirty)
	f.dirty = f.dirty[:0]
	clear(f.forgotten)
	f.mu.Unlock()
	out := make([]FetchPartition, len(entries))
	for i, e := range entries {
		out[i] = f.read(e, cfg)
	}
	return out
}

// read is e's fetch state now, recorded as what its next answer applies
// to; fetcher goroutine only.
func (f *fetcher) read(e *fetchEntry, cfg FetchConfig) FetchPartition {
	f.visits.Add(1)
	l := e.p.log
	e.asked, e.fetchOffset = true, l.EndOffset()
	return FetchPartition{TopicPartition: e.p.tp, TopicID: e.topicID,
		FetchOffset: e.fetchOffset, LogStartOffset: l.StartOffset(), CurrentLeaderEpoch: e.leaderEpoch,
		LastFetchedEpoch: l.LatestEpoch(), PartitionMaxBytes: cfg.PartitionMaxBytes}
}

// answered is the entry an answer for tp applies to: the current one, if
// a request read it and it does not back off.
func (f *fetcher) answered(tp TopicPartition) *fetchEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.parts[tp]
	if e == nil || e.heapIdx >= 0 || !e.asked {
		return nil
	}
	return e
}

// handle applies the leader's answers, each to the entry it answers (an
// incremental request's answer also names partitions the request did not
// carry: the session holds them), and marks each entry applied to as
// changed: an append, truncation, out-of-range repair or the leader's log
// start may have moved its fetch state.
func (f *fetcher) handle(ctx context.Context, r *Replication, answers []FetchedPartition, log *zap.Logger) {
	backoffMs := f.set.m.cfg.Fetch.BackoffMs
	for _, a := range answers {
		e := f.answered(a.TopicPartition)
		if e == nil {
			continue
		}
		if a.Err == nil {
			f.served(e)
		}
		if err := f.apply(ctx, r, e, e.fetchOffset, a); err != nil {
			if !errors.Is(err, ErrNotLeader) {
				log.Info("fetch of partition failed; backing off", zap.Stringer("partition", e.p.tp), zap.Error(err))
			}
			cause := a.Err // the leader's error, else ours applying its answer
			if cause == nil {
				cause = err
			}
			f.failed(e, cause, backoffMs)
			continue
		}
		f.markDirty(e)
	}
}

// apply handles one partition's answer to a fetch at fetchOffset.
func (f *fetcher) apply(ctx context.Context, r *Replication, e *fetchEntry, fetchOffset int64, a FetchedPartition) error {
	switch {
	case a.Err == nil && a.Diverging != nil:
		return e.p.TruncateOnDivergence(e.leaderEpoch, *a.Diverging)
	case a.Err == nil:
		return e.p.AppendAsFollower(e.leaderEpoch, fetchOffset, a.Records, a.HighWatermark, a.LogStartOffset)
	case errors.Is(a.Err, ErrOffsetOutOfRange):
		return f.outOfRange(ctx, r, e)
	}
	return a.Err
}

// outOfRange asks the leader where its log ends and, when the follower is
// not past that, where it starts (two ListOffsets, as Kafka's
// fetchOffsetAndTruncate), and repairs the follower's log
// (Partition.HandleOutOfRange).
func (f *fetcher) outOfRange(ctx context.Context, r *Replication, e *fetchEntry) error {
	req := ListOffsetRequest{ConnID: f.connID, ReplicaID: f.set.m.cfg.BrokerID, TopicPartition: e.p.tp,
		TopicID: e.topicID, CurrentLeaderEpoch: e.leaderEpoch, Timestamp: LatestTimestamp}
	leaderEnd, err := r.Fetch.ListOffset(ctx, f.leader, req)
	if err != nil {
		return fmt.Errorf("leader's log end offset: %w", err)
	}
	if leaderEnd < e.p.log.EndOffset() {
		return e.p.HandleOutOfRange(e.leaderEpoch, leaderEnd, -1)
	}
	req.Timestamp = EarliestTimestamp
	leaderStart, err := r.Fetch.ListOffset(ctx, f.leader, req)
	if err != nil {
		return fmt.Errorf("leader's log start offset: %w", err)
	}
	return e.p.HandleOutOfRange(e.leaderEpoch, leaderEnd, leaderStart)
}
