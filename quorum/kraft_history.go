package quorum

import (
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// kraftHistory is what the log says of the quorum itself (KIP-853): the
// KRaftVersion and Voters control records it holds, by offset, on top of what
// the snapshot the log starts from said. The voter set in force is the latest
// entry, committed or not (Kafka's VoterSetHistory): a VotersRecord takes effect
// as soon as it is appended, and truncating it or loading a snapshot rolls it back.
//
// INVARIANTS: offsets strictly increase in versions and in voters; an entry from a
// snapshot sits at the snapshot's end offset - 1, below every log entry.
type kraftHistory struct {
	versions []kraftVersionAt
	voters   []votersAt
	// gen counts changes of voters, so the driver knows when to refresh the
	// addresses it derives from the set.
	gen uint64
}

type kraftVersionAt struct {
	offset int64
	level  int16
}

type votersAt struct {
	offset int64
	set    VoterSet
	// ids caches set.IDs(): the core asks for them on every fetch.
	ids []int32
}

// kraftRecord is one KRaftVersion or Voters control record of a batch.
type kraftRecord struct {
	offset int64
	level  int16 // for a KRaftVersionRecord
	voters *VoterSet
}

// kraftRecordsOf decodes the KRaftVersion and Voters records of a control batch
// (none in a data batch). An undecodable one is an error: the batch cannot be
// appended, because its voter set would be unknown.
func kraftRecordsOf(b raftlog.Batch) ([]kraftRecord, error) {
	if !b.Control {
		return nil, nil
	}
	recs, err := b.Records()
	if err != nil {
		return nil, err
	}
	var out []kraftRecord
	for i, rec := range recs {
		t, err := raftlog.ParseControlKey(rec.Key)
		if err != nil {
			return nil, fmt.Errorf("control record at %d: %w", b.BaseOffset+int64(i), err)
		}
		off := b.BaseOffset + int64(i)
		switch t {
		case raftlog.ControlKRaftVersion:
			level, err := ParseKRaftVersionRecord(rec.Value)
			if err != nil {
				return nil, fmt.Errorf("record at %d: %w", off, err)
			}
			out = append(out, kraftRecord{offset: off, level: level})
		case raftlog.ControlKRaftVoters:
			vs, err := ParseVotersRecord(rec.Value)
			if err != nil {
				return nil, fmt.Errorf("record at %d: %w", off, err)
			}
			out = append(out, kraftRecord{offset: off, voters: &vs})
		}
	}
	return out, nil
}

// add records what a batch appended at the log end says. The caller decoded it
// with kraftRecordsOf.
func (h *kraftHistory) add(recs []kraftRecord) {
	for _, kr := range recs {
		if kr.voters != nil {
			assertf(len(h.voters) == 0 || h.voters[len(h.voters)-1].offset < kr.offset,
				"voter history grows: VotersRecord at %d", kr.offset)
			h.voters = append(h.voters, votersAt{offset: kr.offset, set: *kr.voters, ids: kr.voters.IDs()})
			h.gen++
			continue
		}
		assertf(len(h.versions) == 0 || h.versions[len(h.versions)-1].offset < kr.offset,
			"kraft.version history grows: KRaftVersionRecord at %d", kr.offset)
		h.versions = append(h.versions, kraftVersionAt{offset: kr.offset, level: kr.level})
	}
}

// truncateFrom forgets the entries at or above end (the log was cut there).
func (h *kraftHistory) truncateFrom(end int64) {
	for len(h.voters) > 0 && h.voters[len(h.voters)-1].offset >= end {
		h.voters = h.voters[:len(h.voters)-1]
		h.gen++
	}
	for len(h.versions) > 0 && h.versions[len(h.versions)-1].offset >= end {
		h.versions = h.versions[:len(h.versions)-1]
	}
}

// reset replaces the history with what the snapshot id says (the log restarts at
// its end).
func (h *kraftHistory) reset(id raftlog.SnapshotID, k SnapshotKRaft) {
	*h = kraftHistory{gen: h.gen + 1}
	at := id.EndOffset - 1
	if k.KRaftVersion > KRaftVersionStatic {
		h.versions = []kraftVersionAt{{offset: at, level: k.KRaftVersion}}
	}
	if len(k.Voters.Voters) > 0 {
		h.voters = []votersAt{{offset: at, set: k.Voters, ids: k.Voters.IDs()}}
	}
}

// latestVoters is the voter set in force, if any record or snapshot named one.
func (h *kraftHistory) latestVoters() (votersAt, bool) {
	if len(h.voters) == 0 {
		return votersAt{}, false
	}
	return h.voters[len(h.voters)-1], true
}

// votersAt is the voter set in force at offset (the latest entry at or below it):
// what a snapshot ending at offset+1 must carry.
func (h *kraftHistory) votersAt(offset int64) (VoterSet, bool) {
	for i := len(h.voters) - 1; i >= 0; i-- {
		if h.voters[i].offset <= offset {
			return h.voters[i].set, true
		}
	}
	return VoterSet{}, false
}

// kraftVersionAt is the kraft.version in force at offset, 0 if no record says.
func (h *kraftHistory) kraftVersionAt(offset int64) int16 {
	for i := len(h.versions) - 1; i >= 0; i-- {
		if h.versions[i].offset <= offset {
			return h.versions[i].level
		}
	}
	return KRaftVersionStatic
}

// latestKRaftVersion is the kraft.version in force at the log end.
func (h *kraftHistory) latestKRaftVersion() int16 {
	if n := len(h.versions); n > 0 {
		return h.versions[n-1].level
	}
	return KRaftVersionStatic
}

// dynamic reports that the voter set comes from the log (KIP-853): a node configured
// with controller.quorum.bootstrap.servers and no controller.quorum.voters, or a
// node of a static quorum whose log raised kraft.version to 1
// (UpgradeKRaftVersion, KAFKA-16538). A static node at kraft.version 0 ignores
// VotersRecords. Truncating the upgrade's record makes the node static again.
func (r *Raft) dynamic() bool {
	return len(r.cfg.Voters) == 0 || r.log.kraft.latestKRaftVersion() >= KRaftVersionDynamic
}

// kraftVersion is the kraft.version in force: the configured one (0) for a static
// quorum, the latest KRaftVersionRecord for a dynamic one.
func (r *Raft) kraftVersion() int16 {
	if !r.dynamic() {
		return r.cfg.KRaftVersion
	}
	return r.log.kraft.latestKRaftVersion()
}

// voterIDs are the ids of the voter set in force, ascending: Config.Voters for a
// static quorum, the latest VotersRecord for a dynamic one (none before the log
// names one). Callers must not modify the slice.
func (r *Raft) voterIDs() []int32 {
	if !r.dynamic() {
		return r.cfg.Voters
	}
	if v, ok := r.log.kraft.latestVoters(); ok {
		return v.ids
	}
	return nil
}

// isVoterID reports whether id is in the voter set in force.
func (r *Raft) isVoterID(id int32) bool {
	_, ok := slices.BinarySearch(r.voterIDs(), id)
	return ok
}

// majority is the number of voters that make a quorum of the voter set in force.
func (r *Raft) majority() int { return len(r.voterIDs())/2 + 1 }

// selfIsVoter reports whether this replica is in the voter set in force. In a
// dynamic quorum that takes the directory id too: a node whose metadata disk was
// replaced is a new replica, not the voter its id names.
func (r *Raft) selfIsVoter() bool {
	if !r.dynamic() {
		return r.cfg.isVoter(r.cfg.NodeID)
	}
	v, ok := r.log.kraft.latestVoters()
	return ok && v.set.IsVoter(ReplicaKey{ID: r.cfg.NodeID, DirectoryID: r.cfg.DirectoryID})
}

// removedPendingCommit reports whether the latest VotersRecord removed this replica
// and is not known to be committed (at or above the high watermark). Such a replica
// still campaigns, counting only the votes of the new set: a leader that removed
// itself and lost its leadership (a crash, check-quorum) before the removal
// committed may have to lead again to commit it (Raft thesis 4.2.2: a leader
// outside its configuration manages the cluster until the configuration commits).
// Without it, a new set whose voters lack the record can need this replica's vote,
// which it refuses them for their shorter log, and no leader is ever elected (found
// by TestSimulationVoterChanges: voters {2,3}, 2 removes itself while 3 is cut off,
// then restarts as an observer). Once it learns a high watermark past the record it
// is an observer like any other.
func (r *Raft) removedPendingCommit() bool {
	if !r.dynamic() || r.isVoter {
		return false
	}
	h := r.log.kraft.voters
	if len(h) < 2 {
		return false
	}
	self := ReplicaKey{ID: r.cfg.NodeID, DirectoryID: r.cfg.DirectoryID}
	last, prev := h[len(h)-1], h[len(h)-2]
	return last.offset >= r.hw && prev.set.IsVoter(self) && !last.set.IsVoter(self)
}

// mayGrantTo reports whether membership lets this node grant candidate a vote: at
// kraft.version 0 both must be voters; from kraft.version 1 on Kafka grants
// without a membership check (KIP-853: the voter set read from the log may lag),
// and the candidate counts only votes from its own voters.
func (r *Raft) mayGrantTo(candidate int32) bool {
	if r.kraftVersion() >= KRaftVersionDynamic {
		return true
	}
	return r.isVoter && r.isVoterID(candidate)
}

// refreshVoter recomputes whether this replica is a voter after the log (and so
// the voter set in force) changed. Only an Unattached or Follower replica changes
// sides here: leaders, candidates and resigned leaders keep their role until it
// ends (the voter-change rules of KIP-853 for them are not implemented yet). A
// Follower needs nothing else (its fetch timeout asks campaigns()); an Unattached
// one restarts its timers as the side it is now on.
func (r *Raft) refreshVoter(nowMs int64) {
	if !r.dynamic() || (r.role != Unattached && r.role != Follower) {
		return
	}
	was := r.isVoter
	r.isVoter = r.selfIsVoter()
	if r.isVoter == was {
		return
	}
	v, _ := r.log.kraft.latestVoters()
	if r.isVoter {
		r.logf("%d is a voter of %v", r.cfg.NodeID, v.set)
	} else {
		r.logf("%d is not a voter of %v", r.cfg.NodeID, v.set)
	}
	if r.role == Unattached {
		r.discover = nil
		r.resetTimers()
		r.enterUnattached(nowMs)
	}
}

// snapshotKRaft is what a snapshot ending at id must say of the quorum: the
// kraft.version and voter set in force at its last offset (nothing at kraft.version
// 0, so static snapshots stay byte for byte as before).
func (r *Raft) snapshotKRaft(id raftlog.SnapshotID) SnapshotKRaft {
	if !r.dynamic() {
		return SnapshotKRaft{}
	}
	k := SnapshotKRaft{KRaftVersion: r.log.kraft.kraftVersionAt(id.EndOffset - 1)}
	if k.KRaftVersion > KRaftVersionStatic {
		k.Voters, _ = r.log.kraft.votersAt(id.EndOffset - 1)
	}
	return k
}

// VoterSet is the voter set in force of a dynamic quorum and a number that changes
// whenever it does; ok is false for a static quorum or before the log names one.
func (r *Raft) VoterSet() (vs VoterSet, gen uint64, ok bool) {
	if !r.dynamic() {
		return VoterSet{}, 0, false
	}
	v, ok := r.log.kraft.latestVoters()
	return v.set, r.log.kraft.gen, ok
}

// voterDirectoryID is the directory id the voter set in force gives voter id: what
// a Vote or BeginQuorumEpoch addressed to it carries (KIP-853). Zero in a static
// quorum, whose voters have none.
func (r *Raft) voterDirectoryID(id int32) [16]byte {
	if !r.dynamic() {
		return [16]byte{}
	}
	v, _ := r.log.kraft.latestVoters()
	node, _ := v.set.Voter(id)
	return node.Key.DirectoryID
}

// ownDirectoryID is this replica's directory id as a candidate states it; zero in a
// static quorum, whose Vote requests stay as they were.
func (r *Raft) ownDirectoryID() [16]byte {
	if !r.dynamic() {
		return [16]byte{}
	}
	return r.cfg.DirectoryID
}

// isOwnKey reports whether a request addressed to voter (id, directory id) is for
// this replica, as Kafka's isValidVoterKey: an id of -1 (v0 requests) or a zero
// directory id leaves that half unchecked. Otherwise the answer is INVALID_VOTER_KEY:
// a controller whose disk was replaced is a new replica and cannot act as the old
// one.
func (r *Raft) isOwnKey(id int32, dir [16]byte) bool {
	if id >= 0 && id != r.cfg.NodeID {
		return false
	}
	return dir == [16]byte{} || r.cfg.DirectoryID == [16]byte{} || dir == r.cfg.DirectoryID
}
