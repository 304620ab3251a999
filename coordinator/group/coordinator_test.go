package group

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
)

// env is one coordinator on a real replica manager that leads
// __consumer_offsets-0 (NumPartitions 1: every group lives there), with a
// fake clock the test moves and Tick calls of its own.
type env struct {
	t     *testing.T
	dir   string
	rm    *replica.Manager
	c     *Coordinator
	nowMs atomic.Int64
}

const testSessionMs = 10000

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.nowMs.Store(1_000_000)
	rm, err := replica.New(replica.Config{Dir: e.dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Close() })
	e.rm = rm
	e.lead(1, 1)
	e.c = e.newCoordinator()
	return e
}

// lead makes broker leader lead __consumer_offsets-0 at leaderEpoch, with
// broker 1 as the only replica.
func (e *env) lead(leader, leaderEpoch int32) {
	e.t.Helper()
	e.leadWith(leader, leaderEpoch, leaderEpoch, []int32{1})
}

// leadWith applies a partition state with the given replicas, all in sync.
func (e *env) leadWith(leader, leaderEpoch, partitionEpoch int32, replicas []int32) {
	e.t.Helper()
	st := replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: 0},
		TopicID: [16]byte{1}, Leader: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
		Replicas: replicas, ISR: replicas}
	if err := e.rm.Apply(st); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) newCoordinator() *Coordinator {
	e.t.Helper()
	c, err := New(Config{BrokerID: 1, Replicas: e.rm, NumPartitions: 1, InitialRebalanceDelayMs: 3000,
		NowMs: e.nowMs.Load})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	e.waitLoaded(c)
	return c
}

// waitLoaded polls until c has loaded partition 0.
func (e *env) waitLoaded(c *Coordinator) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		_, _, code := c.resolveLocked("any")
		c.mu.Unlock()
		if code == 0 {
			return
		}
		if code != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			e.t.Fatalf("coordinator not loaded: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) advance(ms int64) {
	e.nowMs.Add(ms)
	e.c.Tick(e.nowMs.Load())
}

type joinReq struct {
	member   string
	instance *string
	version  int16
	meta     string
}

// joinAsync sends a JoinGroup v5 (v from r) and returns where its answer comes.
func (e *env) joinAsync(group string, r joinReq) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	if r.version != 0 {
		req.Version = r.version
	}
	req.Group, req.MemberID, req.InstanceID = group, r.member, r.instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = testSessionMs, 20000
	req.ProtocolType = "consumer"
	meta := r.meta
	if meta == "" {
		meta = "m"
	}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(meta)}}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- e.c.JoinGroup(context.Background(), req, "client", "/127.0.0.1") }()
	return ch
}

// answered waits briefly for a parked request's answer; ok is false when
// none came (still parked).
func answered[T any](ch <-chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-time.After(200 * time.Millisecond):
		var zero T
		return zero, false
	}
}

func mustAnswer[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

// newMember joins group as a fresh dynamic member (KIP-394 round trip) and
// returns its id and the parked join.
func (e *env) newMember(group string) (string, <-chan *kmsg.JoinGroupResponse) {
	e.t.Helper()
	first := mustAnswer(e.t, "first join", e.joinAsync(group, joinReq{}))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		e.t.Fatalf("first join: %v member %q, want MEMBER_ID_REQUIRED with an id", kerr.ErrorForCode(first.ErrorCode), first.MemberID)
	}
	return first.MemberID, e.joinAsync(group, joinReq{member: first.MemberID})
}

func (e *env) sync(group, member string, generation int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 3
	req.Group, req.MemberID, req.Generation = group, member, generation
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- e.c.SyncGroup(context.Background(), req) }()
	return ch
}

func (e *env) heartbeat(group, member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 3
	req.Group, req.MemberID, req.Generation = group, member, generation
	return e.c.Heartbeat(req).ErrorCode
}

// stableSingle brings a group to Stable with one member holding assignment
// "a0"; it returns the member id and generation.
func (e *env) stableSingle(group string) (string, int32) {
	e.t.Helper()
	id, join := e.newMember(group)
	e.waitState(group, PreparingRebalance)
	if _, ok := answered(join); ok {
		e.t.Fatal("the first rebalance of an empty group answered before group.initial.rebalance.delay.ms")
	}
	e.advance(3000)
	j := mustAnswer(e.t, "join after the initial delay", join)
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != id || len(j.Members) != 1 {
		e.t.Fatalf("join: %v generation %d leader %q members %d", kerr.ErrorForCode(j.ErrorCode), j.Generation, j.LeaderID, len(j.Members))
	}
	s := mustAnswer(e.t, "sync", e.sync(group, id, 1, map[string]string{id: "a0"}))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "a0" {
		e.t.Fatalf("sync: %v assignment %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}
	return id, j.Generation
}

// waitState polls until group is in want (a request sent with joinAsync
// has reached the coordinator).
func (e *env) waitState(group string, want State) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.state(group) != want {
		if time.Now().After(deadline) {
			e.t.Fatalf("group %s: state %v, want %v", group, e.state(group), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) state(group string) State {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	sh, _, code := e.c.resolveLocked(group)
	if code != 0 || sh.groups[group] == nil {
		return Dead
	}
	return sh.groups[group].state
}

func TestJoinMemberIDRequiredAndInitialDelay(t *testing.T) {
	e := newEnv(t)
	id, gen := e.stableSingle("g")
	if e.state("g") != Stable || gen != 1 || id == "" {
		t.Fatalf("state %v generation %d", e.state("g"), gen)
	}
	// v3 and older have no KIP-394 round trip: the join parks directly.
	if _, ok := answered(e.joinAsync("old", joinReq{version: 3})); ok {
		t.Fatal("a v3 join of an empty group answered before the initial delay")
	}
}

func TestJoinSessionTimeoutBounds(t *testing.T) {
	e := newEnv(t)
	for _, ms := range []int32{DefaultMinSessionTimeoutMs - 1, DefaultMaxSessionTimeoutMs + 1} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g", ms, 1000, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		if r := e.c.JoinGroup(context.Background(), req, "c", "h"); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
			t.Errorf("session timeout %d: %v, want INVALID_SESSION_TIMEOUT", ms, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// A second member joining a Stable group starts a rebalance: the first
// member's heartbeat says REBALANCE_IN_PROGRESS, its rejoin completes the
// join phase (no delay: the group is not Empty), and the leader's
// assignment reaches both through SyncGroup.
func TestSecondMemberRebalances(t *testing.T) {
	e := newEnv(t)
	a, gen := e.stableSingle("g")
	b, bJoin := e.newMember("g")
	e.waitState("g", PreparingRebalance)
	if code := e.heartbeat("g", a, gen); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during the rebalance: %v", kerr.ErrorForCode(code))
	}
	if _, ok := answered(bJoin); ok {
		t.Fatal("the join phase completed before the first member rejoined")
	}
	aj := mustAnswer(t, "a's rejoin", e.joinAsync("g", joinReq{member: a}))
	bj := mustAnswer(t, "b's join", bJoin)
	if aj.Generation != 2 || bj.Generation != 2 || aj.LeaderID != a || len(aj.Members) != 2 || len(bj.Members) != 0 {
		t.Fatalf("joins: a gen %d leader %q members %d; b gen %d members %d", aj.Generation, aj.LeaderID, len(aj.Members), bj.Generation, len(bj.Members))
	}
	bSync := e.sync("g", b, 2, nil)
	if _, ok := answered(bSync); ok {
		t.Fatal("a follower's sync answered before the leader's")
	}
	as := mustAnswer(t, "leader sync", e.sync("g", a, 2, map[string]string{a: "pa", b: "pb"}))
	bs := mustAnswer(t, "follower sync", bSync)
	if string(as.MemberAssignment) != "pa" || string(bs.MemberAssignment) != "pb" || e.state("g") != Stable {
		t.Fatalf("assignments %q %q, state %v", as.MemberAssignment, bs.MemberAssignment, e.state("g"))
	}
	if code := e.heartbeat("g", b, 1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of an old generation: %v", kerr.ErrorForCode(code))
	}
}

// A member that stops heartbeating is removed once its session timeout
// passes, and the group rebalances without it.
func TestSessionExpiryRemovesMember(t *testing.T) {
	e := newEnv(t)
	a, _ := e.stableSingle("g")
	b, bJoin := e.newMember("g")
	e.waitState("g", PreparingRebalance)
	aj := mustAnswer(t, "a's rejoin", e.joinAsync("g", joinReq{member: a}))
	mustAnswer(t, "b's join", bJoin)
	bSync := e.sync("g", b, aj.Generation, nil)
	mustAnswer(t, "leader sync", e.sync("g", a, aj.Generation, map[string]string{a: "pa", b: "pb"}))
	mustAnswer(t, "b sync", bSync)

	for range 4 { // only a heartbeats, for longer than the session timeout
		e.advance(testSessionMs / 3)
		if code := e.heartbeat("g", a, aj.Generation); code != 0 && code != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
		}
	}
	if e.state("g") != PreparingRebalance {
		t.Fatalf("state %v after b's session expired, want PreparingRebalance", e.state("g"))
	}
	j := mustAnswer(t, "a's rejoin", e.joinAsync("g", joinReq{member: a}))
	if j.Generation != aj.Generation+1 || len(j.Members) != 1 {
		t.Fatalf("rejoin: generation %d members %d", j.Generation, len(j.Members))
	}
	if code := e.heartbeat("g", b, aj.Generation); code != kerr.UnknownMemberID.Code {
		t.Fatalf("the expired member's heartbeat: %v", kerr.ErrorForCode(code))
	}
}

func commitReq(group, member string, generation int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, generation
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, offset, 5
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	return req
}

func commitCode(e *env, req *kmsg.OffsetCommitRequest) int16 {
	return e.c.OffsetCommit(req).Topics[0].Partitions[0].ErrorCode
}

// Generation -1 commits (a consumer without group management) are taken
// only by an Empty group; a group with members wants its member and
// generation.
func TestOffsetCommitGenerationChecks(t *testing.T) {
	e := newEnv(t)
	if code := commitCode(e, commitReq("solo", "", -1, 7)); code != 0 {
		t.Fatalf("generation -1 commit to an unknown group: %v", kerr.ErrorForCode(code))
	}
	a, gen := e.stableSingle("g")
	for _, tc := range []struct {
		member string
		gen    int32
		want   int16
	}{
		{"", -1, kerr.UnknownMemberID.Code},
		{a, gen + 1, kerr.IllegalGeneration.Code},
		{"other", gen, kerr.UnknownMemberID.Code},
		{a, gen, 0},
	} {
		if code := commitCode(e, commitReq("g", tc.member, tc.gen, 42)); code != tc.want {
			t.Errorf("commit by %q generation %d: %v, want %v", tc.member, tc.gen, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
	got := e.c.FetchOffsets(OffsetFetchGroup{Group: "g", Topics: map[string][]int32{"t": {0, 1}}})
	if o := got.Offsets[TopicPartition{"t", 0}]; o.Offset != 42 || o.LeaderEpoch != 5 {
		t.Fatalf("fetched %+v", o)
	}
	if o := got.Offsets[TopicPartition{"t", 1}]; o.Offset != -1 {
		t.Fatalf("uncommitted partition fetched %+v", o)
	}
}

// The coordinator moves (here: a new Coordinator over the same log, as the
// next leader of the partition reads it): the group comes back Stable with
// its member, generation and assignment, and the committed offsets.
func TestLoadRebuildsGroupAndOffsets(t *testing.T) {
	e := newEnv(t)
	a, gen := e.stableSingle("g")
	if code := commitCode(e, commitReq("g", a, gen, 99)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := commitCode(e, commitReq("solo", "", -1, 5)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.lead(1, 2) // a new leader epoch: the state is read back from the log
	e.c.Close()
	e.c = e.newCoordinator()
	if code := e.heartbeat("g", a, gen); code != 0 {
		t.Fatalf("heartbeat after the move: %v", kerr.ErrorForCode(code))
	}
	d := e.c.DescribeGroup("g")
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != a || string(d.Members[0].MemberAssignment) != "a0" {
		t.Fatalf("described after the move: %+v", d)
	}
	s := mustAnswer(t, "sync after the move", e.sync("g", a, gen, nil))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "a0" {
		t.Fatalf("sync after the move: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}
	for group, want := range map[string]int64{"g": 99, "solo": 5} {
		got := e.c.FetchOffsets(OffsetFetchGroup{Group: group, Topics: map[string][]int32{"t": {0}}})
		if o := got.Offsets[TopicPartition{"t", 0}]; o.Offset != want {
			t.Errorf("%s: offset %d after the move, want %d", group, o.Offset, want)
		}
	}
}

// After leadership moves away, requests say NOT_COORDINATOR and a parked
// join is released with it.
func TestLostLeadershipAnswersNotCoordinator(t *testing.T) {
	e := newEnv(t)
	_, join := e.newMember("g")
	e.waitState("g", PreparingRebalance)
	e.lead(2, 2)
	e.advance(1)
	if j := mustAnswer(t, "parked join", join); j.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join after the move: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	if code := e.heartbeat("g", "x", 1); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
	}
}

// A static member (KIP-345) that restarts joins with its instance id and no
// member id: it takes over its place under a new id without a rebalance,
// and its old id is fenced.
func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	e := newEnv(t)
	inst := "host-1"
	join := e.joinAsync("g", joinReq{instance: &inst})
	e.waitState("g", PreparingRebalance)
	e.advance(3000)
	j := mustAnswer(t, "static join", join)
	mustAnswer(t, "sync", e.sync("g", j.MemberID, j.Generation, map[string]string{j.MemberID: "s0"}))

	re := mustAnswer(t, "static rejoin", e.joinAsync("g", joinReq{instance: &inst}))
	if re.ErrorCode != 0 || re.Generation != j.Generation || re.MemberID == j.MemberID || e.state("g") != Stable {
		t.Fatalf("rejoin: %v generation %d member %q (was %q), state %v", kerr.ErrorForCode(re.ErrorCode), re.Generation, re.MemberID, j.MemberID, e.state("g"))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 3
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = "g", j.MemberID, &inst, j.Generation
	if code := e.c.Heartbeat(hb).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("the old id's heartbeat: %v", kerr.ErrorForCode(code))
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 4
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: j.MemberID, InstanceID: &inst}, {MemberID: "nobody"}, {InstanceID: &inst}}
	r := e.c.LeaveGroup(leave)
	want := []int16{kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code, 0}
	for i, m := range r.Members {
		if m.ErrorCode != want[i] {
			t.Errorf("leave %d: %v, want %v", i, kerr.ErrorForCode(m.ErrorCode), kerr.ErrorForCode(want[i]))
		}
	}
	if e.state("g") != Empty {
		t.Fatalf("state %v after the only member left", e.state("g"))
	}
}

// __consumer_offsets is compacted (cleanup.policy=compact, small segments):
// many commits of the same partitions shrink to the latest ones, and a
// coordinator loading the compacted log finds the latest offsets and the
// group as they were.
func TestLoadAfterCompaction(t *testing.T) {
	e := newEnv(t)
	cfg := replica.DefaultTopicConfig()
	cfg.SegmentBytes, cfg.Compact, cfg.Delete = 400, true, false
	e.rm.SetTopicConfig(Topic, cfg)
	a, gen := e.stableSingle("g")
	for i := range 30 {
		if code := commitCode(e, commitReq("g", a, gen, int64(i))); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
		if code := commitCode(e, commitReq("solo", "", -1, int64(1000+i))); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	p, _ := e.rm.Partition(replica.TopicPartition{Topic: Topic, Partition: 0})
	before := p.Log().Size()
	e.rm.CleanupLogs(e.nowMs.Load())
	if after := p.Log().Size(); after*3 > before {
		t.Fatalf("__consumer_offsets %d bytes after compaction, %d before", after, before)
	}
	e.lead(1, 2)
	e.c.Close()
	e.c = e.newCoordinator()
	for group, want := range map[string]int64{"g": 29, "solo": 1029} {
		got := e.c.FetchOffsets(OffsetFetchGroup{Group: group, Topics: map[string][]int32{"t": {0}}})
		if o := got.Offsets[TopicPartition{"t", 0}]; o.Offset != want {
			t.Errorf("%s: offset %d after compaction and reload, want %d", group, o.Offset, want)
		}
	}
	if code := e.heartbeat("g", a, gen); code != 0 {
		t.Fatalf("heartbeat after compaction and reload: %v", kerr.ErrorForCode(code))
	}
}

// A static member's new member id (a rejoin without a rebalance) is written
// to the log, so it is still known after the coordinator moves.
func TestStaticRejoinSurvivesMove(t *testing.T) {
	e := newEnv(t)
	inst := "host-1"
	join := e.joinAsync("g", joinReq{instance: &inst})
	e.waitState("g", PreparingRebalance)
	e.advance(3000)
	j := mustAnswer(t, "static join", join)
	mustAnswer(t, "sync", e.sync("g", j.MemberID, j.Generation, map[string]string{j.MemberID: "s0"}))
	re := mustAnswer(t, "static rejoin", e.joinAsync("g", joinReq{instance: &inst}))
	if re.ErrorCode != 0 || re.MemberID == j.MemberID {
		t.Fatalf("rejoin: %v member %q", kerr.ErrorForCode(re.ErrorCode), re.MemberID)
	}
	e.lead(1, 2)
	e.c.Close()
	e.c = e.newCoordinator()
	if code := e.heartbeat("g", re.MemberID, j.Generation); code != 0 {
		t.Fatalf("the new member id's heartbeat after the move: %v", kerr.ErrorForCode(code))
	}
}

// offsets.retention.minutes: the offsets of a group Empty for that long
// expire at the next retention check, the group goes with them, and the
// tombstones keep them gone after a reload. A group that emptied only
// lately (its member's session ran out during the long wait) keeps its
// offsets.
func TestOffsetsRetentionExpiresEmptyGroups(t *testing.T) {
	e := newEnv(t)
	if code := commitCode(e, commitReq("solo", "", -1, 7)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	a, gen := e.stableSingle("live")
	if code := commitCode(e, commitReq("live", a, gen, 9)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	fetch := func(group string) int64 {
		return e.c.FetchOffsets(OffsetFetchGroup{Group: group, Topics: map[string][]int32{"t": {0}}}).Offsets[TopicPartition{"t", 0}].Offset
	}
	e.advance(DefaultOffsetsRetentionMs - 60_000)
	if fetch("solo") != 7 {
		t.Fatal("offsets expired before offsets.retention.minutes")
	}
	if d := e.c.DescribeGroup("live"); d.State != "Empty" {
		t.Fatalf("the silent member's group is %s, want Empty", d.State)
	}
	e.advance(DefaultOffsetsRetentionCheckIntervalMs) // past the retention of "solo"
	if got := fetch("solo"); got != -1 {
		t.Fatalf("the empty group's offset %d after offsets.retention.minutes, want -1", got)
	}
	if d := e.c.DescribeGroup("solo"); d.State != "Dead" {
		t.Fatalf("the expired group is %s", d.State)
	}
	if got := fetch("live"); got != 9 {
		t.Fatalf("the lately emptied group's offset %d, want 9 (kept)", got)
	}
	e.lead(1, 2)
	e.c.Close()
	e.c = e.newCoordinator()
	if got := fetch("solo"); got != -1 {
		t.Fatalf("the expired offset came back after a reload: %d", got)
	}
}

// OffsetDelete refuses the offsets of topics a Stable consumer group's
// members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the others.
func TestOffsetDeleteSubscribedTopic(t *testing.T) {
	e := newEnv(t)
	meta := kmsg.ConsumerMemberMetadata{Version: 0, Topics: []string{"t"}}
	first := mustAnswer(t, "first join", e.joinAsync("g", joinReq{}))
	join := e.joinAsync("g", joinReq{member: first.MemberID, meta: string(meta.AppendTo(nil))})
	e.waitState("g", PreparingRebalance)
	e.advance(3000)
	j := mustAnswer(t, "join", join)
	mustAnswer(t, "sync", e.sync("g", j.MemberID, j.Generation, map[string]string{j.MemberID: "x"}))
	for _, topic := range []string{"t", "other"} {
		req := commitReq("g", j.MemberID, j.Generation, 5)
		req.Topics[0].Topic = topic
		if code := commitCode(e, req); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	for _, topic := range []string{"t", "other"} {
		del.Topics = append(del.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
	}
	r := e.c.OffsetDelete(del)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || r.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", r)
	}
	got := e.c.FetchOffsets(OffsetFetchGroup{Group: "g", Topics: map[string][]int32{"t": {0}, "other": {0}}})
	if got.Offsets[TopicPartition{"t", 0}].Offset != 5 || got.Offsets[TopicPartition{"other", 0}].Offset != -1 {
		t.Fatalf("offsets after OffsetDelete: %+v", got.Offsets)
	}
}

// group.max.size bounds members and KIP-394 member ids handed out alike: a
// client asking for new ids in a loop gets GROUP_MAX_SIZE_REACHED, not an
// ever larger pending list; the ids given out can still join.
func TestGroupMaxSizeCountsPendingMembers(t *testing.T) {
	e := newEnv(t)
	c, err := New(Config{BrokerID: 1, Replicas: e.rm, NumPartitions: 1, GroupMaxSize: 2, NowMs: e.nowMs.Load})
	if err != nil {
		t.Fatal(err)
	}
	e.c.Close()
	e.c = c
	t.Cleanup(c.Close)
	e.waitLoaded(c)
	var ids []string
	for i := range 3 {
		r := mustAnswer(t, "join", e.joinAsync("g", joinReq{}))
		switch {
		case i < 2 && r.ErrorCode == kerr.MemberIDRequired.Code:
			ids = append(ids, r.MemberID)
		case i == 2 && r.ErrorCode == kerr.GroupMaxSizeReached.Code:
		default:
			t.Fatalf("join %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	e.joinAsync("g", joinReq{member: ids[0]}) // a handed-out id is let in
	e.waitState("g", PreparingRebalance)
}

// A commit is answered only once the high watermark passes it: with a
// second in-sync replica that never fetches, it fails after
// offsets.commit.timeout.ms (COORDINATOR_NOT_AVAILABLE, not cached). A
// coordinator loading the partition then waits for the high watermark to
// reach the log end, answering COORDINATOR_LOAD_IN_PROGRESS, and finishes
// once the ISR shrinks to the leader.
func TestCommitWaitsForHighWatermarkAndLoadWaitsToo(t *testing.T) {
	e := newEnv(t)
	if code := commitCode(e, commitReq("solo", "", -1, 1)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.c.Close()
	c, err := New(Config{BrokerID: 1, Replicas: e.rm, NumPartitions: 1, CommitTimeoutMs: 100, NowMs: e.nowMs.Load})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	t.Cleanup(c.Close)
	e.leadWith(1, 2, 2, []int32{1, 2}) // broker 2 is in sync but never fetches
	e.waitLoaded(c)
	if code := commitCode(e, commitReq("solo", "", -1, 2)); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("a commit the high watermark never passed: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	if o := c.FetchOffsets(OffsetFetchGroup{Group: "solo", Topics: map[string][]int32{"t": {0}}}).Offsets[TopicPartition{"t", 0}]; o.Offset != 1 {
		t.Fatalf("the unacknowledged commit is served: offset %d", o.Offset)
	}

	e.leadWith(1, 3, 3, []int32{1, 2}) // a new leader epoch: reload, the uncommitted record in the log
	if code := e.heartbeat("solo", "m", 0); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("heartbeat while the high watermark is below the log end: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	e.advance(100)
	if code := e.heartbeat("solo", "m", 0); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("still loading: %v", kerr.ErrorForCode(code))
	}
	e.leadWith(1, 3, 4, []int32{1}) // the ISR shrinks to the leader: the high watermark reaches the end
	e.waitLoaded(c)
	if o := c.FetchOffsets(OffsetFetchGroup{Group: "solo", Topics: map[string][]int32{"t": {0}}}).Offsets[TopicPartition{"t", 0}]; o.Offset != 2 {
		t.Fatalf("after the load: offset %d, want 2 (the record committed with the ISR change)", o.Offset)
	}
}

// Once __consumer_offsets exists its partition count decides a group's
// partition, not offsets.topic.num.partitions: a broker set to 1 whose
// topic has 5 partitions serves a group of partition 3 (NOT_COORDINATOR
// before: it looked at partition 0), and its ticks load partition 3.
func TestTopicPartitionCountDecides(t *testing.T) {
	e := newEnv(t)
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("g-%d", i); PartitionFor(cand, 5) == 3 {
			id = cand
		}
	}
	if err := e.rm.Apply(replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: 3},
		TopicID: [16]byte{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{BrokerID: 1, Replicas: e.rm, NumPartitions: 1, TopicPartitions: func() int32 { return 5 },
		NowMs: e.nowMs.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if got := c.PartitionFor(id); got != 3 {
		t.Fatalf("partition %d, want 3", got)
	}
	c.Tick(e.nowMs.Load())
	deadline := time.Now().Add(5 * time.Second)
	for {
		res := c.FetchOffsets(OffsetFetchGroup{Group: id})
		if res.ErrorCode == 0 {
			break
		}
		if res.ErrorCode != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			t.Fatalf("OffsetFetch of a group of partition 3: %v", kerr.ErrorForCode(res.ErrorCode))
		}
		time.Sleep(time.Millisecond) // polling the load's end, as waitLoaded
	}
}

func txnCommitReq(group, member string, generation int32, pid int64, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.MemberID, req.Generation = "tx", group, member, generation
	req.ProducerID, req.ProducerEpoch = pid, 2
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, offset, 5
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{p}}}
	return req
}

func verified(int64, int16) error { return nil }

func (e *env) txnCommit(req *kmsg.TxnOffsetCommitRequest, verify func(int64, int16) error) int16 {
	return e.c.TxnOffsetCommit(req, verify).Topics[0].Partitions[0].ErrorCode
}

// marker writes producer pid's COMMIT or ABORT on __consumer_offsets-0 and
// tells the coordinator, as the WriteTxnMarkers handler does.
func (e *env) marker(pid int64, commit bool) {
	e.t.Helper()
	p, _ := e.rm.Partition(replica.TopicPartition{Topic: Topic, Partition: 0})
	off, err := p.AppendTxnMarker(replica.TxnMarker{ProducerID: pid, ProducerEpoch: 2, Commit: commit})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.WaitCommitted(context.Background(), off); err != nil {
		e.t.Fatal(err)
	}
	e.c.CompleteTxn(0, pid, commit, off)
}

// fetchT0 is the group's offset for t-0, RequireStable or not.
func (e *env) fetchT0(group string, stable bool) FetchedOffset {
	return e.c.FetchOffsets(OffsetFetchGroup{Group: group, Topics: map[string][]int32{"t": {0}}, RequireStable: stable}).Offsets[TopicPartition{"t", 0}]
}

// TxnOffsetCommit: the transaction coordinator's refusal and v3's member
// and generation checks answer before anything is written; an accepted
// commit is written in the producer's transaction and stays pending
// (OffsetFetch without RequireStable still sees the older offset, with it
// UNSTABLE_OFFSET_COMMIT) until its COMMIT marker makes it the committed
// offset or its ABORT drops it; a reload reads transactional batches and
// their markers back the same way, and a transaction still open at the
// reload commits when its marker comes.
func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	e := newEnv(t)
	a, gen := e.stableSingle("g")
	refuse := func(int64, int16) error { return fmt.Errorf("not in the transaction: %w", kerr.InvalidTxnState) }
	for _, tc := range []struct {
		member string
		gen    int32
		verify func(int64, int16) error
		want   int16
	}{
		{a, gen, refuse, kerr.InvalidTxnState.Code},
		{a, gen + 1, verified, kerr.IllegalGeneration.Code},
		{"other", gen, verified, kerr.UnknownMemberID.Code},
	} {
		if code := e.txnCommit(txnCommitReq("g", tc.member, tc.gen, 500, 1), tc.verify); code != tc.want {
			t.Errorf("txn commit by %q generation %d: %v, want %v", tc.member, tc.gen, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
	if code := commitCode(e, commitReq("g", a, gen, 10)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if o := e.fetchT0("g", true); o.ErrorCode != 0 || o.Offset != 10 {
		t.Fatalf("refused txn commits left %+v", o)
	}
	if code := e.txnCommit(txnCommitReq("g", a, gen, 500, 77), verified); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	if o := e.fetchT0("g", false); o.Offset != 10 {
		t.Fatalf("pending offset visible before its marker: %+v", o)
	}
	if o := e.fetchT0("g", true); o.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable while pending: %+v", o)
	}
	e.marker(500, true)
	if o := e.fetchT0("g", true); o.ErrorCode != 0 || o.Offset != 77 || o.LeaderEpoch != 5 {
		t.Fatalf("after COMMIT: %+v", o)
	}
	if code := e.txnCommit(txnCommitReq("g", a, gen, 501, 88), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.marker(501, false)
	if o := e.fetchT0("g", true); o.ErrorCode != 0 || o.Offset != 77 {
		t.Fatalf("after ABORT: %+v", o)
	}
	if code := e.txnCommit(txnCommitReq("g", a, gen, 502, 99), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.lead(1, 2)
	e.c.Close()
	e.c = e.newCoordinator()
	if o := e.fetchT0("g", false); o.Offset != 77 {
		t.Fatalf("after reload: %+v, want 77 (88 aborted, 99 pending)", o)
	}
	if o := e.fetchT0("g", true); o.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable after reload with 502 open: %+v", o)
	}
	e.marker(502, true)
	if o := e.fetchT0("g", true); o.ErrorCode != 0 || o.Offset != 99 {
		t.Fatalf("COMMIT after reload: %+v", o)
	}
}

// A transaction's offset replaces a committed one only if written after it
// (Kafka's completePendingTxnOffsetCommit): a plain OffsetCommit made while
// the transaction is open wins over its COMMIT, live and after a reload. A
// group known only by its pending offsets (generation -1, no members)
// survives Ticks and offsets retention until the marker comes.
func TestTxnOffsetCommitOrderAndPendingOnlyGroup(t *testing.T) {
	e := newEnv(t)
	if code := e.txnCommit(txnCommitReq("g", "", -1, 600, 5), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := commitCode(e, commitReq("g", "", -1, 9)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.marker(600, true)
	if o := e.fetchT0("g", true); o.Offset != 9 {
		t.Fatalf("COMMIT of an older transactional offset over a newer commit: %+v", o)
	}
	e.lead(1, 2)
	e.c.Close()
	e.c = e.newCoordinator()
	if o := e.fetchT0("g", true); o.Offset != 9 {
		t.Fatalf("after reload: %+v, want 9", o)
	}
	if code := e.txnCommit(txnCommitReq("fresh", "", -1, 601, 3), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.advance(DefaultOffsetsRetentionMs + DefaultOffsetsRetentionCheckIntervalMs)
	e.marker(601, true)
	if o := e.fetchT0("fresh", true); o.ErrorCode != 0 || o.Offset != 3 {
		t.Fatalf("pending-only group after Ticks: %+v", o)
	}
}

// A marker that commits while its __consumer_offsets partition loads
// (after the log end the load reads to) is kept and applied when the load
// ends.
func TestTxnMarkerDuringLoad(t *testing.T) {
	e := newEnv(t)
	if code := e.txnCommit(txnCommitReq("g", "", -1, 700, 11), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.c.Close()
	c, err := New(Config{BrokerID: 1, Replicas: e.rm, NumPartitions: 1, CommitTimeoutMs: 100, NowMs: e.nowMs.Load})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	t.Cleanup(c.Close)
	e.leadWith(1, 2, 2, []int32{1, 2}) // broker 2 is in sync but never fetches
	e.waitLoaded(c)
	if code := commitCode(e, commitReq("other", "", -1, 2)); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("a commit the high watermark never passed: %v", kerr.ErrorForCode(code))
	}
	e.leadWith(1, 3, 3, []int32{1, 2}) // reload, held below the log end
	if code := e.heartbeat("g", "m", 0); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("heartbeat while loading: %v", kerr.ErrorForCode(code))
	}
	p, _ := e.rm.Partition(replica.TopicPartition{Topic: Topic, Partition: 0})
	// The broker calls CompleteTxn once the marker committed, past the end
	// the load reads to; the test leaves the marker out of the log so that
	// only the kept notice can commit the offset (the loader goroutine reads
	// the log end when it runs, which a test cannot order).
	c.CompleteTxn(0, 700, true, p.Log().EndOffset())
	e.leadWith(1, 3, 4, []int32{1}) // the high watermark reaches the end: the load ends
	e.waitLoaded(c)
	if o := e.fetchT0("g", true); o.ErrorCode != 0 || o.Offset != 11 {
		t.Fatalf("after a COMMIT that came during the load: %+v", o)
	}
}

// A marker settles only the offsets written before it: a late or repeated
// notice of a producer's earlier marker leaves its next transaction's
// offsets pending.
func TestTxnMarkerSettlesOnlyEarlierOffsets(t *testing.T) {
	e := newEnv(t)
	if code := e.txnCommit(txnCommitReq("g", "", -1, 800, 1), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	p, _ := e.rm.Partition(replica.TopicPartition{Topic: Topic, Partition: 0})
	first := p.Log().EndOffset()
	e.marker(800, true)
	if code := e.txnCommit(txnCommitReq("g", "", -1, 800, 2), verified); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.c.CompleteTxn(0, 800, true, first) // the first marker's notice again
	if o := e.fetchT0("g", true); o.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("the second transaction's offset after the first marker's notice: %+v", o)
	}
	if o := e.fetchT0("g", false); o.Offset != 1 {
		t.Fatalf("committed offset %+v, want 1", o)
	}
}

// hostOthers makes the replica manager host n partitions of another topic
// (followers of broker 2), as a broker of a large cluster does.
func hostOthers(t testing.TB, rm *replica.Manager, n int) {
	t.Helper()
	states := make([]replica.PartitionState, n)
	for i := range states {
		states[i] = replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: "other", Partition: int32(i)},
			TopicID: [16]byte{7}, Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}}
	}
	if err := rm.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
}

// tickBytes is what one Tick of c allocates, averaged over a few.
func tickBytes(c *Coordinator, nowMs int64) uint64 {
	const ticks = 20
	c.Tick(nowMs)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range ticks {
		c.Tick(nowMs + int64(i))
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / ticks
}

// TestTickIgnoresOtherPartitions: a Tick follows the leadership of
// __consumer_offsets without listing every partition the broker hosts
// (issue 17: ten ticks a second each sorted a copy of all of them, a cost
// that grew with the cluster's partitions and slowed every broker). With
// 300 partitions of another topic hosted, a Tick allocates about what it
// does with none (it allocated their sorted list, 7 KB, before).
func TestTickIgnoresOtherPartitions(t *testing.T) {
	e := newEnv(t)
	base := tickBytes(e.c, e.nowMs.Load())
	hostOthers(t, e.rm, 300)
	with := tickBytes(e.c, e.nowMs.Load())
	if with > base+2048 {
		t.Fatalf("a Tick allocates %d bytes with 300 other partitions hosted, %d without", with, base)
	}
	e.c.mu.Lock()
	_, _, code := e.c.resolveLocked("any")
	e.c.mu.Unlock()
	if code != 0 {
		t.Fatalf("partition 0 no longer coordinated: %v", kerr.ErrorForCode(code))
	}
}

// BenchmarkTickHosting: one Tick of a group coordinator (ten a second by
// default) on a broker hosting 1,000 or 5,000 partitions of other topics
// besides __consumer_offsets-0. It must not grow with them (issue 17).
func BenchmarkTickHosting(b *testing.B) {
	for _, n := range []int{1_000, 5_000} {
		b.Run(fmt.Sprintf("hosted=%d", n), func(b *testing.B) {
			rm, err := replica.New(replica.Config{Dir: b.TempDir(), BrokerID: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer rm.Close()
			st := replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: 0},
				TopicID: [16]byte{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
			if err := rm.Apply(st); err != nil {
				b.Fatal(err)
			}
			hostOthers(b, rm, n)
			c, err := New(Config{BrokerID: 1, Replicas: rm, NumPartitions: 1, NowMs: func() int64 { return 1 }})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				c.Tick(1)
			}
		})
	}
}
