package replica

import (
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
// read at every request, so a truncation or a role change needs no
// bookkeeping here beyond the entry. A fetcher left without partitions (its
// leader is no longer followed) stops, as Kafka's shutdownIdleFetcherThreads.
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
// its fields ordered to fit 48 bytes (it was 56, in the 64-byte class).
type fetchEntry struct {
	p       *Partition
	topicID [16]byte
	// delayUntilMs is the end of a backoff; established is set at the first
	// answer without an error from the leader at leaderEpoch; retryMs is the
	// next catch-up retry while not established. Guarded by the fetcher's mu.
	delayUntilMs int64
	retryMs      int64
	leaderEpoch  int32
	established  bool
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
// leader; an entry is replaced (never mutated but for its backoff fields)
// when the leader epoch changes, so an answer to a request built from an old
// entry is recognised and dropped. A fetcher with no parts is removed from
// its set and its goroutine stopped (cancel); done is closed when the
// goroutine has returned.
type fetcher struct {
	key    fetcherKey
	connID int64 // FetchRequest.ConnID: unique in the set
	leader int32
	set    *fetcherSet
	cancel context.CancelFunc // nil until the goroutine starts
	done   chan struct{}

	mu    sync.Mutex
	parts map[TopicPartition]*fetchEntry
	wake  chan struct{} // capacity 1: "parts changed"
	// inflight cancels the fetch being sent (nil when none); interrupted
	// says put canceled it; reconnect makes the next fetch ask for a new
	// connection.
	inflight    context.CancelFunc
	interrupted bool
	reconnect   bool
	// opening is FetchRequest.Opening of the fetch in flight: put does
	// not interrupt a fetch that opens a session.
	opening atomic.Bool
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
			wake: make(chan struct{}, 1), done: make(chan struct{})}
		s.byKey[key] = f
		s.startLocked(f)
	}
	s.assigned[st.TopicPartition] = key
	f.put(&fetchEntry{p: p, leaderEpoch: st.LeaderEpoch, topicID: st.TopicID})
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

// put adds or replaces e's partition. A new entry interrupts a fetch in
// flight: the leader may hold that fetch for replica.fetch.wait.max.ms when
// none of its partitions has data, and the new partition (a leader change:
// acks=-1 produces wait for it) must not wait behind it.
func (f *fetcher) put(e *fetchEntry) {
	f.mu.Lock()
	if old := f.parts[e.p.tp]; old == nil || old.p != e.p || old.leaderEpoch != e.leaderEpoch {
		f.parts[e.p.tp] = e
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

// drop removes tp and returns how many partitions are left.
func (f *fetcher) drop(tp TopicPartition) int {
	f.mu.Lock()
	delete(f.parts, tp)
	n := len(f.parts)
	f.mu.Unlock()
	f.poke()
	return n
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// current reports whether e is still the entry for its partition.
func (f *fetcher) current(e *fetchEntry) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[e.p.tp] == e
}

// run is the fetcher goroutine.
func (f *fetcher) run(ctx context.Context, r *Replication) {
	log := f.set.m.log.With(zap.Int32("leader", f.leader), zap.Int("fetcher", f.key.id))
	cfg := f.set.m.cfg.Fetch
	for ctx.Err() == nil {
		entries, waitMs := f.ready()
		if len(entries) == 0 {
			f.idle(ctx, waitMs)
			continue
		}
		req := f.request(entries, r.BrokerEpoch(), cfg)
		answers, interrupted, err := f.send(ctx, r, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if interrupted {
				continue // with the new partition, at once
			}
			log.Debug("fetch from leader failed", zap.Error(err))
			f.delay(entries, cfg.BackoffMs)
			continue
		}
		f.handle(ctx, r, entries, req, answers, log)
	}
}

// ready returns the entries not backing off, and how long until the next one
// is ready (-1: none waits).
func (f *fetcher) ready() ([]*fetchEntry, int64) {
	nowMs := f.set.m.hooks.nowMs()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fetchEntry
	waitMs := int64(-1)
	for _, e := range f.parts {
		if d := e.delayUntilMs - nowMs; d > 0 {
			if waitMs < 0 || d < waitMs {
				waitMs = d
			}
			continue
		}
		out = append(out, e)
	}
	return out, waitMs
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

// delay backs entries off for backoffMs.
func (f *fetcher) delay(entries []*fetchEntry, backoffMs int64) {
	until := f.set.m.hooks.nowMs() + backoffMs
	f.mu.Lock()
	for _, e := range entries {
		e.delayUntilMs = until
	}
	f.mu.Unlock()
}

// failed backs e off after the leader answered it with err: the full backoff
// once the leader has served it at this leader epoch, else (the leader may
// not have applied the metadata naming it yet) the next catch-up retry.
func (f *fetcher) failed(e *fetchEntry, err error, backoffMs int64) {
	nowMs := f.set.m.hooks.nowMs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.established || !leaderBehind(err) {
		e.delayUntilMs = nowMs + backoffMs
		return
	}
	e.retryMs = min(max(e.retryMs*2, catchUpRetryMs), backoffMs)
	e.delayUntilMs = nowMs + e.retryMs
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

func (f *fetcher) request(entries []*fetchEntry, brokerEpoch int64, cfg FetchConfig) *FetchRequest {
	req := &FetchRequest{ReplicaID: f.set.m.cfg.BrokerID, BrokerEpoch: brokerEpoch, ConnID: f.connID,
		MaxWaitMs: cfg.MaxWaitMs, MinBytes: cfg.MinBytes, MaxBytes: cfg.MaxBytes}
	for _, e := range entries {
		l := e.p.log
		req.Partitions = append(req.Partitions, FetchPartition{TopicPartition: e.p.tp, TopicID: e.topicID,
			FetchOffset: l.EndOffset(), LogStartOffset: l.StartOffset(), CurrentLeaderEpoch: e.leaderEpoch,
			LastFetchedEpoch: l.LatestEpoch(), PartitionMaxBytes: cfg.PartitionMaxBytes})
	}
	return req
}

// handle applies the leader's answers; entries[i] asked req.Partitions[i].
func (f *fetcher) handle(ctx context.Context, r *Replication, entries []*fetchEntry, req *FetchRequest,
	answers []FetchedPartition, log *zap.Logger) {
	// An answer names a few of the asked partitions (a session's answer
	// those with news): index the answers, not the ~33k entries a fetcher
	// of a 100k-partition cluster asks (issue 17).
	byTP := make(map[TopicPartition]int, len(answers))
	for j, a := range answers {
		byTP[a.TopicPartition] = j
	}
	asked := make([]int, len(answers)) // answers[j] is for entries[asked[j]]; -1: none
	for j := range asked {
		asked[j] = -1
	}
	for i, e := range entries {
		if len(byTP) == 0 {
			break
		}
		if j, ok := byTP[e.p.tp]; ok {
			asked[j] = i
			delete(byTP, e.p.tp)
		}
	}
	backoffMs := f.set.m.cfg.Fetch.BackoffMs
	for j, a := range answers {
		i := asked[j]
		if i < 0 || !f.current(entries[i]) {
			continue
		}
		e, asked := entries[i], req.Partitions[i]
		if a.Err == nil {
			f.served(e)
		}
		if err := f.apply(ctx, r, e, asked, a); err != nil {
			if !errors.Is(err, ErrNotLeader) {
				log.Info("fetch of partition failed; backing off", zap.Stringer("partition", e.p.tp), zap.Error(err))
			}
			cause := a.Err // the leader's error, else ours applying its answer
			if cause == nil {
				cause = err
			}
			f.failed(e, cause, backoffMs)
		}
	}
}

// apply handles one partition's answer.
func (f *fetcher) apply(ctx context.Context, r *Replication, e *fetchEntry, asked FetchPartition, a FetchedPartition) error {
	switch {
	case a.Err == nil && a.Diverging != nil:
		return e.p.TruncateOnDivergence(e.leaderEpoch, *a.Diverging)
	case a.Err == nil:
		return e.p.AppendAsFollower(e.leaderEpoch, asked.FetchOffset, a.Records, a.HighWatermark, a.LogStartOffset)
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
