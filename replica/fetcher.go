package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Follower fetchers, as Kafka's ReplicaFetcherManager / ReplicaFetcherThread:
// one goroutine per leader broker this broker follows partitions of, each
// sending one Fetch at a time for all of them (long-polled by the leader) and
// appending the answers. A partition's fetch position is its log end and its
// last fetched epoch the log's latest epoch, read at every request, so a
// truncation or a role change needs no bookkeeping here beyond the entry.

// fetchEntry is one partition a fetcher fetches.
type fetchEntry struct {
	p            *Partition
	leaderEpoch  int32
	topicID      [16]byte
	delayUntilMs int64 // backoff after an error
}

// fetcher fetches from one leader.
//
// INVARIANTS: parts holds only partitions whose metadata names leader as the
// leader; an entry is replaced (never mutated but for delayUntilMs) when the
// leader epoch changes, so an answer to a request built from an old entry is
// recognised and dropped.
type fetcher struct {
	leader int32
	set    *fetcherSet

	mu    sync.Mutex
	parts map[TopicPartition]*fetchEntry
	wake  chan struct{} // capacity 1: "parts changed"
}

// fetcherSet owns the fetchers of a manager.
//
// INVARIANTS: a partition is in at most one fetcher (assigned says which);
// fetcher goroutines run only between start and stop.
type fetcherSet struct {
	m *Manager

	mu       sync.Mutex
	repl     *Replication
	byLeader map[int32]*fetcher
	assigned map[TopicPartition]int32
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func newFetcherSet(m *Manager) *fetcherSet {
	return &fetcherSet{m: m, byLeader: map[int32]*fetcher{}, assigned: map[TopicPartition]int32{}}
}

// add makes st.Leader's fetcher fetch p at st.LeaderEpoch (moving it from
// another leader's fetcher).
func (s *fetcherSet) add(p *Partition, st PartitionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.assigned[st.TopicPartition]; ok && old != st.Leader {
		s.byLeader[old].drop(st.TopicPartition)
	}
	f := s.byLeader[st.Leader]
	if f == nil {
		f = &fetcher{leader: st.Leader, set: s, parts: map[TopicPartition]*fetchEntry{}, wake: make(chan struct{}, 1)}
		s.byLeader[st.Leader] = f
		if s.ctx != nil && s.ctx.Err() == nil {
			s.wg.Go(func() { f.run(s.ctx, s.repl) })
		}
	}
	s.assigned[st.TopicPartition] = st.Leader
	f.put(&fetchEntry{p: p, leaderEpoch: st.LeaderEpoch, topicID: st.TopicID})
}

// remove stops fetching tp.
func (s *fetcherSet) remove(tp TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.assigned[tp]; ok {
		s.byLeader[old].drop(tp)
		delete(s.assigned, tp)
	}
}

func (s *fetcherSet) start(r Replication) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil {
		return
	}
	s.repl = &r
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, f := range s.byLeader {
		s.wg.Go(func() { f.run(s.ctx, s.repl) })
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

func (f *fetcher) put(e *fetchEntry) {
	f.mu.Lock()
	if old := f.parts[e.p.tp]; old == nil || old.p != e.p || old.leaderEpoch != e.leaderEpoch {
		f.parts[e.p.tp] = e
	}
	f.mu.Unlock()
	f.poke()
}

func (f *fetcher) drop(tp TopicPartition) {
	f.mu.Lock()
	delete(f.parts, tp)
	f.mu.Unlock()
	f.poke()
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
	log := f.set.m.log.With(zap.Int32("leader", f.leader))
	cfg := f.set.m.cfg.Fetch
	for ctx.Err() == nil {
		entries, waitMs := f.ready()
		if len(entries) == 0 {
			f.idle(ctx, waitMs)
			continue
		}
		req := f.request(entries, r.BrokerEpoch(), cfg)
		answers, err := r.Fetch.Fetch(ctx, f.leader, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Debug("fetch from leader failed", zap.Error(err))
			f.delay(entries, cfg.BackoffMs)
			continue
		}
		f.handle(entries, req, answers, log)
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

func (f *fetcher) delay(entries []*fetchEntry, backoffMs int64) {
	until := f.set.m.hooks.nowMs() + backoffMs
	f.mu.Lock()
	for _, e := range entries {
		e.delayUntilMs = until
	}
	f.mu.Unlock()
}

func (f *fetcher) request(entries []*fetchEntry, brokerEpoch int64, cfg FetchConfig) *FetchRequest {
	req := &FetchRequest{ReplicaID: f.set.m.cfg.BrokerID, BrokerEpoch: brokerEpoch,
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
func (f *fetcher) handle(entries []*fetchEntry, req *FetchRequest, answers []FetchedPartition, log *zap.Logger) {
	byTP := make(map[TopicPartition]int, len(entries))
	for i, e := range entries {
		byTP[e.p.tp] = i
	}
	var failed []*fetchEntry
	for _, a := range answers {
		i, ok := byTP[a.TopicPartition]
		if !ok || !f.current(entries[i]) {
			continue
		}
		e, asked := entries[i], req.Partitions[i]
		if err := f.apply(e, asked, a); err != nil {
			if !errors.Is(err, ErrNotLeader) {
				log.Info("fetch of partition failed; backing off", zap.Stringer("partition", e.p.tp), zap.Error(err))
			}
			failed = append(failed, e)
		}
	}
	f.delay(failed, f.set.m.cfg.Fetch.BackoffMs)
}

// apply handles one partition's answer.
func (f *fetcher) apply(e *fetchEntry, asked FetchPartition, a FetchedPartition) error {
	switch {
	case a.Err == nil && a.Diverging != nil:
		return e.p.TruncateOnDivergence(e.leaderEpoch, *a.Diverging)
	case a.Err == nil:
		return e.p.AppendAsFollower(e.leaderEpoch, asked.FetchOffset, a.Records, a.HighWatermark)
	case errors.Is(a.Err, ErrOffsetOutOfRange):
		if err := e.p.HandleOutOfRange(e.leaderEpoch, a.LogStartOffset, a.HighWatermark); err != nil {
			return err
		}
		return nil
	}
	return a.Err
}
