package quorum_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var (
	// Under the race detector a smaller slice runs (make test); make sim and CI's sim
	// step run 300 without it.
	simSeeds = flag.Int("sim.seeds", map[bool]int{false: 300, true: 24}[raceEnabled], "number of simulation seeds")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this simulation seed (prints its trace with -v)")
	// -sim.whitebox=false leaves only the end-to-end invariants (make mutants).
	simWhitebox = flag.Bool("sim.whitebox", true, "also run the checks that look inside the driver")
	simPerSeed  = flag.Bool("sim.perseed", false, "log each seed's counts (with -v)")
	// simOldVote lets older peers serve Vote v0-v1 (no KIP-996 pre-vote). Off by
	// default: then a voter whose log is behind can win the race to every election
	// (its backoff, at most election.backoff.max.ms, is shorter than the others'
	// election timeout, which each of its Vote requests restarts) and be refused
	// every time; a few seeds in a thousand stay leaderless past the liveness window.
	simOldVote   = flag.Bool("sim.oldvote", false, "older peers may lack Vote v2 (pre-vote)")
	simDamage    = flag.Bool("sim.damage", true, "flip bits and drop files of one down node at a time")
	simFlipEpoch = flag.Bool("sim.flipepoch", false, "bit flips may hit a batch's partition leader epoch, which no CRC covers")
	// simDynamic is the share of seeds that run a dynamic quorum (sim_dynamic_test.go).
	simDynamic = flag.Int("sim.dynamic", 35, "percent of seeds that run a dynamic quorum (kraft.version 1) with voter changes")
)

// TestSimulation runs the seeded quorum simulation: 1, 3 or 5 voters plus observers
// under message drop, duplication, delay and reordering, symmetric and one-way
// partitions, process pauses, slow fsyncs and crashes that lose every unsynced
// write; the Raft invariants of kraft-behaviours.md §8 are checked after every event.
// Each seed then heals the faults (at most f voters stay down) and must elect a leader
// that commits a fresh proposal every live node applies, within simLivenessMs.
//
// A failure prints the seed, the command that replays it, and the last events.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		res := runSimSeed(*simSeed)
		if res.err != nil {
			t.Fatal(res.report())
		}
		t.Logf("seed %d: %s", *simSeed, res.summary())
		if testing.Verbose() {
			t.Logf("last events:\n%s", res.trace)
		}
		return
	}
	// Bugs the simulation found are pinned as transcripts in testdata (a seed's schedule
	// changes whenever the simulation does).
	var seeds []uint64
	for s := 1; s <= *simSeeds; s++ {
		seeds = append(seeds, uint64(s))
	}
	start := time.Now()
	results := runSimSeeds(seeds)
	var agg simStats
	var first *simResult
	caught := map[string][]uint64{} // invariant -> failing seeds
	for _, res := range results {
		if *simPerSeed {
			st := res.stats
			t.Logf("seed %d: %d elections, %d truncations, %d snapshot loads, %d crashes inside a persist, %d other crashes, "+
				"%d damage events, %d starts refused, %d recoveries finished, failed: %t",
				res.seed, st.elections, st.truncations, st.snapshotLoads, st.inPersist(), st.crashes,
				st.damage.total(), st.damage.detected, st.damage.recovered, res.err != nil)
		}
		if res.err != nil {
			if first == nil {
				first = res
			}
			inv, _, _ := strings.Cut(res.err.Error(), ":")
			caught[inv] = append(caught[inv], res.seed)
			continue
		}
		agg.add(res.stats)
	}
	// The counts go to CI's output (make sim runs -v).
	t.Logf("%d seeds in %v: %s", len(seeds), time.Since(start).Round(time.Millisecond), agg)
	if *simDynamic > 0 && first == nil && agg.dynamic >= 50 && (agg.voterChanges < agg.dynamic || agg.diskReplaced == 0 || agg.maxVoterSets < 4) {
		// The schedule must keep reaching voter changes and replaced disks, or the
		// dynamic seeds check nothing of them.
		t.Errorf("the dynamic seeds no longer change voters: %d seeds, %d changes committed, %d disks replaced, at most %d voter sets in a run",
			agg.dynamic, agg.voterChanges, agg.diskReplaced, agg.maxVoterSets)
	}
	if dm := agg.damage; *simDamage && first == nil && agg.seeds-agg.dynamic >= 200 &&
		(dm.injected[dmgFlipBelowRec] == 0 || dm.injected[dmgDropState] == 0 || dm.detected == 0 || dm.recovered == 0) {
		t.Errorf("the damage schedule no longer reaches detection and recovery: %s", dm)
	}
	if missing := agg.missingCrashArms(); first == nil && len(missing) > 0 {
		t.Errorf("the crash schedule no longer reaches %v: %s", missing, agg)
	}
	if first != nil {
		var by []string
		for inv, ss := range caught {
			by = append(by, fmt.Sprintf("%s: seeds %v", inv, ss[:min(len(ss), 10)]))
		}
		slices.Sort(by)
		t.Fatalf("%d of %d seeds failed (%s); the first:\n%s", len(results)-agg.seeds, len(results), strings.Join(by, "; "), first.report())
	}
}

// TestSimulationDeterministic: a seed replays exactly (same events, same trace), which
// is what makes -sim.seed a reproduction.
func TestSimulationDeterministic(t *testing.T) {
	for _, seed := range []uint64{3, 17} {
		var traces [2]string
		var events [2]int
		for i := range traces {
			res := runSimSeedWith(seed, func(s *sim) {
				s.at(3000, func() { traces[i] = s.trace.String() })
			})
			if res.err != nil {
				t.Fatal(res.report())
			}
			events[i] = res.stats.events
		}
		if events[0] != events[1] || traces[0] != traces[1] || traces[0] == "" {
			t.Fatalf("seed %d is not deterministic: %d vs %d events", seed, events[0], events[1])
		}
	}
}

// TestSimulationFailureReport: a violation stops the run and the report names the
// seed, the command that replays it, the fault schedule and the last events.
func TestSimulationFailureReport(t *testing.T) {
	res := runSimSeedWith(5, func(s *sim) {
		s.at(1500, func() { s.fail("Injected: violation at %d ms", s.nowMs) })
	})
	if res.err == nil {
		t.Fatal("injected violation not reported")
	}
	rep := res.report()
	for _, want := range []string{"seed 5 (", "Injected: violation at 1500 ms", "-sim.seed=5", "fault schedule", "last events:", "VIOLATION"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if n := strings.Count(res.trace, "\n"); n == 0 || n > len(traceRing{}.ents) {
		t.Errorf("trace has %d lines, want 1..%d", n, len(traceRing{}.ents))
	}
}

// runSimSeeds runs seeds on one worker per CPU; results keep the seeds' order.
func runSimSeeds(seeds []uint64) []*simResult {
	results := make([]*simResult, len(seeds))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				results[i] = runSimSeed(seeds[i])
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// simLivenessMs bounds the simulated time from healing to the fresh commit reaching
// every live node: a few election and fetch timeouts plus backoff.
const simLivenessMs = 30_000

type simResult struct {
	seed   uint64
	err    error
	trace  string
	faults string
	desc   string
	stats  simStats
}

func (r *simResult) report() string {
	return fmt.Sprintf("seed %d (%s): %v\nreproduce: %s\n"+
		"fault schedule (last %d):\n%s\nlast events:\n%s",
		r.seed, r.desc, r.err, replayCommand(r.seed), len(traceRing{}.ents), r.faults, r.trace)
}

// replayCommand is the command that replays seed with this run's build and flags.
func replayCommand(seed uint64) string {
	cmd := "go test ./quorum"
	if m := quorum.Mutant(); m != "" {
		cmd += " -tags mutant_" + m
	}
	if m := raftlog.Mutant(); m != "" {
		cmd += " -tags mutant_" + m
	}
	cmd += fmt.Sprintf(" -run 'TestSimulation$' -v -sim.seed=%d", seed)
	if !*simWhitebox {
		cmd += " -sim.whitebox=false"
	}
	return cmd
}

func (r *simResult) summary() string { return r.desc + "; " + r.stats.String() }

// runSimSeed builds the cluster and fault mix a seed chooses and runs both phases.
func runSimSeed(seed uint64) *simResult { return runSimSeedWith(seed, nil) }

// runSimSeedWith lets a test hook into the sim before it starts (nil: none).
func runSimSeedWith(seed uint64, hook func(*sim)) *simResult {
	s := newSim(seed)
	res := &simResult{seed: seed}
	if hook != nil {
		hook(s)
	}
	nv, no := []int{1, 3, 5}[s.rng.IntN(3)], s.rng.IntN(3)
	dynamic := s.rng.IntN(100) < *simDynamic
	if dynamic {
		// Initial voters and spares that start as observers.
		nv, no = []int{1, 3}[s.rng.IntN(2)], 1+s.rng.IntN(2)
	}
	for i := 1; i <= nv; i++ {
		s.voters = append(s.voters, int32(i))
	}
	s.f = (nv - 1) / 2
	s.chooseFaultMix()
	faultMs := 4000 + s.rng.Int64N(6000)
	kind := "static"
	if dynamic {
		s.chooseDynamic()
		kind = map[bool]string{true: "dynamic (formatted)", false: "dynamic (upgraded)"}[s.dyn.formatted]
	}
	res.desc = fmt.Sprintf("%s, %d voters, %d observers, %d ms of faults, timeouts/%d, drop %d‰ dup %d‰ fsync %d ms stall %d‰/%d ms",
		kind, nv, no, faultMs, s.timeScale, s.baseDrop, s.baseDup, s.fsyncMs, s.stallPct, s.stallMs)
	// The upgrade of a static quorum is setup, not under test: no open crashes
	// (armOpenCrash) until it is done.
	s.calm = s.dyn != nil && !s.dyn.formatted
	for i := 1; i <= nv+no; i++ {
		if err := s.addNode(int32(i)); err != nil {
			res.err = err
			return res
		}
	}
	s.scheduleProposals()
	if s.dyn != nil && !s.dyn.formatted {
		// The upgrade is setup, not under test: on fast disks.
		stall := s.stallPct
		s.stallPct = 0
		s.upgradePhase()
		s.stallPct = stall
		s.calm = false
	}
	s.slowDisk()
	faultMs += s.nowMs
	s.scheduleChaos(faultMs)
	if s.dyn != nil {
		s.scheduleVoterChanges(faultMs)
	}
	s.runUntil(faultMs, nil)
	if s.err == nil {
		s.stats.maxLivenessMs = s.livenessPhase()
	}
	res.err = s.err
	if s.err != nil || *simSeed != 0 {
		res.trace, res.faults = s.trace.String(), s.faults.String()
	}
	res.stats = s.stats
	res.stats.seeds = 1
	res.stats.sumLivenessMs = res.stats.maxLivenessMs
	res.stats.events = int(s.seq)
	res.stats.elections = len(s.chk.leaders)
	res.stats.committed = len(s.chk.committed)
	if d := s.dyn; d != nil {
		res.stats.dynamic = 1
		res.stats.voterChanges = len(d.history)
		if !d.formatted && len(d.history) > 0 {
			res.stats.voterChanges-- // the upgrade names the same voters
		}
		res.stats.voterSets = len(d.sets)
		res.stats.maxVoterSets = len(d.sets)
		res.stats.changeAttempts, res.stats.changesAccepted, res.stats.changesAcked = d.attempts, d.accepted, d.acked
		res.stats.diskReplaced = d.wipes
	}
	return res
}

func newSim(seed uint64) *sim {
	s := &sim{
		seed: seed, rng: rand.New(rand.NewPCG(seed, 0x73696d)),
		nodes: map[int32]*simNode{}, links: map[[2]int32]*linkFaults{},
		whitebox: *simWhitebox,
	}
	s.chk = newChecker()
	return s
}

// chooseFaultMix picks this seed's background fault rates, from a calm network to a
// lossy one with a slow disk.
func (s *sim) chooseFaultMix() {
	s.baseDrop = []int{0, 10, 50, 200}[s.rng.IntN(4)]
	s.baseDup = []int{0, 20, 100}[s.rng.IntN(3)]
	s.fsyncMs = []int64{0, 2, 10}[s.rng.IntN(3)]
	s.stallPct = []int{0, 10, 50}[s.rng.IntN(3)]
	s.stallMs = []int64{100, 1500}[s.rng.IntN(2)]
	s.dupRespPct = []int{0, 500}[s.rng.IntN(2)]
	s.proposeEveryMs = []int64{10, 50, 200}[s.rng.IntN(3)]
	s.timeScale = []int64{1, 4}[s.rng.IntN(2)]
	s.retentionBytes = []int64{1, 2000, -1}[s.rng.IntN(3)]
}

// slowDisk makes one node's fsyncs ten times slower in some seeds.
func (s *sim) slowDisk() {
	if s.rng.IntN(4) == 0 {
		n := s.randomNode()
		n.disk.slow = 10
		s.faultf(n.id, "SLOW disk (fsync x10)")
	}
}

// scheduleProposals proposes through every node that believes it leads, as clients
// do: a stale leader cut off with a minority keeps appending what it can never
// commit, which its return truncates.
func (s *sim) scheduleProposals() {
	var tick func()
	tick = func() {
		for _, id := range s.ids {
			if n := s.nodes[id]; !n.down && n.node.Status().Role == quorum.Leader {
				s.propose(n)
			}
		}
		s.at(s.nowMs+1+s.rng.Int64N(2*s.proposeEveryMs), tick)
	}
	s.at(s.rng.Int64N(s.proposeEveryMs+1), tick)
}

// scheduleChaos injects one random fault every few hundred ms until untilMs.
func (s *sim) scheduleChaos(untilMs int64) {
	var tick func()
	tick = func() {
		if s.nowMs >= untilMs {
			return
		}
		s.chaos()
		s.at(s.nowMs+20+s.rng.Int64N(400), tick)
	}
	s.at(s.rng.Int64N(200), tick)
}

func (s *sim) randomNode() *simNode { return s.nodes[s.ids[s.rng.IntN(len(s.ids))]] }

func (s *sim) chaos() {
	n := s.randomNode()
	if l := s.leader(); l != nil && s.rng.IntN(100) < 40 {
		n = l // aim at the leader often enough to force elections and divergence
	}
	switch p := s.rng.IntN(100); {
	case p < 5:
		s.crash(n)
	case p < 12:
		// A crash inside one of the node's next few persist steps, of any kind or
		// of one kind.
		d := n.disk
		d.crashIn, d.crashOp = 1+s.rng.IntN(4), -1
		if s.rng.IntN(2) == 0 {
			d.crashOp = diskOp(s.rng.IntN(int(numDiskOps)))
		}
		s.faultf(n.id, "CRASH armed inside persist step %d from now (kind %d)", d.crashIn, d.crashOp)
	case p < 14:
		n.crashAfterGrant = true
		s.faultf(n.id, "CRASH armed right after the next vote granted")
	case p < 15:
		if !n.down {
			n.disk.failSync = true
			s.faultf(n.id, "EIO armed for the next fsync")
		}
	case p < 22:
		s.restart(n)
	case p < 25:
		s.snapshot(n)
	case p < 32:
		s.pause(n, 10+s.rng.Int64N(3000))
	case p < 33:
		// A long stop (a GC storm, a VM migration): the others elect meanwhile and
		// the node comes back believing what it believed.
		s.pause(n, 5000+s.rng.Int64N(15000))
	case p < 36:
		s.partition()
	case p < 46:
		s.isolateLeaderWithMinority()
	case p < 50:
		s.flapLeader()
	case p < 54:
		a, b := s.randomNode(), s.randomNode()
		if a != b {
			s.link(a.id, b.id).cut = true
			s.faultf(-1, "CUT %d -> %d", a.id, b.id)
		}
	case p < 62:
		s.healCuts()
	case p < 80:
		s.degradeLink()
	case p < 85:
		s.calmLinks(false)
	case p < 88:
		if l := s.leader(); l != nil && !l.busy(s.nowMs) && len(l.queue) == 0 {
			// A shutdown that is never completed: the node keeps running, answering
			// fetchers BROKER_NOT_AVAILABLE until it leaves the epoch.
			name, resign := "RESIGN", l.node.Resign
			if s.rng.IntN(2) == 0 {
				name, resign = "SHUTDOWN", l.node.Shutdown
			}
			s.faultf(l.id, "%s", name)
			var err error
			s.runEvent(l, func() { err = resign() })
			if err != nil {
				s.fail("leader %d %s: %v", l.id, name, err)
			}
		}
	case p < 95:
		// Damage while down: a node already down, or n crashed for it.
		for _, id := range s.ids {
			if s.nodes[id].down {
				n = s.nodes[id]
				break
			}
		}
		if !n.down && s.rng.IntN(2) == 0 {
			s.crash(n)
		}
		s.damage(n)
		if s.dyn != nil && s.rng.IntN(3) == 0 && s.wipeable(n) {
			s.wipe(n)
		}
	default:
		s.aimAtInstall()
	}
}

// electionMs is the voters' election timeout.
func (s *sim) electionMs() int64 { return 1000 / s.timeScale }

// isolateLeaderWithMinority cuts the leader and a minority of the voters (and a random
// half of the observers) off from the rest while the majority elects a new leader;
// the old side keeps appending what it can never commit, which the heal, one to four
// election timeouts later, truncates.
func (s *sim) isolateLeaderWithMinority() {
	l := s.leader()
	voters, f := s.voters, s.f
	if l != nil && s.dyn != nil {
		voters = nil
		for _, k := range s.logVoters(l).keys {
			voters = append(voters, k.ID)
		}
		f = (len(voters) - 1) / 2
	}
	if l == nil || len(voters) < 3 {
		return
	}
	side := map[int32]bool{l.id: true}
	others := slices.DeleteFunc(slices.Clone(voters), func(v int32) bool { return v == l.id })
	s.rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, v := range others[:s.rng.IntN(max(f, 1))] {
		side[v] = true
	}
	for _, id := range s.ids {
		if !slices.Contains(voters, id) && s.rng.IntN(2) == 0 {
			side[id] = true
		}
	}
	s.split(side)
	s.faultf(-1, "ISOLATE leader %d with minority %v", l.id, side)
	if d := l.disk; d.crashIn == 0 && s.rng.IntN(3) == 0 {
		// Its return truncates what it appended alone: crash inside that.
		d.crashIn, d.crashOp = 1, opTruncate
		s.faultf(l.id, "CRASH armed inside the next TruncateTo")
	}
	healAt := s.nowMs + s.electionMs()*(1+s.rng.Int64N(4)) + s.rng.Int64N(s.electionMs())
	s.at(healAt, func() {
		if !s.healed {
			s.healCuts()
		}
	})
}

// flapLeader cuts and restores the leader's links a few times, each phase close to an
// election timeout, so elections start and abort around the moment they would win.
func (s *sim) flapLeader() {
	l := s.leader()
	if l == nil {
		return
	}
	id := l.id
	t := s.nowMs
	flaps := 2 + s.rng.IntN(4)
	s.faultf(id, "FLAP leader's links %d times", flaps)
	for i := range flaps {
		t += s.electionMs()*3/4 + s.rng.Int64N(s.electionMs()/2+1)
		cut := i%2 == 0
		s.at(t, func() {
			if s.healed {
				return
			}
			for _, o := range s.ids {
				if o != id {
					s.link(id, o).cut, s.link(o, id).cut = cut, cut
				}
			}
			s.faultf(id, "FLAP cut=%t", cut)
		})
	}
}

// partition splits the nodes into two random groups (both directions cut).
func (s *sim) partition() {
	side := map[int32]bool{}
	for _, id := range s.ids {
		side[id] = s.rng.IntN(2) == 0
	}
	s.split(side)
	s.faultf(-1, "PARTITION %v", side)
}

// split cuts every link between the two sides, both directions.
func (s *sim) split(side map[int32]bool) {
	for _, a := range s.ids {
		for _, b := range s.ids {
			if a != b && side[a] != side[b] {
				s.link(a, b).cut = true
			}
		}
	}
}

func (s *sim) healCuts() {
	for _, l := range s.links {
		l.cut = false
	}
	s.faultf(-1, "HEAL")
}

// degradeLink gives one directed link a random mix of loss, duplication, delay and
// reordering (slow messages overtaken by later ones).
func (s *sim) degradeLink() {
	a, b := s.randomNode(), s.randomNode()
	if a == b {
		return
	}
	l := s.link(a.id, b.id)
	l.dropPct = s.baseDrop + []int{0, 100, 500}[s.rng.IntN(3)]
	l.dupPct = s.baseDup + []int{0, 100}[s.rng.IntN(2)]
	l.delayMs = 1 + s.rng.Int64N(50)
	l.jitterMs = s.rng.Int64N(100)
	l.slowPct = []int{0, 50, 300}[s.rng.IntN(3)]
	l.slowMs = 100 + s.rng.Int64N(3000)
	s.faultf(-1, "DEGRADE %d -> %d: %+v", a.id, b.id, *l)
}

// calmLinks resets every link to the seed's background rates (heal: no faults).
func (s *sim) calmLinks(heal bool) {
	for _, a := range s.ids {
		for _, b := range s.ids {
			if a == b {
				continue
			}
			l := s.link(a, b)
			*l = linkFaults{cut: l.cut, delayMs: 1, jitterMs: 2, dropPct: s.baseDrop, dupPct: s.baseDup}
			if heal {
				*l = linkFaults{delayMs: 1, jitterMs: 2}
			}
		}
	}
	s.faultf(-1, "CALM links (heal=%t)", heal)
}

// livenessPhase heals everything, restarts all but at most f voters, and requires a
// fresh proposal to commit and reach every live node within simLivenessMs. It
// returns the simulated time that took.
func (s *sim) livenessPhase() int64 {
	healedAt := s.nowMs
	s.healed = true
	s.calmLinks(true)
	s.stallPct, s.dupRespPct = 0, 0
	keepDown := s.rng.IntN(s.f + 1)
	if s.dyn != nil {
		keepDown = 0 // every node runs: removed voters must not disrupt (stableAfterHeal)
	}
	for _, v := range s.voters {
		// A damaged voter recovers only with a majority of healthy voters up.
		if d := s.nodes[v].disk; d.damaged || d.recovery != nil {
			keepDown = min(keepDown, s.f-1)
		}
	}
	for _, id := range s.ids {
		n := s.nodes[id]
		n.crashAfterGrant = false
		n.disk.crashIn, n.disk.failSync = 0, false
		n.disk.slow = 1
		switch {
		case n.down && n.voter && keepDown > 0:
			keepDown--
			s.faultf(n.id, "stays down")
		case n.down:
			s.restart(n)
		case n.pausedUntil > s.nowMs:
			n.pausedUntil = s.nowMs
			s.wake(n)
		}
	}
	s.faultf(-1, "LIVENESS phase: network healed, disks fast")
	p := &probe{s: s}
	s.runUntil(healedAt+simLivenessMs, p.done)
	if s.err == nil && !p.done() {
		s.fail("Liveness: no fresh commit reached every live node within %d ms of healing (%s)", simLivenessMs, p)
	}
	took := s.nowMs - healedAt
	if s.err == nil && s.dyn != nil {
		s.stableAfterHeal(healedAt)
	}
	return took
}

// probe proposes a fresh record through the current leader until one commits, then
// waits for every live node to apply it.
type probe struct {
	s         *sim
	offset    int64
	epoch     int32
	proposed  bool
	committed bool
}

func (p *probe) String() string {
	return fmt.Sprintf("probe proposed=%t offset=%d epoch=%d committed=%t", p.proposed, p.offset, p.epoch, p.committed)
}

func (p *probe) done() bool {
	s := p.s
	if !p.committed {
		if p.proposed {
			if i := batchAt(s.chk.committed, p.offset); i >= 0 {
				p.committed = s.chk.committed[i].Epoch == p.epoch
				p.proposed = p.committed // overwritten by another epoch's batch: propose again
			}
		}
		if l := s.leader(); !p.committed && l != nil && (!p.proposed || l.node.Status().Epoch > p.epoch) {
			if off, epoch, ok := s.propose(l); ok {
				p.offset, p.epoch, p.proposed = off, epoch, true
				s.tracef(l.id, "liveness probe at %d epoch %d", off, epoch)
			}
		}
		if !p.committed {
			return false
		}
	}
	for _, id := range s.ids {
		if n := s.nodes[id]; !n.down && n.appliedNext <= p.offset {
			return false
		}
		// A live voter repaired with a recovery marker must finish its recovery too
		// (the phase keeps a majority of healthy voters up for it): until then it
		// cannot vote, so a quorum that needs it could not elect a leader.
		if n := s.nodes[id]; !n.down && n.voter && n.disk.recovery != nil {
			return false
		}
	}
	return true
}
