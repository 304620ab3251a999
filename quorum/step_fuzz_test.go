package quorum

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// FuzzStep feeds arbitrary messages to the production core of node 1 in a 3-voter
// quorum (voters 1, 2, 3) that starts with a log of three epochs: any request or
// response type, from any node id, at any epoch (MaxInt32 and negatives included),
// with any offsets, interleaved with ticks, proposals and restarts from what the node
// persisted. The driver's duties are done as Node does them (persist, Advance).
//
// It asserts what no peer may break:
//   - no panic, and no request or response makes Step fail (a response it cannot use
//     is refused, never fatal);
//   - the epoch never decreases, stays in [0, MaxInt32), and one epoch never gets two
//     leaders, nor a leader outside the voter set;
//   - a vote once cast in an epoch does not change;
//   - the high watermark never exceeds the log end;
//   - a request answered with an error code changes nothing and persists nothing;
//   - every persisted quorum-state is one the node restarts from.
//
// The input is a byte program: the first byte picks the start (follower of 2, leader,
// unattached, observer), then each op byte is followed by the bytes its fields need;
// running out of bytes reads zeros. The seed corpus under testdata/fuzz/FuzzStep holds
// every attack of issue 12.
func FuzzStep(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, program []byte) {
		h := newStepHarness(t, program)
		for i := 0; i < 64 && h.in.more(); i++ {
			h.op()
		}
	})
}

// fuzzIn reads a fuzz program; past its end it reads zeros.
type fuzzIn struct {
	b []byte
	i int
}

func (in *fuzzIn) more() bool { return in.i < len(in.b) }

func (in *fuzzIn) byte() byte {
	if in.i >= len(in.b) {
		return 0
	}
	in.i++
	return in.b[in.i-1]
}

func (in *fuzzIn) u32() uint32 {
	var buf [4]byte
	for i := range buf {
		buf[i] = in.byte()
	}
	return binary.BigEndian.Uint32(buf[:])
}

// stepHarness is node 1 plus its simulated disk, as Node drives it.
type stepHarness struct {
	t       *testing.T
	in      *fuzzIn
	cfg     Config
	r       *Raft
	nowMs   int64
	state   raftlog.QuorumState
	batches []raftlog.Batch
	start   int64
	snap    *raftlog.SnapshotID
	// outbound requests the core sent that no response has answered yet.
	outbound []Message
	// leaders maps each epoch to the leader this node recorded for it.
	leaders map[int32]int32
	// voted maps each epoch to the vote this node cast in it.
	voted map[int32]int32
	epoch int32
}

const (
	fuzzFollower = iota
	fuzzLeader
	fuzzUnattached
	fuzzObserver
	fuzzStarts
)

func newStepHarness(t *testing.T, program []byte) *stepHarness {
	in := &fuzzIn{b: program}
	start := in.byte() % fuzzStarts
	h := &stepHarness{t: t, in: in, nowMs: 1_000_000, leaders: map[int32]int32{}, voted: map[int32]int32{}}
	h.cfg = Config{NodeID: 1, ClusterID: "c", Voters: []int32{1, 2, 3}, AppendLingerMs: AppendLingerMsNone}
	if start == fuzzObserver {
		h.cfg.NodeID = 4
	}
	// The log: offsets 0-1 in epoch 1, 2-4 in epoch 2, 5 in epoch 3.
	for _, e := range []struct {
		epoch int32
		n     int
	}{{1, 2}, {2, 3}, {3, 1}} {
		base := int64(0)
		if n := len(h.batches); n > 0 {
			base = h.batches[n-1].NextOffset()
		}
		recs := make([]raftlog.Record, e.n)
		for i := range recs {
			recs[i] = raftlog.Record{Value: []byte{byte(base) + byte(i)}}
		}
		h.batches = append(h.batches, raftlog.EncodeBatch(base, e.epoch, 1, false, recs))
	}
	h.state = raftlog.QuorumState{LeaderID: 2, LeaderEpoch: 3, VotedID: 2, CurrentVoters: []int32{1, 2, 3}}
	switch start {
	case fuzzLeader:
		h.state = raftlog.QuorumState{LeaderID: -1, LeaderEpoch: 4, VotedID: 1, CurrentVoters: []int32{1, 2, 3}}
	case fuzzUnattached:
		h.state = raftlog.QuorumState{LeaderID: -1, LeaderEpoch: 3, VotedID: -1, CurrentVoters: []int32{1, 2, 3}}
	case fuzzObserver:
		h.state.VotedID = -1
	}
	h.restart()
	if start == fuzzLeader {
		// Restarted as Candidate in epoch 4; node 2 grants.
		h.drain()
		for _, m := range h.outbound {
			if m.Vote != nil && m.To == 2 {
				h.step(Message{From: 2, To: 1, RequestID: m.RequestID,
					VoteResp: &VoteResponse{LeaderID: -1, LeaderEpoch: 4, VoteGranted: true}})
			}
		}
		if h.r.role != Leader {
			t.Fatalf("setup: node 1 is %s, want Leader", h.r.role)
		}
	}
	h.drain()
	return h
}

// restart builds the core from the simulated disk, as NewNode does after a crash.
func (h *stepHarness) restart() {
	loaded := raftlog.Loaded{State: h.state, Batches: slices.Clone(h.batches), StartOffset: h.start, Snapshot: h.snap}
	if h.snap != nil && h.snap.EndOffset == h.start {
		loaded.StartSnapshot = h.snap
	}
	r, err := NewRaft(h.cfg, loaded, h.nowMs)
	if err != nil {
		h.t.Fatalf("restart from persisted state %+v: %v", h.state, err)
	}
	h.r, h.outbound = r, nil
	h.check()
}

// drain handles Ready as Node does, and records outbound requests.
func (h *stepHarness) drain() {
	for i := 0; h.r.HasReady(); i++ {
		if i == 1000 {
			h.t.Fatalf("Ready never drains (role %s, epoch %d)", h.r.role, h.r.epoch)
		}
		rd := h.r.Ready()
		if st := rd.QuorumState; st != nil {
			if err := validateQuorumState(&h.cfg, *st, h.r.log.lastEpoch(), h.r.log.kraft.latestKRaftVersion()); err != nil {
				h.t.Fatalf("persisted an unusable quorum-state: %v", err)
			}
			h.state = *st
		}
		if rd.LoadSnapshot != nil {
			// The driver may find the downloaded file invalid (its bytes are the
			// leader's): the core must drop it, not stop.
			if rd.snapshotRejected = h.in.byte()%2 == 0; !rd.snapshotRejected {
				id := *rd.LoadSnapshot
				h.snap, h.start, h.batches = &id, id.EndOffset, nil
			}
		}
		if rd.TruncateTo >= 0 {
			i := slices.IndexFunc(h.batches, func(b raftlog.Batch) bool { return b.BaseOffset >= rd.TruncateTo })
			if i >= 0 {
				h.batches = h.batches[:i:i]
			}
		}
		h.batches = append(h.batches, rd.Append...)
		for _, m := range append(rd.Messages, rd.MessagesAfterPersist...) {
			if m.IsRequest() {
				h.outbound = append(h.outbound, m)
			}
		}
		if len(h.outbound) > 16 {
			h.outbound = h.outbound[len(h.outbound)-16:]
		}
		h.r.Advance(rd)
	}
	h.check()
}

// check asserts the core's invariants against what it showed before.
func (h *stepHarness) check() {
	t, s := h.t, h.r.Status()
	if s.Epoch < h.epoch || s.Epoch < 0 || s.Epoch == math.MaxInt32 {
		t.Fatalf("epoch %d after %d", s.Epoch, h.epoch)
	}
	h.epoch = s.Epoch
	if s.LeaderID >= 0 {
		if !h.cfg.isVoter(s.LeaderID) {
			t.Fatalf("leader %d is not a voter (epoch %d)", s.LeaderID, s.Epoch)
		}
		if l, ok := h.leaders[s.Epoch]; ok && l != s.LeaderID {
			t.Fatalf("two leaders in epoch %d: %d and %d", s.Epoch, l, s.LeaderID)
		}
		h.leaders[s.Epoch] = s.LeaderID
	}
	if s.VotedID >= 0 {
		if v, ok := h.voted[s.Epoch]; ok && v != s.VotedID {
			t.Fatalf("vote in epoch %d changed from %d to %d", s.Epoch, v, s.VotedID)
		}
		h.voted[s.Epoch] = s.VotedID
	}
	if h.r.hw > s.LogEndOffset {
		t.Fatalf("high watermark %d above log end %d", h.r.hw, s.LogEndOffset)
	}
}

// step delivers m. Nothing a peer sends may make Step fail: the only error Step
// returns comes from local storage, and the harness has none (no snapshot files).
func (h *stepHarness) step(m Message) {
	if err := h.r.Step(h.nowMs, m); err != nil {
		h.t.Fatalf("%s made Step fail: %v", m, err)
	}
}

func (h *stepHarness) op() {
	switch h.in.byte() % 8 {
	case 0, 1, 2:
		h.request()
	case 3, 4:
		h.response()
	case 5:
		h.nowMs += []int64{0, 1, 20, 250, 500, 2000, 3000, 10_000}[h.in.byte()%8]
		h.r.Tick(h.nowMs)
		h.drain()
	case 6:
		if h.r.role == Leader {
			if _, _, err := h.r.Propose(h.nowMs, []raftlog.Record{{Value: []byte{h.in.byte()}}}); err != nil {
				h.t.Fatalf("propose: %v", err)
			}
			h.drain()
		}
	case 7:
		h.restart()
		h.drain()
	}
}

// request steps one inbound request and checks that an error answer changed nothing.
func (h *stepHarness) request() {
	m := Message{From: h.id(), To: h.cfg.NodeID, RequestID: 1 << 40}
	cluster := []string{"c", "", "other"}[h.in.byte()%3]
	switch h.in.byte() % 5 {
	case 0:
		m.Vote = &VoteRequest{ClusterID: cluster, VoterID: h.id(), CandidateEpoch: h.epochArg(), CandidateID: m.From,
			LastOffsetEpoch: h.epochArg(), LastOffset: h.offset(), PreVote: h.in.byte()%2 == 0}
	case 1:
		m.BeginEpoch = &BeginQuorumEpochRequest{ClusterID: cluster, VoterID: h.id(), LeaderID: m.From, LeaderEpoch: h.epochArg()}
	case 2:
		m.EndEpoch = &EndQuorumEpochRequest{ClusterID: cluster, LeaderID: m.From, LeaderEpoch: h.epochArg(),
			PreferredSuccessors: []int32{h.id(), h.id()}}
	case 3:
		m.Fetch = &FetchRequest{ClusterID: cluster, ReplicaID: h.id(), MaxWaitMs: int32(h.in.byte()) - 1,
			MaxBytes: int32(h.in.u32()), CurrentLeaderEpoch: h.epochArg(), FetchOffset: h.offset(), LastFetchedEpoch: h.epochArg()}
	case 4:
		m.FetchSnapshot = &FetchSnapshotRequest{ClusterID: cluster, ReplicaID: h.id(), MaxBytes: int32(h.in.u32()),
			CurrentLeaderEpoch: h.epochArg(), SnapshotID: raftlog.SnapshotID{EndOffset: h.offset(), Epoch: h.epochArg()},
			Position: h.offset()}
	}
	before := h.r.Status()
	h.step(m)
	if code := answerCode(h.r, m.RequestID); code != 0 && code != kerr.BrokerNotAvailable.Code {
		after := h.r.Status()
		if h.r.pendingState != nil || after.Epoch != before.Epoch || after.LeaderID != before.LeaderID ||
			after.VotedID != before.VotedID || after.Role != before.Role {
			h.t.Fatalf("%s answered %s but changed %s epoch %d leader %d voted %d (persist %t) -> %s epoch %d leader %d voted %d",
				m, errName(code), before.Role, before.Epoch, before.LeaderID, before.VotedID,
				h.r.pendingState != nil, after.Role, after.Epoch, after.LeaderID, after.VotedID)
		}
	}
	h.drain()
}

// answerCode is the error code (partition level, else top level) of the core's answer
// to request id, 0 when it succeeded or is not sent yet (a parked Fetch).
func answerCode(r *Raft, id uint64) int16 {
	for _, m := range append(slices.Clone(r.msgs), r.msgsAfter...) {
		if m.RequestID != id || m.IsRequest() {
			continue
		}
		var top, part int16
		switch {
		case m.VoteResp != nil:
			top, part = m.VoteResp.TopLevelErrorCode, m.VoteResp.ErrorCode
		case m.BeginEpochResp != nil:
			top, part = m.BeginEpochResp.TopLevelErrorCode, m.BeginEpochResp.ErrorCode
		case m.EndEpochResp != nil:
			top, part = m.EndEpochResp.TopLevelErrorCode, m.EndEpochResp.ErrorCode
		case m.FetchResp != nil:
			top, part = m.FetchResp.TopLevelErrorCode, m.FetchResp.ErrorCode
		case m.FetchSnapshotResp != nil:
			top, part = m.FetchSnapshotResp.TopLevelErrorCode, m.FetchSnapshotResp.ErrorCode
		}
		if part != 0 {
			return part
		}
		return top
	}
	return 0
}

// response answers one of the core's outbound requests (or a made-up one).
func (h *stepHarness) response() {
	var req Message
	if n := len(h.outbound); n > 0 {
		i := int(h.in.byte()) % n
		req = h.outbound[i]
		h.outbound = slices.Delete(h.outbound, i, i+1)
	} else {
		req = Message{To: h.id(), RequestID: uint64(h.in.byte()), Fetch: &FetchRequest{}}
	}
	m := Message{From: req.To, To: h.cfg.NodeID, RequestID: req.RequestID}
	if h.in.byte()%8 == 0 {
		m.From = h.id()
	}
	if h.in.byte()%16 == 0 {
		m.Err = ErrRequestFailed
	}
	top, part, leader, epoch := h.code(), h.code(), h.id(), h.epochArg()
	switch {
	case req.Vote != nil:
		m.VoteResp = &VoteResponse{TopLevelErrorCode: top, ErrorCode: part, LeaderID: leader, LeaderEpoch: epoch,
			VoteGranted: h.in.byte()%2 == 0, PreVote: req.Vote.PreVote}
	case req.BeginEpoch != nil:
		m.BeginEpochResp = &BeginQuorumEpochResponse{TopLevelErrorCode: top, ErrorCode: part, LeaderID: leader, LeaderEpoch: epoch}
	case req.EndEpoch != nil:
		m.EndEpochResp = &EndQuorumEpochResponse{TopLevelErrorCode: top, ErrorCode: part, LeaderID: leader, LeaderEpoch: epoch}
	case req.FetchSnapshot != nil:
		m.FetchSnapshotResp = &FetchSnapshotResponse{TopLevelErrorCode: top, ErrorCode: part, LeaderID: leader,
			LeaderEpoch: epoch, SnapshotID: req.FetchSnapshot.SnapshotID, Size: h.offset(), Position: h.offset(),
			Bytes: make([]byte, h.in.byte()%8)}
	default:
		m.FetchResp = h.fetchResp(top, part, leader, epoch)
	}
	h.step(m)
	h.drain()
}

func (h *stepHarness) fetchResp(top, part int16, leader, epoch int32) *FetchResponse {
	resp := &FetchResponse{TopLevelErrorCode: top, ErrorCode: part, HighWatermark: h.offset(),
		LogStartOffset: h.offset(), LeaderID: leader, LeaderEpoch: epoch}
	switch h.in.byte() % 4 {
	case 0:
		resp.DivergingEpoch = &EpochEndOffset{Epoch: h.epochArg(), EndOffset: h.offset()}
	case 1:
		resp.SnapshotID = &raftlog.SnapshotID{EndOffset: h.offset(), Epoch: h.epochArg()}
	}
	base := h.offset()
	for range h.in.byte() % 3 {
		n := int(h.in.byte()%3) + 1
		recs := make([]raftlog.Record, n)
		b := raftlog.EncodeBatch(base, h.epochArg(), h.nowMs, false, recs)
		resp.Batches = append(resp.Batches, b)
		base = b.NextOffset()
	}
	return resp
}

// id picks a node id: the voters, this node, an observer, a stranger, or any int32.
func (h *stepHarness) id() int32 {
	switch v := h.in.byte(); v % 8 {
	case 0:
		return -1
	case 1, 2, 3:
		return int32(v % 8) // 1, 2, 3
	case 4:
		return 4
	case 5:
		return 99
	case 6:
		return math.MaxInt32
	default:
		return int32(h.in.u32())
	}
}

// epochArg picks an epoch around the node's own, the extremes, or any int32.
func (h *stepHarness) epochArg() int32 {
	e := h.r.epoch
	switch h.in.byte() % 10 {
	case 0:
		return e
	case 1:
		return e + 1
	case 2:
		return e - 1
	case 3:
		return 0
	case 4:
		return -1
	case 5:
		return math.MaxInt32
	case 6:
		return math.MaxInt32 - 1
	case 7:
		return h.r.log.lastEpoch()
	case 8:
		return e + 2
	}
	return int32(h.in.u32())
}

// offset picks an offset around the log end and high watermark, or an extreme.
func (h *stepHarness) offset() int64 {
	leo := h.r.log.endOffset()
	switch h.in.byte() % 10 {
	case 0:
		return leo
	case 1:
		return leo + 1
	case 2:
		return leo - 1
	case 3:
		return h.r.hw
	case 4:
		return 0
	case 5:
		return -1
	case 6:
		return math.MaxInt64
	case 7:
		return math.MinInt64
	case 8:
		return h.r.log.startOffset
	}
	return int64(int32(h.in.u32()))
}

// code picks an error code a peer might answer.
func (h *stepHarness) code() int16 {
	codes := []int16{0, 0, 0, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.NotLeaderForPartition.Code,
		kerr.BrokerNotAvailable.Code, kerr.InvalidRequest.Code, kerr.InconsistentVoterSet.Code,
		kerr.InconsistentClusterID.Code, kerr.SnapshotNotFound.Code, kerr.PositionOutOfRange.Code,
		kerr.UnsupportedVersion.Code, kerr.InvalidVoterKey.Code, kerr.OffsetOutOfRange.Code, -1}
	return codes[int(h.in.byte())%len(codes)]
}

// fuzzSeeds are the programs of the seed corpus: issue 12's attacks on each start,
// plus a healthy exchange. A program is: start, then ops (see op, request, response).
func fuzzSeeds() [][]byte {
	const (
		opRequest   = 0
		opResponse  = 3
		opTick      = 5
		opPropose   = 6
		opRestart   = 7
		reqVote     = 0
		reqBegin    = 1
		reqEnd      = 2
		reqFetch    = 3
		id2         = 2
		id3         = 3
		id99        = 5
		epochSame   = 0
		epochNext   = 1
		epochMax    = 5
		offsetLEO   = 0
		clusterOK   = 0
		codeInvalid = 7 // index of INVALID_REQUEST in code()
	)
	var seeds [][]byte
	for start := byte(0); start < fuzzStarts; start++ {
		seeds = append(seeds,
			// Vote from 99 at MaxInt32 (voter id 99 too), then time passes and a restart.
			[]byte{start, opRequest, id99, clusterOK, reqVote, 0, epochMax, 7, offsetLEO, 1, opTick, 5, opTick, 6, opRestart},
			// BeginQuorumEpoch naming 99 at the epoch, and at epoch+1.
			[]byte{start, opRequest, id99, clusterOK, reqBegin, 0, epochSame, opRequest, id99, clusterOK, reqBegin, 0, epochNext, opTick, 5, opRestart},
			// EndQuorumEpoch from 99 at MaxInt32, and from voter 2 at MaxInt32.
			[]byte{start, opRequest, id99, clusterOK, reqEnd, epochMax, id2, id3, opRequest, id2, clusterOK, reqEnd, epochMax, id2, id3, opTick, 6},
			// A conflicting leader: voter 3 announces itself at the epoch voter 2 (or 1) leads.
			[]byte{start, opRequest, id3, clusterOK, reqBegin, 0, epochSame, opRequest, id3, clusterOK, reqEnd, epochSame, id2, id2, opTick, 5},
			// A voter's Vote at MaxInt32 and at epoch+1 (leader stickiness), then fetch timeouts.
			[]byte{start, opRequest, id3, clusterOK, reqVote, 0, epochMax, 7, offsetLEO, 1, opRequest, id3, clusterOK, reqVote, 0, epochNext, 7, offsetLEO, 1, opTick, 6, opTick, 6, opTick, 7},
			// INVALID_REQUEST answers (top level, then partition level) to whatever was
			// sent, with time passing between them: refused, never fatal.
			[]byte{start, opResponse, 0, 1, 1, codeInvalid, 0, id2, epochSame, offsetLEO, 4, 2, 0, 0, opTick, 2,
				opResponse, 0, 1, 1, 0, codeInvalid, id2, epochSame, offsetLEO, 4, 2, 0, 0, opTick, 4,
				opResponse, 0, 1, 1, codeInvalid, codeInvalid, id2, epochSame, offsetLEO, 4, 2, 0, 0},
			// The leader's Fetch answers: first the high watermark at the log end, then a
			// diverging epoch (0, 0) below it, then a snapshot ending below it. (A fetch
			// answer is: hw, log start, kind, its fields, batch base, batch count.)
			[]byte{start, opResponse, 0, 1, 1, 0, 0, id2, epochSame, offsetLEO, 4, 2, 0, 0,
				opResponse, 0, 1, 1, 0, 0, id2, epochSame, offsetLEO, 4, 0, 3, 4, 0, 0, opTick, 2,
				opResponse, 0, 1, 1, 0, 0, id2, epochSame, offsetLEO, 4, 1, 2, 7, 0, 0, opTick, 2,
				opResponse, 0, 1, 1, 0, 0, id2, epochSame, 0, 4, 7},
			// Pre-votes from voter 3 at epoch+1 and epoch+2 (KIP-996 with a live leader).
			[]byte{start, opResponse, 0, 1, 1, 0, 0, id2, epochSame, offsetLEO, 4, 2, 0, 0,
				opRequest, id3, clusterOK, reqVote, 0, epochNext, epochSame, offsetLEO, 0,
				opRequest, id3, clusterOK, reqVote, 0, 8, epochNext, offsetLEO, 0, opTick, 6},
			// Healthy traffic: answer whatever was sent, propose, fetch, tick.
			[]byte{start, opResponse, 0, 1, 1, 0, 0, 3, 0, 0, opPropose, 9, opRequest, id2, clusterOK, reqFetch, 2, 100, 0, 0, 0, 0, 0, 0, 0, 0, opTick, 4, opResponse, 0, 1, 1, 0, 0, 3, 0, 0, opRestart},
		)
	}
	return seeds
}
