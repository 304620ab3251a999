package quorum_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/quorumtest"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// The voter-change simulation: a seeded run of five Raft cores (quorumtest.Env, the
// production core through its public API) that upgrades a static three-voter quorum
// to kraft.version 1 and then adds and removes voters (AddVoter/RemoveVoter on
// whoever leads) while it drops, duplicates and reorders messages, partitions the
// network and crashes and restarts nodes. After every round it checks:
//   - ElectionSafety: at most one leader per epoch, across every voter set the run
//     went through;
//   - CommittedSurvives: every node applies the same batch at every committed offset
//     (nothing committed is lost or changed by a voter change, a truncation or a
//     restart);
//   - LeaderCompleteness: a leader of epoch E holds everything exposed as committed
//     by the leaders of earlier epochs;
//   - OneChangeAtATime: consecutive committed voter sets differ by one voter;
//   - NonVotersNeverCampaign: a replica outside the voter set in force (a removed
//     voter that still runs) is never Prospective or Candidate, unless the last
//     VotersRecord of its log removed it and is above its high watermark (it may
//     have to lead to commit its own removal; quorum's removedPendingCommit).
//
// Each seed then heals every fault with all nodes up (removed voters included) and
// must keep one leader and epoch while they fetch: a removed voter cannot disrupt
// the quorum (its pre-votes are refused and it learns from the log that it is no
// voter).
//
// The simulation of the production Node driver (sim_test.go, sim_dynamic_test.go)
// runs voter changes too, in its dynamic-quorum seeds, on the real driver and
// storage; this one runs five cores in rounds, a cheaper and differently shaped
// schedule (five nodes, an upgrade from three static voters, every node restarted
// for the quiet phase).

const voterSimNodes = 5

var (
	simVoterAll   = flag.Bool("sim.voterall", false, "run every voter-change seed and report every failure")
	simVoterSeeds = flag.Int("sim.voterseeds", 0, "number of voter-change seeds (0: 10, 1 under -race)")
)

type voterSim struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	e    *quorumtest.Env
	// cut[{a,b}] drops messages from a to b.
	cut map[[2]int32]bool
	// dropPm is the per-mille message loss of the seed.
	dropPm int
	// pending are requests delivered and not answered yet, by target: when the
	// target crashes they fail, as the production driver's request timeout makes
	// them (a discovering observer has no fetch deadline of its own).
	pending map[int32]map[[2]uint64]quorum.Message
	// committed is the batch applied at each base offset, by any node.
	committed map[int64]raftlog.Batch
	// applied is how many of each node's Applied batches were checked (per life).
	applied map[int32]int
	// leaders is the leader of each epoch; leaderHW the highest high watermark a
	// leader of that epoch exposed.
	leaders  map[int32]int32
	leaderHW map[int32]int64
	// changes counts accepted voter changes; sets the distinct voter sets seen.
	changes int
	sets    map[string]bool
	// staleStatic counts nodes the quiet phase excused: static voters that missed
	// the upgrade, led by a controller outside their configured voters.
	staleStatic int
	err         error
}

func (v *voterSim) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf("seed %d at %d ms: %s", v.seed, v.e.NowMs, fmt.Sprintf(format, args...))
	}
}

func newVoterSim(t *testing.T, seed uint64) *voterSim {
	v := &voterSim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x766f74)), e: quorumtest.NewEnv(seed),
		cut: map[[2]int32]bool{}, pending: map[int32]map[[2]uint64]quorum.Message{}, committed: map[int64]raftlog.Batch{}, applied: map[int32]int{},
		leaders: map[int32]int32{}, leaderHW: map[int32]int64{}, sets: map[string]bool{}}
	v.dropPm = []int{0, 20, 100}[v.rng.IntN(3)]
	for id := int32(1); id <= voterSimNodes; id++ {
		cfg := quorum.Config{NodeID: id, Voters: []int32{1, 2, 3}, DirectoryID: upgradeDirID(id), Endpoints: upgradeEndpoints(id),
			FetchMaxBytes: []int32{200, 0}[v.rng.IntN(2)], AppendLingerMs: quorum.AppendLingerMsNone}
		if err := v.e.AddNode(cfg); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// round processes every node's Ready and delivers what is in flight: each message
// is lost (a request is then answered as failed), held back to the next round
// (reordering), duplicated, or delivered.
func (v *voterSim) round() {
	e := v.e
	for _, id := range e.IDs() {
		e.ProcessReady(e.Nodes[id])
	}
	net := e.Net
	e.Net = nil
	for _, m := range net {
		if !m.IsRequest() {
			delete(v.pending[m.From], [2]uint64{uint64(m.To), m.RequestID})
		} else if to := e.Nodes[m.To]; to != nil && !to.Down {
			if v.pending[m.To] == nil {
				v.pending[m.To] = map[[2]uint64]quorum.Message{}
			}
			v.pending[m.To][[2]uint64{uint64(m.From), m.RequestID}] = m
		}
		switch r := v.rng.IntN(1000); {
		case r < 50:
			e.Net = append(e.Net, m) // late
			continue
		case r < 50+v.dropPm || v.cut[[2]int32{m.From, m.To}]:
			deliverOrFail(e, m, true)
			continue
		case r < 80+v.dropPm && !m.IsRequest():
			deliverOrFail(e, m, false) // a duplicated response
		}
		deliverOrFail(e, m, false)
	}
	if e.Fatal != nil {
		v.fail("Fatal: %v", e.Fatal)
	}
	if e.Out.Len() > 1<<20 && *simSeed == 0 {
		e.Out.Reset()
	}
	v.check()
}

func (v *voterSim) check() {
	e := v.e
	for _, id := range e.IDs() {
		n := e.Nodes[id]
		if n.Down {
			continue
		}
		st := n.Raft.Status()
		if st.Role == quorum.Leader || st.Role == quorum.Resigned {
			if l, ok := v.leaders[st.Epoch]; ok && l != id {
				v.fail("ElectionSafety: %d and %d lead epoch %d", l, id, st.Epoch)
			}
			v.leaders[st.Epoch] = id
		}
		if !st.IsVoter && (st.Role == quorum.Prospective || st.Role == quorum.Candidate) && !removedPending(n, st) {
			v.fail("NonVotersNeverCampaign: node %d is %s at epoch %d outside the voters %v", id, st.Role, st.Epoch, st.VoterIDs)
		}
		if v.applied[id] > len(n.Applied) {
			v.applied[id] = 0 // a new life re-applies from its log start
		}
		for _, b := range n.Applied[v.applied[id]:] {
			if c, ok := v.committed[b.BaseOffset]; ok && !bytes.Equal(c.Raw, b.Raw) {
				v.fail("CommittedSurvives: node %d applies %d..%d epoch %d where %d..%d epoch %d was committed",
					id, b.BaseOffset, b.LastOffset, b.Epoch, c.BaseOffset, c.LastOffset, c.Epoch)
			}
			v.committed[b.BaseOffset] = b
		}
		v.applied[id] = len(n.Applied)
		if st.Role == quorum.Leader {
			v.checkLeader(n, st)
		}
	}
}

// removedPending reports, from n's own log, whether its last VotersRecord removed it
// and lies at or above its high watermark: the one case a replica outside the
// voter set campaigns (quorum's removedPendingCommit).
func removedPending(n *quorumtest.Node, st quorum.Status) bool {
	type at struct {
		off int64
		ids []int32
	}
	var sets []at
	for _, b := range n.Batches {
		if !b.Control {
			continue
		}
		recs, err := b.Records()
		if err != nil {
			return false
		}
		for i, r := range recs {
			if t, err := raftlog.ParseControlKey(r.Key); err == nil && t == raftlog.ControlKRaftVoters {
				if vs, err := quorum.ParseVotersRecord(r.Value); err == nil {
					sets = append(sets, at{b.BaseOffset + int64(i), vs.IDs()})
				}
			}
		}
	}
	if len(sets) < 2 {
		return false
	}
	last, prev := sets[len(sets)-1], sets[len(sets)-2]
	return last.off >= st.HighWatermark && slices.Contains(prev.ids, n.ID) && !slices.Contains(last.ids, n.ID)
}

func (v *voterSim) checkLeader(n *quorumtest.Node, st quorum.Status) {
	if st.HighWatermark > v.leaderHW[st.Epoch] {
		v.leaderHW[st.Epoch] = st.HighWatermark
	}
	var need int64
	for e, hw := range v.leaderHW {
		if e < st.Epoch {
			need = max(need, hw)
		}
	}
	for _, b := range n.Batches {
		if b.BaseOffset >= need {
			break
		}
		if c, ok := v.committed[b.BaseOffset]; ok && !bytes.Equal(c.Raw, b.Raw) {
			v.fail("LeaderCompleteness: leader %d of epoch %d holds %d..%d epoch %d where %d..%d epoch %d was committed",
				n.ID, st.Epoch, b.BaseOffset, b.LastOffset, b.Epoch, c.BaseOffset, c.LastOffset, c.Epoch)
		}
	}
	if st.LogEndOffset < need {
		v.fail("LeaderCompleteness: leader %d of epoch %d ends at %d, below the %d committed before it", n.ID, st.Epoch,
			st.LogEndOffset, need)
	}
}

// leader is the up node that leads the highest epoch, or nil.
func (v *voterSim) leader() *quorumtest.Node {
	var best *quorumtest.Node
	for _, id := range v.e.IDs() {
		n := v.e.Nodes[id]
		if n.Down || n.Raft.Status().Role != quorum.Leader {
			continue
		}
		if best == nil || n.Raft.Status().Epoch > best.Raft.Status().Epoch {
			best = n
		}
	}
	return best
}

// run is one seed: the upgrade, faultMs of faults and voter changes, then the quiet
// phase.
func (v *voterSim) run(faultMs int64) {
	e := v.e
	for e.NowMs < 30_000 && v.err == nil {
		if l := v.leader(); l != nil {
			if _, err := l.Raft.UpgradeKRaftVersion(e.NowMs, quorum.KRaftVersionDynamic, false); err == nil && l.Raft.Status().KRaftVersion == 1 {
				break
			}
		}
		v.step(10)
	}
	if v.leader() == nil || v.leader().Raft.Status().KRaftVersion != 1 {
		v.fail("Liveness: the upgrade to kraft.version 1 did not happen by %d ms", e.NowMs)
	}
	end := e.NowMs + faultMs
	for e.NowMs < end && v.err == nil {
		v.step(int64(5 + v.rng.IntN(20)))
		switch r := v.rng.IntN(100); {
		case r < 4:
			v.changeVoters()
		case r < 6:
			v.crashOrRestart()
		case r < 7:
			v.partition()
		case r < 8:
			clear(v.cut)
		}
	}
	v.quiet()
}

func (v *voterSim) step(ms int64) {
	v.e.Tick(ms, nil)
	if l := v.leader(); l != nil && v.rng.IntN(3) == 0 {
		_, _, _ = l.Raft.Propose(v.e.NowMs, []raftlog.Record{{Value: fmt.Appendf(nil, "v%d", v.e.NowMs)}})
	}
	v.round()
}

// changeVoters asks the leader to add a replica that is not a voter or remove a
// voter (never the last one), as an operator would; refusals are normal.
func (v *voterSim) changeVoters() {
	l := v.leader()
	if l == nil {
		return
	}
	st := l.Raft.Status()
	var outside []int32
	for id := int32(1); id <= voterSimNodes; id++ {
		if !slices.Contains(st.VoterIDs, id) {
			outside = append(outside, id)
		}
	}
	var err error
	if len(outside) > 0 && (len(st.VoterIDs) < 2 || v.rng.IntN(2) == 0) {
		id := outside[v.rng.IntN(len(outside))]
		_, err = l.Raft.AddVoter(v.e.NowMs, quorum.VoterNode{Key: quorum.ReplicaKey{ID: id, DirectoryID: upgradeDirID(id)},
			Endpoints: upgradeEndpoints(id), KRaftVersionMax: quorum.KRaftVersionMax})
	} else if len(st.VoterIDs) > 1 {
		id := st.VoterIDs[v.rng.IntN(len(st.VoterIDs))]
		_, err = l.Raft.RemoveVoter(v.e.NowMs, quorum.ReplicaKey{ID: id, DirectoryID: upgradeDirID(id)})
	}
	if err == nil {
		v.changes++
	}
}

// crashOrRestart crashes a live node (at most two down) or restarts a down one.
func (v *voterSim) crashOrRestart() {
	var up, down []*quorumtest.Node
	for _, id := range v.e.IDs() {
		if n := v.e.Nodes[id]; n.Down {
			down = append(down, n)
		} else {
			up = append(up, n)
		}
	}
	if len(down) > 0 && (len(down) >= 2 || v.rng.IntN(2) == 0) {
		v.restart(down[v.rng.IntN(len(down))])
		return
	}
	n := up[v.rng.IntN(len(up))]
	v.e.Crash(n)
	for _, m := range v.pending[n.ID] {
		if from := v.e.Nodes[m.From]; from != nil && !from.Down {
			v.e.Net = append(v.e.Net, quorumtest.FailedResponse(m))
		}
	}
	clear(v.pending[n.ID])
}

func (v *voterSim) restart(n *quorumtest.Node) {
	if err := v.e.Start(n); err != nil {
		v.fail("Restart: node %d: %v", n.ID, err)
	}
	v.applied[n.ID] = 0
}

// partition cuts one random node off, or splits the nodes in two.
func (v *voterSim) partition() {
	ids := v.e.IDs()
	v.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	k := 1 + v.rng.IntN(2)
	for _, a := range ids[:k] {
		for _, b := range ids[k:] {
			v.cut[[2]int32{a, b}], v.cut[[2]int32{b, a}] = true, true
		}
	}
}

// quiet heals everything, restarts every node (removed voters too), waits for a
// leader that commits, and then requires that leader and its epoch to last while
// every node runs: nothing outside the voter set disrupts it.
func (v *voterSim) quiet() {
	e := v.e
	clear(v.cut)
	v.dropPm = 0
	for _, id := range e.IDs() {
		if n := e.Nodes[id]; n.Down {
			v.restart(n)
		}
	}
	var l *quorumtest.Node
	deadline := e.NowMs + 20_000
	for v.err == nil && e.NowMs < deadline {
		v.step(10)
		// A leader that removed itself resigns once the removal commits: wait for one
		// in the voter set in force, that commits and that every node follows.
		if l = v.leader(); l != nil && v.settledOn(l) {
			break
		}
	}
	if l == nil || v.err != nil {
		var states []string
		for _, id := range e.IDs() {
			states = append(states, fmt.Sprintf("%s voters %v", quorumtest.StateLine(e.Nodes[id]), e.Nodes[id].Raft.Status().VoterIDs))
		}
		v.fail("Liveness: no leader committed within 20 s of healing:\n%s", strings.Join(states, "\n"))
		return
	}
	epoch := l.Raft.Status().Epoch
	for until := e.NowMs + 10_000; v.err == nil && e.NowMs < until; {
		v.step(10)
	}
	st := l.Raft.Status()
	if st.Role != quorum.Leader || st.Epoch != epoch {
		v.fail("NoDisruption: leader %d of epoch %d is %s at epoch %d after 10 s without faults (voters %v)",
			l.ID, epoch, st.Role, st.Epoch, st.VoterIDs)
		return
	}
	for _, id := range e.IDs() {
		ns := e.Nodes[id].Raft.Status()
		if ns.KRaftVersion == 0 && !slices.Contains(e.Nodes[id].Cfg.Voters, l.ID) {
			// A static voter that missed the upgrade refuses a leader outside its
			// controller.quorum.voters (the kraft.version 0 rule) until it is
			// reconfigured: a documented limit.
			v.staleStatic++
			continue
		}
		if ns.Epoch != epoch || ns.LeaderID != l.ID || ns.IsVoter != slices.Contains(st.VoterIDs, id) {
			v.fail("NoDisruption: node %d (%s) at epoch %d follows %d (voter %t, voters %v, log end %d); leader %d of epoch %d has voters %v, log end %d",
				id, ns.Role, ns.Epoch, ns.LeaderID, ns.IsVoter, ns.VoterIDs, ns.LogEndOffset, l.ID, epoch, st.VoterIDs, st.LogEndOffset)
		}
	}
	v.sets[fmt.Sprint(st.VoterIDs)] = true
}

// settledOn reports whether l leads in its own voter set, has committed in its
// epoch, and every node follows it.
func (v *voterSim) settledOn(l *quorumtest.Node) bool {
	st := l.Raft.Status()
	if !slices.Contains(st.VoterIDs, l.ID) || st.HighWatermark <= st.EpochStartOffset {
		return false
	}
	for _, id := range v.e.IDs() {
		if ns := v.e.Nodes[id].Raft.Status(); id != l.ID && (ns.Role != quorum.Follower || ns.LeaderID != l.ID || ns.Epoch != st.Epoch) {
			return false
		}
	}
	return true
}

// checkVoterHistory decodes the committed VotersRecords in offset order and checks
// that consecutive sets differ by one voter.
func (v *voterSim) checkVoterHistory() {
	offs := make([]int64, 0, len(v.committed))
	for off := range v.committed {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	var prev []int32
	for _, off := range offs {
		b := v.committed[off]
		if !b.Control {
			continue
		}
		recs, err := b.Records()
		if err != nil {
			v.fail("CommittedSurvives: batch %d: %v", off, err)
			return
		}
		for _, r := range recs {
			if t, err := raftlog.ParseControlKey(r.Key); err != nil || t != raftlog.ControlKRaftVoters {
				continue
			}
			vs, err := quorum.ParseVotersRecord(r.Value)
			if err != nil {
				v.fail("OneChangeAtATime: VotersRecord in batch %d: %v", off, err)
				return
			}
			ids := vs.IDs()
			v.sets[fmt.Sprint(ids)] = true
			if prev != nil && symmetricDiff(prev, ids) > 1 {
				v.fail("OneChangeAtATime: voters %v follow %v at offset %d", ids, prev, off)
			}
			prev = ids
		}
	}
}

func symmetricDiff(a, b []int32) int {
	d := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			d++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			d++
		}
	}
	return d
}

// TestSimulationVoterChanges runs the voter-change simulation over seeds (-sim.seed
// runs one).
func TestSimulationVoterChanges(t *testing.T) {
	seeds := map[bool]int{false: 10, true: 1}[raceEnabled]
	if testing.Short() {
		seeds = 4
	}
	if *simVoterSeeds > 0 {
		seeds = *simVoterSeeds
	}
	var list []uint64
	if *simSeed != 0 {
		list = []uint64{*simSeed}
	}
	for s := 1; s <= seeds && len(list) < seeds && *simSeed == 0; s++ {
		list = append(list, uint64(s))
	}
	changes, stale, sets := 0, 0, map[string]bool{}
	for _, seed := range list {
		v := newVoterSim(t, seed)
		v.run(4000 + int64(v.rng.IntN(4000)))
		if v.err == nil {
			v.checkVoterHistory()
		}
		if *simSeed != 0 && testing.Verbose() {
			_ = os.WriteFile(fmt.Sprintf("%s/voter-sim-%d.log", os.TempDir(), seed), v.e.Out.Bytes(), 0o644)
		}
		if v.err != nil && *simVoterAll {
			t.Errorf("%v", v.err)
			continue
		}
		if v.err != nil {
			t.Fatalf("%v\nreplay: go test ./quorum -run TestSimulationVoterChanges -sim.seed=%d\nlast events:\n%s",
				v.err, seed, lastLines(v.e.Out.String(), 60))
		}
		changes += v.changes
		stale += v.staleStatic
		for s := range v.sets {
			sets[s] = true
		}
	}
	t.Logf("%d seeds: %d voter changes accepted, %d distinct voter sets, %d static voters that missed the upgrade excused",
		len(list), changes, len(sets), stale)
	if len(list) >= 4 && (changes < len(list) || len(sets) < 4) {
		// The schedule must keep reaching voter changes, or the test checks nothing.
		t.Errorf("the schedule no longer changes voters: %d changes, sets %v", changes, sets)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
