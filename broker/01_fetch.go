package broker

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// Fetch of data partitions: v4-v16, on broker listeners. (quorum/01_fetch.go
// answers Fetch of __cluster_metadata on the controller listener; the two never
// share a listener, so the app routes by listener.)
//
// Behaviour, as Kafka's KafkaApis.handleFetchRequest / ReplicaManager.fetchMessages
// for consumers:
//   - Topics by name, or by id from v13 (an unknown id is UNKNOWN_TOPIC_ID); a
//     partition this broker does not lead is NOT_LEADER_OR_FOLLOWER (v16 adds
//     the leader and its endpoint, KIP-951); CurrentLeaderEpoch (v9+) fences
//     with FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320); an offset
//     outside the log is OFFSET_OUT_OF_RANGE.
//   - Records are whole batches below the high watermark (read_uncommitted)
//     or the last stable offset (read_committed: below the earliest
//     undecided transaction); read_committed gets the aborted transactions
//     of the range in AbortedTransactions (empty when none), others null.
//   - Bytes: each partition at most PartitionMaxBytes, the response at most
//     MaxBytes (v3+), except that the first partition with data returns at least
//     one whole batch (KIP-74).
//   - Long poll: with fewer than MinBytes and no error, the answer waits up to
//     MaxWaitMillis for a high watermark move on any fetched partition.
//   - Incremental fetch sessions (KIP-227, v7+) for consumers and
//     followers alike: see fetch_sessions.go. The session decides which
//     partitions are read (those that can have news: fetchSession) and
//     which the answer carries; errors FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
//     and FETCH_SESSION_TOPIC_ID_ERROR answer with no topics.
//   - Replica fetches (ReplicaID, or ReplicaState.ID from v15, >= 0) come from
//     followers (replica.Partition.ReadForFollower): records up to the log
//     end, not the high watermark; a follower outside the assignment, or with
//     a broker epoch older than its registration, is NOT_LEADER_OR_FOLLOWER;
//     LastFetchedEpoch (v12+) is checked against the epoch cache and a
//     divergent log answered with DivergingEpoch and no records; the fetch
//     offset becomes the follower's log end offset (high watermark, ISR
//     expansion). Their long poll is woken by appends.
func (c *ClientAPI) handleFetch(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	fctx := c.sessions.newContext(req.Body.(*kmsg.FetchRequest), time.Now().UnixMilli())
	if fctx.errCode != 0 {
		resp := req.Body.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = fctx.errCode
		return resp, nil
	}
	var resp *kmsg.FetchResponse
	var rs fetchRegions
	var err error
	if fctx.session != nil {
		resp, rs, fctx.body, err = c.fetchSession(ctx, req.Listener, fctx)
	} else {
		resp, rs, err = c.fetchLongPoll(ctx, req.Listener, fctx.body)
	}
	if err != nil {
		return nil, err
	}
	replicaID, _ := fetchReplica(fctx.body)
	c.sessions.finish(fctx, resp, replicaID >= 0, time.Now().UnixMilli())
	if len(rs) == 0 { // copied, or nothing read
		return resp, nil
	}
	return newSplicedFetch(resp, rs) // see fetch_splice.go
}

// fetchLongPoll reads body's partitions, waiting up to MaxWaitMillis for
// MinBytes. The records are regions in rs (nil when copied: copyRecords).
func (c *ClientAPI) fetchLongPoll(ctx context.Context, listener string, body *kmsg.FetchRequest) (*kmsg.FetchResponse, fetchRegions, error) {
	wait := time.Duration(max(body.MaxWaitMillis, 0)) * time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// One waiter per pass, registered with every partition before it is
		// read: a move after the read wakes it, and the wait is one channel
		// however many partitions the fetch holds (issue 17).
		w := replica.NewWaiter()
		resp, rs, fr := c.fetchOnce(listener, body, nil, func(_ int, p *replica.Partition, follower bool) {
			if follower {
				p.WakeOnAppend(w)
			} else {
				p.WakeOnChange(w)
			}
		})
		if fr.bytes >= int(body.MinBytes) || fr.errors || wait <= 0 || fr.watched == 0 {
			w.Stop()
			return resp, rs, nil
		}
		rs.releaseAll() // a later pass reads again
		c.fetchWaiting.Add(1)
		select {
		case <-ctx.Done():
			c.fetchWaiting.Add(-1)
			w.Stop()
			return nil, nil, ctx.Err()
		case <-timer.C:
			c.fetchWaiting.Add(-1)
			w.Stop()
			resp, rs, _ = c.fetchOnce(listener, body, nil, nil)
			return resp, rs, nil
		case <-w.C():
			c.fetchWaiting.Add(-1)
			w.Stop()
		}
	}
}

// fetchSession is fetchLongPoll for an incremental fetch in fctx.session:
// each pass reads only the partitions of the session that can have news
// (sessionRound, fetch_sessions.go), registering the session's Waiter with
// them first, and waits on that Waiter. It returns the body its last pass
// read (the answer's partitions, for finish).
func (c *ClientAPI) fetchSession(ctx context.Context, listener string, fctx fetchContext) (*kmsg.FetchResponse, fetchRegions, *kmsg.FetchRequest, error) {
	s, req := fctx.session, fctx.body
	r := s.beginRound(fctx.named, time.Now().UnixMilli())
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for last := false; ; {
		r.collect()
		body := c.sessions.roundBody(req, r)
		resp, rs, fr := c.fetchOnce(listener, body, s.fetchedMs, r.watch)
		if last || fr.bytes >= int(req.MinBytes) || fr.errors || wait <= 0 {
			r.answered(resp, fr.again)
			return resp, rs, body, nil
		}
		rs.releaseAll() // a later pass reads again
		c.fetchWaiting.Add(1)
		select {
		case <-ctx.Done():
			c.fetchWaiting.Add(-1)
			r.abandon()
			return nil, nil, nil, ctx.Err()
		case <-timer.C:
			last = true
		case <-s.w.C():
		}
		c.fetchWaiting.Add(-1)
	}
}

// fetchRound is what one pass over the request found.
type fetchRound struct {
	bytes   int
	errors  bool
	watched int // partitions watch was called for
	// again are the indexes (in request order) of the partitions a fetch
	// session reads again at its next fetch even if nothing wakes them:
	// those whose records the byte budget may have left out, and those
	// whose follower the leader owes a state update (not in the ISR:
	// replica.FollowerRead.OutOfISR).
	again []int
}

// fetchOnce reads every requested partition once: records as regions in rs
// (nil with copyRecords, then in RecordBatches). watch, if not nil, is
// called with the index (in request order) of each partition read, before
// the read, and whether the fetch is a follower's. sessionMs is the time of
// the latest fetch of the follower fetch session body comes from (nil for
// none), handed to the partitions a follower's read reaches
// (replica.FollowerFetch.SessionFetchMs).
func (c *ClientAPI) fetchOnce(listener string, body *kmsg.FetchRequest, sessionMs *atomic.Int64,
	watch func(i int, p *replica.Partition, follower bool)) (*kmsg.FetchResponse, fetchRegions, fetchRound) {
	resp := body.ResponseKind().(*kmsg.FetchResponse)
	img := c.cfg.Metadata.Image()
	var fr fetchRound
	var hints []leaderHint
	var rs fetchRegions
	if !c.copyRecords.Load() {
		rs = fetchRegions{}
	}
	remaining := math.MaxInt32
	if body.Version >= 3 {
		remaining = int(max(body.MaxBytes, 0))
	}
	minOne := true
	i := -1 // the partition's index in request order
	for _, rt := range body.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t, unknownID := fetchTopic(img, body.Version, rt)
		for _, rp := range rt.Partitions {
			i++
			sp := kmsg.NewFetchResponseTopicPartition()
			// Kafka answers empty records, never null: librdkafka rejects a
			// null record set ("invalid MessageSetSize -1").
			sp.Partition, sp.HighWatermark, sp.RecordBatches = rp.Partition, -1, []byte{}
			if body.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			var p *replica.Partition
			var err error
			if unknownID {
				sp.ErrorCode = kerr.UnknownTopicID.Code
			} else if p, err = c.hostedPartition(img, t, rp.Partition); err == nil {
				limit := min(int(max(rp.PartitionMaxBytes, 0)), remaining)
				replicaID, brokerEpoch := fetchReplica(body)
				if watch != nil {
					watch(i, p, replicaID >= 0)
					fr.watched++
				}
				c.fetchReads.Add(1)
				var n int
				var again bool
				if replicaID >= 0 {
					n, again, err = fetchForFollower(p, &sp, rs, body.Version, rp, replicaID, brokerEpoch, limit, minOne, sessionMs)
					if sp.DivergingEpoch.EndOffset >= 0 {
						fr.bytes++ // a divergence answers at once
					}
				} else {
					n, again, err = fetchPartition(p, &sp, rs, body.Version, rp, limit, minOne, body.IsolationLevel == 1)
				}
				if again || limit <= 0 {
					fr.again = append(fr.again, i)
				}
				remaining -= n
				fr.bytes += n
				minOne = minOne && n == 0
			}
			if err != nil {
				sp.ErrorCode = replicaErrorCode(err)
			}
			if sp.ErrorCode != 0 {
				fr.errors = true
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && body.Version >= 16 {
					if h := partitionLeaderHint(t, rp.Partition); h.ok {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = h.leaderID, h.leaderEpoch
						hints = append(hints, h)
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, b := range produceLeaderEndpoints(img, listener, hints) {
		fb := kmsg.NewFetchResponseBroker()
		fb.NodeID, fb.Host, fb.Port, fb.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, fb)
	}
	return resp, rs, fr
}

// fetchTopic resolves a requested topic by id (v13+) or name; unknownID is set
// for an id the image does not know.
func fetchTopic(img *image.Image, version int16, rt kmsg.FetchRequestTopic) (t *image.Topic, unknownID bool) {
	if version >= 13 {
		t, ok := img.TopicByID(records.UUID(rt.TopicID))
		return t, !ok
	}
	t, _ = img.TopicByName(rt.Topic)
	return t, false
}

// fetchPartition reads one partition into sp and returns the bytes it added.
// Without minOne, a first batch larger than limit is left out (skipped). With
// rs, the records are a region of the segment file (RecordBatches its
// placeholder).
func fetchPartition(p *replica.Partition, sp *kmsg.FetchResponseTopicPartition, rs fetchRegions, version int16,
	rp kmsg.FetchRequestTopicPartition, limit int, minOne, readCommitted bool) (n int, skipped bool, err error) {
	epoch := int32(-1)
	if version >= 9 {
		epoch = rp.CurrentLeaderEpoch
	}
	var rr replica.ReadResult
	if rs != nil {
		rr, err = p.ReadRegionAsLeader(rp.FetchOffset, max(limit, 0), epoch, readCommitted)
	} else {
		rr, err = p.ReadAsLeaderIsolated(rp.FetchOffset, max(limit, 0), epoch, readCommitted)
	}
	if err == nil || errors.Is(err, replica.ErrOffsetOutOfRange) {
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rr.HighWatermark, rr.LastStableOffset, rr.LogStartOffset
	}
	if err != nil {
		return 0, false, err
	}
	n, skipped = setRecords(sp, rs, rr.Records, rr.Region, limit, minOne)
	if n == 0 {
		return 0, skipped, nil
	}
	for _, a := range rr.AbortedTxns {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		sp.AbortedTransactions = append(sp.AbortedTransactions, at)
	}
	return n, false, nil
}

// setRecords puts what a partition read (records, or with rs a region) into
// sp and returns its size; a first batch larger than limit is left out (and
// its region released) unless minOne: skipped.
func setRecords(sp *kmsg.FetchResponseTopicPartition, rs fetchRegions, records []byte, region storage.Region, limit int, minOne bool) (int, bool) {
	n := len(records)
	if rs != nil {
		n = int(region.Len)
	}
	if n == 0 || (n > limit && !minOne) {
		region.Release()
		return 0, n > 0
	}
	if rs != nil {
		sp.RecordBatches = rs.add(region)
	} else {
		sp.RecordBatches = records
	}
	return n, false
}

// fetchReplica is the fetching replica's id and broker epoch: ReplicaState
// from v15, ReplicaID before (no epoch: -1); the id is -1 for consumers.
func fetchReplica(body *kmsg.FetchRequest) (int32, int64) {
	if body.Version >= 15 {
		return body.ReplicaState.ID, body.ReplicaState.Epoch
	}
	return body.ReplicaID, -1
}

// fetchForFollower reads one partition for a follower into sp and returns
// the bytes it added (records as in fetchPartition), and again: the byte
// budget left records out, or the follower is outside the ISR (a session
// reads the partition at its next fetch, fetchRound.again).
func fetchForFollower(p *replica.Partition, sp *kmsg.FetchResponseTopicPartition, rs fetchRegions, version int16,
	rp kmsg.FetchRequestTopicPartition, replicaID int32, brokerEpoch int64, limit int, minOne bool, sessionMs *atomic.Int64) (n int, again bool, err error) {
	ff := replica.FollowerFetch{ReplicaID: replicaID, BrokerEpoch: brokerEpoch, FetchOffset: rp.FetchOffset,
		LogStartOffset: -1, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: max(limit, 0), Region: rs != nil,
		SessionFetchMs: sessionMs}
	if version >= 5 {
		ff.LogStartOffset = rp.LogStartOffset
	}
	if version >= 9 {
		ff.CurrentLeaderEpoch = rp.CurrentLeaderEpoch
	}
	if version >= 12 {
		ff.LastFetchedEpoch = rp.LastFetchedEpoch
	}
	rr, err := p.ReadForFollower(ff)
	again = rr.OutOfISR
	if err == nil || errors.Is(err, replica.ErrOffsetOutOfRange) {
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rr.HighWatermark, rr.HighWatermark, rr.LogStartOffset
	}
	if err != nil {
		rr.Region.Release()
		return 0, false, err
	}
	if d := rr.Diverging; d != nil && version >= 12 {
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
		rr.Region.Release()
		return 0, again, nil
	}
	n, skipped := setRecords(sp, rs, rr.Records, rr.Region, limit, minOne)
	return n, skipped || again, nil
}
