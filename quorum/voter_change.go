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
	if v, ok := r.log.kraft.latestVoters(); ok && v.offset >= r.hw {
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
	r.drainAccumulator(r.nowMs)
	off := r.log.endOffset()
	r.log.append(raftlog.EncodeBatch(off, r.epoch, r.nowMs, true, []raftlog.Record{
		{Key: raftlog.ControlKey(raftlog.ControlKRaftVoters), Value: AppendVotersRecord(nil, next)}}))
	for _, rs := range r.lead.replicas {
		rs.voter = next.IsVoter(ReplicaKey{ID: rs.id})
	}
	for _, id := range next.IDs() {
		if r.lead.replicas[id] == nil {
			r.lead.replicas[id] = &replicaState{id: id, voter: true, endOffset: -1, lastFetchMs: -1, lastCaughtUpMs: -1}
		}
	}
	r.logf("%d appended voter set %v at offset %d", r.cfg.NodeID, next, off)
	r.maybeAdvanceHW()
	r.completeParkedFetches(r.nowMs, false, false)
	return off
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
