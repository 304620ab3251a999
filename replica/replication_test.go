package replica

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/storage"
)

// memCluster is an in-memory cluster of replica managers: followers fetch
// by calling the leader's ReadForFollower (long-polled on Appended), and a
// tiny controller answers AlterPartition with the rules of Kafka's
// ReplicationControlManager (partition epoch, eligibility) and "publishes"
// the new state to every manager, as the metadata log would.
type memCluster struct {
	t    *testing.T
	tp   TopicPartition
	mgrs map[int32]*Manager

	ctl     sync.Mutex // serializes metadata changes, as the log orders them
	mu      sync.Mutex
	down    map[int32]bool // brokers whose fetches fail
	fenced  map[int32]bool
	epochs  map[int32]int64
	state   PartitionState
	alters  int
	applied []PartitionState
	// partErrs counts partition errors answered, by follower and leader;
	// parked counts the fetches a leader holds, by follower and leader.
	partErrs map[[2]int32]int
	parked   map[[2]int32]int
	// closedFetchers records CloseFetcher calls: follower, connection.
	closedFetchers map[[2]int64]int
	// opening: followers whose every fetch says it opens a fetch session
	// (FetchRequest.Opening), as a broker transport's full fetch does;
	// canceled counts their fetches that ended canceled, by follower.
	opening  map[int32]bool
	canceled map[int32]int
	// sessions are the followers' incremental fetch sessions (KIP-227), by
	// follower and connection: what each leader holds of them.
	sessions map[[2]int64]map[TopicPartition]FetchPartition
}

func newMemCluster(t *testing.T, ids ...int32) *memCluster {
	return newMemClusterWith(t, FetchConfig{MaxWaitMs: 50, BackoffMs: 20}, ids...)
}

func newMemClusterWith(t *testing.T, fetch FetchConfig, ids ...int32) *memCluster {
	return newMemClusterTransport(t, fetch, true, ids...)
}

// newMemClusterTransport is newMemClusterWith whose followers fetch in
// incremental sessions (as over the broker's transport) or, without
// sessions, every partition each time.
func newMemClusterTransport(t *testing.T, fetch FetchConfig, sessions bool, ids ...int32) *memCluster {
	return newMemClusterLag(t, fetch, sessions, 200, ids...)
}

// newMemClusterLag is newMemClusterTransport with replica.lag.time.max.ms
// lagMs: a test that must keep a stopped follower in the ISR for a while
// (whatever the machine's load) gives a long one.
func newMemClusterLag(t *testing.T, fetch FetchConfig, sessions bool, lagMs int64, ids ...int32) *memCluster {
	c := &memCluster{t: t, tp: TopicPartition{"rep", 0}, mgrs: map[int32]*Manager{},
		down: map[int32]bool{}, fenced: map[int32]bool{}, epochs: map[int32]int64{}, partErrs: map[[2]int32]int{},
		parked: map[[2]int32]int{}, closedFetchers: map[[2]int64]int{}, opening: map[int32]bool{}, canceled: map[int32]int{},
		sessions: map[[2]int64]map[TopicPartition]FetchPartition{}}
	for _, id := range ids {
		m, err := New(Config{Dir: t.TempDir(), BrokerID: id, ReplicaLagTimeMaxMs: lagMs, Fetch: fetch})
		if err != nil {
			t.Fatal(err)
		}
		c.epochs[id] = 100 + int64(id)
		c.mgrs[id] = m
		id := id
		var tr FetchTransport = fetchAs{c, id}
		if sessions {
			tr = sessionFetchAs{fetchAs{c, id}}
		}
		if err := m.StartReplication(Replication{Fetch: tr, AlterPartition: c, Brokers: c,
			BrokerEpoch: func() int64 { return c.brokerEpoch(id) }}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
	}
	return c
}

func (c *memCluster) brokerEpoch(id int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epochs[id]
}

func (c *memCluster) ISRBroker(id int32) (int64, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.epochs[id]
	return e, ok && !c.fenced[id], ok
}

// publish makes st the partition's state on every broker.
func (c *memCluster) publish(st PartitionState) {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	c.publishLocked(st)
}

func (c *memCluster) publishLocked(st PartitionState) {
	c.publishToLocked(st, st.Replicas)
}

// publishToLocked makes st the controller's state of the partition and
// applies it on the brokers ids only; ctl held.
func (c *memCluster) publishToLocked(st PartitionState, ids []int32) {
	c.mu.Lock()
	c.state = st
	c.applied = append(c.applied, st)
	c.mu.Unlock()
	for _, id := range ids {
		// ErrClosed: the test's cleanup closed that broker's manager
		// while another's ISR loop still changed the partition.
		if err := c.mgrs[id].Apply(st); err != nil && !errors.Is(err, ErrClosed) {
			c.t.Error(err)
		}
	}
}

// elect makes leader the partition's leader the way the controller does:
// from the current state, with the leader and partition epochs one past
// it, published to every replica under the controller lock. A state a test
// built from its own earlier copy can be stale: under load (-race) the
// leader's ISR loop may have shrunk and expanded the ISR meanwhile
// (replica.lag.time.max.ms is 200 ms here), each change a partition epoch,
// and a replica ignores a state with an older partition epoch than its own.
func (c *memCluster) elect(leader int32) PartitionState {
	return c.electOn(leader)
}

// electOn is elect whose new state reaches only the brokers on now (every
// replica when on is empty); the others learn it from a later publish of
// the returned state. The controller's state is the new one at once, so an
// AlterPartition of the old leader is stale from here, as in Kafka. A
// leader the ISR lost meanwhile (a shrink under load while the test kept it
// from fetching) is elected uncleanly, as Kafka's controller does, with
// the ISR just itself: a leader outside its own ISR is no state a
// controller makes.
func (c *memCluster) electOn(leader int32, on ...int32) PartitionState {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	st := c.current()
	st.Leader, st.LeaderEpoch, st.PartitionEpoch = leader, st.LeaderEpoch+1, st.PartitionEpoch+1
	if !slices.Contains(st.ISR, leader) {
		st.ISR = []int32{leader}
	}
	if len(on) == 0 {
		on = st.Replicas
	}
	c.publishToLocked(st, on)
	return st
}

func (c *memCluster) current() PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *memCluster) AlterPartition(_ context.Context, brokerID int32, _ int64, items []AlterPartitionItem) ([]AlterPartitionResult, error) {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	var out []AlterPartitionResult
	for _, it := range items {
		c.mu.Lock()
		st := c.state
		c.alters++
		var res AlterPartitionResult
		var isr []int32
		for _, m := range it.NewISR {
			isr = append(isr, m.BrokerID)
			if c.fenced[m.BrokerID] || m.BrokerEpoch != -1 && m.BrokerEpoch != c.epochs[m.BrokerID] {
				res = AlterPartitionResult{Outcome: AlterRejected, ErrorCode: 107}
			}
		}
		switch {
		case it.LeaderEpoch != st.LeaderEpoch || brokerID != st.Leader:
			res = AlterPartitionResult{Outcome: AlterStale, ErrorCode: 74}
		case it.PartitionEpoch != st.PartitionEpoch:
			res = AlterPartitionResult{Outcome: AlterStale, ErrorCode: 95}
		}
		c.mu.Unlock()
		if res.ErrorCode == 0 {
			st.ISR, st.PartitionEpoch = isr, st.PartitionEpoch+1
			c.publishLocked(st)
			res = AlterPartitionResult{Outcome: AlterCommitted, LeaderID: st.Leader, LeaderEpoch: st.LeaderEpoch,
				PartitionEpoch: st.PartitionEpoch, ISR: isr}
		}
		out = append(out, res)
	}
	return out, nil
}

func (c *memCluster) Fetch(ctx context.Context, leader int32, req *FetchRequest) ([]FetchedPartition, error) {
	// isDown is checked again after every read: a fetch parked before its
	// broker went down must not deliver what the leader appended after, as a
	// real broker that is down receives nothing more.
	isDown := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.down[req.ReplicaID] || c.down[leader]
	}
	if isDown() {
		return nil, errors.New("broker down")
	}
	c.mu.Lock()
	opening := c.opening[req.ReplicaID]
	c.mu.Unlock()
	if opening && req.Opening != nil {
		req.Opening.Store(true)
		defer func() {
			if ctx.Err() != nil {
				c.mu.Lock()
				c.canceled[req.ReplicaID]++
				c.mu.Unlock()
			}
		}()
	}
	m := c.mgrs[leader]
	timer := time.NewTimer(time.Duration(req.MaxWaitMs) * time.Millisecond)
	defer timer.Stop()
	for {
		var out []FetchedPartition
		var waits []reflect.SelectCase
		bytes := 0
		for _, fp := range req.Partitions {
			a := FetchedPartition{TopicPartition: fp.TopicPartition, HighWatermark: -1}
			p, ok := m.Partition(fp.TopicPartition)
			if !ok {
				a.Err = ErrUnknownPartition
				out = append(out, a)
				continue
			}
			waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.Appended())})
			r, err := p.ReadForFollower(FollowerFetch{ReplicaID: req.ReplicaID, BrokerEpoch: req.BrokerEpoch,
				FetchOffset: fp.FetchOffset, LogStartOffset: fp.LogStartOffset, CurrentLeaderEpoch: fp.CurrentLeaderEpoch,
				LastFetchedEpoch: fp.LastFetchedEpoch, MaxBytes: int(fp.PartitionMaxBytes)})
			a.Err, a.HighWatermark, a.LogStartOffset, a.Diverging, a.Records = err, r.HighWatermark, r.LogStartOffset, r.Diverging, r.Records
			if err != nil || r.Diverging != nil {
				bytes++
			}
			if err != nil {
				c.mu.Lock()
				c.partErrs[[2]int32{req.ReplicaID, leader}]++
				c.mu.Unlock()
			}
			bytes += len(r.Records)
			out = append(out, a)
		}
		if isDown() {
			return nil, errors.New("broker down")
		}
		if bytes > 0 || len(waits) == 0 {
			return out, nil
		}
		waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
		key := [2]int32{req.ReplicaID, leader}
		c.mu.Lock()
		c.parked[key]++
		c.mu.Unlock()
		i, _, _ := reflect.Select(waits)
		c.mu.Lock()
		c.parked[key]--
		c.mu.Unlock()
		if i >= len(waits)-2 {
			return out, ctx.Err()
		}
	}
}

func (c *memCluster) ListOffset(_ context.Context, leader int32, req ListOffsetRequest) (int64, error) {
	c.mu.Lock()
	down := c.down[req.ReplicaID] || c.down[leader]
	c.mu.Unlock()
	if down {
		return -1, errors.New("broker down")
	}
	p, ok := c.mgrs[leader].Partition(req.TopicPartition)
	if !ok {
		return -1, ErrUnknownPartition
	}
	off, _, err := p.OffsetForReplica(req.Timestamp, req.CurrentLeaderEpoch)
	return off, err
}

// fetchAs is broker id's fetch transport: memCluster, plus the record of
// the fetcher connections it was told to close.
type fetchAs struct {
	*memCluster
	id int32
}

func (f fetchAs) CloseFetcher(connID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedFetchers[[2]int64{int64(f.id), connID}]++
	delete(f.sessions, [2]int64{int64(f.id), connID})
}

// sessionFetchAs is fetchAs with an incremental fetch session per
// connection, as the broker's transport keeps: the leader is asked every
// partition of the session, the fetcher hands over what changed.
type sessionFetchAs struct{ fetchAs }

func (sessionFetchAs) FetchesIncrementally() {}

func (f sessionFetchAs) Fetch(ctx context.Context, leader int32, req *FetchRequest) ([]FetchedPartition, error) {
	if !req.Incremental {
		f.t.Error("a fetcher sent a full request to an incremental transport")
	}
	key := [2]int64{int64(f.id), req.ConnID}
	f.mu.Lock()
	sess := f.sessions[key]
	f.mu.Unlock()
	sess = sessionAfter(sess, req)
	all := *req
	all.Incremental, all.Partitions, all.Forgotten, all.Full = false, nil, nil, nil
	for _, p := range sess {
		all.Partitions = append(all.Partitions, p)
	}
	answers, err := f.memCluster.Fetch(ctx, leader, &all)
	f.mu.Lock()
	if err != nil {
		delete(f.sessions, key) // the next request is full
	} else {
		f.sessions[key] = sess
	}
	f.mu.Unlock()
	return answers, err
}

func (c *memCluster) fetcherClosed(follower int32, connID int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedFetchers[[2]int64{int64(follower), connID}]
}

func (c *memCluster) parkedFetches(follower, leader int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked[[2]int32{follower, leader}]
}

func (c *memCluster) partitionErrors(follower, leader int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partErrs[[2]int32{follower, leader}]
}

func (c *memCluster) part(id int32) *Partition {
	p, ok := c.mgrs[id].Partition(c.tp)
	if !ok {
		c.t.Fatalf("broker %d does not host %s", id, c.tp)
	}
	return p
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func logBatches(t *testing.T, p *Partition) []string {
	t.Helper()
	data, err := p.log.Read(p.log.StartOffset(), 1<<30, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for len(data) > 0 {
		bs, n, err := splitForTest(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bs...)
		data = data[n:]
	}
	return out
}

// TestFollowersReplicateAndAdvanceHighWatermark: with RF 3 and every replica
// in the ISR, the leader's high watermark reaches its log end only once both
// followers fetched it; acks=-1 completes; followers hold the leader's
// batches byte for byte and learn the high watermark; producer state is
// replicated (a retry answered by the new leader is a duplicate).
func TestFollowersReplicateAndAdvanceHighWatermark(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.publish(st)
	leader := c.part(1)
	var last AppendResult
	for i := range 20 {
		res, err := leader.AppendAsLeader(batch(3, 7, 0, int32(3*i)), acksAll)
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leader.WaitCommitted(ctx, last.LastOffset); err != nil {
		t.Fatalf("acks=-1: %v (hw %d)", err, leader.HighWatermark())
	}
	want := logBatches(t, leader)
	for _, id := range []int32{2, 3} {
		eventually(t, fmt.Sprintf("follower %d high watermark", id), func() bool { return c.part(id).HighWatermark() == 60 })
		if got := logBatches(t, c.part(id)); !slices.Equal(got, want) {
			t.Fatalf("follower %d log differs from the leader's", id)
		}
	}
	// Broker 2 leads now; a retry of the last batch is a duplicate there.
	c.elect(2)
	res, err := c.part(2).AppendAsLeader(batch(3, 7, 0, 57), acksLeader)
	if err != nil || !res.Duplicate || res.BaseOffset != 57 {
		t.Fatalf("retry on the new leader: %+v %v", res, err)
	}
}

// TestFollowerTruncatesDivergentSuffix: broker 1 leads at epoch 1 and
// appends batches only it has; broker 2 becomes leader at epoch 2 with other
// data; broker 1, now a follower, gets DivergingEpoch, truncates its
// uncommitted suffix and ends with exactly broker 2's log.
func TestFollowerTruncatesDivergentSuffix(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	c.publish(st)
	for range 3 {
		appendOK(t, c.part(1), batch(2, -1, 0, 0))
	}
	eventually(t, "committed 6", func() bool { return c.part(1).HighWatermark() == 6 })
	c.mu.Lock()
	c.down[2] = true // broker 2 stops fetching
	c.mu.Unlock()
	for range 4 {
		if _, err := c.part(1).AppendAsLeader(batch(5, -1, 0, 0), acksLeader); err != nil {
			t.Fatal(err)
		}
	}
	if c.part(1).log.EndOffset() != 26 {
		t.Fatalf("leader end %d", c.part(1).log.EndOffset())
	}
	// Broker 2 is elected (it was in the ISR, unless a shrink under load
	// took it out: then uncleanly) at epoch 2, with broker 1 following. It
	// comes back up only once it leads: up earlier, its fetcher could still
	// copy broker 1's divergent batches.
	c.elect(2)
	c.mu.Lock()
	c.down[2] = false
	c.mu.Unlock()
	for range 2 {
		if _, err := c.part(2).AppendAsLeader(batch(1, -1, 0, 0), acksLeader); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "broker 1 converges on broker 2's log", func() bool {
		return c.part(1).log.EndOffset() == 8 && c.part(2).HighWatermark() == 8
	})
	if got, want := logBatches(t, c.part(1)), logBatches(t, c.part(2)); !slices.Equal(got, want) {
		t.Fatal("logs differ after truncation")
	}
	if got := c.part(1).log.EpochEntries(); len(got) != 2 || got[1].Epoch != 2 || got[1].StartOffset != 6 {
		t.Fatalf("follower epochs %v", got)
	}
	// OffsetForLeaderEpoch on the new leader: epoch 1 ends at 6.
	if e, err := c.part(2).LastOffsetForLeaderEpoch(-1, 1); err != nil || e != (EpochEndOffset{1, 6}) {
		t.Fatalf("LastOffsetForLeaderEpoch(1) = %+v %v", e, err)
	}
	if _, err := c.part(1).LastOffsetForLeaderEpoch(-1, 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("OffsetForLeaderEpoch on a follower: %v", err)
	}
}

// TestISRShrinksAndExpands: a follower that stops fetching leaves the ISR
// after replica.lag.time.max.ms (the HW then moves without it); while its
// broker is fenced it cannot rejoin; once unfenced and caught up it rejoins
// through AlterPartition.
func TestISRShrinksAndExpands(t *testing.T) {
	c := newMemCluster(t, 1, 2, 3)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.publish(st)
	leader := c.part(1)
	appendOK(t, leader, batch(1, -1, 0, 0))
	eventually(t, "hw 1", func() bool { return leader.HighWatermark() == 1 })
	c.mu.Lock()
	c.down[3], c.fenced[3] = true, true
	c.mu.Unlock()
	res, err := leader.AppendAsLeader(batch(1, -1, 0, 0), acksLeader)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "ISR shrinks to [1 2]", func() bool { return slices.Equal(c.current().ISR, []int32{1, 2}) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leader.WaitCommitted(ctx, res.LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := leader.State().ISR; !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("leader ISR %v", got)
	}
	// Fetching again but fenced: caught up, yet not eligible.
	c.mu.Lock()
	c.down[3] = false
	c.mu.Unlock()
	eventually(t, "broker 3 caught up", func() bool { return c.part(3).log.EndOffset() == 2 })
	// Not a readiness wait: give a wrong expansion time to happen (the ISR
	// goroutine runs every 100 ms, fetches every few).
	time.Sleep(150 * time.Millisecond)
	if got := c.current().ISR; !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("fenced broker joined the ISR: %v", got)
	}
	c.mu.Lock()
	c.fenced[3] = false
	c.mu.Unlock()
	eventually(t, "ISR expands to [1 2 3]", func() bool { return slices.Equal(c.current().ISR, []int32{1, 2, 3}) })
	eventually(t, "leader sees the ISR", func() bool { return slices.Equal(leader.State().ISR, []int32{1, 2, 3}) })
}

// splitForTest splits data into its batches' raw bytes.
func splitForTest(data []byte) ([]string, int, error) {
	bs, n, err := storage.SplitBatches(data)
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b.Raw)
	}
	if err == nil && n == 0 {
		err = errors.New("no whole batch")
	}
	return out, n, err
}

// TestFollowerFetchesNewLeaderBeforeItCatchesUp: a follower that applies a
// leader change before the new leader does is answered UNKNOWN_LEADER_EPOCH;
// it must not back off replica.fetch.backoff.ms (a minute here) for that, or
// the high watermark, and every acks=-1 produce, waits that long (or until
// the ISR drops it). Its fetcher
// of the old leader, left without partitions, stops.
func TestFollowerFetchesNewLeaderBeforeItCatchesUp(t *testing.T) {
	c := newMemClusterWith(t, FetchConfig{MaxWaitMs: 50, BackoffMs: 60000}, 1, 2, 3)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	c.publish(st)
	res, err := c.part(1).AppendAsLeader(batch(2, 7, 0, 0), acksAll)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.part(1).WaitCommitted(ctx, res.LastOffset); err != nil {
		t.Fatal(err)
	}
	old := c.mgrs[3].fetchers.fetcherFor(fetcherKey{leader: 1})
	if old == nil {
		t.Fatal("broker 3 has no fetcher for leader 1")
	}
	// The controller elects broker 2; broker 3 learns it first.
	st = c.electOn(2, 3)
	eventually(t, "broker 2 answers broker 3 with an error", func() bool { return c.partitionErrors(3, 2) > 0 })
	c.publish(st)
	res, err = c.part(2).AppendAsLeader(batch(2, 7, 2, 0), acksAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.part(2).WaitCommitted(ctx, res.LastOffset); err != nil {
		t.Fatalf("acks=-1 after the leader change: %v (hw %d, broker 3's log end %d)", err,
			c.part(2).HighWatermark(), c.part(3).log.EndOffset())
	}
	// (The commit alone does not show it: the ISR may have dropped broker 3
	// after replica.lag.time.max.ms, 200 ms here.)
	eventually(t, "broker 3 replicates from the new leader", func() bool { return c.part(3).log.EndOffset() == 4 })
	select {
	case <-old.done:
	case <-ctx.Done():
		t.Fatal("broker 3's idle fetcher of leader 1 is still running")
	}
	if f := c.mgrs[3].fetchers.fetcherFor(fetcherKey{leader: 1}); f != nil {
		t.Fatal("broker 3 still has a fetcher for leader 1")
	}
	if n := c.fetcherClosed(3, old.connID); n != 1 {
		t.Fatalf("broker 3's transport was told to close its fetcher of leader 1 %d times, want 1", n)
	}
}

// TestFetcherIDIsKafkas: partitions spread over num.replica.fetchers as
// Kafka's getFetcherId does (Java's String.hashCode of the topic).
func TestFetcherIDIsKafkas(t *testing.T) {
	// "hello".hashCode() is 99162322; 31 * it + p, abs, mod n.
	for _, tc := range []struct {
		tp   TopicPartition
		n    int
		want int
	}{{TopicPartition{"hello", 0}, 3, 0}, {TopicPartition{"hello", 0}, 1000, 314}, {TopicPartition{"hello", 7}, 3, 2},
		{TopicPartition{"hello", 7}, 1, 0}} {
		if got := fetcherID(tc.tp, tc.n); got != tc.want {
			t.Errorf("fetcherID(%v, %d) = %d, want %d", tc.tp, tc.n, got, tc.want)
		}
	}
}

// TestFollowerOutOfRangeAsKafka: a follower whose fetch is out of range asks
// the leader's log end and start (ListOffsets as a replica) and repairs its
// log as Kafka's fetchOffsetAndTruncate: a log past the leader's end (here
// an empty log starting past it, below which TruncateTo cannot cut) starts
// over at the leader's end; a log below the leader's log start starts over
// there. Either way it then replicates what the leader appends.
func TestFollowerOutOfRangeAsKafka(t *testing.T) {
	c := newMemCluster(t, 1, 2)
	st := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, ISR: []int32{1}}
	c.mu.Lock()
	c.down[2] = true
	c.mu.Unlock()
	c.publish(st)
	leader, follower := c.part(1), c.part(2)
	acks1 := AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}
	for i := range 2 {
		if _, err := leader.AppendAsLeader(batch(3, 7, 0, int32(3*i)), acks1); err != nil {
			t.Fatal(err)
		}
	}
	// Past the leader's end (6): an empty log at 10.
	if err := follower.log.TruncateFullyAndStartAt(10); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.down[2] = false
	c.mu.Unlock()
	eventually(t, "the follower starts over at the leader's log end", func() bool {
		return follower.log.StartOffset() == 6 && follower.log.EndOffset() == 6
	})
	if _, err := leader.AppendAsLeader(batch(2, 7, 0, 6), acks1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower replicates on", func() bool { return follower.log.EndOffset() == 8 })

	// Below the leader's log start: the leader's log starts at 8 now, the
	// follower's is back at 0.
	c.mu.Lock()
	c.down[2] = true
	c.mu.Unlock()
	leader.log.SetStartOffset(8)
	if err := follower.log.TruncateFullyAndStartAt(0); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.down[2] = false
	c.mu.Unlock()
	if _, err := leader.AppendAsLeader(batch(1, 7, 0, 8), acks1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower starts over at the leader's log start and replicates", func() bool {
		return follower.log.StartOffset() == 8 && follower.log.EndOffset() == 9
	})
}

// TestNewPartitionDoesNotWaitForParkedFetch: when a partition moves to a
// leader this follower already fetches other partitions from, and that
// fetch is parked at the leader (nothing new: it is held up to
// replica.fetch.wait.max.ms, a minute here), the fetcher interrupts it and
// fetches the new partition at once.
func TestNewPartitionDoesNotWaitForParkedFetch(t *testing.T) {
	c := newMemClusterWith(t, FetchConfig{MaxWaitMs: 60000, BackoffMs: 20}, 1, 2, 3)
	a := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{2, 3}, ISR: []int32{2, 3}}
	c.publish(a)
	b := PartitionState{TopicPartition: TopicPartition{"rep", 1}, TopicID: topicID, Leader: 1, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	apply := func(st PartitionState, ids ...int32) {
		for _, id := range ids {
			if err := c.mgrs[id].Apply(st); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(b, 1, 2, 3)
	eventually(t, "broker 3's fetch parked at leader 2", func() bool { return c.parkedFetches(3, 2) > 0 })
	b.Leader, b.LeaderEpoch, b.PartitionEpoch = 2, 2, 2
	apply(b, 2, 1, 3)
	pb, _ := c.mgrs[2].Partition(b.TopicPartition)
	if _, err := pb.AppendAsLeader(batch(2, 7, 0, 0), acksAll); err != nil {
		t.Fatal(err)
	}
	fb, _ := c.mgrs[3].Partition(b.TopicPartition)
	eventually(t, "broker 3 replicates the moved partition", func() bool { return fb.log.EndOffset() == 2 })
}

// TestSessionOpeningFetchIsNotInterrupted: a fetch that opens a fetch
// session on its leader (FetchRequest.Opening, set by the broker transport
// for a full fetch at SessionEpoch 0) is not interrupted by a new partition
// for that leader: an abandoned answer would leave its session on the
// leader with no follower that knows the id, holding a cache slot and every
// partition until evicted (zk-legacy, whose LeaderAndIsr adds partitions
// one at a time, filled the leaders' caches: broker RSS per partition at
// 10k partitions 10.7 KiB before incremental follower sessions, 75 KiB
// after, in kraftd bench). The new partition is fetched with the next
// request, as Kafka's fetcher threads do.
func TestSessionOpeningFetchIsNotInterrupted(t *testing.T) {
	c := newMemClusterWith(t, FetchConfig{MaxWaitMs: 300, BackoffMs: 20}, 1, 2, 3)
	c.mu.Lock()
	c.opening[3] = true
	c.mu.Unlock()
	a := PartitionState{TopicPartition: c.tp, TopicID: topicID, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{2, 3}, ISR: []int32{2, 3}}
	c.publish(a)
	eventually(t, "broker 3's fetch parked at leader 2", func() bool { return c.parkedFetches(3, 2) > 0 })
	b := PartitionState{TopicPartition: TopicPartition{"rep", 1}, TopicID: topicID, Leader: 2, LeaderEpoch: 1,
		PartitionEpoch: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}}
	for _, id := range []int32{2, 3} {
		if err := c.mgrs[id].Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	pb, _ := c.mgrs[2].Partition(b.TopicPartition)
	if _, err := pb.AppendAsLeader(batch(2, 7, 0, 0), acksAll); err != nil {
		t.Fatal(err)
	}
	fb, _ := c.mgrs[3].Partition(b.TopicPartition)
	eventually(t, "broker 3 replicates the new partition after the parked fetch", func() bool { return fb.log.EndOffset() == 2 })
	c.mu.Lock()
	canceled := c.canceled[3]
	c.mu.Unlock()
	if canceled != 0 {
		t.Fatalf("%d session-opening fetches of broker 3 were canceled by a new partition", canceled)
	}
}

// sessionAfter is what a leader holding sess (nil: none) holds after req, as
// the broker's fetch sessions do: Full when there is none, else the
// request's partitions added or replaced and its forgotten ones removed.
func sessionAfter(sess map[TopicPartition]FetchPartition, req *FetchRequest) map[TopicPartition]FetchPartition {
	if sess == nil {
		sess = map[TopicPartition]FetchPartition{}
		for _, p := range req.Full() {
			sess[p.TopicPartition] = p
		}
		return sess
	}
	for _, p := range req.Partitions {
		sess[p.TopicPartition] = p
	}
	for _, tp := range req.Forgotten {
		delete(sess, tp)
	}
	return sess
}
