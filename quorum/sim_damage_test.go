package quorum_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Disk damage in the simulation (issue 14, section 3): while a node is down, at most
// one node at a time, a batch in one of its segment files gets a flipped bit
// (below the durable end kraftd-synced-end records, or beyond the end the node made
// durable; never in the unrecorded window between the two, whose damage recovery
// cannot detect by design: see fileDamage), its
// quorum-state file is deleted or made unreadable, a segment file (the first, a
// middle or the last one) is deleted, or a snapshot the log still covers is deleted
// (fileDamage, on the node's CrashFS). A lost first segment is damage only when no
// snapshot reaches the next segment (else the log was cleanable there); then the
// start must be refused (DamageRefused). On restart the production FileStorage either refuses to open (ErrCorrupt; a lost
// quorum-state is refused by the production core, checkStateNotLost), and the node
// is then repaired by raftlog.Recover as `kraftd storage recover` does (marker with
// E first, then the log cut to its last valid batch) and started again; or it cuts a
// torn tail as after any crash. A stop on a disk that was not damaged is a
// violation: a power loss must never put a node in recovery.

type damageKind int

const (
	dmgFlipBelowRec damageKind = iota // a flipped bit below the durable end record
	dmgFlipTail                       // a flipped bit at or beyond it (read as a torn tail)
	dmgDropState                      // the quorum-state file deleted
	dmgFlipState                      // a flipped bit in the quorum-state file
	dmgDropSegment                    // the last segment file deleted
	dmgDropMiddle                     // a middle segment file deleted
	dmgDropFirst                      // the first segment file deleted
	dmgDropSnapshot                   // a snapshot the log still covers deleted
	numDamageKinds
)

var damageNames = [numDamageKinds]string{"bit flips below the durable end", "bit flips beyond it (torn tail)",
	"quorum-states dropped", "quorum-state flips", "last segments dropped", "middle segments dropped",
	"first segments dropped", "snapshots dropped"}

// simDamageStats are one run's damage counts.
type simDamageStats struct {
	injected [numDamageKinds]int
	// detected: starts refused on damaged data; repaired: `storage recover` runs;
	// recovered: markers the node removed after catching up.
	detected, repaired, recovered int
	// mustRefuse: first segments dropped with no snapshot reaching the next one (the
	// start must be refused; the others lose nothing a snapshot does not hold).
	mustRefuse int
	// windowSpared: damages drawn while the disk held batches in the unrecorded
	// window (from the durable end record to the durable end), which fileDamage
	// leaves alone.
	windowSpared int
}

func (a *simDamageStats) add(b simDamageStats) {
	for i := range a.injected {
		a.injected[i] += b.injected[i]
	}
	a.detected += b.detected
	a.repaired += b.repaired
	a.recovered += b.recovered
	a.mustRefuse += b.mustRefuse
	a.windowSpared += b.windowSpared
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
	return fmt.Sprintf("damage: %s (%d of the first with no snapshot reaching the next segment: refused; "+
		"%d drawn with the unrecorded window spared); %d starts refused, %d repairs with a marker, %d recoveries finished",
		joinComma(by), a.mustRefuse, a.windowSpared, a.detected, a.repaired, a.recovered)
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
	s.fileDamage(n, s.rng.IntN(10))
}

func (s *sim) injectf(n *simNode, kind damageKind, format string, args ...any) {
	n.disk.damaged = true
	s.stats.damage.injected[kind]++
	s.faultf(n.id, "DAMAGE "+format, args...)
}

// repair is `kraftd storage recover` (raftlog.Recover) on the node's files.
func (d *simDisk) repair() { d.fileRepair() }

// ClearRecovery implements raftlog.RecoveryClearer: the marker is removed durably.
func (d *simDisk) ClearRecovery() error {
	if err := d.dead(); err != nil {
		return err
	}
	if err := d.file.st.ClearRecovery(); err != nil {
		return err
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
	// The first two seeds from 5 with a leader and a live follower voter at 2500 ms
	// are used (23 and 28 today); should the schedule change, the next seeds are tried.
	for seed := uint64(5); seed <= 60; seed++ {
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

// crashArmSeeds is, for each crash arm of issue 14 (the open, CreateSnapshot,
// snapshot Write, ResetLog, log cleaning, and the durable-end record written
// after the acknowledgement), about how many seeds the schedule takes to crash
// inside it once, as measured over seeds 1-2000 (2026-12-02: open 2428 crashes,
// CreateSnapshot 39, snapshot Write 105, ResetLog 44, log cleaning 82,
// durable-end record 174). A schedule change that divides an arm's rate by
// several should bring it up to date.
var crashArmSeeds = map[diskOp]int{opOpen: 1, opSnapCreate: 51, opSnapChunk: 19, opResetLog: 45, opClean: 24, opRecord: 11}

// crashArmExpected is how many crashes inside an arm a run must expect before
// it requires one: with 6 the chance that a sound schedule reaches none is
// e^-6, 0.25% (a seed's schedule changes with every change to the
// simulation, so a fixed seed range is a fresh draw each time). A fixed count
// of seeds for every arm was fragile: at 200 seeds ResetLog is expected 4.4
// times, and the seeds 1-200 of one version reached it in none.
const crashArmExpected = 6

// missingCrashArms names the crash arms a run of agg's seeds no longer
// reaches, among those it is expected to reach crashArmExpected times or more:
// every arm from 306 seeds (CI runs 500, where the rarest is expected 9.8
// times, P(none) under 10^-4), the frequent ones from fewer (make sim's 200:
// all but ResetLog and CreateSnapshot).
func (a simStats) missingCrashArms() []string {
	var missing []string
	for _, op := range []diskOp{opOpen, opSnapCreate, opSnapChunk, opResetLog, opClean, opRecord} {
		if a.seeds >= crashArmExpected*crashArmSeeds[op] && a.persistCrashes[op] == 0 {
			missing = append(missing, diskOpNames[op])
		}
	}
	return missing
}
