package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

const testClusterID = "test-cluster-id-aaaaaa"

// fakeLog is an in-memory __cluster_metadata log: Propose appends a batch
// when the caller leads the epoch; commit hands batches to a listener.
//
// INVARIANTS: batches are contiguous from offset 0; delivered <= len(batches).
type fakeLog struct {
	batches     []raftlog.Batch
	delivered   int
	leaderEpoch int32 // epoch in which Propose succeeds; -1 = never
}

func (l *fakeLog) endOffset() int64 {
	if n := len(l.batches); n > 0 {
		return l.batches[n-1].LastOffset + 1
	}
	return 0
}

func (l *fakeLog) propose(epoch int32, recs []raftlog.Record) (int64, error) {
	if epoch != l.leaderEpoch {
		return 0, quorum.ErrNotLeader
	}
	b := raftlog.EncodeBatch(l.endOffset(), epoch, 1, false, recs)
	l.batches = append(l.batches, b)
	return b.LastOffset, nil
}

// appendLeaderChange writes the control batch a new quorum leader writes.
func (l *fakeLog) appendLeaderChange(leader, epoch int32) int64 {
	msg := kmsg.NewLeaderChangeMessage()
	msg.LeaderID = leader
	rec := raftlog.Record{Key: raftlog.ControlKey(raftlog.ControlLeaderChange), Value: msg.AppendTo(nil)}
	b := raftlog.EncodeBatch(l.endOffset(), epoch, 1, true, []raftlog.Record{rec})
	l.batches = append(l.batches, b)
	return b.BaseOffset
}

// undelivered returns the batches not yet committed and marks them so.
func (l *fakeLog) undelivered() []raftlog.Batch {
	out := l.batches[l.delivered:]
	l.delivered = len(l.batches)
	return out
}

// replayLog builds the image a fresh reader (broker) would publish from
// the committed batches: open transactions held back, as Kafka's loader.
func replayLog(t interface{ Fatal(...any) }, batches []raftlog.Batch) *image.Image {
	v := emptyView()
	for _, b := range batches {
		if b.Control {
			continue
		}
		var err error
		if v, err = v.replay(decodeBatch(new(records.Decoder), b), b.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	return v.visible()
}

// env drives one or more controllers (cores) sharing one log through a
// transcript. Requests and ticks go to c, the last controller that led
// (node 1 at first); commits and leader changes go to all of them.
type env struct {
	t       *testing.T
	cfg     Config
	c       *core
	cores   []*core // cores[i] is node i+1
	log     *fakeLog
	nowMs   int64
	hold    bool // when set, appended batches are not committed automatically
	printed int  // batches already printed
	out     strings.Builder
}

func newEnv(t *testing.T, tc *testCase) *env {
	e := &env{t: t, log: &fakeLog{leaderEpoch: -1}, nowMs: 1000}
	e.cfg = Config{
		NodeID: 1, ClusterID: testClusterID, Quorum: nopQuorum{},
		MaxIdleIntervalMs: -1,
		Rand:              rand.New(rand.NewPCG(1, 2)),
		Voters:            []Voter{{ID: 1, Host: "localhost", Port: 9093}, {ID: 2, Host: "localhost", Port: 9094}},
	}
	if v := tc.arg("max-records", ""); v != "" {
		e.cfg.MaxRecordsPerBatch = atoi(t, v)
	}
	if v := tc.arg("max-user-op", ""); v != "" {
		e.cfg.MaxRecordsPerUserOp = atoi(t, v)
	}
	if v := tc.arg("mv", ""); v != "" {
		e.cfg.MetadataVersion = int16(atoi(t, v))
	}
	if v := tc.arg("partitions", ""); v != "" {
		e.cfg.DefaultNumPartitions = int32(atoi(t, v))
	}
	if v := tc.arg("rf", ""); v != "" {
		e.cfg.DefaultReplicationFactor = int16(atoi(t, v))
	}
	if tc.has("idle") {
		e.cfg.MaxIdleIntervalMs = 500
	}
	e.cfg.UncleanLeaderElectionEnable = tc.has("unclean")
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n := atoi(t, tc.arg("controllers", "1"))
	for i := range n {
		cfg := e.cfg
		cfg.NodeID = int32(i + 1)
		cfg.Rand = rand.New(rand.NewPCG(1, uint64(i+2)))
		e.cores = append(e.cores, newCore(cfg, e.log.propose))
	}
	e.c = e.cores[0]
	return e
}

type nopQuorum struct{}

func (nopQuorum) Propose(context.Context, int32, []raftlog.Record) (int64, error) {
	return 0, quorum.ErrNotLeader
}

func (nopQuorum) Resign(context.Context) error { return quorum.ErrNotLeader }

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func int32s(t testing.TB, s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			out = append(out, int32(atoi(t, f)))
		}
	}
	return out
}

// settle commits appended batches (unless held) and prints what was
// appended since the last call.
func (e *env) settle() {
	e.printAppended()
	if !e.hold {
		e.commit()
	}
}

// commit delivers every appended batch, repeating while delivering makes
// the controller append more (activation records).
func (e *env) commit() {
	for bs := e.log.undelivered(); len(bs) > 0; bs = e.log.undelivered() {
		e.deliver(bs)
		e.printAppended()
	}
}

// commitN delivers only the next n appended batches.
func (e *env) commitN(n int) {
	bs := e.log.batches[e.log.delivered : e.log.delivered+n]
	e.log.delivered += n
	e.deliver(bs)
	e.printAppended()
}

// deliver commits bs on every controller.
func (e *env) deliver(bs []raftlog.Batch) {
	for _, c := range e.cores {
		if err := c.commit(bs, e.nowMs); err != nil {
			fmt.Fprintf(&e.out, "node %d commit error: %v\n", c.cfg.NodeID, err)
		}
	}
}

// leaderChange tells every controller that node leads epoch.
func (e *env) leaderChange(node, epoch int32, start int64) {
	for _, c := range e.cores {
		l := quorum.LeaderAndEpoch{LeaderID: node, Epoch: epoch, EpochStartOffset: -1}
		if c.cfg.NodeID == node {
			l.EpochStartOffset = start
			e.c = c
		}
		c.leaderChange(l, e.nowMs)
	}
}

func (e *env) printAppended() {
	for _, b := range e.log.batches[e.printed:] {
		e.printBatch(b)
	}
	e.printed = len(e.log.batches)
}

func (e *env) printBatch(b raftlog.Batch) {
	if b.Control {
		fmt.Fprintf(&e.out, "batch %d epoch=%d: control LEADER_CHANGE\n", b.BaseOffset, b.Epoch)
		return
	}
	var recs []offsetRecord
	for r, err := range decodeBatch(nil, b) {
		if err != nil {
			e.t.Fatal(err)
		}
		recs = append(recs, r)
	}
	fmt.Fprintf(&e.out, "batch %d-%d epoch=%d:\n", b.BaseOffset, b.LastOffset, b.Epoch)
	if len(recs) > 8 {
		counts := map[records.Type]int{}
		for _, r := range recs {
			counts[r.rec.Message.Type()]++
		}
		types := make([]records.Type, 0, len(counts))
		for typ := range counts {
			types = append(types, typ)
		}
		slices.Sort(types)
		for _, typ := range types {
			fmt.Fprintf(&e.out, "  %d x %s\n", counts[typ], typ)
		}
		return
	}
	for _, r := range recs {
		js, err := r.rec.MarshalJSON()
		if err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&e.out, "  %d %s\n", r.offset, js)
	}
}

// request runs req through the core; the response is printed when it is
// released.
func (e *env) request(req kmsg.Request) {
	e.c.handle(req, e.nowMs, func(r kmsg.Response) { e.out.WriteString(formatResponse(r)) })
	e.settle()
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}

func msg(s *string) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf(" msg=%q", *s)
}
