package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// scriptedLeader is an IncrementalFetchTransport whose every Fetch the test
// answers. It keeps each connection's session as the broker's transport
// does (Full when it has none, else the request's changes and forgotten
// partitions; none after an error) and hands the test each call with the
// session as it holds it after the request: the tests compare that with
// the followed partitions' fetch state, so a change the fetcher did not
// hand over shows as a difference.
type scriptedLeader struct {
	calls chan *fetchCall
	// listOffset answers ListOffsets (out-of-range repairs).
	listOffset func(ListOffsetRequest) (int64, error)

	mu       sync.Mutex
	sessions map[int64]map[TopicPartition]FetchPartition
}

// fetchCall is one Fetch the test answers on reply.
type fetchCall struct {
	req     *FetchRequest
	full    bool
	session map[TopicPartition]FetchPartition
	reply   chan fetchReply
}

type fetchReply struct {
	answers []FetchedPartition
	err     error
}

func (*scriptedLeader) FetchesIncrementally() {}

func (l *scriptedLeader) Fetch(ctx context.Context, _ int32, req *FetchRequest) ([]FetchedPartition, error) {
	// As a session-opening fetch: put does not interrupt it, so the test's
	// changes land between two requests and the next one must carry them.
	req.Opening.Store(true)
	l.mu.Lock()
	sess := l.sessions[req.ConnID]
	delete(l.sessions, req.ConnID) // back only after a good answer
	l.mu.Unlock()
	full := sess == nil
	sess = sessionAfter(sess, req)
	call := &fetchCall{req: req, full: full, session: maps.Clone(sess), reply: make(chan fetchReply, 1)}
	select {
	case l.calls <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-call.reply:
		if r.err == nil {
			l.mu.Lock()
			l.sessions[req.ConnID] = sess
			l.mu.Unlock()
		}
		return r.answers, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *scriptedLeader) ListOffset(_ context.Context, _ int32, req ListOffsetRequest) (int64, error) {
	return l.listOffset(req)
}

// quietController refuses ISR changes; eligibleBrokers lets every broker in.
type quietController struct{}

func (quietController) AlterPartition(context.Context, int32, int64, []AlterPartitionItem) ([]AlterPartitionResult, error) {
	return nil, errors.New("no controller here")
}

type eligibleBrokers struct{}

func (eligibleBrokers) ISRBroker(int32) (int64, bool, bool) { return 1, true, true }

// fetchEnv is broker 2 following n partitions of topic "dirty" led by
// broker 1 at leader epoch 1, fetched through a scriptedLeader.
type fetchEnv struct {
	t     *testing.T
	m     *Manager
	l     *scriptedLeader
	parts []*Partition
}

func newFetchEnv(t *testing.T, n int, backoffMs int64) *fetchEnv {
	return newFetchEnvWith(t, n, backoffMs, nil)
}

// newFetchEnvWith is newFetchEnv with prefill run before the fetcher starts.
func newFetchEnvWith(t *testing.T, n int, backoffMs int64, prefill func(env *fetchEnv)) *fetchEnv {
	t.Helper()
	m, err := New(Config{Dir: t.TempDir(), BrokerID: 2, Fetch: FetchConfig{MaxWaitMs: 10, BackoffMs: backoffMs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	env := &fetchEnv{t: t, m: m, l: &scriptedLeader{calls: make(chan *fetchCall),
		sessions: map[int64]map[TopicPartition]FetchPartition{}}}
	var states []PartitionState
	for i := range n {
		states = append(states, env.state(i, 1))
	}
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p, ok := m.Partition(states[i].TopicPartition)
		if !ok {
			t.Fatalf("partition %d not hosted", i)
		}
		env.parts = append(env.parts, p)
	}
	if prefill != nil {
		prefill(env)
	}
	if err := m.StartReplication(Replication{Fetch: env.l, AlterPartition: quietController{}, Brokers: eligibleBrokers{},
		BrokerEpoch: func() int64 { return 1 }}); err != nil {
		t.Fatal(err)
	}
	return env
}

func (env *fetchEnv) state(i int, leaderEpoch int32) PartitionState {
	return PartitionState{TopicPartition: TopicPartition{"dirty", int32(i)}, TopicID: topicID, Leader: 1,
		LeaderEpoch: leaderEpoch, PartitionEpoch: leaderEpoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
}

func (env *fetchEnv) fetcher() *fetcher {
	f := env.m.fetchers.fetcherFor(fetcherKey{leader: 1})
	if f == nil {
		env.t.Fatal("no fetcher for leader 1")
	}
	return f
}

// next is the fetcher's next Fetch, checked: the session the leader holds
// after it is exactly the fetch state of every partition not backing off.
func (env *fetchEnv) next(what string) *fetchCall {
	env.t.Helper()
	var call *fetchCall
	select {
	case call = <-env.l.calls:
	case <-time.After(5 * time.Second):
		env.t.Fatalf("%s: no fetch within 5 s", what)
	}
	f := env.fetcher()
	truth := map[TopicPartition]FetchPartition{}
	f.mu.Lock()
	for tp, e := range f.parts {
		if e.heapIdx < 0 {
			l := e.p.log
			truth[tp] = FetchPartition{TopicPartition: tp, TopicID: e.topicID, FetchOffset: l.EndOffset(),
				LogStartOffset: l.StartOffset(), CurrentLeaderEpoch: e.leaderEpoch, LastFetchedEpoch: l.LatestEpoch(),
				PartitionMaxBytes: env.m.cfg.Fetch.PartitionMaxBytes}
		}
	}
	f.mu.Unlock()
	if !maps.Equal(call.session, truth) {
		for tp, want := range truth {
			if got, ok := call.session[tp]; !ok || got != want {
				env.t.Errorf("%s: the leader's session holds %s as %s (held %v), its fetch state is %s", what, tp, fetchState(got), ok, fetchState(want))
			}
		}
		for tp := range call.session {
			if _, ok := truth[tp]; !ok {
				env.t.Errorf("%s: the leader's session holds %s, which is not fetched", what, tp)
			}
		}
		env.t.FailNow()
	}
	return call
}

func fetchState(p FetchPartition) string {
	return fmt.Sprintf("{offset %d, log start %d, leader epoch %d, last fetched epoch %d}",
		p.FetchOffset, p.LogStartOffset, p.CurrentLeaderEpoch, p.LastFetchedEpoch)
}

// prefill appends batches of 2 records in leader epochs epochs to
// partition i, as its follower, before the fetcher starts.
func (env *fetchEnv) prefill(i int, epochs ...int32) {
	env.t.Helper()
	p := env.parts[i]
	for _, epoch := range epochs {
		end := p.log.EndOffset()
		a := records(i, end, 2, epoch)
		if err := p.AppendAsFollower(1, end, a.Records, a.HighWatermark, 0); err != nil {
			env.t.Fatal(err)
		}
	}
}

// round takes the next fetch (checked) and answers it.
func (env *fetchEnv) round(what string, answers ...FetchedPartition) *fetchCall {
	env.t.Helper()
	call := env.next(what)
	call.reply <- fetchReply{answers: answers}
	return call
}

// records is the leader's answer for partition i: a batch of n records at
// offset base in leader epoch epoch, the high watermark at its end.
func records(i int, base int64, n int, epoch int32) FetchedPartition {
	recs := make([]storage.Record, n)
	for j := range recs {
		recs[j] = storage.Record{Value: []byte{byte(j)}, TimestampMs: 1000}
	}
	return FetchedPartition{TopicPartition: TopicPartition{"dirty", int32(i)}, HighWatermark: base + int64(n),
		Records: storage.EncodeBatch(base, epoch, 1000, false, recs).Raw}
}

// appendRounds appends batches of 2 records to partition i through the
// fetcher, one round each, in leader epochs epochs.
func (env *fetchEnv) appendRounds(i int, epochs ...int32) {
	env.t.Helper()
	for k, epoch := range epochs {
		call := env.next(fmt.Sprintf("append %d to partition %d", k, i))
		off := call.session[TopicPartition{"dirty", int32(i)}].FetchOffset
		call.reply <- fetchReply{answers: []FetchedPartition{records(i, off, 2, epoch)}}
	}
}

// The fetcher's own append: the next request carries the new log end and
// latest epoch (and nothing else).
func TestFetcherDirtyAfterAppend(t *testing.T) {
	env := newFetchEnv(t, 3, 1000)
	if call := env.round("full"); !call.full {
		t.Fatal("the first fetch is not full")
	}
	env.appendRounds(0, 0, 1)
	call := env.round("after the appends")
	if call.full || len(call.req.Partitions) != 1 || call.req.Partitions[0].FetchOffset != 4 || call.req.Partitions[0].LastFetchedEpoch != 1 {
		t.Fatalf("request after the appends: full %v, partitions %+v, want partition 0 at 4 in epoch 1", call.full, call.req.Partitions)
	}
}

// A truncation on DivergingEpoch: the next request carries the cut log end
// and its latest epoch.
func TestFetcherDirtyAfterDivergence(t *testing.T) {
	env := newFetchEnvWith(t, 2, 1000, func(env *fetchEnv) {
		env.prefill(1, 0, 1) // [0, 2) in epoch 0, [2, 4) in epoch 1
	})
	env.round("full")
	env.round("diverging", FetchedPartition{TopicPartition: TopicPartition{"dirty", 1}, HighWatermark: 2,
		Diverging: &EpochEndOffset{Epoch: 0, EndOffset: 2}})
	call := env.next("after the truncation")
	if end := env.parts[1].log.EndOffset(); end != 2 {
		t.Fatalf("log end %d after the divergence, want 2", end)
	}
	call.reply <- fetchReply{}
}

// An out-of-range repair: the follower past the leader's log end cuts back
// to it; the next request carries the new log end.
func TestFetcherDirtyAfterOutOfRange(t *testing.T) {
	env := newFetchEnvWith(t, 2, 1000, func(env *fetchEnv) { env.prefill(0, 0, 0) })
	env.l.listOffset = func(req ListOffsetRequest) (int64, error) {
		if req.Timestamp != LatestTimestamp {
			t.Errorf("ListOffsets at %d, want latest only", req.Timestamp)
		}
		return 2, nil
	}
	env.round("full")
	env.round("out of range", FetchedPartition{TopicPartition: TopicPartition{"dirty", 0}, Err: ErrOffsetOutOfRange})
	call := env.next("after the repair")
	if end := env.parts[0].log.EndOffset(); end != 2 {
		t.Fatalf("log end %d after the repair, want the leader's 2", end)
	}
	call.reply <- fetchReply{}
}

// A new leader epoch replaces the entry (put): the next request carries it,
// although the fetch in flight was not interrupted.
func TestFetcherDirtyAfterPut(t *testing.T) {
	env := newFetchEnv(t, 3, 1000)
	call := env.next("full")
	if err := env.m.Apply(env.state(2, 2)); err != nil {
		t.Fatal(err)
	}
	call.reply <- fetchReply{}
	call = env.round("after the new leader epoch")
	if len(call.req.Partitions) != 1 || call.req.Partitions[0].CurrentLeaderEpoch != 2 {
		t.Fatalf("request after the new leader epoch: %+v", call.req.Partitions)
	}
}

// A partition no longer followed (drop) is forgotten by the next request.
func TestFetcherForgetsDropped(t *testing.T) {
	env := newFetchEnv(t, 3, 1000)
	call := env.next("full")
	if err := env.m.Remove(TopicPartition{"dirty", 1}, false); err != nil {
		t.Fatal(err)
	}
	call.reply <- fetchReply{}
	call = env.round("after the drop")
	if !slices.Equal(call.req.Forgotten, []TopicPartition{{"dirty", 1}}) || len(call.req.Partitions) != 0 {
		t.Fatalf("request after the drop: forgotten %v, partitions %+v", call.req.Forgotten, call.req.Partitions)
	}
}

// A backoff starting forgets the partition; its end asks it again.
func TestFetcherBackoffForgetsAndAsksAgain(t *testing.T) {
	env := newFetchEnv(t, 3, 40)
	env.round("full")
	env.round("established", records(0, 0, 1, 0), records(1, 0, 1, 0), records(2, 0, 1, 0))
	env.round("leader error", FetchedPartition{TopicPartition: TopicPartition{"dirty", 1}, Err: ErrFencedLeaderEpoch})
	call := env.round("backing off")
	if _, held := call.session[TopicPartition{"dirty", 1}]; held {
		t.Fatal("a backing-off partition is still in the session")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		call = env.next("until the backoff ends")
		call.reply <- fetchReply{}
		if _, held := call.session[TopicPartition{"dirty", 1}]; held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the partition was not asked again after its backoff")
		}
		time.Sleep(time.Millisecond)
	}
}

// Retention moving a follower's log start (not the fetcher's doing): the
// next request carries the new log start.
func TestFetcherDirtyAfterRetention(t *testing.T) {
	env := newFetchEnvWith(t, 2, 1000, func(env *fetchEnv) {
		cfg := DefaultTopicConfig()
		cfg.SegmentBytes, cfg.RetentionMs = int64(len(records(0, 0, 2, 0).Records)), 60000
		env.m.SetTopicConfig("dirty", cfg)
		env.prefill(0, 0, 0, 0)
	})
	env.round("full")
	call := env.next("appended")
	if n := env.m.CleanupLogs(1 << 40); n == 0 {
		t.Fatal("retention deleted nothing")
	}
	if start := env.parts[0].log.StartOffset(); start == 0 {
		t.Fatal("retention did not move the log start")
	}
	call.reply <- fetchReply{}
	call = env.round("after retention")
	if len(call.req.Partitions) != 1 || call.req.Partitions[0].LogStartOffset == 0 {
		t.Fatalf("request after retention: %+v", call.req.Partitions)
	}
}

// An idle round with n partitions followed reads none of them; a round
// after one append reads that one (issue 17: ~33k per leader at 100k
// partitions). Counted, not timed.
func TestFetcherIdleRoundIsO1(t *testing.T) {
	const n = 100
	env := newFetchEnv(t, n, 1000)
	env.round("full")
	f := env.fetcher()
	before := f.visits.Load()
	for i := range 20 {
		call := env.round(fmt.Sprintf("idle %d", i))
		if call.full || len(call.req.Partitions) != 0 || len(call.req.Forgotten) != 0 {
			t.Fatalf("idle round %d sent %d partitions, %d forgotten", i, len(call.req.Partitions), len(call.req.Forgotten))
		}
	}
	if v := f.visits.Load() - before; v != 0 {
		t.Fatalf("20 idle rounds over %d partitions looked at %d partitions, want 0", n, v)
	}
	before = f.visits.Load()
	for i := range 20 {
		env.appendRounds(i*7%n, 0)
	}
	env.round("last")
	if v := f.visits.Load() - before; v != 20 {
		t.Fatalf("20 rounds after one append each looked at %d partitions, want 20", v)
	}
}

// A transport without sessions gets every partition each time, and
// replication works over it.
func TestFollowersReplicateWithoutSessions(t *testing.T) {
	c := newMemClusterTransport(t, FetchConfig{MaxWaitMs: 50, BackoffMs: 20}, false, 1, 2, 3)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.publish(st)
	res := appendOK(t, c.part(1), batch(3, -1, 0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.part(1).WaitCommitted(ctx, res.LastOffset); err != nil {
		t.Fatalf("acks=-1: %v", err)
	}
	for _, id := range []int32{2, 3} {
		eventually(t, fmt.Sprintf("follower %d high watermark", id), func() bool { return c.part(id).HighWatermark() == 3 })
	}
}

// A leader's answer is untrusted: an answer naming a partition this fetcher
// does not follow (or a topic id the transport could not name, which comes
// as an empty topic) is dropped, and a partition answered twice in one
// response is appended once: the second copy does not start at the log end
// any more, and is refused rather than written after the first.
func TestFetcherIgnoresAnswersNotAsked(t *testing.T) {
	env := newFetchEnv(t, 2, 1000)
	env.round("full")
	stranger := records(0, 0, 2, 0)
	stranger.TopicPartition = TopicPartition{"dirty", 99}
	unnamed := records(0, 0, 2, 0)
	unnamed.TopicPartition = TopicPartition{"", 0}
	call := env.next("hostile answers")
	off := call.session[TopicPartition{"dirty", 0}].FetchOffset
	call.reply <- fetchReply{answers: []FetchedPartition{stranger, unnamed, records(0, off, 2, 0), records(0, off, 2, 0)}}
	// The fetcher sends its next request only once it applied the answers;
	// that request is checked against the real fetch state (next), and the
	// logs hold exactly one copy.
	env.round("after the hostile answers")
	if end := env.parts[0].log.EndOffset(); end != off+2 {
		t.Fatalf("partition 0 ends at %d after one batch of 2 answered twice, want %d", end, off+2)
	}
	if end := env.parts[1].log.EndOffset(); end != 0 {
		t.Fatalf("partition 1 ends at %d, answered only under names it does not have", end)
	}
	if _, ok := env.m.Partition(TopicPartition{"dirty", 99}); ok {
		t.Fatal("an answer for a partition not followed made the broker host it")
	}
}
