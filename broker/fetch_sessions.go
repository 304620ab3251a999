package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
//     leave it; every partition of the session is read, and the answer holds
//     only those with records, an error, or a high watermark, last stable
//     offset or log start offset the client was not told yet. A partition
//     that returned records moves to the end of the session, so the others
//     get the response's bytes next (Kafka's fairness). A session left empty
//     is closed and the fetch answered without one.
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
// asked, and what the client was last told.
type cachedPartition struct {
	key                       fetchSessionKey
	req                       kmsg.FetchRequestTopicPartition
	hwm, lastStable, logStart int64 // -1: nothing told yet (or an error was)
}

// fetchSession is one client's session.
//
// INVARIANTS: len(parts) == len(index); epoch > 0 (the epoch the next
// incremental request must carry).
type fetchSession struct {
	id         int32
	epoch      int32
	privileged bool // a follower's
	topicIDs   bool // addressed by topic id (created by Fetch v13+)
	parts      []*cachedPartition
	index      map[fetchSessionKey]*cachedPartition
	lastUsedMs int64
}

// fetchSessionCache holds the sessions of one broker; safe for concurrent use.
//
// INVARIANTS: partitions == the sum of len(s.parts) over sessions, and
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
		fc.partitions -= len(s.parts)
		delete(fc.sessions, id)
	}
}

// fetchContext is how one Fetch uses the cache.
type fetchContext struct {
	errCode int16
	// full: the answer lists every partition; create: it may open a
	// session (epoch 0).
	full, create bool
	// session is the incremental request's session.
	session *fetchSession
	// body is the request to read: the request itself, or for an
	// incremental fetch every partition of the session.
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
	before := len(s.parts)
	s.update(body)
	fc.partitions += len(s.parts) - before
	if len(s.parts) == 0 || fc.partitions > fc.maxPartitions {
		fc.remove(s.id)
		return fetchContext{full: true, body: body}
	}
	s.lastUsedMs = nowMs
	s.epoch = nextSessionEpoch(s.epoch)
	return fetchContext{session: s, body: s.request(body)}
}

// nextSessionEpoch is FetchMetadata.nextEpoch: it wraps to 1, never 0 or -1.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// update adds or refreshes the request's partitions, then drops the
// forgotten ones (Kafka's FetchSession.update); mu held.
func (s *fetchSession) update(body *kmsg.FetchRequest) {
	for _, rt := range body.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey(body.Version, rt.Topic, rt.TopicID, rp.Partition)
			if cp, ok := s.index[key]; ok {
				cp.req = rp
				continue
			}
			s.add(&cachedPartition{key: key, req: rp, hwm: -1, lastStable: -1, logStart: -1})
		}
	}
	for _, ft := range body.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := sessionKey(body.Version, ft.Topic, ft.TopicID, p)
			if _, ok := s.index[key]; ok {
				delete(s.index, key)
				s.parts = removePart(s.parts, key)
			}
		}
	}
}

func (s *fetchSession) add(cp *cachedPartition) {
	s.index[cp.key] = cp
	s.parts = append(s.parts, cp)
}

func removePart(parts []*cachedPartition, key fetchSessionKey) []*cachedPartition {
	for i, cp := range parts {
		if cp.key == key {
			return append(parts[:i], parts[i+1:]...)
		}
	}
	return parts
}

func sessionKey(version int16, topic string, id [16]byte, partition int32) fetchSessionKey {
	if version >= 13 {
		return fetchSessionKey{topicID: id, partition: partition}
	}
	return fetchSessionKey{topic: topic, partition: partition}
}

// request is body with the session's partitions, in session order, as its
// topics (consecutive partitions of a topic share an entry); mu held.
func (s *fetchSession) request(body *kmsg.FetchRequest) *kmsg.FetchRequest {
	out := *body
	out.Topics, out.ForgottenTopics = nil, nil
	for _, cp := range s.parts {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != cp.key.topic || out.Topics[n-1].TopicID != cp.key.topicID {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = cp.key.topic, cp.key.topicID
			out.Topics = append(out.Topics, rt)
		}
		rt := &out.Topics[len(out.Topics)-1]
		rt.Partitions = append(rt.Partitions, cp.req)
	}
	return &out
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
	var moved []*cachedPartition
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			cp := s.index[sessionKey(fctx.body.Version, rt.Topic, rt.TopicID, rp.Partition)]
			if cp == nil || !cp.mustRespond(&rp) {
				continue
			}
			parts = append(parts, rp)
			if len(rp.RecordBatches) > 0 {
				moved = append(moved, cp)
			}
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
	for _, cp := range moved {
		s.parts = append(removePart(s.parts, cp.key), cp)
	}
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
	s := &fetchSession{epoch: 1, privileged: privileged, topicIDs: body.Version >= 13,
		index: map[fetchSessionKey]*cachedPartition{}, lastUsedMs: nowMs}
	for s.id == 0 || fc.sessions[s.id] != nil {
		s.id = fc.newID()
	}
	for _, rt := range body.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey(body.Version, rt.Topic, rt.TopicID, rp.Partition)
			if s.index[key] == nil {
				s.add(&cachedPartition{key: key, req: rp, hwm: -1, lastStable: -1, logStart: -1})
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
	if fc.partitions+len(s.parts) > fc.maxPartitions {
		return nil
	}
	fc.sessions[s.id] = s
	fc.partitions += len(s.parts)
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

func (s *fetchSession) key() sessionValue { return evictKey(s.privileged, len(s.parts), s.id) }

func (a sessionValue) less(b sessionValue) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if a.size != b.size {
		return a.size < b.size
	}
	return a.id < b.id
}
