package quorum

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Voter changes (KIP-853, AddRaftVoter and RemoveRaftVoter) change the voter set one
// server at a time: the leader appends a VotersRecord with one voter more or less,
// which is in force as soon as it is appended (the high watermark is computed over
// the new set at once), and it accepts the next change only once that record has
// committed. With single-server changes every majority of the old set overlaps every
// majority of the new one, so two leaders cannot be elected in one epoch; the
// known bug of single-server changes (a leader of a new epoch committing a change
// while an uncommitted one from an older epoch is in a follower's log) is closed by
// also waiting until the high watermark is established in the leader's own epoch,
// whose LeaderChange batch comes after any older record.

// VoterChangeError is a refused voter change: a Kafka error code and message for
// the AddRaftVoter / RemoveRaftVoter response.
type VoterChangeError struct {
	Code    int16
	Message string
}

func (e *VoterChangeError) Error() string {
	return fmt.Sprintf("quorum: voter change refused: %s (%d)", e.Message, e.Code)
}

func refuseChange(code int16, format string, args ...any) *VoterChangeError {
	return &VoterChangeError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// voterChangeAllowed applies the rules every voter change shares: only a leader of a
// kraft.version >= 1 quorum, with its high watermark established in its epoch and no
// VotersRecord uncommitted.
func (r *Raft) voterChangeAllowed() *VoterChangeError {
	switch {
	case r.role != Leader:
		return refuseChange(kerr.NotLeaderForPartition.Code, "node %d is not the leader", r.cfg.NodeID)
	case !r.dynamic() || r.kraftVersion() < KRaftVersionDynamic:
		return refuseChange(kerr.UnsupportedVersion.Code, "kraft.version %d does not support voter changes", r.kraftVersion())
	case !r.lead.hwEstablished:
		return refuseChange(kerr.RequestTimedOut.Code, "the leader has not committed an offset in its epoch %d yet", r.epoch)
	}
	if v, ok := r.log.kraft.latestVoters(); ok && v.offset >= r.hw && !mutTwoChanges {
		return refuseChange(kerr.RequestTimedOut.Code, "the voter change at offset %d is not committed yet", v.offset)
	}
	return nil
}

// AddVoter appends the voter set in force plus v (AddRaftVoter). The new voter must be
// an observer that fetched within the fetch timeout and has reached the high
// watermark; DUPLICATE_VOTER is keyed on the id alone, so replacing a disk is remove,
// then add. It returns the offset of the VotersRecord, committed once the high
// watermark passes it.
func (r *Raft) AddVoter(nowMs int64, v VoterNode) (int64, error) {
	r.nowMs = max(r.nowMs, nowMs)
	if err := r.voterChangeAllowed(); err != nil {
		return 0, err
	}
	cur, _ := r.log.kraft.latestVoters()
	if _, dup := cur.set.Voter(v.Key.ID); dup {
		return 0, refuseChange(kerr.DuplicateVoter.Code, "voter %d is already in the voter set %v", v.Key.ID, cur.set)
	}
	rs := r.lead.replicas[v.Key.ID]
	if rs == nil || rs.endOffset < r.hw || rs.lastFetchMs < 0 || r.nowMs-rs.lastFetchMs > r.cfg.FetchTimeoutMs {
		return 0, refuseChange(kerr.RequestTimedOut.Code, "replica %d is not a caught-up observer of the leader", v.Key.ID)
	}
	if rs.dirID != v.Key.DirectoryID {
		// The replica that fetches is not the one to add (another disk, or one that
		// does not say which): Kafka keys the caught-up check on the replica key.
		return 0, refuseChange(kerr.RequestTimedOut.Code, "replica %d fetches with directory id %s, not %s", v.Key.ID,
			shortUUID(rs.dirID), shortUUID(v.Key.DirectoryID))
	}
	next, err := NewVoterSet(append(append([]VoterNode(nil), cur.set.Voters...), v))
	if err != nil {
		return 0, refuseChange(kerr.InvalidRequest.Code, "%v", err)
	}
	return r.appendVoters(next), nil
}

// RemoveVoter appends the voter set in force without key (RemoveRaftVoter). A zero
// directory id matches any; removing the last voter is refused (VOTER_NOT_FOUND, as
// Kafka answers). A leader that removes itself keeps leading until the record
// commits, then resigns.
func (r *Raft) RemoveVoter(nowMs int64, key ReplicaKey) (int64, error) {
	r.nowMs = max(r.nowMs, nowMs)
	if err := r.voterChangeAllowed(); err != nil {
		return 0, err
	}
	cur, _ := r.log.kraft.latestVoters()
	if !cur.set.IsVoter(key) || len(cur.set.Voters) == 1 {
		return 0, refuseChange(kerr.VoterNotFound.Code, "replica %d:%s cannot be removed from %v", key.ID,
			shortUUID(key.DirectoryID), cur.set)
	}
	var rest []VoterNode
	for _, v := range cur.set.Voters {
		if v.Key.ID != key.ID {
			rest = append(rest, v)
		}
	}
	next, err := NewVoterSet(rest)
	if err != nil {
		return 0, refuseChange(kerr.InvalidRequest.Code, "%v", err)
	}
	return r.appendVoters(next), nil
}

// appendVoters appends a VotersRecord of next after any queued proposals and moves
// the leader's replica tracking to the new set.
func (r *Raft) appendVoters(next VoterSet) int64 {
	return r.appendControl([]raftlog.Record{
		{Key: raftlog.ControlKey(raftlog.ControlKRaftVoters), Value: AppendVotersRecord(nil, next)}}, next)
}

// appendControl appends a control batch of recs, whose last VotersRecord is next,
// after any queued proposals, and moves the leader's replica tracking to next. It
// returns the batch's last offset.
func (r *Raft) appendControl(recs []raftlog.Record, next VoterSet) int64 {
	r.drainAccumulator(r.nowMs)
	off := r.log.endOffset()
	r.log.append(raftlog.EncodeBatch(off, r.epoch, r.nowMs, true, recs))
	for _, rs := range r.lead.replicas {
		rs.voter = next.IsVoter(ReplicaKey{ID: rs.id})
	}
	for _, id := range next.IDs() {
		if r.lead.replicas[id] == nil {
			r.lead.replicas[id] = &replicaState{id: id, voter: true, endOffset: -1, lastFetchMs: -1, lastCaughtUpMs: -1}
		}
	}
	if r.lead.checkQuorumMs == noDeadline && len(r.otherVoters()) > 0 {
		// The leader was alone in its voter set: now others must fetch within the
		// window, as at the start of an epoch.
		r.lead.checkQuorumMs = r.nowMs + r.checkQuorumWindowMs()
	}
	r.logf("%d appended voter set %v at offset %d", r.cfg.NodeID, next, off)
	r.maybeAdvanceHW()
	r.completeParkedFetches(r.nowMs, false, false)
	return off + int64(len(recs)) - 1
}

// leaderInVoterSet reports whether the leader is in the voter set in force; a leader
// that removed itself counts toward neither the high watermark nor check-quorum.
func (r *Raft) leaderInVoterSet() bool { return r.isVoterID(r.cfg.NodeID) }

// maybeResignAfterRemoval makes a leader that is no longer in a committed voter set
// resign (KIP-853): its successor is elected among the remaining voters.
func (r *Raft) maybeResignAfterRemoval(nowMs int64) {
	if r.role != Leader || !r.dynamic() || r.leaderInVoterSet() {
		return
	}
	if v, ok := r.log.kraft.latestVoters(); ok && v.offset < r.hw {
		r.logf("%d resigns: the committed voter set %v does not include it", r.cfg.NodeID, v.set)
		r.becomeResigned(nowMs, r.preferredSuccessors())
	}
}

// UpgradeKRaftVersion raises the kraft.version of the quorum this node leads
// (KAFKA-16538, `kraftd features upgrade --feature kraft.version=1`). From
// kraft.version 0 to 1 it needs every voter's replica key, listeners and supported
// range: the leader's own from its Config (DirectoryID, Endpoints), the others'
// from the UpdateRaftVoter each sent this leader in this epoch. It appends one
// control batch with a KRaftVersionRecord and the VotersRecord of those voters; from
// then on every node takes the voter set from the log (dynamic) and voters can be
// added and removed. It returns the batch's offset, or -1 when nothing is appended
// (validateOnly, or the level is already in force). Refusals: NOT_LEADER_OR_FOLLOWER
// off the leader, INVALID_UPDATE_VERSION for a level this node does not support, a
// downgrade, or a voter that has not reported or does not support the level;
// REQUEST_TIMED_OUT before the high watermark is established in the epoch or while a
// VotersRecord is uncommitted.
func (r *Raft) UpgradeKRaftVersion(nowMs int64, level int16, validateOnly bool) (int64, error) {
	r.nowMs = max(r.nowMs, nowMs)
	cur := r.kraftVersion()
	switch {
	case r.role != Leader:
		return -1, refuseChange(kerr.NotLeaderForPartition.Code, "node %d is not the leader", r.cfg.NodeID)
	case level < 0 || level > KRaftVersionMax:
		return -1, refuseChange(kerr.InvalidUpdateVersion.Code, "kraft.version %d is not supported (0-%d)", level, KRaftVersionMax)
	case level < cur:
		return -1, refuseChange(kerr.InvalidUpdateVersion.Code, "kraft.version cannot be downgraded from %d to %d", cur, level)
	case level == cur:
		return -1, nil
	case !r.lead.hwEstablished:
		return -1, refuseChange(kerr.RequestTimedOut.Code, "the leader has not committed an offset in its epoch %d yet", r.epoch)
	}
	if v, ok := r.log.kraft.latestVoters(); ok && v.offset >= r.hw {
		return -1, refuseChange(kerr.RequestTimedOut.Code, "the voter change at offset %d is not committed yet", v.offset)
	}
	var nodes []VoterNode
	for _, id := range r.voterIDs() {
		v, ok := r.reported[id]
		if r.reportedEpoch != r.epoch {
			ok = false
		}
		if id == r.cfg.NodeID {
			v, ok = r.localVoterNode()
		}
		switch {
		case !ok:
			return -1, refuseChange(kerr.InvalidUpdateVersion.Code,
				"voter %d has not reported its directory id and listeners (UpdateRaftVoter) to leader %d in epoch %d", id, r.cfg.NodeID, r.epoch)
		case v.Key.DirectoryID == [16]byte{}:
			return -1, refuseChange(kerr.InvalidUpdateVersion.Code, "voter %d has no directory id", id)
		case v.KRaftVersionMin > level || v.KRaftVersionMax < level:
			return -1, refuseChange(kerr.InvalidUpdateVersion.Code, "voter %d supports kraft.version %d-%d, not %d",
				id, v.KRaftVersionMin, v.KRaftVersionMax, level)
		}
		nodes = append(nodes, v)
	}
	next, err := NewVoterSet(nodes)
	if err != nil {
		return -1, refuseChange(kerr.InvalidUpdateVersion.Code, "%v", err)
	}
	if validateOnly {
		return -1, nil
	}
	off := r.appendControl(KRaftControlRecords(level, next), next)
	r.logf("%d upgraded kraft.version %d -> %d at offset %d with voters %v", r.cfg.NodeID, cur, level, off, next)
	return off, nil
}
