package broker

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
)

// Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala
// (FetchManager.newContext, FetchSessionCache, CachedPartition).
//
// A Fetch (v7+) names a session by SessionID and SessionEpoch:
//   - epoch -1 (FINAL) or 0 (INITIAL) is a full fetch: the session it names,
//     if any, is closed; with 0 the broker creates a session holding the
//     request's partitions and answers its id (0 when the cache has no slot
//     for it) with every partition; with -1 it creates none (SessionID 0).
//   - epoch > 0 is incremental: an unknown id is FETCH_SESSION_ID_NOT_FOUND,
//     an epoch other than the session's next is INVALID_FETCH_SESSION_EPOCH
//     (no topics either way). The request's partitions are added to the
//     session or update their fetch offset and limits, ForgottenTopics
//     leave it; the answer holds only the partitions with records, an
//     error, a diverging epoch, or a high watermark, last stable offset or
//     log start offset the client was not told yet. A session left empty
//     is closed and the fetch answered without one.
//   - What an incremental fetch reads (issue 17: a follower's session holds
//     ~33k partitions at 100k, and each append woke a pass over all of
//     them): a session keeps one Waiter registered with each of its
//     partitions (both the change and the append event) across requests,
//     and each pass reads only the partitions that can have news since the
//     client was last answered: those the request names (a new fetch
//     offset moves the follower's high watermark and ISR), those whose
//     registration fired (the Waiter records which), those never read or
//     registered yet (all of them at the first incremental fetch), and
//     those whose last answer had records, an error or a diverging epoch,
//     or whose records the response's byte budget left out: Kafka reads
//     every partition at the session's fetch offset, so these are answered
//     again unless the client moved on (a client that dropped records it
//     was sent and does not name the partition gets them again); and, for
//     a follower, those where it is outside the ISR or an ISR change is in
//     flight (replica.FollowerRead.OutOfISR): Kafka's leader updates the
//     follower's state of every session partition on each fetch, and only
//     these can owe it an action that nothing else wakes (an ISR expansion
//     that could not happen yet because the leader's metadata still had
//     the follower's broker fenced, or whose AlterPartition was refused);
//     a caught-up follower in the ISR still costs nothing per fetch. A partition
//     read in a pass is registered before the read, so a move after it
//     fires. Every other partition is unchanged since it was last read, and
//     Kafka's incremental answer would leave it out too. The passes of one
//     long poll read the same growing set, so the last pass's answer covers
//     everything read. A fetch that fails (the client went away) puts what
//     it read back to be read by the next.
//   - A session keeps the addressing it was created with: a request by
//     topic id (v13+) on a session by name, or the reverse, is
//     FETCH_SESSION_TOPIC_ID_ERROR.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions. A new
// session takes a free slot, else the slot of a session unused for
// fetchSessionEvictionMs (120 s, Kafka's
// MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS), else that of the least
// valuable session (fewest partitions, non-follower first) if it is worth
// less than the new one; followers' sessions can be evicted only by other
// followers' sessions. Otherwise the fetch is answered without a session.
// The partitions of all sessions are bounded too
// (maxCachedFetchSessionPartitions): a session that would pass the bound
// first closes idle ones (evictIdle).

// DefaultMaxIncrementalFetchSessionCacheSlots is
// max.incremental.fetch.session.cache.slots' default.
const DefaultMaxIncrementalFetchSessionCacheSlots = 1000

// sessionSlots is the cache size for a configured
// MaxIncrementalFetchSessionCacheSlots (0: the default, negative: none).
func sessionSlots(configured int) int {
	switch {
	case configured == 0:
		return DefaultMaxIncrementalFetchSessionCacheSlots
	case configured < 0:
		return 0
	}
	return configured
}

// maxCachedFetchSessionPartitions bounds the partitions all sessions hold
// together (a kraftd bound; Kafka has none): incremental fetches may add
// partitions, real or not, without end, and each costs memory. A session
// that would take the cache past it is not opened, or is closed (the fetch
// is answered without a session, which clients take as "fetch in full").
const maxCachedFetchSessionPartitions = 1 << 20

// fetchSessionEvictionMs is how long a session must go unused before any
// new session may take its slot.
const fetchSessionEvictionMs = 120000

// fetchSessionKey is a session partition: by topic id (v13+) or name.
type fetchSessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// cachedPartition is one partition of a session: the fetch parameters last
// asked, and what the client was last told (both guarded by the cache's mu),
// and how the session watches it (guarded by the session's mu). A leader
// holds one per partition it leads per follower session (two per led
// partition at RF 3), hence the compact req: 112 bytes, it was 152 (in
// 160).
type cachedPartition struct {
	key                       fetchSessionKey
	req                       sessionFetch
	hwm, lastStable, logStart int64 // -1: nothing told yet (or an error was)

	removed atomic.Bool // forgotten, or its session closed
	// watchChange and watchAppend: a registration of the session's Waiter
	// with the partition is live (not fired yet); queued: in
	// fetchSession.pending; round: the last sessionRound that read it.
	watchChange, watchAppend, queued bool
	round                            uint64
}

// sessionFetch is what a session partition's fetch last asked: the fields
// of kmsg.FetchRequestTopicPartition the fetch path reads, not its tagged
// ones (ReplicaDirectoryID and HighWatermark, which no fetch reads) and
// their unknown tags: 32 bytes instead of 72.
type sessionFetch struct {
	fetchOffset, logStartOffset                             int64
	currentLeaderEpoch, lastFetchedEpoch, partitionMaxBytes int32
}

func sessionFetchOf(rp kmsg.FetchRequestTopicPartition) sessionFetch {
	return sessionFetch{fetchOffset: rp.FetchOffset, logStartOffset: rp.LogStartOffset,
		currentLeaderEpoch: rp.CurrentLeaderEpoch, lastFetchedEpoch: rp.LastFetchedEpoch, partitionMaxBytes: rp.PartitionMaxBytes}
}

// request is f as partition's entry of a FetchRequest (the other fields
// at their defaults).
func (f sessionFetch) request(partition int32) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.LogStartOffset = partition, f.fetchOffset, f.logStartOffset
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = f.currentLeaderEpoch, f.lastFetchedEpoch, f.partitionMaxBytes
	return rp
}

// fetchSession is one client's session.
//
// INVARIANTS: epoch > 0 (the epoch the next incremental request must
// carry). Every partition of index is, at any time, in pending, or
// registered with w on both events and unchanged since it was last read
// (else its registration fired: w.Woken names it), or being read by a
// fetch of the session. w is stopped once the session is closed.
type fetchSession struct {
	id         int32
	epoch      int32
	privileged bool // a follower's
	topicIDs   bool // addressed by topic id (created by Fetch v13+)
	index      map[fetchSessionKey]*cachedPartition
	lastUsedMs int64

	w *replica.Waiter
	// fetchedMs is the time in ms of the session's latest fetch, stored by
	// beginRound for a follower's session and read by the leader's
	// partitions (replica.FollowerFetch.SessionFetchMs). Allocated on its
	// own: the partitions keep it after the session is evicted, and it
	// alone must stay reachable, not the session's partition index.
	fetchedMs *atomic.Int64
	// mu guards pending, rounds and the partitions' watch fields.
	mu      sync.Mutex
	pending []*cachedPartition // to read at the next fetch
	rounds  uint64
}

// fetchSessionCache holds the sessions of one broker; safe for concurrent use.
//
// INVARIANTS: partitions == the sum of len(s.index) over sessions, and
// <= maxPartitions after every call.
type fetchSessionCache struct {
	mu            sync.Mutex
	maxSlots      int
	maxPartitions int
	partitions    int
	sessions      map[int32]*fetchSession
	newID         func() int32 // a random positive id
}

func newFetchSessionCache(maxSlots int, newID func() int32) *fetchSessionCache {
	return &fetchSessionCache{maxSlots: maxSlots, maxPartitions: maxCachedFetchSessionPartitions,
		sessions: map[int32]*fetchSession{}, newID: newID}
}

// remove closes session id; mu held.
func (fc *fetchSessionCache) remove(id int32) {
	if s, ok := fc.sessions[id]; ok {
		fc.partitions -= len(s.index)
		delete(fc.sessions, id)
		s.w.Stop()
		for _, cp := range s.index {
			cp.removed.Store(true)
		}
	}
}

// fetchContext is how one Fetch uses the cache.
type fetchContext struct {
	errCode int16
	// full: the answer lists every partition; create: it may open a
	// session (epoch 0).
	full, create bool
	// session is the incremental request's session, and named the
	// session's partitions the request names.
	session *fetchSession
	named   []*cachedPartition
	// body is the request to read: the request itself, or for an
	// incremental fetch the partitions its last pass read
	// (ClientAPI.fetchSession).
	body *kmsg.FetchRequest
}

// newContext interprets body's session fields (v7+; before, every fetch is
// full and sessionless).
func (fc *fetchSessionCache) newContext(body *kmsg.FetchRequest, nowMs int64) fetchContext {
	if body.Version < 7 {
		return fetchContext{full: true, body: body}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if body.SessionEpoch == -1 || body.SessionEpoch == 0 {
		fc.remove(body.SessionID)
		return fetchContext{full: true, create: body.SessionEpoch == 0, body: body}
	}
	s, ok := fc.sessions[body.SessionID]
	switch {
	case !ok:
		return fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
	case s.epoch != body.SessionEpoch:
		return fetchContext{errCode: kerr.InvalidFetchSessionEpoch.Code}
	case s.topicIDs != (body.Version >= 13):
		return fetchContext{errCode: kerr.FetchSessionTopicIDError.Code}
	}
	before := len(s.index)
	named := s.update(body)
	fc.partitions += len(s.index) - before
	if fc.partitions > fc.maxPartitions {
		fc.evictIdle(fc.partitions-fc.maxPartitions, s, nowMs)
	}
	if len(s.index) == 0 || fc.partitions > fc.maxPartitions {
		fc.remove(s.id)
		return fetchContext{full: true, body: body}
	}
	s.lastUsedMs = nowMs
	s.epoch = nextSessionEpoch(s.epoch)
	return fetchContext{session: s, named: named, body: body}
}

// nextSessionEpoch is FetchMetadata.nextEpoch: it wraps to 1, never 0 or -1.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// update adds or refreshes the request's partitions, then drops the
// forgotten ones (Kafka's FetchSession.update), and returns the partitions
// the request named still in the session; the cache's mu held.
func (s *fetchSession) update(body *kmsg.FetchRequest) []*cachedPartition {
	var named []*cachedPartition
	for _, rt := range body.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey(body.Version, rt.Topic, rt.TopicID, rp.Partition)
			cp, ok := s.index[key]
			if ok {
				cp.req = sessionFetchOf(rp)
			} else {
				cp = &cachedPartition{key: key, req: sessionFetchOf(rp), hwm: -1, lastStable: -1, logStart: -1}
				s.index[key] = cp
			}
			named = append(named, cp)
		}
	}
	for _, ft := range body.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := sessionKey(body.Version, ft.Topic, ft.TopicID, p)
			if cp, ok := s.index[key]; ok {
				delete(s.index, key)
				cp.removed.Store(true) // its registrations fire into nothing
			}
		}
	}
	return named
}

func sessionKey(version int16, topic string, id [16]byte, partition int32) fetchSessionKey {
	if version >= 13 {
		return fetchSessionKey{topicID: id, partition: partition}
	}
	return fetchSessionKey{topic: topic, partition: partition}
}

// finish turns the read of fctx.body into the answer: a full fetch with
// create opens a session (SessionID 0 when none fits) remembering what it
// told; an incremental one keeps only the partitions the client must hear
// about. privileged marks a follower's fetch.
func (fc *fetchSessionCache) finish(fctx fetchContext, resp *kmsg.FetchResponse, privileged bool, nowMs int64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fctx.full {
		resp.SessionID = 0
		if fctx.create {
			if s := fc.create(fctx.body, resp, privileged, nowMs); s != nil {
				resp.SessionID = s.id
			}
		}
		return
	}
	s := fctx.session
	if fc.sessions[s.id] != s {
		resp.SessionID = 0 // closed meanwhile by a full fetch naming it: answer in full
		return
	}
	resp.SessionID = s.id
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			cp := s.index[sessionKey(fctx.body.Version, rt.Topic, rt.TopicID, rp.Partition)]
			if cp == nil || !cp.mustRespond(&rp) {
				continue
			}
			parts = append(parts, rp)
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
}

// mustRespond reports whether an incremental answer must carry rp, and
// records what it tells (Kafka's CachedPartition.maybeUpdateResponseData).
func (cp *cachedPartition) mustRespond(rp *kmsg.FetchResponseTopicPartition) bool {
	must := len(rp.RecordBatches) > 0 || rp.DivergingEpoch.EndOffset >= 0 || rp.CurrentLeader.LeaderID >= 0
	if cp.hwm != rp.HighWatermark || cp.lastStable != rp.LastStableOffset || cp.logStart != rp.LogStartOffset {
		must = true
		cp.hwm, cp.lastStable, cp.logStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	}
	if rp.ErrorCode != 0 {
		must = true
		cp.hwm = -1 // errors are always sent, and the next answer too
	}
	return must
}

// create opens a session for a full fetch's partitions with what resp
// tells them, if a slot is free or can be freed; mu held.
func (fc *fetchSessionCache) create(body *kmsg.FetchRequest, resp *kmsg.FetchResponse, privileged bool, nowMs int64) *fetchSession {
	size := 0
	for _, rt := range body.Topics {
		size += len(rt.Partitions)
	}
	if fc.maxSlots <= 0 || size > fc.maxPartitions || len(fc.sessions) >= fc.maxSlots && !fc.evict(privileged, size, nowMs) {
		return nil
	}
	s := &fetchSession{epoch: 1, privileged: privileged, fetchedMs: new(atomic.Int64), topicIDs: body.Version >= 13,
		index: map[fetchSessionKey]*cachedPartition{}, lastUsedMs: nowMs, w: replica.NewWaiter()}
	for s.id == 0 || fc.sessions[s.id] != nil {
		s.id = fc.newID()
	}
	for _, rt := range body.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey(body.Version, rt.Topic, rt.TopicID, rp.Partition)
			if s.index[key] == nil {
				// Not watched yet: the first incremental fetch reads it.
				cp := &cachedPartition{key: key, req: sessionFetchOf(rp), hwm: -1, lastStable: -1, logStart: -1, queued: true}
				s.index[key] = cp
				s.pending = append(s.pending, cp)
			}
		}
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			if cp := s.index[sessionKey(body.Version, rt.Topic, rt.TopicID, rt.Partitions[i].Partition)]; cp != nil {
				cp.mustRespond(&rt.Partitions[i])
			}
		}
	}
	if over := fc.partitions + len(s.index) - fc.maxPartitions; over > 0 {
		if fc.evictIdle(over, nil, nowMs); fc.partitions+len(s.index) > fc.maxPartitions {
			return nil
		}
	}
	fc.sessions[s.id] = s
	fc.partitions += len(s.index)
	return s
}

// evict frees a slot for a new session of size partitions (Kafka's
// FetchSessionCache.tryEvict); mu held.
func (fc *fetchSessionCache) evict(privileged bool, size int, nowMs int64) bool {
	var stalest, cheapest *fetchSession
	for _, s := range fc.sessions {
		if stalest == nil || s.lastUsedMs < stalest.lastUsedMs {
			stalest = s
		}
		if (privileged || !s.privileged) && (cheapest == nil || s.key().less(cheapest.key())) {
			cheapest = s
		}
	}
	switch {
	case stalest != nil && nowMs-stalest.lastUsedMs > fetchSessionEvictionMs:
		fc.remove(stalest.id)
	case cheapest != nil && !evictKey(privileged, size, 0).less(cheapest.key()):
		fc.remove(cheapest.id)
	default:
		return false
	}
	return true
}

// followerSessionIdleMs is how long a follower's session must go unused
// before the partition bound (maxPartitions) may close it for a new or
// growing session. A live replica fetcher sends a Fetch at least every
// replica.fetch.wait.max.ms (500 ms) plus the time it takes to apply an
// answer, so a follower session idle this long was abandoned: its fetcher
// lost the answer that opened it (a timeout, a reset connection) and
// opened another. Such orphans are as large as the live sessions (at 1M
// partitions on 3 brokers ~333k each) and, unevicted, kept every later
// session of that leader from opening: its followers fetched in full each
// round (O(partitions)) and fell out of the ISR (issue 17's 1M run). A
// live follower closed by mistake only fetches in full once more.
const followerSessionIdleMs = 10000

// evictIdle closes idle sessions, least recently used first, until at
// least need partitions are freed or none is idle: followers' sessions
// unused for followerSessionIdleMs, others for fetchSessionEvictionMs.
// keep (the session growing, or nil) is never closed. Kafka's cache is
// bounded by slots alone (tryEvict); this frees the partition bound the
// same way. mu held.
func (fc *fetchSessionCache) evictIdle(need int, keep *fetchSession, nowMs int64) {
	var idle []*fetchSession
	for _, s := range fc.sessions {
		limit := int64(fetchSessionEvictionMs)
		if s.privileged {
			limit = followerSessionIdleMs
		}
		if s != keep && nowMs-s.lastUsedMs > limit {
			idle = append(idle, s)
		}
	}
	slices.SortFunc(idle, func(a, b *fetchSession) int { return cmp.Compare(a.lastUsedMs, b.lastUsedMs) })
	for _, s := range idle {
		if need <= 0 {
			return
		}
		need -= len(s.index)
		fc.remove(s.id)
	}
}

// sessionValue orders sessions as Kafka's EvictableKey: non-followers
// first, then fewer partitions, then lower id (a new session has id 0).
type sessionValue struct {
	privileged bool
	size       int
	id         int32
}

func evictKey(privileged bool, size int, id int32) sessionValue {
	return sessionValue{privileged, size, id}
}

func (s *fetchSession) key() sessionValue { return evictKey(s.privileged, len(s.index), s.id) }

func (a sessionValue) less(b sessionValue) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if a.size != b.size {
		return a.size < b.size
	}
	return a.id < b.id
}

// sessionRound is what one incremental fetch of a session reads: the
// partitions of all its passes so far, in reading order (see the package
// comment above: held back, named, then woken).
type sessionRound struct {
	s   *fetchSession
	id  uint64
	cps []*cachedPartition
}

// beginRound starts an incremental fetch's reading set with the partitions
// held back for it and those the request names.
func (s *fetchSession) beginRound(named []*cachedPartition, nowMs int64) *sessionRound {
	if s.privileged {
		s.fetchedMs.Store(nowMs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	r := &sessionRound{s: s, id: s.rounds}
	for _, cp := range s.pending {
		cp.queued = false
		r.addLocked(cp)
	}
	s.pending = nil
	for _, cp := range named {
		r.addLocked(cp)
	}
	return r
}

// collect adds the partitions whose registrations fired since the last
// collect; those registrations are spent, so the next read registers again.
func (r *sessionRound) collect() {
	woken := r.s.w.Woken()
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, wk := range woken {
		cp := wk.Key.(*cachedPartition)
		if wk.Append {
			cp.watchAppend = false
		} else {
			cp.watchChange = false
		}
		r.addLocked(cp)
	}
}

// addLocked adds cp to the round once; s.mu held.
func (r *sessionRound) addLocked(cp *cachedPartition) {
	if cp.removed.Load() || cp.round == r.id {
		return
	}
	cp.round = r.id
	r.cps = append(r.cps, cp)
}

// watch registers the session's Waiter with p, partition i of the round, on
// each event it is not registered for yet; called before p is read.
func (r *sessionRound) watch(i int, p *replica.Partition, _ bool) {
	cp := r.cps[i]
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if !cp.watchChange {
		cp.watchChange = true
		p.WakeOnChangeKey(r.s.w, cp)
	}
	if !cp.watchAppend {
		cp.watchAppend = true
		p.WakeOnAppendKey(r.s.w, cp)
	}
}

// holdBackLocked queues cp for the session's next fetch; s.mu held.
func (s *fetchSession) holdBackLocked(cp *cachedPartition) {
	if !cp.queued && !cp.removed.Load() {
		cp.queued = true
		s.pending = append(s.pending, cp)
	}
}

// answered holds back for the next fetch the partitions of resp (the
// answer to the round's last pass, in round order) that answered records,
// an error or a diverging epoch, or that the pass found must be read again
// (again: their indexes; records the byte budget left out, a follower
// outside the ISR): nothing would wake them, and Kafka reads them again at
// the session's fetch offset.
func (r *sessionRound) answered(resp *kmsg.FetchResponse, again []int) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	i := 0
	for _, rt := range resp.Topics {
		for _, sp := range rt.Partitions {
			if len(sp.RecordBatches) > 0 || sp.ErrorCode != 0 || sp.DivergingEpoch.EndOffset >= 0 {
				r.s.holdBackLocked(r.cps[i])
			}
			i++
		}
	}
	for _, i := range again {
		r.s.holdBackLocked(r.cps[i])
	}
}

// abandon holds back every partition the round read: its answer is not
// sent, so the client was told none of it.
func (r *sessionRound) abandon() {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, cp := range r.cps {
		r.s.holdBackLocked(cp)
	}
}

// roundBody is req with the round's partitions as its topics
// (consecutive partitions of a topic share an entry).
func (fc *fetchSessionCache) roundBody(req *kmsg.FetchRequest, r *sessionRound) *kmsg.FetchRequest {
	out := *req
	out.Topics, out.ForgottenTopics = nil, nil
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, cp := range r.cps {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != cp.key.topic || out.Topics[n-1].TopicID != cp.key.topicID {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = cp.key.topic, cp.key.topicID
			out.Topics = append(out.Topics, rt)
		}
		rt := &out.Topics[len(out.Topics)-1]
		rt.Partitions = append(rt.Partitions, cp.req.request(cp.key.partition))
	}
	return &out
}
