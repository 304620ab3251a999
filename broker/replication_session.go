package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
)

// followerSession is a fetcher's side of its incremental fetch session
// (KIP-227) with its leader, as Kafka's FetchSessionHandler: the first
// request is full with SessionEpoch 0 (INITIAL), which asks the leader for a
// session; once it answers a SessionID, each request carries only the
// partitions whose fetch state (offset, log start, epochs, limit) changed
// since the leader last took it, and names in ForgottenTopicsData those the
// fetcher no longer asks for (stopped, or backing off), and the leader
// answers only partitions with something new (fetch_sessions.go). At 100k
// partitions on 3 brokers a full fetch names ~33k partitions each way every
// round (issue 17); an idle round now names none.
//
// The state moves only on a good answer. A failed send, a session error
// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR) or any other top-level error starts over
// with a full request that names the old session (epoch 0 closes it on the
// leader); after a session error that full request goes at once.
//
// A fetcher's request is either every partition it asks (the session
// compares each with what it holds: O(partitions)), or, from the replica
// fetchers (replica.FetchRequest.Incremental), only those that may have
// changed and those forgotten, with FetchRequest.Full for a full request:
// a round then costs O(changed) on this side too (issue 17).
//
// Only its fetcher's goroutine uses a session (one request at a time).
type followerSession struct {
	leader  int32
	version int16 // the addressing: by topic id from v13
	id      int32 // 0: none
	epoch   int32 // the next request's; 0 until the leader answered an id
	// parts are the session's partitions as the leader holds them; topics
	// names their topic ids, with how many of parts each has (answers from
	// v13 name topics by id, and an incremental answer names partitions the
	// request did not carry).
	parts  map[replica.TopicPartition]heldFetch
	topics map[[16]byte]*sessionTopic
}

// sessionTopic is a topic of a follower session's partitions.
type sessionTopic struct {
	name  string
	parts int
}

// heldFetch is a session partition as the leader holds it: its
// replica.FetchPartition without the name the map's key already is (48
// bytes a value, not 72: one per partition this broker follows).
type heldFetch struct {
	topicID                                                 [16]byte
	fetchOffset, logStartOffset                             int64
	currentLeaderEpoch, lastFetchedEpoch, partitionMaxBytes int32
}

func heldFetchOf(p replica.FetchPartition) heldFetch {
	return heldFetch{topicID: p.TopicID, fetchOffset: p.FetchOffset, logStartOffset: p.LogStartOffset,
		currentLeaderEpoch: p.CurrentLeaderEpoch, lastFetchedEpoch: p.LastFetchedEpoch, partitionMaxBytes: p.PartitionMaxBytes}
}

// partition is h, held for tp, as the fetcher's partition.
func (h heldFetch) partition(tp replica.TopicPartition) replica.FetchPartition {
	return replica.FetchPartition{TopicPartition: tp, TopicID: h.topicID, FetchOffset: h.fetchOffset, LogStartOffset: h.logStartOffset,
		CurrentLeaderEpoch: h.currentLeaderEpoch, LastFetchedEpoch: h.lastFetchedEpoch, PartitionMaxBytes: h.partitionMaxBytes}
}

// sessionDelta is what one request told the leader.
type sessionDelta struct {
	full      bool
	sent      []replica.FetchPartition
	forgotten []replica.FetchPartition
}

// session returns connection connID's session with leader at version,
// anew after a change of leader or addressing.
func (t *FetchTransport) session(connID int64, leader int32, version int16) *followerSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[connID]
	if s == nil || s.leader != leader || (s.version >= 13) != (version >= 13) {
		s = &followerSession{leader: leader}
		t.sessions[connID] = s
	}
	s.version = version
	return s
}

// request is in on the wire: in full, or the session's changes.
func (s *followerSession) request(in *replica.FetchRequest, version int16) (*kmsg.FetchRequest, sessionDelta) {
	var d sessionDelta
	switch {
	case s.id == 0 || s.epoch == 0:
		d.full, d.sent = true, in.Partitions
		if in.Incremental {
			d.sent = in.Full()
		}
	case in.Incremental:
		for _, p := range in.Partitions {
			if h, ok := s.parts[p.TopicPartition]; !ok || h != heldFetchOf(p) {
				d.sent = append(d.sent, p)
				if ok {
					d.forgetReplaced(h, p, version)
				}
			}
		}
		for _, tp := range in.Forgotten {
			if h, ok := s.parts[tp]; ok {
				d.forgotten = append(d.forgotten, h.partition(tp))
			}
		}
	default:
		// One lookup per partition; the session's partitions missing from
		// the request (forgotten) are looked for only when the request
		// does not hold all of them (issue 17: at ~33k partitions a set of
		// every asked partition cost as much again each round).
		held := 0
		for _, p := range in.Partitions {
			h, ok := s.parts[p.TopicPartition]
			if ok {
				held++
			}
			if !ok || h != heldFetchOf(p) {
				d.sent = append(d.sent, p)
				if ok {
					d.forgetReplaced(h, p, version)
				}
			}
		}
		if held < len(s.parts) { // the fetcher asks each partition once
			d.forgotten = s.missing(in)
		}
	}
	req := replicaFetchRequest(in, version, d.sent)
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	// By name and id: a replaced partition is forgotten under its old
	// topic id, next to the new one's other forgotten partitions.
	type topicKey struct {
		name string
		id   [16]byte
	}
	byTopic := map[topicKey]int{}
	for _, p := range d.forgotten {
		k := topicKey{p.Topic, p.TopicID}
		i, ok := byTopic[k]
		if !ok {
			i = len(req.ForgottenTopics)
			byTopic[k] = i
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = p.Topic, p.TopicID
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, p.Partition)
	}
	return req, d
}

// forgetReplaced forgets h, the session's partition p had, when p is h's
// topic partition under another topic id: its topic was deleted and
// created again with the same name (KIP-516). From v13 the leader keys a
// session's partitions by topic id, so (old id, partition) is another
// partition that would stay in its session until the session ends; as
// Kafka's FetchSessionHandler ("replaced" partitions) the request forgets
// it next to sending p. Before v13 the leader keys by name and p simply
// replaces it. A zero id on either side is not a replacement (Kafka's test).
func (d *sessionDelta) forgetReplaced(h heldFetch, p replica.FetchPartition, version int16) {
	if version >= 13 && h.topicID != p.TopicID && h.topicID != [16]byte{} && p.TopicID != [16]byte{} {
		d.forgotten = append(d.forgotten, h.partition(p.TopicPartition))
	}
}

// missing lists the session's partitions in not asks for.
func (s *followerSession) missing(in *replica.FetchRequest) []replica.FetchPartition {
	asked := make(map[replica.TopicPartition]struct{}, len(in.Partitions))
	for _, p := range in.Partitions {
		asked[p.TopicPartition] = struct{}{}
	}
	var out []replica.FetchPartition
	for tp, h := range s.parts {
		if _, ok := asked[tp]; !ok {
			out = append(out, h.partition(tp))
		}
	}
	return out
}

// answered moves the session past a request the leader answered without
// error, in a session sessionID (0: none).
func (s *followerSession) answered(d sessionDelta, sessionID int32) {
	switch {
	case sessionID == 0 || !d.full && sessionID != s.id:
		s.id, s.epoch, s.parts, s.topics = 0, 0, nil, nil // none: the next request is full and asks again
		return
	case d.full:
		s.parts = make(map[replica.TopicPartition]heldFetch, len(d.sent))
		s.topics = map[[16]byte]*sessionTopic{}
		s.id, s.epoch = sessionID, 1
	default:
		s.epoch = nextSessionEpoch(s.epoch)
	}
	for _, p := range d.sent {
		if h, ok := s.parts[p.TopicPartition]; ok {
			s.unrefTopic(h.topicID)
		}
		s.parts[p.TopicPartition] = heldFetchOf(p)
		t := s.topics[p.TopicID]
		if t == nil {
			t = &sessionTopic{name: p.Topic}
			s.topics[p.TopicID] = t
		}
		t.parts++
	}
	for _, p := range d.forgotten {
		// A replaced partition's new id was just taken from d.sent: only
		// the old one is forgotten.
		if h, ok := s.parts[p.TopicPartition]; ok && h.topicID == p.TopicID {
			s.unrefTopic(h.topicID)
			delete(s.parts, p.TopicPartition)
		}
	}
}

// unrefTopic counts one partition of topic id less.
func (s *followerSession) unrefTopic(id [16]byte) {
	if t := s.topics[id]; t != nil {
		if t.parts--; t.parts <= 0 {
			delete(s.topics, id)
		}
	}
}

// topicName is the name of topic id among the session's partitions and
// those of request d, "" when neither has it; d's are looked at only when
// the session does not know the id (a topic new to it).
func (s *followerSession) topicName(d sessionDelta) func(id [16]byte) string {
	names := map[[16]byte]string{}
	next := 0 // d.sent before next are in names
	return func(id [16]byte) string {
		if t := s.topics[id]; t != nil {
			return t.name
		}
		if n, ok := names[id]; ok {
			return n
		}
		for ; next < len(d.sent); next++ {
			p := d.sent[next]
			if _, ok := names[p.TopicID]; !ok {
				names[p.TopicID] = p.Topic
			}
			if p.TopicID == id {
				next++
				return p.Topic
			}
		}
		return ""
	}
}

// reset makes the next request full; it names the old session, which the
// leader then closes.
func (s *followerSession) reset() { s.epoch, s.parts, s.topics = 0, nil, nil }

// sessionError reports a top-level error about the session itself.
func sessionError(code int16) bool {
	return code == kerr.FetchSessionIDNotFound.Code || code == kerr.InvalidFetchSessionEpoch.Code ||
		code == kerr.FetchSessionTopicIDError.Code
}
