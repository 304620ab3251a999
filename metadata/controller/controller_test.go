package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeQuorum is an in-memory log behind Quorum.Propose. With autoCommit,
// every appended batch is committed at once; otherwise commit() does it.
type fakeQuorum struct {
	mu         sync.Mutex
	log        fakeLog
	ctl        *Controller
	autoCommit bool
	proposed   chan int64 // last offset of every appended batch
	resigned   int        // Resign calls
}

func newFakeQuorum(autoCommit bool) *fakeQuorum {
	return &fakeQuorum{log: fakeLog{leaderEpoch: -1}, autoCommit: autoCommit, proposed: make(chan int64, 1024)}
}

// Resign records that the controller handed leadership over.
func (q *fakeQuorum) Resign(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.resigned++
	return nil
}

func (q *fakeQuorum) Propose(_ context.Context, epoch int32, recs []raftlog.Record) (int64, error) {
	q.mu.Lock()
	last, err := q.log.propose(epoch, recs)
	var commit []raftlog.Batch
	if err == nil && q.autoCommit {
		commit = q.log.undelivered()
	}
	q.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if commit != nil {
		q.ctl.HandleCommit(commit)
	}
	q.proposed <- last
	return last, nil
}

// elect makes node lead epoch: LeaderChange is appended and committed.
func (q *fakeQuorum) elect(node, epoch int32) {
	q.mu.Lock()
	start := int64(-1)
	if node == q.ctl.cfg.NodeID {
		q.log.leaderEpoch = epoch
		start = q.log.appendLeaderChange(node, epoch)
	} else {
		q.log.leaderEpoch = -1
		q.log.batches = q.log.batches[:q.log.delivered]
	}
	q.mu.Unlock()
	q.ctl.HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: node, Epoch: epoch, EpochStartOffset: start})
	q.commit()
}

func (q *fakeQuorum) commit() {
	q.mu.Lock()
	bs := q.log.undelivered()
	q.mu.Unlock()
	if len(bs) > 0 {
		q.ctl.HandleCommit(bs)
	}
}

func (q *fakeQuorum) waitProposed(t *testing.T) int64 {
	t.Helper()
	select {
	case off := <-q.proposed:
		return off
	case <-time.After(5 * time.Second):
		t.Fatal("no batch proposed")
		return 0
	}
}

// fakeClock is a settable wall clock.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func startController(t *testing.T, q *fakeQuorum, clock *fakeClock, opts ...func(*Config)) *Controller {
	t.Helper()
	cfg := Config{
		NodeID: 1, ClusterID: testClusterID, Quorum: q,
		MaxIdleIntervalMs: -1, Clock: clock.now, Rand: rand.New(rand.NewPCG(3, 4)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q.ctl = c
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// call sends req through the registered handler and returns a channel
// with its response.
func call(c *Controller, req kmsg.Request) <-chan kmsg.Response {
	out := make(chan kmsg.Response, 1)
	go func() {
		resp, err := c.handle(context.Background(), &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
		if err != nil {
			resp = nil
		}
		out <- resp
	}()
	return out
}

func await(t *testing.T, ch <-chan kmsg.Response) kmsg.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r == nil {
			t.Fatal("handler failed")
		}
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no response")
		return nil
	}
}

func registration(id int32) *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version, req.BrokerID, req.ClusterID = 4, id, testClusterID
	req.IncarnationID[0] = byte(id)
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", 1, 20
	req.Features = append(req.Features, f)
	return req
}

func heartbeat(id int32, epoch, offset int64) *kmsg.BrokerHeartbeatRequest {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version, req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = 1, id, epoch, offset
	return req
}

func TestControllerNotActiveAnswersNotController(t *testing.T) {
	q := newFakeQuorum(true)
	c := startController(t, q, &fakeClock{})
	r := await(t, call(c, registration(1))).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("got error %d, want NOT_CONTROLLER", r.ErrorCode)
	}
}

// A response is sent only once its records are committed.
func TestControllerRepliesAfterCommit(t *testing.T) {
	q := newFakeQuorum(false)
	c := startController(t, q, &fakeClock{})
	q.elect(1, 1)
	q.waitProposed(t) // bootstrap records
	q.commit()
	resp := call(c, registration(1))
	off := q.waitProposed(t)
	select {
	case r := <-resp:
		t.Fatalf("response before commit: %+v", r)
	default:
	}
	q.commit()
	r := await(t, resp).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != 0 || r.BrokerEpoch != off {
		t.Fatalf("got error %d epoch %d, want epoch %d", r.ErrorCode, r.BrokerEpoch, off)
	}
	img, _ := c.CommittedImage()
	if b, ok := img.Broker(1); !ok || !b.Fenced || b.Epoch != off {
		t.Fatalf("committed image broker 1 = %+v, %t", b, ok)
	}
}

// Losing leadership fails the requests whose records never committed.
func TestControllerLeadershipLossFailsPending(t *testing.T) {
	q := newFakeQuorum(false)
	c := startController(t, q, &fakeClock{})
	q.elect(1, 1)
	q.waitProposed(t)
	q.commit()
	resp := call(c, registration(1))
	q.waitProposed(t)
	q.elect(2, 2)
	r := await(t, resp).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("got error %d, want NOT_CONTROLLER", r.ErrorCode)
	}
	img, _ := c.CommittedImage()
	if _, ok := img.Broker(1); ok {
		t.Fatal("uncommitted registration survived leadership loss")
	}
}

func TestControllerCloseFailsPending(t *testing.T) {
	q := newFakeQuorum(false)
	c := startController(t, q, &fakeClock{})
	q.elect(1, 1)
	q.waitProposed(t)
	q.commit()
	resp := call(c, registration(1))
	q.waitProposed(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := await(t, resp).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("got error %d, want NOT_CONTROLLER", r.ErrorCode)
	}
	if err := c.Start(); err != ErrClosed {
		t.Fatalf("Start after Close = %v", err)
	}
}

// A broker that stops heartbeating is fenced once its session expires; the
// other broker, which keeps heartbeating, is not.
func TestControllerSessionExpiryFences(t *testing.T) {
	q := newFakeQuorum(true)
	clock := &fakeClock{}
	clock.ms.Store(1_000_000)
	c := startController(t, q, clock)
	q.elect(1, 1)
	q.waitProposed(t)
	epochs := map[int32]int64{}
	for _, id := range []int32{1, 2} {
		r := await(t, call(c, registration(id))).(*kmsg.BrokerRegistrationResponse)
		epochs[id] = r.BrokerEpoch
		q.waitProposed(t)
		h := await(t, call(c, heartbeat(id, r.BrokerEpoch, 1<<40))).(*kmsg.BrokerHeartbeatResponse)
		q.waitProposed(t)
		if h.IsFenced {
			t.Fatalf("broker %d still fenced", id)
		}
	}
	clock.advance(5 * time.Second)
	await(t, call(c, heartbeat(1, epochs[1], 1<<40)))
	clock.advance(5 * time.Second)
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Tick returns once the fencing is proposed; the fake quorum commits it
	// at once, but the loop adopts commits from its inbox asynchronously.
	fence := q.waitProposed(t)
	// Broker 1's heartbeat writes nothing and reveals only its own committed
	// state, so it is answered at once (answersNow), possibly before the loop
	// has adopted the fencing's commit: it is no barrier for broker 2's state.
	h := await(t, call(c, heartbeat(1, epochs[1], 1<<40))).(*kmsg.BrokerHeartbeatResponse)
	if h.ErrorCode != 0 || h.IsFenced {
		t.Fatalf("broker 1 heartbeat after the expiry: error %d fenced %t", h.ErrorCode, h.IsFenced)
	}
	waitFor(t, func() bool { _, off := c.CommittedImage(); return off >= fence })
	img, _ := c.CommittedImage()
	b1, _ := img.Broker(1)
	b2, _ := img.Broker(2)
	if b1.Fenced || !b2.Fenced {
		t.Fatalf("fenced: broker1=%t broker2=%t, want false/true", b1.Fenced, b2.Fenced)
	}
	// Broker 2 is fenced once: a later Tick has nobody left to fence.
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case off := <-q.proposed:
		t.Fatalf("a second Tick proposed a batch ending at %d", off)
	default:
	}
}

func TestRegisterHandlers(t *testing.T) {
	q := newFakeQuorum(true)
	c := startController(t, q, &fakeClock{})
	reg := protocol.NewRegistry()
	c.RegisterHandlers(reg)
	for _, a := range servedAPIs {
		minV, maxV, h, ok := reg.Lookup(a.key)
		if !ok || h == nil || minV != a.min || maxV != a.max {
			t.Errorf("key %d: registered %d-%d %t", a.key, minV, maxV, ok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config { return Config{NodeID: 1, ClusterID: "x", Quorum: nopQuorum{}} }
	cfg := base()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTimeoutMs != 9000 || cfg.MaxIdleIntervalMs != 500 || cfg.MetadataVersion != 14 || cfg.MaxRecordsPerBatch != 10000 {
		t.Fatalf("defaults: %+v", cfg)
	}
	for name, mut := range map[string]func(*Config){
		"no cluster":    func(c *Config) { c.ClusterID = "" },
		"no quorum":     func(c *Config) { c.Quorum = nil },
		"mv too new":    func(c *Config) { c.MetadataVersion = 17 },
		"mv too old":    func(c *Config) { c.MetadataVersion = 3 },
		"hb >= session": func(c *Config) { c.HeartbeatIntervalMs = 9000 },
	} {
		cfg := base()
		mut(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The quorum may merge proposals appended within its linger time into one
// batch: the commit of the merged batch adopts the view of the last
// proposal it holds and releases every response it covers.
func TestCommitOfMergedProposals(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1)
	var got []kmsg.Response
	done := func(r kmsg.Response) { got = append(got, r) }
	c.handle(createTopic("a", 2, 1), 0, done)
	c.handle(createTopic("b", 3, 1), 0, done)
	pending := fl.undelivered()
	if len(pending) != 2 || len(got) != 0 {
		t.Fatalf("%d batches appended, %d responses before commit", len(pending), len(got))
	}
	var recs []raftlog.Record
	for _, b := range pending {
		rs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rs...)
	}
	merged := raftlog.EncodeBatch(pending[0].BaseOffset, pending[0].Epoch, 1, false, recs)
	fl.batches = append(fl.batches[:len(fl.batches)-2], merged)
	if err := c.commit([]raftlog.Batch{merged}, 0); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(c.inflight) != 0 {
		t.Fatalf("%d responses, %d still in flight after the merged commit", len(got), len(c.inflight))
	}
	if want := replayLog(t, fl.batches); !c.committed.visible().Equal(want) {
		t.Fatalf("image after merged commit:\n%s\nreplay:\n%s", c.committed.visible().Dump(), want.Dump())
	}
}

// activeWithBroker elects node 1 and registers and unfences broker 1,
// everything committed; it returns the broker epoch.
func activeWithBroker(t *testing.T, q *fakeQuorum, c *Controller) int64 {
	t.Helper()
	q.elect(1, 1)
	q.waitProposed(t)
	q.commit()
	ch := call(c, registration(1))
	q.waitProposed(t)
	q.commit()
	epoch := await(t, ch).(*kmsg.BrokerRegistrationResponse).BrokerEpoch
	ch = call(c, heartbeat(1, epoch, 1<<40))
	q.waitProposed(t)
	q.commit()
	if r := await(t, ch).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("unfence: error %d fenced %t", r.ErrorCode, r.IsFenced)
	}
	return epoch
}

// A steady heartbeat reveals only committed state, so it is answered at
// once rather than after another request's uncommitted records (issue 12).
func TestSteadyHeartbeatDoesNotWaitForOtherWrites(t *testing.T) {
	q := newFakeQuorum(false)
	c := startController(t, q, &fakeClock{})
	epoch := activeWithBroker(t, q, c)
	create := call(c, createTopic("t", 3, 1))
	q.waitProposed(t)
	r := await(t, call(c, heartbeat(1, epoch, 1<<40))).(*kmsg.BrokerHeartbeatResponse)
	if r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("heartbeat: error %d fenced %t", r.ErrorCode, r.IsFenced)
	}
	select {
	case <-create:
		t.Fatal("create answered before its records committed")
	default:
	}
	q.commit()
	if r := await(t, create).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: error %d", r.Topics[0].ErrorCode)
	}
}

// The batches of a large operation may commit before this controller has
// replayed them into its pending view (they are all proposed at once): the
// commit replays them first, the committed view is the log's, and the
// operation is answered once the remaining steps run.
func TestLargeOperationCommittedBeforeItsReplay(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1, func(cfg *Config) { cfg.MaxRecordsPerBatch = 10 })
	c.stepAppends = true
	var created kmsg.Response
	c.handle(createTopic("big", 100, 1), 0, func(r kmsg.Response) { created = r })
	for i := 0; i < 11; i++ { // the last of these steps replays the first batch only
		c.appendNext(0)
	}
	if !c.busy() || c.pending.img.NumPartitions() >= 100 {
		t.Fatalf("busy %t with %d partitions replayed after the proposals", c.busy(), c.pending.img.NumPartitions())
	}
	commitAll(t, c, fl)
	if n := c.committed.img.NumPartitions(); n != 100 {
		t.Fatalf("committed view has %d partitions, want 100", n)
	}
	if got := replayLog(t, fl.batches); got.NumPartitions() != 100 {
		t.Fatalf("log replays to %d partitions", got.NumPartitions())
	}
	for c.busy() {
		c.appendNext(0)
	}
	if created == nil || created.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v", created)
	}
	if c.pending != c.committed || len(c.inflight) != 0 {
		t.Fatalf("pending is not the committed view (%d in flight)", len(c.inflight))
	}
	// The next write starts from the complete view.
	if r := run(t, c, fl, createTopic("small", 1, 1)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("next create: error %d", r.Topics[0].ErrorCode)
	}
}

// While an operation too large for one batch is proposed and then replayed
// one batch per loop step, heartbeats that write nothing are served between
// its steps and answered at once (issue 12: a 100,000-partition create held
// every heartbeat for its whole duration); its own answer waits for all of
// them. Every batch is proposed before any is replayed, so the quorum
// replicates the whole operation while the controller replays it.
func TestHeartbeatServedBetweenBatchesOfALargeCreate(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1, func(cfg *Config) { cfg.MaxRecordsPerBatch = 10 })
	c.stepAppends = true
	epoch := c.pending.regOffsets[1]
	var created kmsg.Response
	before := len(fl.batches)
	c.handle(createTopic("big", 100, 1), 0, func(r kmsg.Response) { created = r }) // 103 records: 12 batches
	steps := 0
	for ; c.busy(); steps++ {
		if proposed := len(fl.batches) - before; proposed < 12 && c.pending.img.NumPartitions() > 0 {
			t.Fatalf("step %d: a batch replayed with %d of 12 proposed", steps, proposed)
		}
		hb := heartbeat(1, epoch, 1<<40)
		if !c.writesNothing(hb) {
			t.Fatal("a steady heartbeat would write")
		}
		var r kmsg.Response
		c.handle(hb, 0, func(resp kmsg.Response) { r = resp })
		if r == nil || r.(*kmsg.BrokerHeartbeatResponse).ErrorCode != 0 {
			t.Fatalf("step %d: heartbeat not answered at once: %v", steps, r)
		}
		c.appendNext(0)
	}
	// 11 steps propose the other batches (the last of them replays the
	// first batch), 11 replay the rest.
	if steps != 22 {
		t.Errorf("%d steps after the first, want 22", steps)
	}
	if created != nil {
		t.Fatal("create answered before its records committed")
	}
	commitAll(t, c, fl)
	if created == nil || created.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v", created)
	}
	if got := replayLog(t, fl.batches); got.NumPartitions() != 100 {
		t.Fatalf("%d partitions replayed", got.NumPartitions())
	}
}

// TestControllerReplayFailureResignsAndReportsFatal: a committed record the
// image cannot apply stops the controller for good: it resigns quorum
// leadership, logs the offset and the record, reports the error to OnFatal
// (the app exits non-zero) and to Failed (the metric), and answers
// NOT_CONTROLLER from then on.
func TestControllerReplayFailureResignsAndReportsFatal(t *testing.T) {
	q := newFakeQuorum(false)
	obs, logs := observer.New(zap.ErrorLevel)
	fatal := make(chan error, 1)
	c := startController(t, q, &fakeClock{}, func(cfg *Config) {
		cfg.Logger = zap.New(obs)
		cfg.OnFatal = func(err error) { fatal <- err }
	})
	q.elect(1, 1)
	boot := q.waitProposed(t)
	q.commit()
	waitFor(t, func() bool { _, off := c.CommittedImage(); return off >= boot })
	bad, err := records.Record{Message: &records.RemoveAccessControlEntryRecord{ID: records.UUID{7}}}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.HandleCommit([]raftlog.Batch{raftlog.EncodeBatch(boot+1, 1, 0, false, []raftlog.Record{{Value: bad}})})
	var got error
	select {
	case got = <-fatal:
	case <-time.After(5 * time.Second):
		t.Fatal("no fatal error reported")
	}
	var re *ReplayError
	if !errors.As(got, &re) || !errors.Is(got, ErrReplay) || re.Offset != boot+1 {
		t.Fatalf("fatal error %v", got)
	}
	if !errors.Is(c.Failed(), ErrReplay) {
		t.Fatalf("Failed() = %v", c.Failed())
	}
	q.mu.Lock()
	resigned := q.resigned
	q.mu.Unlock()
	if resigned != 1 {
		t.Fatalf("resigned %d times, want 1", resigned)
	}
	entries := logs.FilterMessageSnippet("cannot apply committed metadata").All()
	if len(entries) != 1 {
		t.Fatalf("logged %d replay failures", len(entries))
	}
	fields := entries[0].ContextMap()
	if fields["offset"] != boot+1 || !strings.Contains(fmt.Sprint(fields["record"]), `"type":"REMOVE_ACCESS_CONTROL_ENTRY_RECORD"`) {
		t.Fatalf("log fields %v", fields)
	}
	r := await(t, call(c, registration(1))).(*kmsg.BrokerRegistrationResponse)
	if r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("failed controller answered error %d, want NOT_CONTROLLER", r.ErrorCode)
	}
}

// A standby (not the quorum leader) that cannot apply the log stops too,
// but has nothing to resign.
func TestControllerReplayFailureOnStandby(t *testing.T) {
	q := newFakeQuorum(false)
	fatal := make(chan error, 1)
	c := startController(t, q, &fakeClock{}, func(cfg *Config) { cfg.OnFatal = func(err error) { fatal <- err } })
	bad, err := records.Record{Message: &records.PartitionRecord{TopicID: records.UUID{1}, Replicas: []int32{1}}}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.HandleCommit([]raftlog.Batch{raftlog.EncodeBatch(0, 1, 0, false, []raftlog.Record{{Value: bad}})})
	select {
	case err := <-fatal:
		if !errors.Is(err, image.ErrUnknownTopic) {
			t.Fatalf("fatal error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no fatal error reported")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.resigned != 0 {
		t.Fatal("a standby resigned")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not reached")
		}
	}
}

// TestAllocateProducerIDsExhausted: a block whose end would pass int64 is
// UNKNOWN_SERVER_ERROR and writes nothing, as Kafka's generateNextProducerId
// ("Exhausted all producerIds"); the last block that fits is still handed out.
func TestAllocateProducerIDsExhausted(t *testing.T) {
	for _, tc := range []struct {
		next  int64
		want  int16
		start int64
	}{
		{math.MaxInt64 - 2*producerIDBlockSize, 0, math.MaxInt64 - 2*producerIDBlockSize},
		{math.MaxInt64 - producerIDBlockSize, 0, math.MaxInt64 - producerIDBlockSize},
		{math.MaxInt64 - producerIDBlockSize + 1, kerr.UnknownServerError.Code, 0},
	} {
		d := image.NewDelta(nil)
		for i, m := range []records.Message{
			&records.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 7},
			&records.ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 7, NextProducerID: tc.next},
		} {
			if err := d.Replay(int64(i), 1, records.Record{Message: m}); err != nil {
				t.Fatal(err)
			}
		}
		c := newCore(Config{NodeID: 1, ClusterID: testClusterID, Quorum: nopQuorum{}}, nil)
		v := emptyView()
		v.img = d.Apply()
		c.pending = v
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = 1, 7
		res := c.allocateProducerIDs(req)
		resp := res.Response.(*kmsg.AllocateProducerIDsResponse)
		if resp.ErrorCode != tc.want || resp.ProducerIDStart != tc.start {
			t.Fatalf("next %d: error %d start %d, want error %d start %d", tc.next, resp.ErrorCode, resp.ProducerIDStart, tc.want, tc.start)
		}
		if (tc.want != 0) != (len(res.Records) == 0) {
			t.Fatalf("next %d: %d records", tc.next, len(res.Records))
		}
	}
}
