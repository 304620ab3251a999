package quorum_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Disk damage in the simulation (issue 14, section 3): while a node is down, at most
// one node at a time, its durable log gets a flipped bit (anywhere: below the durable
// end record or beyond it), its quorum-state file or its last segment file is
// deleted, or a snapshot the log still covers is deleted. On restart the node either
// stops (the sim disk's model of FileStorage's detection: the production batch parser
// judges the bytes, the durable end record judges torn tail against bit rot; a lost
// quorum-state is refused by the production core, checkStateNotLost), and is then
// repaired as `kraftd storage recover` does (marker with E first, then the log cut
// to its last valid batch) and started again; or it cuts a torn tail as after any
// crash. A stop on a disk that was not damaged is a violation: a power loss must
// never put a node in recovery.

type damageKind int

const (
	dmgFlipBelowRec damageKind = iota // a flipped bit below the durable end record
	dmgFlipTail                       // a flipped bit at or beyond it (read as a torn tail)
	dmgDropState                      // the quorum-state file deleted
	dmgFlipState                      // a flipped bit in the quorum-state file
	dmgDropSegment                    // the last segment file deleted
	dmgDropMiddle                     // an earlier segment file deleted
	dmgDropSnapshot                   // a snapshot the log still covers deleted
	numDamageKinds
)

var damageNames = [numDamageKinds]string{"bit flips below the durable end", "bit flips beyond it (torn tail)",
	"quorum-states dropped", "quorum-state flips", "last segments dropped", "earlier segments dropped", "snapshots dropped"}

// simDamageStats are one run's damage counts.
type simDamageStats struct {
	injected [numDamageKinds]int
	// detected: starts refused on damaged data; repaired: `storage recover` runs;
	// recovered: markers the node removed after catching up.
	detected, repaired, recovered int
	// tornCut: damaged batches a start cut as a torn tail.
	tornCut int
}

func (a *simDamageStats) add(b simDamageStats) {
	for i := range a.injected {
		a.injected[i] += b.injected[i]
	}
	a.detected += b.detected
	a.repaired += b.repaired
	a.recovered += b.recovered
	a.tornCut += b.tornCut
}

func (a simDamageStats) total() int {
	t := 0
	for _, c := range a.injected {
		t += c
	}
	return t
}

func (a simDamageStats) String() string {
	var by []string
	for k, c := range a.injected {
		by = append(by, fmt.Sprintf("%d %s", c, damageNames[k]))
	}
	return fmt.Sprintf("damage: %s; %d starts refused, %d repairs with a marker, %d recoveries finished, %d damaged batches cut as a torn tail",
		joinComma(by), a.detected, a.repaired, a.recovered, a.tornCut)
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// damage injects one random damage into down node n's disk, if no other node is
// damaged or recovering.
func (s *sim) damage(n *simNode) {
	if !*simDamage || s.noDamage || !n.down || s.healed || n.voter && len(s.voters) < 3 {
		return // a lone voter that recovers waits for a leader forever, rightly
	}
	for _, id := range s.ids {
		if o := s.nodes[id].disk; id != n.id && (o.damaged || o.recovery != nil) {
			return
		}
	}
	d := n.disk
	if d.file != nil {
		s.fileDamage(n, s.rng.IntN(10))
		return
	}
	switch p := s.rng.IntN(10); {
	case p < 6 && len(d.durable) > 0:
		i := s.rng.IntN(len(d.durable))
		b := d.durable[i]
		raw := slices.Clone(b.Raw)
		// Any byte but the partition leader epoch (12..15), unless -sim.flipepoch:
		// no CRC covers it, and a flip there that keeps the epochs monotonic loads
		// silently, in FileStorage as in Kafka.
		var pos int
		if *simFlipEpoch {
			pos = s.rng.IntN(len(raw))
		} else if pos = s.rng.IntN(len(raw) - 4); pos >= 12 {
			pos += 4
		}
		raw[pos] ^= 1 << s.rng.IntN(8)
		b.Raw = raw
		d.durable[i] = b // d.cur shares the array: the node is down, cur == durable
		kind := dmgFlipTail
		if b.BaseOffset < d.rec {
			kind = dmgFlipBelowRec
		}
		s.injectf(n, kind, "FLIP bit at byte %d of batch %d..%d epoch %d (durable end record %d, durable end %d)",
			pos, b.BaseOffset, b.LastOffset, b.Epoch, d.rec, d.durEnd())
	case p < 7 && !d.stateLost:
		d.state, d.stateLost = raftlog.EmptyQuorumState(), true
		delete(s.chk.diskEpoch, n.id) // the next state it writes may be older
		s.injectf(n, dmgDropState, "DROP quorum-state")
	case p < 8 && !d.stateLost:
		d.stateCorrupt = true
		s.injectf(n, dmgFlipState, "FLIP a bit of quorum-state")
	case p < 9 && len(d.durable) > 1:
		k := 1 + s.rng.IntN(len(d.durable)-1)
		if k+1 < len(d.durable) && s.rng.IntN(2) == 0 {
			// The segment holding batches k..j-1: the next one does not continue
			// the log.
			j := k + 1 + s.rng.IntN(len(d.durable)-k-1)
			from, to := d.durable[k].BaseOffset, d.durable[j].BaseOffset
			d.durable = slices.Concat(d.durable[:k:k], d.durable[j:])
			d.cur = d.durable
			s.injectf(n, dmgDropMiddle, "DROP the segment [%d, %d) (durable end record %d)", from, to, d.rec)
			break
		}
		d.durable = d.durable[:k:k]
		d.cur = d.durable
		s.injectf(n, dmgDropSegment, "DROP the last segment: log ends at %d (durable end record %d)", d.durEnd(), d.rec)
	default:
		if id, ok := d.latest(); ok && id.EndOffset > d.start {
			delete(d.files, id)
			s.injectf(n, dmgDropSnapshot, "DROP snapshot %+v (log start %d)", id, d.start)
		}
	}
}

func (s *sim) injectf(n *simNode, kind damageKind, format string, args ...any) {
	n.disk.damaged = true
	s.stats.damage.injected[kind]++
	s.faultf(n.id, "DAMAGE "+format, args...)
}

// openLog is the log half of FileStorage's open (recoverLog), on the sim's batches:
// each durable batch's bytes go through the production parser; the first that fails
// ends the log. If it lies below the durable end record the node stops (ErrCorrupt);
// beyond it, it is a torn tail and is cut. A log ending below the record without a
// snapshot covering the record stops the node too ("log ends early").
func (d *simDisk) openLog() error {
	if d.stateCorrupt {
		// FileStorage.loadQuorumState: the file is replaced atomically, so no
		// crash tears it; an unreadable one is damage.
		return fmt.Errorf("%w: sim node %d: quorum-state is unreadable", raftlog.ErrCorrupt, d.n.id)
	}
	i, reason := d.firstInvalid()
	if i < len(d.cur) {
		b := d.cur[i]
		if b.BaseOffset < d.rec {
			return fmt.Errorf("%w: sim node %d: invalid batch at offset %d, below the durable end %d: %v",
				raftlog.ErrCorrupt, d.n.id, b.BaseOffset, d.rec, reason)
		}
		d.s.faultf(d.n.id, "load: torn tail at %d (durable end record %d): cut %d batches: %v", b.BaseOffset, d.rec, len(d.cur)-i, reason)
		if d.damaged {
			d.s.stats.damage.tornCut += len(d.cur) - i
		}
		d.cur = d.cur[:i:i]
		d.durable = d.cur
	}
	if d.curEnd() < d.rec {
		if id, ok := d.latest(); !ok || id.EndOffset < d.rec {
			return fmt.Errorf("%w: sim node %d: the log ends at %d, below the durable end %d, and no snapshot covers it",
				raftlog.ErrCorrupt, d.n.id, d.curEnd(), d.rec)
		}
	}
	return nil
}

// firstInvalid is the index of the first batch whose bytes the production parser
// refuses or that does not continue the log, len(d.cur) if none. Every batch before
// it becomes what the parser read from its bytes, as FileStorage loads it.
func (d *simDisk) firstInvalid() (int, error) {
	next, prevEpoch := d.start, int32(-1)
	for i, b := range d.cur {
		pb, err := raftlog.ParseBatch(b.Raw)
		if err == nil && pb.Epoch != b.Epoch {
			d.cur[i] = pb // a flipped epoch field: no CRC covers it
		}
		switch {
		case err != nil:
			return i, err
		case pb.BaseOffset != next || pb.LastOffset != b.LastOffset:
			return i, fmt.Errorf("batch at offset %d where %d was expected", pb.BaseOffset, next)
		case pb.Epoch < prevEpoch:
			return i, fmt.Errorf("batch at offset %d has epoch %d after epoch %d", pb.BaseOffset, pb.Epoch, prevEpoch)
		}
		next, prevEpoch = pb.NextOffset(), pb.Epoch
	}
	return len(d.cur), nil
}

// repair is `kraftd storage recover` on the sim disk (raftlog.Recover): E is the
// largest epoch still readable (quorum-state, the log's valid prefix, snapshot
// names, an earlier marker; an unreadable quorum-state is moved aside and counts as
// lost); the marker is written first, then the log is cut to its
// last valid batch and the durable end record lowered to the new end. A lost
// quorum-state stays lost: the marker says so and the node learns the epoch.
func (d *simDisk) repair() {
	if d.file != nil {
		d.fileRepair()
		return
	}
	if d.stateCorrupt {
		// Moved aside (quorum-state.corrupt): the node starts without one.
		d.state, d.stateLost, d.stateCorrupt = raftlog.EmptyQuorumState(), true, false
		delete(d.s.chk.diskEpoch, d.n.id)
	}
	i, _ := d.firstInvalid()
	var epoch int32
	if !d.stateLost {
		epoch = max(d.state.LeaderEpoch, 0)
	}
	for _, b := range d.cur[:i] {
		epoch = max(epoch, b.Epoch)
	}
	for id := range d.files {
		epoch = max(epoch, id.Epoch)
	}
	lost := d.stateLost
	if d.recovery != nil {
		epoch, lost = max(epoch, d.recovery.Epoch), lost || d.recovery.StateLost
	}
	d.recovery = &raftlog.Recovery{Epoch: epoch, StateLost: lost}
	d.cur = d.cur[:i:i]
	d.durable = d.cur
	d.truncSince = -1
	d.rec, d.syncedTo = d.curEnd(), d.curEnd()
	d.s.stats.damage.repaired++
	d.s.faultf(d.n.id, "STORAGE RECOVER: marker epoch %d state lost %t; log cut to [%d, %d)", epoch, lost, d.start, d.curEnd())
}

// ClearRecovery implements raftlog.RecoveryClearer: the marker is removed durably.
func (d *simDisk) ClearRecovery() error {
	if err := d.dead(); err != nil {
		return err
	}
	if d.file != nil {
		if err := d.file.st.ClearRecovery(); err != nil {
			return err
		}
	}
	switch {
	case d.recovery != nil && d.n.node == nil:
		// Removed while the node starts: it ignores the marker (mutant_norecovery).
		d.repairedUnsafe = true
		d.s.faultf(d.n.id, "recovery marker removed at start")
	case d.recovery != nil:
		d.s.stats.damage.recovered++
		d.s.faultf(d.n.id, "recovery marker removed at log end %d", d.curEnd())
	}
	d.recovery = nil
	return nil
}

// refusedOnDamage reports whether err is a start the damage detection refused.
func refusedOnDamage(err error) bool {
	return errors.Is(err, raftlog.ErrCorrupt) || errors.Is(err, quorum.ErrUnusableQuorumState)
}

// TestSimulationDamagedVoterRecovers pins the path the random schedule takes: a
// follower voter of a committing quorum is crashed, one bit of its first durable
// batch (below its durable end record) is flipped, and it is restarted. The
// production Node must refuse to start on the flip; after the repair (marker, log
// cut) it must rejoin without voting, remove its marker once caught up, and every
// invariant must hold through the liveness phase.
func TestSimulationDamagedVoterRecovers(t *testing.T) {
	pinned := 0
	// Seeds 5 and 6 have a committing 3-voter quorum at 2500 ms; should the schedule
	// change, the next seeds are tried.
	for _, seed := range []uint64{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20} {
		if pinned == 2 {
			break
		}
		injected := false
		res := runSimSeedWith(seed, func(s *sim) {
			s.noDamage = true // only the pinned flip
			s.at(2500, func() {
				l := s.leader()
				if l == nil || len(s.voters) < 3 {
					return
				}
				for _, v := range s.voters {
					n := s.nodes[v]
					if n == l || n.down || !s.flipFirstDurableBatch(n) {
						continue
					}
					s.at(s.nowMs+300, func() { s.restart(n) })
					injected = true
					return
				}
			})
		})
		if !injected {
			continue
		}
		pinned++
		if res.err != nil {
			t.Fatal(res.report())
		}
		dm := res.stats.damage
		if dm.detected != 1 || dm.repaired != 1 || dm.recovered != 1 {
			t.Fatalf("seed %d: the flip below the durable end was not detected, repaired and recovered from: %s", seed, dm)
		}
		t.Logf("seed %d: %s", seed, dm)
	}
	if pinned == 0 {
		t.Fatal("no seed had a follower voter to damage at 2500 ms")
	}
}
