package quorum_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Dynamic quorums in the simulation of the production Node (KIP-853, issue 18). A
// share of the seeds (-sim.dynamic) runs kraft.version 1: either formatted like
// `kraftd storage format --initial-controllers` (the bootstrap snapshot 0-0 with the
// initial voters on their disks, the spares formatted --no-initial-controllers and
// finding the quorum through controller.quorum.bootstrap.servers), or a static
// quorum upgraded to kraft.version 1 through the leader's Node before the faults
// begin, as `kraftd features upgrade --feature kraft.version=1` does. Spare nodes
// start as observers. During the faults the leader's Node is asked to add and
// remove voters (the driver steps of Node.AddVoter and RemoveVoter that the
// AddRaftVoter and RemoveRaftVoter handlers run), sometimes twice in a row; a node
// that is down may have its disk replaced (a new, empty disk with a new directory
// id, formatted --no-initial-controllers), and the voter it was is then removed and
// the new replica added by the same schedule.
//
// The checker follows the voter set in force: the last VotersRecord of a log (or,
// below its start, of the committed log; before any, the initial set), as replica
// keys (id, directory id), a replaced disk no longer holding the key it replaced:
//   - MajorityReachedHW: when a leader's high watermark advances, a majority of the
//     voter set in force in its log holds the batch below it durably;
//   - QuorumIntersection: the last committed batch is held by enough voters of the
//     last committed voter set, and of any newer one in a log that holds everything
//     committed, that every majority of that set includes one of them;
//   - OneChangeAtATime: consecutive committed voter sets differ by one voter, and
//     no log holds two VotersRecords above the committed end;
//   - NonVotersNeverCampaign: a replica outside the voter set of its own log is never
//     Prospective, Candidate or Leader, unless the last VotersRecord of its log
//     removed it and is not committed yet (it may lead to commit its own removal);
//   - AckedChangeCommitted: a voter change the leader's Node reports as committed
//     (what AddRaftVoter answers) is in the committed log;
//   - NoDisruption: after healing, with every node up (removed voters too), the
//     leader elected keeps its epoch while every node follows it.
// The other invariants (one leader per epoch, committed never lost or changed,
// leader completeness, monotonic HW, durable kept, liveness) hold as in the static
// seeds.

// simDirID is the directory id of node id's gen-th disk.
func simDirID(id int32, gen int) [16]byte {
	var d [16]byte
	d[0], d[1], d[2], d[3] = 0xd1, byte(id), byte(gen), byte(gen>>8)
	d[15] = 1
	return d
}

func simAddr(id int32) string { return fmt.Sprintf("sim-%d:9093", id) }

// simAddrID is the node an address names (ok false for anything else).
func simAddrID(addr string) (int32, bool) {
	var id int32
	if _, err := fmt.Sscanf(addr, "sim-%d:9093", &id); err != nil || simAddr(id) != addr {
		return 0, false
	}
	return id, true
}

func simEndpoints(id int32) []quorum.Endpoint {
	return []quorum.Endpoint{{Name: "CONTROLLER", Host: fmt.Sprintf("sim-%d", id), Port: 9093}}
}

func simVoterNode(id int32, gen int) quorum.VoterNode {
	return quorum.VoterNode{Key: quorum.ReplicaKey{ID: id, DirectoryID: simDirID(id, gen)}, Endpoints: simEndpoints(id),
		KRaftVersionMin: quorum.KRaftVersionStatic, KRaftVersionMax: quorum.KRaftVersionMax}
}

// simSoleVoter lets the voter changes shrink a voter set to one voter (on by
// default; a leader alone in its voter set once kept a check-quorum deadline in the
// past and its driver spun: TestCheckQuorumFollowsTheVoterSet).
var simSoleVoter = flag.Bool("sim.solevoter", true, "voter changes may shrink a voter set to a single voter")

// dynState is the dynamic part of one seed.
type dynState struct {
	// formatted: the quorum was formatted with its initial voters; otherwise it
	// started static and is upgraded.
	formatted bool
	// initial is the voter set before any VotersRecord: the bootstrap snapshot's, or
	// the static voters (zero directory ids: any disk).
	initial []quorum.ReplicaKey
	// history is the committed voter sets after initial, in offset order.
	history []keysAt
	// parsed caches the VotersRecord of each control batch (by base offset and epoch).
	parsed map[[2]int64]keysAt
	// waiting are accepted voter changes whose Node has not answered yet; ackedWait
	// those answered as committed that the committed log has not reached yet.
	waiting, ackedWait []pendingChange
	// sets are the distinct voter sets the committed log went through.
	sets map[string]bool
	// attempts and accepted count the voter changes asked for and accepted; wipes the
	// disks replaced.
	attempts, accepted, acked, wipes, upgradedAt int
}

// keysAt is a voter set and the offset of the VotersRecord that holds it (-1: none).
type keysAt struct {
	off  int64
	keys []quorum.ReplicaKey
}

type pendingChange struct {
	done  <-chan error
	node  int32
	life  int
	off   int64
	epoch int32
	what  string
}

func keysString(keys []quorum.ReplicaKey) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", k.ID)
		if k.DirectoryID != [16]byte{} {
			fmt.Fprintf(&b, "/%d", k.DirectoryID[2])
		}
	}
	return "{" + b.String() + "}"
}

// votersOfBatch is the last voter set a batch's VotersRecords name (ok false: none).
func (d *dynState) votersOfBatch(b raftlog.Batch) (keysAt, bool) {
	if !b.Control {
		return keysAt{}, false
	}
	k := [2]int64{b.BaseOffset, int64(b.Epoch)}
	if v, ok := d.parsed[k]; ok {
		return v, v.off >= 0
	}
	v := keysAt{off: -1}
	recs, err := b.Records()
	if err == nil {
		for i, r := range recs {
			if t, err := raftlog.ParseControlKey(r.Key); err == nil && t == raftlog.ControlKRaftVoters {
				if vs, err := quorum.ParseVotersRecord(r.Value); err == nil {
					v = keysAt{off: b.BaseOffset + int64(i)}
					for _, vn := range vs.Voters {
						v.keys = append(v.keys, vn.Key)
					}
				}
			}
		}
	}
	d.parsed[k] = v
	return v, v.off >= 0
}

// committedAt is the voter set in force at offset off of the committed log.
func (d *dynState) committedAt(off int64) keysAt {
	cur := keysAt{off: -1, keys: d.initial}
	for _, h := range d.history {
		if h.off >= off {
			break
		}
		cur = h
	}
	return cur
}

func (d *dynState) lastCommitted() keysAt { return d.committedAt(1<<62 - 1) }

// noteCommitted follows the committed log: OneChangeAtATime between consecutive
// committed voter sets.
func (d *dynState) noteCommitted(s *sim, b raftlog.Batch) {
	v, ok := d.votersOfBatch(b)
	if !ok {
		return
	}
	prev := d.lastCommitted()
	if n := keyDiff(prev.keys, v.keys); n > 1 {
		s.fail("OneChangeAtATime: committed voter set %s at offset %d follows %s (%d voters differ)",
			keysString(v.keys), v.off, keysString(prev.keys), n)
	}
	d.history = append(d.history, v)
	d.sets[keysString(v.keys)] = true
}

// keyDiff counts the voters in one set and not the other; a static key (no
// directory id) equals any key of its id (the upgrade names the same voters).
func keyDiff(a, b []quorum.ReplicaKey) int {
	in := func(k quorum.ReplicaKey, set []quorum.ReplicaKey) bool {
		return slices.ContainsFunc(set, func(o quorum.ReplicaKey) bool {
			return o.ID == k.ID && (o.DirectoryID == k.DirectoryID || o.DirectoryID == [16]byte{} || k.DirectoryID == [16]byte{})
		})
	}
	n := 0
	for _, k := range a {
		if !in(k, b) {
			n++
		}
	}
	for _, k := range b {
		if !in(k, a) {
			n++
		}
	}
	return n
}

// logVoters is the voter set in force in n's log (as written): its last VotersRecord,
// or the committed one at its log start. A replaced disk that has read nothing knows
// no voters.
func (s *sim) logVoters(n *simNode) keysAt {
	d := s.dyn
	disk := n.disk
	cur := disk.cur
	// The log only grows between most calls: scan what was appended since the last
	// one, if the batches it scanned are still there.
	m := &disk.votersMemo
	from := 0
	if m.valid && m.start == disk.start && m.scanned <= len(cur) && (m.scanned == 0 ||
		cur[m.scanned-1].BaseOffset == m.lastBase && cur[m.scanned-1].Epoch == m.lastEpoch) {
		from = m.scanned
	} else {
		m.found = -1
	}
	for i := len(cur) - 1; i >= from; i-- {
		if _, ok := d.votersOfBatch(cur[i]); ok {
			m.found = i
			break
		}
	}
	m.valid, m.start, m.scanned = true, disk.start, len(cur)
	if len(cur) > 0 {
		m.lastBase, m.lastEpoch = cur[len(cur)-1].BaseOffset, cur[len(cur)-1].Epoch
	}
	if m.found >= 0 {
		v, _ := d.votersOfBatch(cur[m.found])
		return v
	}
	if n.gen > 0 && disk.start == 0 {
		return keysAt{off: -1}
	}
	return d.committedAt(disk.start)
}

// votersMemo remembers where logVoters found the last VotersRecord of a disk's log.
type votersMemo struct {
	valid          bool
	start          int64
	scanned, found int
	lastBase       int64
	lastEpoch      int32
}

// prevLogVoters is the voter set in n's log before the one at off.
func (s *sim) prevLogVoters(n *simNode, off int64) keysAt {
	d := s.dyn
	cur := n.disk.cur
	for i := len(cur) - 1; i >= 0; i-- {
		if v, ok := d.votersOfBatch(cur[i]); ok && v.off < off {
			return v
		}
	}
	return d.committedAt(min(n.disk.start, off))
}

// holdsKey: n's current disk is replica key k.
func (n *simNode) holdsKey(k quorum.ReplicaKey) bool {
	return n.id == k.ID && (k.DirectoryID == [16]byte{} || k.DirectoryID == n.dirID)
}

// keyDisk is the disk of replica key k (nil: none) and whether it is the node's
// current one.
func (s *sim) keyDisk(k quorum.ReplicaKey) (*simDisk, bool) {
	n := s.nodes[k.ID]
	if n == nil {
		return nil, false
	}
	if k.DirectoryID == [16]byte{} {
		return n.disk, true
	}
	for gen, d := range n.disks {
		if simDirID(n.id, gen) == k.DirectoryID {
			return d, gen == n.gen
		}
	}
	return nil, false
}

func (n *simNode) key() quorum.ReplicaKey { return quorum.ReplicaKey{ID: n.id, DirectoryID: n.dirID} }

func inKeys(keys []quorum.ReplicaKey, n *simNode) bool {
	return slices.ContainsFunc(keys, n.holdsKey)
}

// lostKeys are the voters of keys whose node runs on another disk now.
func (s *sim) lostKeys(keys []quorum.ReplicaKey) []quorum.ReplicaKey {
	var lost []quorum.ReplicaKey
	for _, k := range keys {
		if n := s.nodes[k.ID]; n == nil || !n.holdsKey(k) {
			lost = append(lost, k)
		}
	}
	return lost
}

// checkDynNode runs the per-node voter-change invariants.
func (c *checker) checkDynNode(s *sim, n *simNode, st quorum.Status) {
	if st.Role == quorum.Prospective || st.Role == quorum.Candidate || st.Role == quorum.Leader {
		v := s.logVoters(n)
		if !inKeys(v.keys, n) && !s.removedPending(n, v, st) {
			s.fail("NonVotersNeverCampaign: node %d (disk %d) is %s at epoch %d outside the voter set %s of its log",
				n.id, n.gen, st.Role, st.Epoch, keysString(v.keys))
			return
		}
	}
	// OneChangeAtATime: at most one VotersRecord above the committed end.
	ce, above := c.commitEnd(), 0
	cur := n.disk.cur
	for i := len(cur) - 1; i >= 0 && cur[i].LastOffset >= ce; i-- {
		if v, ok := s.dyn.votersOfBatch(cur[i]); ok && v.off >= ce {
			above++
		}
	}
	if above > 1 {
		s.fail("OneChangeAtATime: node %d (%s epoch %d) holds %d VotersRecords above the committed end %d",
			n.id, st.Role, st.Epoch, above, ce)
	}
}

// removedPending: the last VotersRecord of n's log removed n and is not committed as
// far as n knows (quorum's removedPendingCommit; a restarted node knows no high
// watermark until it hears from a leader).
func (s *sim) removedPending(n *simNode, last keysAt, st quorum.Status) bool {
	if last.off < 0 || last.off < st.HighWatermark {
		return false
	}
	return inKeys(s.prevLogVoters(n, last.off).keys, n)
}

// checkQuorumIntersection: the last committed batch is held by enough voters of the
// last committed voter set, and of a newer set in any log that holds the whole
// committed log, that every majority of that set that can still vote includes a
// holder.
func (c *checker) checkQuorumIntersection(s *sim, b raftlog.Batch) {
	sets := []keysAt{s.dyn.lastCommitted()}
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.down || !n.disk.holdsInLog(b) {
			continue
		}
		if v := s.logVoters(n); v.off >= c.commitEnd() && !slices.ContainsFunc(sets, func(o keysAt) bool { return o.off == v.off }) {
			sets = append(sets, v)
		}
	}
	for _, v := range sets {
		// A voter whose disk was replaced never votes as that voter again: every
		// majority that can elect is drawn from the others, and each must include a
		// holder.
		live := len(v.keys) - len(s.lostKeys(v.keys))
		if need := live - len(v.keys)/2; need > 0 {
			c.checkHeld(s, b, v.keys, need, false, "QuorumIntersection",
				fmt.Sprintf("committed, voter set %s (record at %d), but", keysString(v.keys), v.off))
		}
	}
}

// holdsInLog: the log as written holds b (or b is below its start).
func (d *simDisk) holdsInLog(b raftlog.Batch) bool {
	if b.NextOffset() <= d.start {
		return true
	}
	i := batchAt(d.cur, b.BaseOffset)
	return i >= 0 && sameBatch(d.cur[i], b)
}

// pollVoterChanges takes the answers of the voter changes the Node resolved:
// AckedChangeCommitted.
func (s *sim) pollVoterChanges() {
	d := s.dyn
	kept := d.waiting[:0]
	for _, p := range d.waiting {
		n := s.nodes[p.node]
		if n.life != p.life {
			continue // the node died: nobody waits any more
		}
		select {
		case err := <-p.done:
			if err != nil {
				s.tracef(p.node, "voter change %s at %d: %v", p.what, p.off, err)
				continue
			}
			d.acked++
			d.ackedWait = append(d.ackedWait, p)
		default:
			kept = append(kept, p)
		}
	}
	clear(d.waiting[len(kept):])
	d.waiting = kept
	// The checker learns of a commit when a live node shows it; a leader that dies in
	// the event that moved its high watermark shows it to nobody, so an answered
	// change is checked once the committed log reaches it (and at the end).
	ce := s.chk.commitEnd()
	ackedKept := d.ackedWait[:0]
	for _, p := range d.ackedWait {
		if p.off >= ce {
			ackedKept = append(ackedKept, p)
			continue
		}
		if i := batchAt(s.chk.committed, p.off); i < 0 || s.chk.committed[i].Epoch != p.epoch {
			s.fail("AckedChangeCommitted: node %d answered voter change %s (offset %d, epoch %d) as committed; the committed log has %s there",
				p.node, p.what, p.off, p.epoch, describeAt(s.chk.committed, p.off))
		}
	}
	clear(d.ackedWait[len(ackedKept):])
	d.ackedWait = ackedKept
}

// chooseDynamic sets a dynamic seed up: formatted or upgraded, with spares.
func (s *sim) chooseDynamic() {
	d := &dynState{parsed: map[[2]int64]keysAt{}, sets: map[string]bool{}, formatted: s.rng.IntN(2) == 0}
	s.dyn = d
	for _, v := range s.voters {
		k := quorum.ReplicaKey{ID: v}
		if d.formatted {
			k.DirectoryID = simDirID(v, 0)
		}
		d.initial = append(d.initial, k)
	}
	d.sets[keysString(d.initial)] = true
	s.noDamage = true // see the report of issue 18: damage and replaced disks together exceed f
}

// dynConfig is node n's configuration in a dynamic seed: formatted voters and spares
// (and every replaced disk) know the quorum by its bootstrap servers; in an upgraded
// seed the original disks keep controller.quorum.voters.
func (s *sim) dynConfig(n *simNode) {
	n.dirID = simDirID(n.id, n.gen)
	n.cfg.DirectoryID, n.cfg.Endpoints, n.cfg.FollowersAlwaysFlush = n.dirID, simEndpoints(n.id), true
	n.voter = false // the voter sets of the log decide (checkDynNode)
	if s.dyn.formatted || n.gen > 0 {
		n.cfg.Voters = nil
		n.bootstrap = nil
		for _, v := range s.voters {
			n.bootstrap = append(n.bootstrap, simAddr(v))
		}
		if n.gen > 0 {
			// The operator points a replaced controller at the controllers of the
			// day: every node (removed ones answer with the leader they know).
			n.bootstrap = nil
			for _, id := range s.ids {
				n.bootstrap = append(n.bootstrap, simAddr(id))
			}
		}
	}
}

// formatDisk writes the bootstrap snapshot `storage format --initial-controllers`
// writes onto an initial voter's disk: kraft.version 1 and the initial voters.
func (s *sim) formatDisk(n *simNode) error {
	var nodes []quorum.VoterNode
	for _, k := range s.dyn.initial {
		nodes = append(nodes, simVoterNode(k.ID, 0))
	}
	vs, err := quorum.NewVoterSet(nodes)
	if err != nil {
		return err
	}
	data, err := quorum.BootstrapSnapshot(quorum.KRaftVersionDynamic, vs, n.clock(0))
	if err != nil {
		return err
	}
	fs := n.disk.file.fs
	if err := fs.MkdirAll(simFileDir, 0o755); err != nil {
		return err
	}
	f, err := fs.CreateTemp(simFileDir, "bootstrap-*.checkpoint.part")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(f.Name(), filepath.Join(simFileDir, raftlog.SnapshotFileName(raftlog.BootstrapSnapshotID))); err != nil {
		return err
	}
	if err := fs.SyncDir(simFileDir); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(simFileDir))
}

// upgradePhase runs the static quorum calm until the leader's Node has upgraded it to
// kraft.version 1 and every node has applied the upgrade (a static controller that
// missed it follows only its configured voters: a documented limit).
func (s *sim) upgradePhase() {
	deadline := s.nowMs + simLivenessMs
	for s.err == nil && s.nowMs < deadline {
		s.runUntil(s.nowMs+20, nil)
		if l := s.leader(); l != nil && !l.busy(s.nowMs) && len(l.queue) == 0 && l.node.Status().KRaftVersion == 0 {
			s.runEvent(l, func() {
				done, off, err := l.node.UpgradeKRaftVersion(quorum.KRaftVersionDynamic)
				switch {
				case err != nil:
					s.tracef(l.id, "upgrade refused: %v", err)
				case done != nil:
					s.dyn.waiting = append(s.dyn.waiting, pendingChange{done: done, node: l.id, life: l.life, off: off,
						epoch: l.node.Status().Epoch, what: "upgrade"})
				}
			})
		}
		all := true
		for _, id := range s.ids {
			if n := s.nodes[id]; n.down || n.node.Status().KRaftVersion != 1 || len(s.dyn.history) == 0 || n.appliedNext <= s.dyn.history[0].off {
				all = false
			}
		}
		if all {
			s.dyn.upgradedAt = int(s.nowMs)
			s.faultf(-1, "UPGRADED to kraft.version 1: %s", keysString(s.dyn.history[0].keys))
			return
		}
	}
	if s.err == nil {
		s.fail("Liveness: the static quorum was not upgraded to kraft.version 1 within %d ms", simLivenessMs)
	}
}

// scheduleVoterChanges asks the leader for a voter change every few hundred ms
// until untilMs.
func (s *sim) scheduleVoterChanges(untilMs int64) {
	var tick func()
	tick = func() {
		if s.nowMs >= untilMs || s.healed {
			return
		}
		s.changeVoters()
		if s.rng.IntN(8) == 0 {
			// A controller's disk fails: it goes down, gets a new disk and comes back
			// as a new replica, which the schedule then swaps in for the old voter.
			// Judged while it runs: its log as written holds any voter change it just
			// appended and may have sent.
			if n := s.randomNode(); s.wipeable(n) {
				s.crash(n)
				s.wipe(n)
				life := n.life
				s.at(s.nowMs+200+s.rng.Int64N(2000), func() {
					if n.life == life && !s.healed {
						s.restart(n)
					}
				})
			}
		}
		if s.rng.IntN(4) == 0 {
			// A second change right behind the first: refused until it commits.
			s.at(s.nowMs+1+s.rng.Int64N(5), s.changeVoters)
		}
		s.at(s.nowMs+50+s.rng.Int64N(400), tick)
	}
	s.at(s.nowMs+s.rng.Int64N(300), tick)
}

// changeVoters asks the leader's Node to remove a voter whose disk was replaced,
// else to add a node outside the voter set or remove a voter, as an operator would;
// refusals (not caught up, a change not committed yet, ...) are normal.
func (s *sim) changeVoters() {
	l := s.leader()
	if l == nil || l.busy(s.nowMs) || len(l.queue) > 0 || s.healed {
		return
	}
	vs, _, ok := l.node.VoterSet()
	if !ok {
		return
	}
	var keys []quorum.ReplicaKey
	for _, v := range vs.Voters {
		keys = append(keys, v.Key)
	}
	var outside []*simNode
	for _, id := range s.ids {
		if n := s.nodes[id]; !n.down && !slices.ContainsFunc(keys, func(k quorum.ReplicaKey) bool { return k.ID == id }) {
			outside = append(outside, n)
		}
	}
	lost := s.lostKeys(keys)
	var what string
	var done <-chan error
	var off int64
	var err error
	switch {
	case len(lost) > 0:
		k := lost[s.rng.IntN(len(lost))]
		what = fmt.Sprintf("remove %d/%d (disk replaced)", k.ID, k.DirectoryID[2])
		s.runEvent(l, func() { done, off, err = l.node.RemoveVoter(k) })
	case len(outside) > 0 && (len(keys) < 2 || len(keys) < 4 && s.rng.IntN(2) == 0):
		n := outside[s.rng.IntN(len(outside))]
		what = fmt.Sprintf("add %d/%d", n.id, n.gen)
		s.runEvent(l, func() { done, off, err = l.node.AddVoter(simVoterNode(n.id, n.gen), s.rng.IntN(4) != 0) })
	case len(keys) <= 2 && !*simSoleVoter:
		return
	default:
		k := keys[s.rng.IntN(len(keys))]
		what = fmt.Sprintf("remove %d/%d", k.ID, k.DirectoryID[2])
		s.runEvent(l, func() { done, off, err = l.node.RemoveVoter(k) })
	}
	s.dyn.attempts++
	if err != nil {
		s.tracef(l.id, "voter change %s refused: %v", what, err)
		return
	}
	s.dyn.accepted++
	s.faultf(l.id, "VOTER CHANGE %s at offset %d", what, off)
	if done != nil && !l.down {
		s.dyn.waiting = append(s.dyn.waiting, pendingChange{done: done, node: l.id, life: l.life, off: off,
			epoch: l.node.Status().Epoch, what: what})
	}
}

// wipe replaces the disk of n, which is down: a new directory id, an empty log, and
// a configuration that finds the quorum through bootstrap servers. Callers ask
// wipeable first: a voter's disk is replaced only while every voter set that may be
// in force has three voters or more and no other replaced disk, so that the voters
// left can still elect.
func (s *sim) wipe(n *simNode) {
	if !n.down || s.healed {
		return
	}
	n.gen++
	s.dyn.wipes++
	delete(s.chk.diskEpoch, n.id)
	n.disk = newSimDisk(s, n)
	n.disks = append(n.disks, n.disk)
	s.dynConfig(n)
	s.faultf(n.id, "DISK REPLACED: new directory id (disk %d), formatted --no-initial-controllers", n.gen)
}

// simMaxInFlightMs bounds how long a message is on the wire (delay, jitter and a slow
// message's extra time): a node down longer has nothing of its own in flight.
const simMaxInFlightMs = 3200

// wipeable: replacing n's disk leaves every voter set that may be in force able to
// elect (see wipe). A node that is down must have been down long enough that no
// voter change it appended is still on its way to another log.
func (s *sim) wipeable(n *simNode) bool {
	if s.healed || n.down && s.nowMs-n.downSince < simMaxInFlightMs {
		return false
	}
	var sets []keysAt
	sets = append(sets, s.dyn.lastCommitted())
	for _, id := range s.ids {
		o := s.nodes[id]
		sets = append(sets, s.logVoters(o))
		if o.down && o.disk.lostVoters != nil {
			sets = append(sets, *o.disk.lostVoters)
		}
	}
	for _, v := range sets {
		if inKeys(v.keys, n) && (len(v.keys) < 3 || len(s.lostKeys(v.keys)) > 0) {
			return false
		}
	}
	return true
}

// stableAfterHeal (NoDisruption): once healed, with every node up (removed voters
// too), a leader in the voter set of its log that has committed in its epoch and has
// no voter change pending, and that every node follows, must keep its epoch for
// two fetch timeouts: no node outside the voter set disrupts it, and no voter
// that learned of its removal campaigns.
func (s *sim) stableAfterHeal(healedAt int64) {
	var l *simNode
	settled := func() bool {
		l = s.leader()
		return l != nil && s.settledOn(l)
	}
	s.runUntil(healedAt+2*simLivenessMs, settled)
	if s.err != nil {
		return
	}
	if !settled() {
		s.fail("Liveness: no leader that every node follows, with no voter change pending, within %d ms of healing (leader %v)",
			2*simLivenessMs, l != nil)
		return
	}
	st := l.node.Status()
	window := 2 * l.cfg.FetchTimeoutMs
	s.stats.stableWindows++
	for _, id := range s.ids {
		if !inKeys(s.logVoters(l).keys, s.nodes[id]) {
			s.stats.outsideAtHeal++ // a removed voter, a replaced disk or a spare: it must not disrupt
		}
	}
	s.tracef(l.id, "stable window of %d ms from epoch %d, voters %s", window, st.Epoch, keysString(s.logVoters(l).keys))
	s.runUntil(s.nowMs+window, nil)
	if s.err != nil {
		return
	}
	if s.pollVoterChanges(); s.err == nil && len(s.dyn.ackedWait) > 0 {
		p := s.dyn.ackedWait[0]
		s.fail("AckedChangeCommitted: node %d answered voter change %s (offset %d, epoch %d) as committed; the committed log ends at %d after healing",
			p.node, p.what, p.off, p.epoch, s.chk.commitEnd())
		return
	}
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.down {
			s.fail("NoDisruption: node %d went down without faults", id)
			return
		}
		ns := n.node.Status()
		if ns.Epoch != st.Epoch || ns.LeaderID != l.id {
			s.fail("NoDisruption: node %d (%s, disk %d) is at epoch %d with leader %d, %d ms after leader %d of epoch %d settled (voters %s)",
				id, ns.Role, n.gen, ns.Epoch, ns.LeaderID, window, l.id, st.Epoch, keysString(s.logVoters(l).keys))
			return
		}
	}
}

// settledOn: l leads in the voter set of its log with its high watermark past the
// start of its epoch and past the last VotersRecord, and every node follows it.
func (s *sim) settledOn(l *simNode) bool {
	st := l.node.Status()
	v := s.logVoters(l)
	if !inKeys(v.keys, l) || st.HighWatermark <= st.EpochStartOffset || st.HighWatermark <= v.off {
		return false
	}
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.down {
			return false
		}
		if ns := n.node.Status(); id != l.id && (ns.Epoch != st.Epoch || ns.LeaderID != l.id) {
			return false
		}
	}
	return true
}

// noteLoss keeps, as power is lost, the voter set of the log as written: the
// unsynced writes that survive may bring it back at the next start.
func (d *simDisk) noteLoss() {
	if d.s.dyn == nil || d.n.disk != d {
		return
	}
	v := d.s.logVoters(d.n)
	d.lostVoters = &v
}
