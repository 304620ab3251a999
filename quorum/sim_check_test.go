package quorum_test

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// checker holds the cross-node history the invariants of kraft-behaviours.md §8 are
// judged against. Each violation is reported with the invariant's name first.
type checker struct {
	// leaders: epoch -> the one node that leads it (memory or disk, any life).
	leaders map[int32]int32
	// leaderLife: epoch -> life in which its leader persisted its leadership
	// (NoSameEpochReleadership).
	leaderLife map[int32]int
	// votes: (voter, its disk, epoch) -> candidate, from disk and from grants on the
	// wire (a replaced disk is a new replica: it may vote again).
	votes map[[3]int32]int32
	// diskEpoch: node -> highest persisted epoch.
	diskEpoch map[int32]int32
	// committed is the committed log as first seen, contiguous from offset 0.
	committed []raftlog.Batch
	// maxLeaderHW: the highest HW any leader exposed, and the epoch it did it in.
	maxLeaderHW      int64
	maxLeaderHWEpoch int32
	// leaderHW: epoch -> last HW its leader exposed.
	leaderHW map[int32]int64
}

func newChecker() *checker {
	return &checker{
		leaders: map[int32]int32{}, leaderLife: map[int32]int{}, votes: map[[3]int32]int32{},
		diskEpoch: map[int32]int32{}, leaderHW: map[int32]int64{},
	}
}

func (c *checker) commitEnd() int64 { return end(c.committed) }

// noteLeader enforces SingleLeaderPerEpoch for every leader claim seen anywhere.
func (c *checker) noteLeader(s *sim, epoch, leader int32, where string) {
	if leader < 0 || epoch < 0 {
		return
	}
	if l, ok := c.leaders[epoch]; ok && l != leader {
		s.fail("SingleLeaderPerEpoch: epoch %d has leaders %d and %d (%s)", epoch, l, leader, where)
		return
	}
	c.leaders[epoch] = leader
}

// checkSavedState runs when a quorum-state file becomes durable.
func (c *checker) checkSavedState(s *sim, n *simNode, st raftlog.QuorumState) {
	if prev, ok := c.diskEpoch[n.id]; ok && st.LeaderEpoch < prev {
		s.fail("MonotonicEpoch: node %d persists epoch %d after %d", n.id, st.LeaderEpoch, prev)
	}
	c.diskEpoch[n.id] = max(c.diskEpoch[n.id], st.LeaderEpoch)
	c.noteLeader(s, st.LeaderEpoch, st.LeaderID, "quorum-state file")
	if st.LeaderID == n.id {
		if _, ok := c.leaderLife[st.LeaderEpoch]; !ok {
			c.leaderLife[st.LeaderEpoch] = n.life
		}
	}
	if st.VotedID >= 0 {
		if !n.voter && s.dyn == nil { // at kraft.version 1 any replica grants votes
			s.fail("ObserversNeverCount: observer %d persisted a vote for %d", n.id, st.VotedID)
		}
		c.noteVote(s, n, st.LeaderEpoch, st.VotedID, "quorum-state file")
	}
}

func (c *checker) noteVote(s *sim, n *simNode, epoch, candidate int32, where string) {
	k := [3]int32{n.id, int32(n.gen), epoch}
	if v, ok := c.votes[k]; ok && v != candidate {
		s.fail("MonotonicEpoch(vote): node %d voted for %d and %d in epoch %d (%s)", n.id, v, candidate, epoch, where)
		return
	}
	c.votes[k] = candidate
}

// checkSend runs for every message a node's driver puts on the network.
func (c *checker) checkSend(s *sim, n *simNode, m quorum.Message) {
	if !n.voter && s.dyn == nil && (m.Vote != nil || m.BeginEpoch != nil || m.EndEpoch != nil) {
		s.fail("ObserversNeverCount: observer %d sends %s", n.id, m)
	}
	if m.Vote != nil && s.dyn != nil {
		st := n.node.Status()
		if v := s.logVoters(n); !inKeys(v.keys, n) && !s.removedPending(n, v, st) {
			s.fail("NonVotersNeverCampaign: node %d (disk %d) asks for votes in epoch %d outside the voter set %s of its log",
				n.id, n.gen, m.Vote.CandidateEpoch, keysString(v.keys))
		}
	}
	d := n.disk
	if e := msgEpoch(m); e > d.state.LeaderEpoch {
		s.failWB("PersistBeforeSend: node %d sends epoch %d with durable epoch %d: %s", n.id, e, d.state.LeaderEpoch, m)
	}
	if r := m.VoteResp; r != nil && r.VoteGranted && !r.PreVote {
		if d.state.LeaderEpoch != r.LeaderEpoch || d.state.VotedID != m.To {
			s.failWB("PersistBeforeSend: node %d grants %d in epoch %d, durable state %+v", n.id, m.To, r.LeaderEpoch, d.state)
		}
		c.noteVote(s, n, r.LeaderEpoch, m.To, "vote grant")
	}
	if claimsLeadership(n.id, m) && (d.state.LeaderEpoch != msgEpoch(m) || d.state.LeaderID != n.id) {
		s.failWB("PersistBeforeSend: node %d acts as leader of epoch %d with durable state %+v: %s", n.id, msgEpoch(m), d.state, m)
	}
	if f := m.Fetch; f != nil && n.flushesAll() && f.FetchOffset > 0 {
		// A voter's FetchOffset acknowledges durability: the leader builds the HW on it.
		i, j := batchAt(d.durable, f.FetchOffset-1), batchAt(d.cur, f.FetchOffset-1)
		if f.FetchOffset > d.start && (i < 0 || j < 0 || d.durable[i].Epoch != d.cur[j].Epoch || d.durable[i].LastOffset != d.cur[j].LastOffset) {
			s.failWB("PersistBeforeSend: voter %d acks offset %d, durable log end %d", n.id, f.FetchOffset, d.durEnd())
		}
	}
	if r := m.FetchResp; r != nil && r.ErrorCode == 0 && r.TopLevelErrorCode == 0 && m.Err == nil {
		st := n.node.Status()
		// A leader that removed itself resigns inside the Fetch that commits its
		// removal and answers it as the epoch's (same) leader.
		if st.Role != quorum.Leader && (st.Role != quorum.Resigned || s.dyn == nil) || r.LeaderID != n.id || r.LeaderEpoch != st.Epoch {
			s.failWB("SingleAppendSenderPerEpoch: node %d (%s epoch %d) answers a Fetch successfully naming leader %d epoch %d",
				n.id, st.Role, st.Epoch, r.LeaderID, r.LeaderEpoch)
		}
	}
}

// claimsLeadership: BeginQuorumEpoch and a successful Fetch answer speak as the
// leader, which must be durable first (a restart must come back Resigned).
func claimsLeadership(id int32, m quorum.Message) bool {
	if m.BeginEpoch != nil {
		return true
	}
	r := m.FetchResp
	return r != nil && m.Err == nil && r.ErrorCode == 0 && r.TopLevelErrorCode == 0 && r.LeaderID == id
}

// msgEpoch is the sender's epoch a message carries, or -1.
func msgEpoch(m quorum.Message) int32 {
	switch {
	case m.Vote != nil:
		return m.Vote.CandidateEpoch
	case m.VoteResp != nil:
		return m.VoteResp.LeaderEpoch
	case m.BeginEpoch != nil:
		return m.BeginEpoch.LeaderEpoch
	case m.BeginEpochResp != nil:
		return m.BeginEpochResp.LeaderEpoch
	case m.EndEpoch != nil:
		return m.EndEpoch.LeaderEpoch
	case m.EndEpochResp != nil:
		return m.EndEpochResp.LeaderEpoch
	case m.Fetch != nil:
		return m.Fetch.CurrentLeaderEpoch
	case m.FetchResp != nil:
		return m.FetchResp.LeaderEpoch
	}
	return -1
}

// checkTruncate runs when a node's driver truncates its log.
func (c *checker) checkTruncate(s *sim, n *simNode, offset int64) {
	st := n.node.Status()
	cur := n.disk.cur
	if st.Role == quorum.Leader {
		s.fail("LeaderAppendOnly: leader %d of epoch %d truncates to %d", n.id, st.Epoch, offset)
	}
	if offset < n.lastHW || offset < n.appliedNext {
		s.fail("NoTruncationBelowHW: node %d truncates to %d, hw %d applied %d", n.id, offset, n.lastHW, n.appliedNext)
	}
	for i := max(0, batchAt(cur, offset)); i < len(cur) && offset < n.disk.curEnd(); i++ {
		b := cur[i]
		if j := batchAt(c.committed, b.BaseOffset); j >= 0 && sameBatch(c.committed[j], b) {
			s.fail("NoTruncationBelowHW: node %d truncates committed batch %d..%d (epoch %d)", n.id, b.BaseOffset, b.LastOffset, b.Epoch)
			return
		}
	}
}

// checkCommitted runs on the batches the node delivers to its listener:
// ConsistentCommitOrder.
func (c *checker) checkCommitted(s *sim, n *simNode, batches []raftlog.Batch) {
	hw := n.node.Status().HighWatermark
	for _, b := range batches {
		if b.BaseOffset != n.appliedNext {
			s.fail("ConsistentCommitOrder: node %d applies batch at %d, expected %d", n.id, b.BaseOffset, n.appliedNext)
			return
		}
		if b.NextOffset() > hw && hw >= 0 {
			s.fail("ConsistentCommitOrder: node %d applies %d..%d above its hw %d", n.id, b.BaseOffset, b.LastOffset, hw)
		}
		c.noteCommitted(s, n.id, b)
		n.appliedNext = b.NextOffset()
	}
}

// noteCommitted records or compares one committed batch (ConsistentCommittedData).
func (c *checker) noteCommitted(s *sim, id int32, b raftlog.Batch) {
	ce := c.commitEnd()
	switch {
	case b.BaseOffset == ce:
		c.committed = append(c.committed, b)
		if s.dyn != nil {
			s.dyn.noteCommitted(s, b)
		}
	case b.BaseOffset < ce:
		if j := batchAt(c.committed, b.BaseOffset); j < 0 || !sameBatch(c.committed[j], b) {
			s.fail("ConsistentCommittedData: node %d has batch %d..%d epoch %d where %s was committed",
				id, b.BaseOffset, b.LastOffset, b.Epoch, describeAt(c.committed, b.BaseOffset))
		}
	default:
		s.fail("ConsistentCommittedData: node %d commits batch at %d beyond the committed end %d", id, b.BaseOffset, ce)
	}
}

func sameBatch(a, b raftlog.Batch) bool {
	return a.BaseOffset == b.BaseOffset && a.LastOffset == b.LastOffset && a.Epoch == b.Epoch && bytes.Equal(a.Raw, b.Raw)
}

func describeAt(bs []raftlog.Batch, off int64) string {
	if i := batchAt(bs, off); i >= 0 {
		b := bs[i]
		return fmt.Sprintf("batch %d..%d epoch %d", b.BaseOffset, b.LastOffset, b.Epoch)
	}
	return "nothing"
}

// check runs after every event over every live node the event touched.
func (c *checker) check(s *sim) {
	for _, id := range s.ids {
		n := s.nodes[id] // disk states were checked when written (checkSavedState)
		if n.down || !n.dirty {
			continue
		}
		n.dirty = false
		c.checkNode(s, n, n.node.Status())
		if s.err != nil {
			return
		}
	}
	c.checkMajorityHasCommitted(s)
}

func (c *checker) checkNode(s *sim, n *simNode, st quorum.Status) {
	id, d := n.id, n.disk
	if st.LogEndOffset != d.curEnd() || st.LastEpoch != d.curLastEpoch() {
		s.failWB("DiskMirror: node %d core log end %d epoch %d, disk's log end %d epoch %d",
			id, st.LogEndOffset, st.LastEpoch, d.curEnd(), d.curLastEpoch())
		return
	}
	if st.FlushedEndOffset > d.start && n.flushesAll() { // an observer does not fsync what it fetches
		i, j := batchAt(d.durable, st.FlushedEndOffset-1), batchAt(d.cur, st.FlushedEndOffset-1)
		if i < 0 || j < 0 || d.durable[i].Epoch != d.cur[j].Epoch {
			s.failWB("FlushedIsDurable: node %d counts %d as flushed, durable end %d", id, st.FlushedEndOffset, d.durEnd())
		}
	}
	if st.Epoch < d.state.LeaderEpoch {
		s.failWB("MonotonicEpoch: node %d runs epoch %d behind its persisted %d", id, st.Epoch, d.state.LeaderEpoch)
	}
	if !n.node.HasReady() && st.Epoch != d.state.LeaderEpoch {
		s.failWB("MonotonicEpoch: idle node %d runs epoch %d, persisted %d", id, st.Epoch, d.state.LeaderEpoch)
	}
	if s.dyn != nil {
		c.checkDynNode(s, n, st)
	} else if !st.IsVoter && st.Role != quorum.Unattached && st.Role != quorum.Follower {
		s.fail("ObserversNeverCount: observer %d is %s", id, st.Role)
	}
	switch st.Role {
	case quorum.Leader, quorum.Resigned:
		c.noteLeader(s, st.Epoch, id, "memory")
	case quorum.Follower:
		c.noteLeader(s, st.Epoch, st.LeaderID, "memory")
	}
	c.checkHW(s, n, st)
	if st.Role == quorum.Leader {
		c.checkLeader(s, n, st)
	} else {
		n.leadEpoch = -1
	}
}

func lastEpoch(bs []raftlog.Batch) int32 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].Epoch
}

// checkHW: a node's HW never goes down in a life and never passes its log end; its log
// below the HW is the committed log.
func (c *checker) checkHW(s *sim, n *simNode, st quorum.Status) {
	hw := st.HighWatermark
	if hw < 0 {
		return // a leader that has not committed in its epoch yet
	}
	if hw < n.lastHW {
		s.fail("MonotonicHW: node %d (%s) hw %d after %d", n.id, st.Role, hw, n.lastHW)
	}
	if hw > st.LogEndOffset {
		s.fail("MonotonicHW: node %d (%s) hw %d beyond its log end %d", n.id, st.Role, hw, st.LogEndOffset)
	}
	n.lastHW = max(n.lastHW, hw)
	cur := n.disk.cur
	i := max(0, batchAt(cur, n.checkedTo))
	for ; i < len(cur) && cur[i].NextOffset() <= hw; i++ {
		if cur[i].BaseOffset >= n.checkedTo {
			c.noteCommitted(s, n.id, cur[i])
		}
	}
	n.checkedTo = max(n.checkedTo, min(hw, n.disk.curEnd()))
}

// checkLeader: the leader-only invariants.
func (c *checker) checkLeader(s *sim, n *simNode, st quorum.Status) {
	if n.leadEpoch != st.Epoch {
		// Leadership counts once it is durable: a leader that crashed before its
		// quorum-state write never told anyone and may win the epoch again.
		if life, ok := c.leaderLife[st.Epoch]; ok && life != n.life {
			s.fail("NoSameEpochReleadership: node %d leads epoch %d again in life %d (first in life %d)", n.id, st.Epoch, n.life, life)
		}
		n.leadEpoch, n.leadEnd = st.Epoch, st.LogEndOffset
		c.checkLeaderHasAllAcked(s, n, st.Epoch, true)
	} else {
		c.checkLeaderHasAllAcked(s, n, st.Epoch, false)
	}
	if st.LogEndOffset < n.leadEnd {
		s.fail("LeaderAppendOnly: leader %d log end went from %d to %d in epoch %d", n.id, n.leadEnd, st.LogEndOffset, st.Epoch)
	}
	n.leadEnd = st.LogEndOffset
	hw := st.HighWatermark
	if hw < 0 {
		return
	}
	if hw <= st.EpochStartOffset {
		s.failWB("HWOnlyAfterOwnEpochCommit: leader %d exposes hw %d, epoch %d starts at %d", n.id, hw, st.Epoch, st.EpochStartOffset)
	}
	prev, seen := c.leaderHW[st.Epoch]
	if seen && hw < prev {
		s.fail("MonotonicLeaderHW: leader %d epoch %d hw %d after %d", n.id, st.Epoch, hw, prev)
	}
	c.leaderHW[st.Epoch] = hw
	if st.Epoch > c.maxLeaderHWEpoch && hw < c.maxLeaderHW {
		s.fail("MonotonicLeaderHW: leader %d of epoch %d exposes hw %d below %d exposed in epoch %d",
			n.id, st.Epoch, hw, c.maxLeaderHW, c.maxLeaderHWEpoch)
	}
	if hw > c.maxLeaderHW {
		c.maxLeaderHW, c.maxLeaderHWEpoch = hw, max(c.maxLeaderHWEpoch, st.Epoch)
	}
	if s.dyn == nil {
		c.checkMajorityReached(s, n, hw, voterKeys(s.voters))
	} else if !seen || hw > prev {
		// The voter set in force changes under a leader (at its append): its high
		// watermark was computed over the set in force when it advanced.
		c.checkMajorityReached(s, n, hw, s.logVoters(n).keys)
	}
}

// voterKeys are the replica keys of static voters (any disk).
func voterKeys(ids []int32) []quorum.ReplicaKey {
	keys := make([]quorum.ReplicaKey, len(ids))
	for i, id := range ids {
		keys[i].ID = id
	}
	return keys
}

// flushesAll: the node fsyncs what it fetches (a voter, or FollowersAlwaysFlush).
func (n *simNode) flushesAll() bool { return n.voter || n.cfg.FollowersAlwaysFlush }

// checkMajorityReached: a majority of voters hold the leader's entry at hw-1 durably.
func (c *checker) checkMajorityReached(s *sim, l *simNode, hw int64, keys []quorum.ReplicaKey) {
	if hw == 0 {
		return // nothing exposed
	}
	cur := l.disk.cur
	if hw <= l.disk.start {
		return // below the log start: in a snapshot, committed
	}
	li := batchAt(cur, hw-1)
	if li < 0 {
		s.fail("MajorityReachedHW: leader %d exposes hw %d beyond its log end %d", l.id, hw, l.disk.curEnd())
		return
	}
	c.checkHeld(s, cur[li], keys, len(keys)/2+1, true, "MajorityReachedHW",
		fmt.Sprintf("leader %d exposes hw %d (voters %s) but", l.id, hw, keysString(keys)))
}

// checkHeld: need of the voters keys hold b durably, or would refuse to vote
// for a log without it: a voter with a recovery marker does not vote until it has
// caught up with a leader holding everything committed (the PAR argument). A voter
// that lost b to damage and was repaired without the marker is a white-box finding
// only: the end-to-end invariants must catch its consequences (make mutants).
//
// A voter whose disk was replaced holds what that disk held durably when it was lost
// when lost is set (its acknowledgements counted then), nothing otherwise.
func (c *checker) checkHeld(s *sim, b raftlog.Batch, keys []quorum.ReplicaKey, need int, lost bool, inv, what string) {
	held, excused, unmarked := 0, 0, 0
	for _, k := range keys {
		d, live := s.keyDisk(k)
		if d == nil || !live && !lost {
			continue
		}
		switch {
		case d.holds(b):
			held++
		case d.recovery != nil || d.damaged:
			excused++ // damaged: down, and checked at its start
		case d.repairedUnsafe:
			unmarked++
		}
	}
	switch {
	case held+excused >= need:
	case held+excused+unmarked >= need:
		s.failWB("%s: %s batch %d..%d is durable on only %d of %d voters (%d recovering; %d repaired without a marker)",
			inv, what, b.BaseOffset, b.LastOffset, held, len(keys), excused, unmarked)
	default:
		s.fail("%s: %s batch %d..%d is durable on only %d of %d voters (%d recovering)",
			inv, what, b.BaseOffset, b.LastOffset, held, len(keys), excused)
	}
}

// checkMajorityHasCommitted: whatever was ever committed stays durable on a majority
// (no crash, truncation or restart may take it back).
func (c *checker) checkMajorityHasCommitted(s *sim) {
	if len(c.committed) == 0 {
		return
	}
	b := c.committed[len(c.committed)-1]
	if s.dyn != nil {
		c.checkQuorumIntersection(s, b)
		return
	}
	c.checkHeld(s, b, voterKeys(s.voters), len(s.voters)/2+1, false, "MajorityReachedHW", "committed")
}

// checkLeaderHasAllAcked (Leader Completeness): a leader of epoch E holds everything
// the leaders of earlier epochs committed. (A stale leader of an older epoch may lack
// what newer ones committed.) full compares the whole prefix, as on election; otherwise
// the last batch stands for it, by log matching.
func (c *checker) checkLeaderHasAllAcked(s *sim, l *simNode, epoch int32, full bool) {
	var need int64
	for e, hw := range c.leaderHW {
		if e < epoch {
			need = max(need, hw)
		}
	}
	need = min(need, c.commitEnd())
	if need <= 0 {
		return
	}
	last := batchAt(c.committed, need-1)
	first := last
	if full {
		first = 0
	}
	for i := first; i <= last; i++ {
		b := c.committed[i]
		if b.NextOffset() <= l.disk.start {
			continue // in the snapshot at the log start
		}
		if j := batchAt(l.disk.cur, b.BaseOffset); j < 0 || !sameBatch(l.disk.cur[j], b) {
			s.fail("LeaderHasAllAcked: leader %d of epoch %d lacks committed batch %d..%d epoch %d (log end %d)",
				l.id, epoch, b.BaseOffset, b.LastOffset, b.Epoch, l.disk.curEnd())
			return
		}
	}
}

// committedValues is the state a snapshot ending at endOffset must hold: the values
// of the committed data records below it, and the epoch of the batch that ends there
// (ok false if no committed batch ends exactly there).
func (c *checker) committedValues(endOffset int64) (vals [][]byte, epoch int32, ok bool) {
	for _, b := range c.committed {
		if b.NextOffset() > endOffset {
			break
		}
		if !b.Control {
			recs, err := b.Records()
			if err != nil {
				return nil, 0, false
			}
			for _, r := range recs {
				vals = append(vals, r.Value)
			}
		}
		if b.NextOffset() == endOffset {
			return vals, b.Epoch, true
		}
	}
	return nil, 0, endOffset == 0
}

// checkLoadedSnapshot (SnapshotEqualsReplay): a snapshot a node loads holds exactly
// the committed records below its end.
func (c *checker) checkLoadedSnapshot(s *sim, n *simNode, snap quorum.Snapshot) {
	want, epoch, ok := c.committedValues(snap.ID.EndOffset)
	if !ok || epoch != snap.ID.Epoch {
		s.fail("SnapshotEqualsReplay: node %d loads snapshot %+v, which does not end on a committed batch of that epoch (committed end %d)",
			n.id, snap.ID, c.commitEnd())
		return
	}
	var got [][]byte
	for v, err := range snap.Values() {
		if err != nil {
			s.fail("SnapshotEqualsReplay: node %d loads unreadable snapshot %+v: %v", n.id, snap.ID, err)
			return
		}
		got = append(got, v)
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		s.fail("SnapshotEqualsReplay: node %d loads snapshot %+v with %d records, the committed log has %d below its end",
			n.id, snap.ID, len(got), len(want))
	}
}
