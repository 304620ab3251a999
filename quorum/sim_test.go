package quorum_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	simSeeds = flag.Int("sim.seeds", 300, "number of simulation seeds")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this simulation seed (prints its trace with -v)")
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
	for _, res := range results {
		if res.err != nil {
			t.Fatal(res.report())
		}
		agg.add(res.stats)
	}
	t.Logf("%d seeds in %v: %s", len(seeds), time.Since(start).Round(time.Millisecond), agg)
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

type simStats struct {
	seeds, events, crashes, leaders, committed int
	truncations, lossyCrashes                  int
	maxLivenessMs, sumLivenessMs               int64
}

func (a *simStats) add(b simStats) {
	a.seeds++
	a.events += b.events
	a.crashes += b.crashes
	a.leaders += b.leaders
	a.committed += b.committed
	a.truncations += b.truncations
	a.lossyCrashes += b.lossyCrashes
	a.maxLivenessMs = max(a.maxLivenessMs, b.maxLivenessMs)
	a.sumLivenessMs += b.maxLivenessMs
}

func (a simStats) String() string {
	return fmt.Sprintf("%d events, %d crashes (%d during an fsync), %d durable leader epochs, %d truncations, %d committed batches; "+
		"recovery after heal max %d ms, mean %d ms",
		a.events, a.crashes, a.lossyCrashes, a.leaders, a.truncations, a.committed,
		a.maxLivenessMs, a.sumLivenessMs/int64(max(a.seeds, 1)))
}

type simResult struct {
	seed   uint64
	err    error
	trace  string
	faults string
	desc   string
	stats  simStats
}

func (r *simResult) report() string {
	return fmt.Sprintf("seed %d (%s): %v\nreproduce: go test ./quorum -run 'TestSimulation$' -v -sim.seed=%d\n"+
		"fault schedule (last %d):\n%s\nlast events:\n%s",
		r.seed, r.desc, r.err, r.seed, len(traceRing{}.ents), r.faults, r.trace)
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
	for i := 1; i <= nv; i++ {
		s.voters = append(s.voters, int32(i))
	}
	s.f = (nv - 1) / 2
	s.chooseFaultMix()
	faultMs := 4000 + s.rng.Int64N(6000)
	res.desc = fmt.Sprintf("%d voters, %d observers, %d ms of faults, timeouts/%d, drop %d‰ dup %d‰ fsync %d ms stall %d‰/%d ms",
		nv, no, faultMs, s.timeScale, s.baseDrop, s.baseDup, s.fsyncMs, s.stallPct, s.stallMs)
	for i := 1; i <= nv+no; i++ {
		if err := s.addNode(int32(i)); err != nil {
			res.err = err
			return res
		}
	}
	s.scheduleProposals()
	s.scheduleChaos(faultMs)
	s.runUntil(faultMs, nil)
	if s.err == nil {
		res.stats.maxLivenessMs = s.livenessPhase()
	}
	res.err = s.err
	if s.err != nil || *simSeed != 0 {
		res.trace, res.faults = s.trace.String(), s.faults.String()
	}
	res.stats.seeds = 1
	res.stats.events = int(s.seq)
	res.stats.crashes = s.crashes
	res.stats.lossyCrashes = s.lossyCrashes
	res.stats.truncations = s.truncations
	res.stats.leaders = len(s.chk.leaderLife)
	res.stats.committed = len(s.chk.committed)
	return res
}

func newSim(seed uint64) *sim {
	s := &sim{
		seed: seed, rng: rand.New(rand.NewPCG(seed, 0x73696d)),
		nodes: map[int32]*simNode{}, links: map[[2]int32]*linkFaults{},
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
}

func (s *sim) scheduleProposals() {
	var tick func()
	tick = func() {
		if l := s.leader(); l != nil {
			s.propose(l)
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
	case p < 6:
		if !n.down {
			s.crashes++
			s.crash(n)
		}
	case p < 12:
		n.crashInFsync = true
		s.faultf(n.id, "CRASH armed for the next fsync")
	case p < 25:
		s.restart(n)
	case p < 35:
		s.pause(n, 10+s.rng.Int64N(3000))
	case p < 42:
		s.partition()
	case p < 50:
		a, b := s.randomNode(), s.randomNode()
		if a != b {
			s.link(a.id, b.id).cut = true
			s.faultf(-1, "CUT %d -> %d", a.id, b.id)
		}
	case p < 60:
		s.healCuts()
	case p < 80:
		s.degradeLink()
	case p < 85:
		s.calmLinks(false)
	case p < 88:
		if l := s.leader(); l != nil && !l.busy(s.nowMs) {
			// A shutdown that is never completed: the node keeps running, answering
			// fetchers BROKER_NOT_AVAILABLE until it leaves the epoch.
			name, resign := "RESIGN", l.raft.Resign
			if s.rng.IntN(2) == 0 {
				name, resign = "SHUTDOWN", l.raft.Shutdown
			}
			s.faultf(l.id, "%s", name)
			if err := resign(s.nowMs); err != nil {
				s.fail("leader %d %s: %v", l.id, name, err)
			}
			s.pump(l)
		}
	}
}

// partition splits the nodes into two random groups (both directions cut).
func (s *sim) partition() {
	side := map[int32]bool{}
	for _, id := range s.ids {
		side[id] = s.rng.IntN(2) == 0
	}
	for _, a := range s.ids {
		for _, b := range s.ids {
			if a != b && side[a] != side[b] {
				s.link(a, b).cut = true
			}
		}
	}
	s.faultf(-1, "PARTITION %v", side)
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
	for _, id := range s.ids {
		n := s.nodes[id]
		n.crashInFsync = false
		switch {
		case n.down && n.voter && keepDown > 0:
			keepDown--
			s.faultf(n.id, "stays down")
		case n.down:
			s.restart(n)
		case n.pausedUntil > s.nowMs:
			n.pausedUntil = s.nowMs
			s.pump(n)
		}
	}
	s.faultf(-1, "LIVENESS phase: network healed, disks fast")
	p := &probe{s: s}
	s.runUntil(healedAt+simLivenessMs, p.done)
	if s.err == nil && !p.done() {
		s.fail("Liveness: no fresh commit reached every live node within %d ms of healing (%s)", simLivenessMs, p)
	}
	return s.nowMs - healedAt
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
		if l := s.leader(); !p.committed && l != nil && (!p.proposed || l.raft.Status().Epoch > p.epoch) {
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
	}
	return true
}
