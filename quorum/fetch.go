package quorum

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// handleFetch answers a Fetch on any node: non-leaders answer with an error and their
// view of the leader (how observers discover it); the leader validates, records the
// fetcher's progress, and answers or parks the request.
func (r *Raft) handleFetch(nowMs int64, m Message) {
	req := m.Fetch
	if code := r.validateFetch(req); code != 0 {
		r.replyFetch(m, &FetchResponse{ErrorCode: code})
		return
	}
	resp := &FetchResponse{}
	if id := r.snapshotForFetch(req); id != nil {
		resp.SnapshotID = id
		r.noteFetcher(nowMs, req, false)
		r.replyFetch(m, resp)
		return
	}
	if div := r.divergence(req.FetchOffset, req.LastFetchedEpoch); div != nil {
		resp.DivergingEpoch = div
		r.noteFetcher(nowMs, req, false)
		r.replyFetch(m, resp)
		return
	}
	r.noteFetcher(nowMs, req, true)
	r.maybeAdvanceHW()
	resp.Batches = r.log.read(req.FetchOffset, int(r.cfg.FetchMaxBytes))
	if len(resp.Batches) > 0 || req.MaxWaitMs == 0 || r.fetcherMissesHW(m.From) {
		r.replyFetch(m, resp)
		return
	}
	r.lead.parked = append(r.lead.parked, parkedFetch{
		from: m.From, requestID: m.RequestID, req: req, deadlineMs: nowMs + int64(req.MaxWaitMs),
	})
}

// validateFetch checks the Fetch fields (INVALID_REQUEST), then validates the epoch
// as every leader-only request does, in Kafka's order (handleFetchRequest).
func (r *Raft) validateFetch(req *FetchRequest) int16 {
	if req.FetchOffset < 0 || req.LastFetchedEpoch < 0 || req.MaxWaitMs < 0 ||
		req.LastFetchedEpoch > req.CurrentLeaderEpoch {
		return kerr.InvalidRequest.Code
	}
	return r.validateLeaderRequest(req.CurrentLeaderEpoch)
}

// validateLeaderRequest is Kafka's validateLeaderOnlyRequest for Fetch and
// FetchSnapshot, in its order: an older epoch is FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH, a node that does not lead the epoch answers
// NOT_LEADER_OR_FOLLOWER, and a leader that is shutting down BROKER_NOT_AVAILABLE.
//
// Kafka's leader resigns on the first poll after its shutdown begins, and from then
// on fails the leader check, so it answers BROKER_NOT_AVAILABLE only until that poll.
// Shutdown here resigns at once, so that window would be empty. The resigned leader
// of a shutdown therefore still counts as the epoch's leader here and keeps
// answering BROKER_NOT_AVAILABLE for the whole hand-over. That answer makes a Kafka
// fetcher back off this node, and an observer ask another voter. NOT_LEADER_OR_FOLLOWER
// naming the same leader and epoch instead makes it fetch from here again at once.
func (r *Raft) validateLeaderRequest(epoch int32) int16 {
	shuttingDown := r.role == Resigned && r.resigned.shutdown
	switch {
	case epoch < r.epoch:
		return kerr.FencedLeaderEpoch.Code
	case epoch > r.epoch:
		return kerr.UnknownLeaderEpoch.Code
	case r.role != Leader && !shuttingDown:
		return kerr.NotLeaderForPartition.Code
	case shuttingDown:
		return kerr.BrokerNotAvailable.Code
	}
	return 0
}

// divergence validates (fetchOffset, lastFetchedEpoch) against the epoch cache (spec
// section 2.7) and returns the DivergingEpoch to send, or nil when the fetcher's log is
// a prefix of this one.
func (r *Raft) divergence(fetchOffset int64, lastFetchedEpoch int32) *EpochEndOffset {
	if fetchOffset == 0 && r.log.startOffset == 0 {
		return nil
	}
	epoch, end := r.log.endOffsetForEpoch(lastFetchedEpoch)
	if epoch != lastFetchedEpoch || end < fetchOffset {
		return &EpochEndOffset{Epoch: epoch, EndOffset: end}
	}
	return nil
}

// DefaultMaxTrackedObservers is how many observers a leader tracks at most
// (Config.MaxTrackedObservers): about 150 bytes each, 600 KB in all, and as many rows
// in a DescribeQuorum answer. A real cluster has one observer per broker.
const DefaultMaxTrackedObservers = 4096

// noteFetcher records a fetcher's progress. A voter's fetch also counts toward
// check-quorum and acknowledges BeginQuorumEpoch. Only a valid (non-diverging) fetch
// offset is an acknowledged end offset.
//
// The replica id of a Fetch is whatever the sender wrote, so each new id would add an
// observer entry, kept observerSessionTimeoutMs. Once Config.MaxTrackedObservers
// observers are tracked, a Fetch from an id not tracked is still served in full but
// not tracked (counted in Counters.ObserversUntracked): DescribeQuorum does not list
// it, and a commit reaches it when the high watermark moves, or when its Fetch's
// MaxWait runs out if it missed that move (without an entry the leader does not know
// which high watermark it last sent it). Not tracking the newcomer, rather than
// evicting the least recently seen, keeps every replica already tracked: a flood of
// forged ids cannot push the real brokers out of DescribeQuorum, and admission costs
// no scan. Tracked entries free up as observers stop fetching for the session timeout.
func (r *Raft) noteFetcher(nowMs int64, req *FetchRequest, valid bool) {
	if req.ReplicaID < 0 {
		return
	}
	rs := r.lead.replicas[req.ReplicaID]
	if rs != nil && rs.voter {
		if dir := r.voterDirectoryID(req.ReplicaID); dir != [16]byte{} && dir != req.ReplicaDirectoryID && !mutDiskAck {
			// The voter's id on another disk (a replaced one: KIP-853 makes it a new
			// replica), or with no directory id (Fetch before v17): not the voter, so
			// neither its offset nor its fetch counts for it, as Kafka's
			// ReplicaState.matchesKey. Kafka tracks it as an observer; here it is
			// served, not tracked, until the voter is removed and its entry becomes an
			// observer's.
			return
		}
	}
	if rs == nil {
		// Voters all have an entry, so this is an observer (expireObservers drops it).
		if len(r.lead.replicas)-len(r.voterIDs()) >= r.cfg.MaxTrackedObservers {
			r.counters.observersUntracked++
			return
		}
		rs = &replicaState{id: req.ReplicaID, endOffset: -1, lastFetchMs: -1, lastCaughtUpMs: -1}
		r.lead.replicas[req.ReplicaID] = rs
		r.lead.observerExpiryMs = min(r.lead.observerExpiryMs, nowMs+observerSessionTimeoutMs)
	}
	rs.lastFetchMs = nowMs
	rs.dirID = req.ReplicaDirectoryID
	if !valid {
		return
	}
	leo := r.log.endOffset()
	switch {
	case req.FetchOffset >= leo:
		rs.lastCaughtUpMs = max(rs.lastCaughtUpMs, nowMs)
	case rs.prevFetchMs > 0 && req.FetchOffset >= rs.prevLeaderEnd:
		rs.lastCaughtUpMs = max(rs.lastCaughtUpMs, rs.prevFetchMs)
	}
	rs.prevFetchMs, rs.prevLeaderEnd = nowMs, leo
	rs.endOffset = req.FetchOffset
}

// replyFetch fills the fields every Fetch answer carries and sends it.
func (r *Raft) replyFetch(m Message, resp *FetchResponse) {
	resp.LeaderID, resp.LeaderEpoch = r.leaderID, r.epoch
	if r.role == Resigned {
		resp.LeaderID = r.cfg.NodeID
	}
	resp.HighWatermark = r.leaderHW()
	resp.LogStartOffset = r.log.startOffset
	if rs := r.fetcherState(m.From); rs != nil && resp.ErrorCode == 0 {
		rs.sentHW = max(rs.sentHW, resp.HighWatermark)
	}
	r.send(Message{To: m.From, RequestID: m.RequestID, FetchResp: resp})
}

// fetcherState is the leader's record of replica id, nil when not leading or unknown.
func (r *Raft) fetcherState(id int32) *replicaState {
	if r.lead == nil {
		return nil
	}
	return r.lead.replicas[id]
}

// fetcherMissesHW reports whether the leader's high watermark is above the last one it
// sent to replica id, so a Fetch with no new records should be answered at once.
func (r *Raft) fetcherMissesHW(id int32) bool {
	rs := r.fetcherState(id)
	return rs != nil && rs.sentHW < r.leaderHW()
}

// completeParkedFetches answers parked fetches whose offset the log has moved past, all
// of them when all is set (the high watermark moved), or only those past their
// deadline when onlyExpired is set.
func (r *Raft) completeParkedFetches(nowMs int64, onlyExpired, all bool) {
	l := r.lead
	keep := l.parked[:0]
	leo := r.log.endOffset()
	for _, p := range l.parked {
		ready := all || p.deadlineMs <= nowMs || (!onlyExpired && leo > p.req.FetchOffset)
		if !ready {
			keep = append(keep, p)
			continue
		}
		resp := &FetchResponse{Batches: r.log.read(p.req.FetchOffset, int(r.cfg.FetchMaxBytes))}
		r.replyFetch(Message{From: p.from, RequestID: p.requestID}, resp)
	}
	clear(l.parked[len(keep):])
	l.parked = keep
}

func (r *Raft) expireParkedFetches(nowMs int64) { r.completeParkedFetches(nowMs, true, false) }

// failParkedFetches answers every parked fetch with NOT_LEADER_OR_FOLLOWER: the node is
// leaving leadership and must not leave fetchers waiting on a dead epoch.
func (r *Raft) failParkedFetches() {
	for _, p := range r.lead.parked {
		r.send(Message{To: p.from, RequestID: p.requestID, FetchResp: &FetchResponse{
			ErrorCode: kerr.NotLeaderForPartition.Code, HighWatermark: -1,
			LeaderID: r.cfg.NodeID, LeaderEpoch: r.epoch, LogStartOffset: r.log.startOffset,
		}})
	}
	r.lead.parked = nil
}
