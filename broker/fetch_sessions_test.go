package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a consumer fetch at v12 (topics by name) or v13 (by id)
// in session id at epoch, naming partitions of demo at offsets (partition
// -> offset) and forgetting forget.
func (d *dataHarness) sessionFetch(version int16, id, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchResponse {
	d.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "demo", d.demoID
		for _, p := range []int32{0, 1} {
			if off, ok := offsets[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = "demo", d.demoID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return d.request(req).(*kmsg.FetchResponse)
}

// partitionsOf lists the answered partitions with their error codes.
func partitionsOf(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

// A KIP-227 session over the wire: the full fetch opens it, incremental
// fetches carry only partitions with news (records, a new high watermark,
// an error, every time), forgotten partitions leave it, and a session left
// empty closes; stale epochs, unknown ids, a change of addressing and a
// final epoch are answered as Kafka's FetchManager does.
func TestFetchSessions(t *testing.T) {
	for _, v := range []int16{12, 13} {
		d := newDataHarness(t, 0)
		d.produce(11, -1, "demo", 0, recordBatch(2))
		// demo-1 is led by broker 2: NOT_LEADER_OR_FOLLOWER in every answer.
		full := d.sessionFetch(v, 0, 0, map[int32]int64{0: 0, 1: 0})
		id := full.SessionID
		parts := partitionsOf(full)
		if full.ErrorCode != 0 || id <= 0 || len(parts) != 2 || len(parts[0].RecordBatches) == 0 ||
			parts[1].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d full fetch: session %d error %d partitions %+v", v, id, full.ErrorCode, parts)
		}
		// The consumer moved to offset 2: nothing new on demo-0.
		inc := d.sessionFetch(v, id, 1, map[int32]int64{0: 2})
		if parts := partitionsOf(inc); inc.ErrorCode != 0 || inc.SessionID != id || len(parts) != 1 ||
			parts[1].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d incremental without news: session %d error %d partitions %+v", v, inc.SessionID, inc.ErrorCode, parts)
		}
		// A new record: demo-0 comes back, read from the session's offset 2.
		d.produce(11, -1, "demo", 0, recordBatch(1))
		inc = d.sessionFetch(v, id, 2, nil)
		if parts := partitionsOf(inc); inc.ErrorCode != 0 || len(parts) != 2 || parts[0].HighWatermark != 3 ||
			len(parts[0].RecordBatches) == 0 {
			t.Fatalf("v%d incremental after a produce: error %d partitions %+v", v, inc.ErrorCode, parts)
		}
		// The same epoch again is stale.
		if stale := d.sessionFetch(v, id, 2, nil); stale.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(stale.Topics) != 0 {
			t.Fatalf("v%d stale epoch: error %d topics %d", v, stale.ErrorCode, len(stale.Topics))
		}
		// Forgetting demo-1 keeps the session; forgetting demo-0 too closes it.
		if inc = d.sessionFetch(v, id, 3, map[int32]int64{0: 3}, 1); inc.ErrorCode != 0 || inc.SessionID != id || len(inc.Topics) != 0 {
			t.Fatalf("v%d forget demo-1: session %d error %d topics %+v", v, inc.SessionID, inc.ErrorCode, inc.Topics)
		}
		if inc = d.sessionFetch(v, id, 4, nil, 0); inc.ErrorCode != 0 || inc.SessionID != 0 {
			t.Fatalf("v%d forget the last partition: session %d error %d", v, inc.SessionID, inc.ErrorCode)
		}
		if gone := d.sessionFetch(v, id, 5, nil); gone.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(gone.Topics) != 0 {
			t.Fatalf("v%d closed session: error %d", v, gone.ErrorCode)
		}
		// A final epoch closes the session it names and opens none.
		id = d.sessionFetch(v, 0, 0, map[int32]int64{0: 0}).SessionID
		if final := d.sessionFetch(v, id, -1, map[int32]int64{0: 0}); final.ErrorCode != 0 || final.SessionID != 0 ||
			len(partitionsOf(final)[0].RecordBatches) == 0 {
			t.Fatalf("v%d final epoch: session %d error %d", v, final.SessionID, final.ErrorCode)
		}
		if gone := d.sessionFetch(v, id, 1, nil); gone.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d session closed by a final epoch: error %d", v, gone.ErrorCode)
		}
	}
	// A session keeps its addressing: by name (v12), not by id (v13).
	d := newDataHarness(t, 0)
	id := d.sessionFetch(12, 0, 0, map[int32]int64{0: 0}).SessionID
	if mixed := d.sessionFetch(13, id, 1, nil); mixed.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v13 fetch in a v12 session: error %d", mixed.ErrorCode)
	}
}

// The cache holds at most its slots: a new session takes the slot of one
// unused for fetchSessionEvictionMs, else of a less valuable one (fewer
// partitions, not a follower's), else gets none; a follower's session is
// evicted only by another follower's.
func TestFetchSessionCacheEviction(t *testing.T) {
	next := int32(0)
	fc := newFetchSessionCache(2, func() int32 { next++; return next })
	open := func(partitions int, follower bool, nowMs int64) int32 {
		return openSession(fc, "t", partitions, follower, nowMs)
	}
	a := open(2, false, 0)
	b := open(3, true, 0)
	if a == 0 || b == 0 {
		t.Fatalf("free slots: sessions %d %d", a, b)
	}
	if c := open(1, false, 1000); c != 0 {
		t.Fatalf("a smaller session evicted a larger one: %d", c)
	}
	c := open(5, false, 1000)
	if c == 0 || fc.sessions[a] != nil || fc.sessions[b] == nil {
		t.Fatalf("a larger consumer session: %d, sessions %v", c, fc.sessions)
	}
	// Only consumer sessions are evictable by consumers: the 5-partition
	// one goes, the follower's 3-partition one stays.
	if e := open(50, false, 2000); e == 0 || fc.sessions[c] != nil || fc.sessions[b] == nil {
		t.Fatalf("a 50-partition consumer session: %d, sessions %v", e, fc.sessions)
	}
	// Followers' sessions rank above consumers' of any size: a follower's
	// new session evicts the 50-partition consumer session.
	if f := open(1, true, 3000); f == 0 || fc.sessions[b] == nil || len(fc.sessions) != 2 {
		t.Fatalf("a follower session: %d, sessions %v", f, fc.sessions)
	}
	if g := open(1, false, 3000); g != 0 {
		t.Fatalf("a consumer session evicted a follower's: %d", g)
	}
	if c := open(1, false, 3000+fetchSessionEvictionMs+1); c == 0 {
		t.Fatal("no slot after every session went stale")
	}
	if len(fc.sessions) != 2 {
		t.Fatalf("%d sessions in 2 slots", len(fc.sessions))
	}
	// The partitions of all sessions are bounded: past it no session opens,
	// and one that grows past it closes.
	fc = newFetchSessionCache(10, func() int32 { next++; return next })
	fc.maxPartitions = 3
	first := open(2, false, 0)
	if second := open(2, false, 0); first == 0 || second != 0 || fc.partitions != 2 {
		t.Fatalf("sessions of 2 and 2 partitions under a bound of 3: %d %d, %d cached", first, second, fc.partitions)
	}
	if fctx := fc.newContext(growFetch(first, "u"), 0); !fctx.full || fctx.session != nil || len(fc.sessions) != 0 || fc.partitions != 0 {
		t.Fatalf("a session grown past the bound: %+v, %d sessions, %d cached", fctx, len(fc.sessions), fc.partitions)
	}
	if off := newFetchSessionCache(0, func() int32 { return 1 }); off.maxSlots != 0 {
		t.Fatal("disabled cache has slots")
	} else if fc = off; open(1, false, 0) != 0 {
		t.Fatal("a disabled cache opened a session")
	}
}

// openSession sends fc a full fetch (epoch 0) of topic's partitions 0 to
// partitions-1, a follower's when follower, and returns the session id
// answered (0: none).
func openSession(fc *fetchSessionCache, topic string, partitions int, follower bool, nowMs int64) int32 {
	body := kmsg.NewPtrFetchRequest()
	body.SetVersion(12)
	body.SessionEpoch = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	body.Topics = []kmsg.FetchRequestTopic{rt}
	fctx := fc.newContext(body, nowMs)
	resp := body.ResponseKind().(*kmsg.FetchResponse)
	fc.finish(fctx, resp, follower, nowMs)
	return resp.SessionID
}

// A session abandoned by its follower (the answer that opened it lost) must
// not hold the partition bound for ever: a follower's session idle for
// followerSessionIdleMs gives way to a new or growing session, least
// recently used first; a consumer's only after fetchSessionEvictionMs, and
// a session in use never. Before, orphans of ~333k partitions each kept
// every later session from opening at 1M partitions, and the followers
// fetched in full every round (issue 17).
func TestFetchSessionCacheEvictsIdleForPartitionBound(t *testing.T) {
	next := int32(0)
	fc := newFetchSessionCache(10, func() int32 { next++; return next })
	fc.maxPartitions = 5
	orphan := openSession(fc, "t", 3, true, 0)
	if again := openSession(fc, "t", 3, true, 0); orphan == 0 || again != 0 {
		t.Fatalf("sessions of 3 and 3 under a bound of 5, both in use: %d %d", orphan, again)
	}
	if early := openSession(fc, "t", 3, true, followerSessionIdleMs); early != 0 {
		t.Fatalf("a follower session idle %d ms was closed for a new one", followerSessionIdleMs)
	}
	now := int64(followerSessionIdleMs + 1)
	renewed := openSession(fc, "t", 3, true, now)
	if renewed == 0 || fc.sessions[orphan] != nil || fc.partitions != 3 {
		t.Fatalf("an idle follower session kept the bound: new %d, sessions %v, %d cached", renewed, fc.sessions, fc.partitions)
	}
	// A consumer's idle session is closed for the bound only once it is
	// stale by Kafka's measure.
	consumer := openSession(fc, "c", 2, false, now)
	if consumer == 0 || fc.partitions != 5 {
		t.Fatalf("a consumer session of 2 beside 3: %d, %d cached", consumer, fc.partitions)
	}
	fc.sessions[renewed].lastUsedMs = now + fetchSessionEvictionMs // in use
	if f := openSession(fc, "f", 1, true, now+fetchSessionEvictionMs); f != 0 {
		t.Fatalf("a consumer session idle %d ms was closed", fetchSessionEvictionMs)
	}
	if f := openSession(fc, "f", 1, true, now+fetchSessionEvictionMs+1); f == 0 || fc.sessions[consumer] != nil || fc.sessions[renewed] == nil {
		t.Fatalf("a stale consumer session kept the bound: %d, sessions %v", f, fc.sessions)
	}
	// A session growing past the bound closes idle others, never itself.
	fc = newFetchSessionCache(10, func() int32 { next++; return next })
	fc.maxPartitions = 5
	idle := openSession(fc, "t", 2, true, 0)
	growing := openSession(fc, "u", 2, true, 0)
	fctx := fc.newContext(growFetch(growing, "v"), followerSessionIdleMs+1)
	if fctx.full || fctx.session == nil || fc.sessions[idle] != nil || fc.sessions[growing] == nil || fc.partitions != 4 {
		t.Fatalf("a session grown past the bound beside an idle one: %+v, sessions %v, %d cached", fctx, fc.sessions, fc.partitions)
	}
}

// growFetch is an incremental fetch (epoch 1) in session id adding
// partitions 0 and 1 of topic.
func growFetch(id int32, topic string) *kmsg.FetchRequest {
	grow := kmsg.NewPtrFetchRequest()
	grow.SetVersion(12)
	grow.SessionID, grow.SessionEpoch = id, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = make([]kmsg.FetchRequestTopicPartition, 2)
	rt.Partitions[1].Partition = 1
	grow.Topics = []kmsg.FetchRequestTopic{rt}
	return grow
}
