package controller

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// proposeFunc appends one batch; see Quorum.Propose.
type proposeFunc func(quorumEpoch int32, recs []raftlog.Record) (lastOffset int64, err error)

// appendOp is an operation whose batches (a metadata transaction) are
// not all appended, or not all replayed into the pending view, yet: its
// response is queued after the last one.
type appendOp struct {
	batches []encoded // not proposed yet
	res     Result
	req     kmsg.Request
	done    func(kmsg.Response)
}

// waiter is a response held until the log is committed through offset.
type waiter struct {
	offset int64
	req    kmsg.Request
	resp   kmsg.Response
	done   func(kmsg.Response)
}

// inflight is the pending view at the end of one appended batch. A batch
// of a large operation is proposed before it is replayed (see
// appendNext): until then view is nil and replay holds its records, from
// base.
type inflight struct {
	lastOffset int64
	view       *view
	base       int64
	replay     []records.Record
}

// core is the controller's state machine. It is driven by exactly one
// goroutine (the Controller's event loop, or a test) and never reads the
// clock or blocks other than inside propose.
//
// INVARIANTS:
//   - committedOffset only grows; committed reflects exactly the batches
//     through committedOffset;
//   - inflight is empty unless active; its lastOffsets increase, all above
//     committedOffset, and pending is the view of its last entry (or
//     committed when it is empty);
//   - while active, nextOffset is the offset the next appended record gets;
//   - waiters are sorted by offset and all wait for offsets above
//     committedOffset.
type core struct {
	cfg     Config
	log     *zap.Logger
	dec     records.Decoder // committed batches decode into it, one record at a time
	rng     *rand.Rand
	propose proposeFunc

	leader     quorum.LeaderAndEpoch
	activating bool // we lead leader.Epoch but have not committed through EpochStartOffset
	active     bool
	failed     error // a committed record could not be replayed: stop acting

	committed       *view
	committedOffset int64
	pending         *view
	inflight        []inflight
	nextOffset      int64
	lastAppendMs    int64

	sessions *sessions
	waiters  []waiter
	// appending is the operation whose batches are being appended one
	// loop step at a time (only when stepAppends is set), or nil.
	appending *appendOp
	// stepAppends makes write append one batch of a multi-batch
	// operation and leave the rest to appendNext, called by the event
	// loop between other work; off, write appends every batch at once
	// (transcripts, fuzzing, benchmarks driving core directly).
	stepAppends bool
	// onCommit, if set, sees every new committed image before the
	// responses it releases are sent, so a caller that got a response can
	// read the image it implies.
	onCommit func(visible *image.Image, committedOffset int64)
	// onFatal, if set, is told once that committed metadata could not be
	// applied; leading says whether this node was the quorum leader.
	onFatal func(err error, leading bool)
}

func newCore(cfg Config, propose proposeFunc) *core {
	v := emptyView()
	return &core{
		cfg: cfg, log: cfg.Logger, rng: cfg.Rand, propose: propose,
		leader:    quorum.LeaderAndEpoch{LeaderID: -1, Epoch: -1, EpochStartOffset: -1},
		committed: v, pending: v, committedOffset: -1,
		sessions: newSessions(cfg.SessionTimeoutMs),
	}
}

// metadataVersion is the level records are written for: the log's, or the
// configured bootstrap level before the log has one.
// unclean is the unclean.leader.election.enable policy of img's topics.
func (c *core) unclean(img *image.Image) uncleanPolicy {
	return uncleanLeaderElection(img, c.cfg.NodeID, c.cfg.UncleanLeaderElectionEnable)
}

func (c *core) metadataVersion() int16 {
	if mv := c.pending.img.MetadataVersion(); mv > 0 {
		return mv
	}
	return c.cfg.MetadataVersion
}

// leaderChange handles a new quorum leader or epoch. Losing (or never
// having) leadership drops everything uncommitted.
func (c *core) leaderChange(l quorum.LeaderAndEpoch, nowMs int64) {
	wasLeading := c.active || c.activating
	c.leader = l
	if l.LeaderID != c.cfg.NodeID {
		if wasLeading {
			c.renounce("leadership moved to %d in epoch %d", l.LeaderID, l.Epoch)
		}
		return
	}
	if wasLeading {
		c.renounce("new epoch %d", l.Epoch)
	}
	c.activating = true
	c.log.Info("became quorum leader, waiting for epoch start to commit",
		zap.Int32("epoch", l.Epoch), zap.Int64("epochStartOffset", l.EpochStartOffset))
	c.maybeActivate(nowMs)
}

// renounce reverts to the committed view and fails every waiting request
// with NOT_CONTROLLER.
func (c *core) renounce(why string, args ...any) {
	if c.active || c.activating {
		c.log.Info("renounced controller leadership: " + fmt.Sprintf(why, args...))
	}
	c.active, c.activating = false, false
	c.pending, c.inflight = c.committed, nil
	c.sessions = newSessions(c.cfg.SessionTimeoutMs)
	if a := c.appending; a != nil {
		c.appending = nil
		if a.done != nil {
			a.done(notController(a.req))
		}
	}
	ws := c.waiters
	c.waiters = nil
	for _, w := range ws {
		w.done(notController(w.req))
	}
}

// commit adopts newly committed batches, in offset order.
func (c *core) commit(batches []raftlog.Batch, nowMs int64) error {
	if c.failed != nil {
		return c.failed
	}
	for _, b := range batches {
		if b.LastOffset <= c.committedOffset {
			continue // already seen (e.g. redelivered after a restart)
		}
		err := c.injectedFault(b)
		if err == nil {
			err = c.commitBatch(b)
		}
		if err != nil {
			c.fail(err)
			return err
		}
		c.committedOffset = b.LastOffset
	}
	if c.onCommit != nil {
		c.onCommit(c.committed.visible(), c.committedOffset)
	}
	c.releaseWaiters()
	c.maybeActivate(nowMs)
	return nil
}

// fail stops the controller for good after committed metadata could not be
// applied: it renounces, logs the offending record, and tells onFatal, which
// resigns quorum leadership if this node holds it and stops the process, as
// Kafka's fatal fault handler does. A leader that cannot apply its own log
// must not keep the quorum from electing one that can.
func (c *core) fail(err error) {
	if c.failed != nil {
		return
	}
	c.failed = err
	leading := c.leader.LeaderID == c.cfg.NodeID
	c.renounce("cannot apply committed metadata")
	fields := []zap.Field{zap.Error(err), zap.Bool("quorumLeader", leading)}
	var re *ReplayError
	if errors.As(err, &re) {
		fields = append(fields, zap.Int64("offset", re.Offset), zap.String("record", re.Record))
	}
	c.log.Error("cannot apply committed metadata; the controller stops", fields...)
	if c.onFatal != nil {
		c.onFatal(err, leading)
	}
}

// injectedFault runs Config.ReplayFault, a test's stand-in for a record
// this controller cannot apply.
func (c *core) injectedFault(b raftlog.Batch) error {
	if c.cfg.ReplayFault == nil {
		return nil
	}
	if err := c.cfg.ReplayFault(b); err != nil {
		return &ReplayError{Offset: b.BaseOffset, Record: "(fault injected into the whole batch)", Err: err}
	}
	return nil
}

func (c *core) commitBatch(b raftlog.Batch) error {
	if b.Control {
		// The quorum's own (LeaderChange, KIP-853 VotersRecord), never one of
		// ours: it may fall between our in-flight appends and changes no image.
		return nil
	}
	if n := len(c.inflight); n > 0 && b.BaseOffset <= c.inflight[n-1].lastOffset {
		// The quorum may merge several proposals appended within its linger time into
		// one batch (each proposal stays whole), so a committed batch ends exactly
		// where one of the in-flight appends ends and covers every append before it.
		i := 0
		for i < n && c.inflight[i].lastOffset < b.LastOffset {
			i++
		}
		if i == n || c.inflight[i].lastOffset != b.LastOffset {
			panic(fmt.Sprintf("controller: committed batch %d-%d does not end where an appended batch ends (first in flight ends at %d)",
				b.BaseOffset, b.LastOffset, c.inflight[0].lastOffset))
		}
		// A large operation's batches may commit before their turn to be
		// replayed (appendNext): replay them now.
		for c.inflight[i].view == nil {
			c.replayNext()
		}
		c.committed, c.inflight = c.inflight[i].view, c.inflight[i+1:]
		return nil
	}
	next, err := c.committed.replay(decodeBatch(&c.dec, b), b.Epoch)
	if err != nil {
		return err
	}
	c.committed = next
	if len(c.inflight) == 0 {
		c.pending = next
	}
	return nil
}

// decodeBatch streams b's records decoded into dec, reused from one record to the
// next, so a standby replays a million-partition change without a million
// allocations; a nil dec allocates every record (for callers that keep them).
func decodeBatch(dec *records.Decoder, b raftlog.Batch) iter.Seq2[offsetRecord, error] {
	return func(yield func(offsetRecord, error) bool) {
		raw, err := b.Records()
		if err != nil {
			yield(offsetRecord{}, fmt.Errorf("%w: %w", ErrReplay, err))
			return
		}
		for _, r := range raw {
			var rec records.Record
			if dec != nil {
				rec, err = dec.Decode(r.Value)
			} else {
				rec, err = records.Decode(r.Value)
			}
			if err != nil {
				raw := r.Value[:min(len(r.Value), 256)]
				yield(offsetRecord{}, &ReplayError{Offset: r.Offset, Record: fmt.Sprintf("%x", raw), Err: err})
				return
			}
			if !yield(offsetRecord{offset: r.Offset, rec: rec}, nil) {
				return
			}
		}
	}
}

func (c *core) releaseWaiters() {
	n := 0
	for n < len(c.waiters) && c.waiters[n].offset <= c.committedOffset {
		c.waiters[n].done(c.waiters[n].resp)
		n++
	}
	c.waiters = c.waiters[n:]
}

// maybeActivate turns a leader that has committed its epoch start into the
// active controller: fresh sessions for every broker, then the activation
// records (abort an open transaction, bootstrap an empty log).
func (c *core) maybeActivate(nowMs int64) {
	if !c.activating || c.committedOffset < c.leader.EpochStartOffset || c.failed != nil {
		return
	}
	c.activating, c.active = false, true
	c.nextOffset = c.committedOffset + 1
	c.lastAppendMs = nowMs
	for _, b := range c.committed.img.Brokers() {
		c.sessions.register(b.ID, b.Fenced, nowMs)
	}
	c.log.Info("became active controller", zap.Int32("epoch", c.leader.Epoch), zap.Int64("nextOffset", c.nextOffset))
	if recs := c.activationRecords(); len(recs) > 0 {
		c.write(Result{Records: recs}, nil, nil, nowMs)
	}
}

// activationRecords is Kafka's ActivationRecordsGenerator, minus the
// ZkMigrationStateRecord (kraftd has no ZooKeeper migration and no codec
// for it).
func (c *core) activationRecords() []records.Record {
	var out []records.Record
	if c.committed.txnBase != nil {
		c.log.Info("aborting in-progress metadata transaction", zap.Int64("offset", c.committed.txnStart))
		out = append(out, records.Record{Message: &records.AbortTransactionRecord{Reason: kmsg.StringPtr("Controller failover")}})
	}
	base := c.committed
	if base.txnBase != nil {
		base = base.txnBase
	}
	if base.img.MetadataVersion() != 0 {
		return out
	}
	mv := c.cfg.MetadataVersion
	c.log.Info("the metadata log appears to be empty, appending bootstrap records", zap.Int16("metadataVersion", mv))
	feature := records.Record{Message: &records.FeatureLevelRecord{Name: image.MetadataVersionFeature, FeatureLevel: mv}}
	if mv < mv36IV1 {
		return append(out, feature)
	}
	return append(out,
		records.Record{Message: &records.BeginTransactionRecord{Name: kmsg.StringPtr("Bootstrap records")}},
		feature,
		records.Record{Message: &records.EndTransactionRecord{}})
}

// handle runs one request: not active answers NOT_CONTROLLER at once;
// otherwise the handler's records are appended and done is called with the
// response once they commit (or with NOT_CONTROLLER if leadership is lost
// first).
func (c *core) handle(req kmsg.Request, nowMs int64, done func(kmsg.Response)) {
	if dc, ok := req.(*kmsg.DescribeClusterRequest); ok {
		done(c.describeCluster(dc)) // a read, answered by any controller
		return
	}
	if !c.active {
		done(notController(req))
		return
	}
	res := c.dispatch(req, nowMs)
	c.write(res, req, done, nowMs)
}

func (c *core) dispatch(req kmsg.Request, nowMs int64) Result {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return c.brokerRegistration(r, nowMs)
	case *kmsg.BrokerHeartbeatRequest:
		return c.brokerHeartbeat(r, nowMs)
	case *kmsg.UnregisterBrokerRequest:
		return c.unregisterBroker(r)
	case *kmsg.CreateTopicsRequest:
		return c.createTopics(r)
	case *kmsg.DeleteTopicsRequest:
		return c.deleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		return c.createPartitions(r)
	case *kmsg.AlterConfigsRequest:
		return c.alterConfigs(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return c.incrementalAlterConfigs(r)
	case *kmsg.AllocateProducerIDsRequest:
		return c.allocateProducerIDs(r)
	case *kmsg.AlterPartitionRequest:
		return c.alterPartition(r)
	case *kmsg.ElectLeadersRequest:
		return c.electLeaders(r)
	case *featureUpdate:
		return c.updateFeatures(r)
	}
	// RegisterHandlers only routes the keys above here.
	panic(fmt.Sprintf("controller: no handler for %T", req))
}

// write appends res.Records (if any) and queues the response behind
// everything appended so far, so a reply never reveals uncommitted state.
// With stepAppends, an operation that needs several batches leaves all
// but the first to appendNext; no other records may be written until it
// is done (busy).
func (c *core) write(res Result, req kmsg.Request, done func(kmsg.Response), nowMs int64) {
	if len(res.Records) == 0 {
		c.reply(res, req, done)
		return
	}
	if c.appending != nil {
		panic(fmt.Sprintf("controller: %d records written while a multi-batch operation is being appended", len(res.Records)))
	}
	batches, code := c.encode(res.Records, !res.nonAtomic)
	if code != 0 {
		if done != nil {
			var msg *string
			if code == kerr.PolicyViolation.Code {
				msg = errExcessivelyLarge.msg
			}
			done(errorResponseMessage(req, code, msg))
		}
		return
	}
	c.appending = &appendOp{batches: batches, res: res, req: req, done: done}
	c.appendNext(nowMs)
	for !c.stepAppends && c.appending != nil {
		c.appendNext(nowMs)
	}
}

// appendRecords appends recs at once, every batch, for a handler that
// must know where its own records land (a registration fencing the old
// incarnation first). A non-zero result is the error code for the request.
func (c *core) appendRecords(recs []records.Record, nowMs int64) int16 {
	batches, code := c.encode(recs, true)
	if code != 0 {
		return code
	}
	for _, b := range batches {
		if err := c.appendBatch(b); err != nil {
			c.renounce("append failed: %v", err)
			return kerr.NotController.Code
		}
	}
	c.lastAppendMs = nowMs
	return 0
}

// busy reports whether an operation's batches are still being appended.
func (c *core) busy() bool { return c.appending != nil }

// appendNext advances the operation being written by one loop step: each
// step proposes its next batch until all are proposed, and only then
// replays them into the pending view, one batch per step (the step that
// proposes the last batch replays the first). The quorum thus replicates
// the whole operation while this controller replays it; replaying each
// batch before proposing the next, as before, made the replay of the
// whole operation (about 0.9 s of CPU at 1M partitions) part of its
// commit. Requests that write nothing are still served between any two
// steps. A single-batch operation is proposed and replayed in one step;
// after the last replay the response is queued. Losing leadership midway
// renounces, which answers it and every waiter with NOT_CONTROLLER.
func (c *core) appendNext(nowMs int64) {
	a := c.appending
	if len(a.batches) > 0 {
		if err := c.proposeBatch(a.batches[0]); err != nil {
			c.renounce("append failed: %v", err)
			return
		}
		a.batches = a.batches[1:]
		c.lastAppendMs = nowMs
		if len(a.batches) > 0 {
			return
		}
	}
	c.replayNext() // none left when commits replayed them first
	if c.unreplayed() {
		return
	}
	c.appending = nil
	c.reply(a.res, a.req, a.done)
}

// unreplayed reports whether an in-flight batch awaits its replay.
func (c *core) unreplayed() bool {
	n := len(c.inflight)
	return n > 0 && c.inflight[n-1].view == nil
}

// replayNext replays the first proposed batch not replayed yet into the
// pending view; false when there is none.
func (c *core) replayNext() bool {
	for i := range c.inflight {
		f := &c.inflight[i]
		if f.view != nil {
			continue
		}
		next, err := c.pending.replay(func(yield func(offsetRecord, error) bool) {
			for j, r := range f.replay {
				if !yield(offsetRecord{offset: f.base + int64(j), rec: r}, nil) {
					return
				}
			}
		}, c.leader.Epoch)
		if err != nil {
			// Our own records must apply; anything else is a bug in a handler.
			panic(fmt.Sprintf("controller: appended records do not replay: %v", err))
		}
		f.view, f.replay = next, nil
		c.pending = next
		return true
	}
	return false
}

// reply queues res's response until everything appended so far commits,
// or answers it at once when that is already so or when it reveals only
// committed state (answersNow).
func (c *core) reply(res Result, req kmsg.Request, done func(kmsg.Response)) {
	wait := c.nextOffset - 1
	if res.appended != nil {
		res.appended(wait)
	}
	if done == nil {
		return
	}
	if wait <= c.committedOffset || len(res.Records) == 0 && c.answersNow(req) {
		done(res.Response)
		return
	}
	c.waiters = append(c.waiters, waiter{offset: wait, req: req, resp: res.Response, done: done})
}

// encode splits recs into batches (a transaction if they are atomic and
// do not fit one); a non-zero result is the error code for the request.
func (c *core) encode(recs []records.Record, atomic bool) ([]encoded, int16) {
	batches, ok, err := split(recs, c.cfg.MaxRecordsPerBatch, c.cfg.MaxBatchBytes, c.metadataVersion() >= mv36IV1, atomic)
	switch {
	case err != nil:
		c.log.Error("cannot encode records", zap.Error(err))
		return nil, kerr.UnknownServerError.Code
	case !ok:
		return nil, kerr.PolicyViolation.Code
	}
	return batches, 0
}

// appendBatch proposes b and replays it into the pending view.
func (c *core) appendBatch(b encoded) error {
	if err := c.proposeBatch(b); err != nil {
		return err
	}
	c.replayNext()
	return nil
}

// proposeBatch appends b to the log and records it in flight, not yet
// replayed (replayNext).
func (c *core) proposeBatch(b encoded) error {
	last, err := c.propose(c.leader.Epoch, b.raw)
	if err != nil {
		return err
	}
	want := c.nextOffset + int64(len(b.raw)) - 1
	if last < want {
		return fmt.Errorf("%w: batch ends at %d, expected %d", ErrOffsetMismatch, last, want)
	}
	if last > want {
		// The quorum leader appended control batches of its own since our last
		// append (a VotersRecord for a voter change, KIP-853): while this
		// controller is active nothing else appends data, so ours simply starts
		// later. Kafka's controller likewise takes the offset the raft layer
		// returns.
		c.log.Info("the quorum appended control records before this batch",
			zap.Int64("expected_last_offset", want), zap.Int64("last_offset", last))
		c.nextOffset = last - int64(len(b.raw)) + 1
	}
	c.inflight = append(c.inflight, inflight{lastOffset: last, base: c.nextOffset, replay: b.recs})
	c.nextOffset = last + 1
	return nil
}

// tick runs the periodic duties at nowMs: fence brokers whose session
// expired (one per batch), and append a NoOpRecord when idle.
func (c *core) tick(nowMs int64) {
	for c.active && !c.busy() {
		id := c.sessions.stale(nowMs)
		if id < 0 {
			break
		}
		c.log.Info("fencing broker because its session has timed out", zap.Int32("broker", id))
		recs := fenceBroker(c.pending.img, id, c.metadataVersion(), c.unclean(c.pending.img))
		c.sessions.fence(id)
		// Kafka's maybeFenceOneStaleBroker: ControllerResult.of, not atomic.
		c.write(Result{Records: recs, nonAtomic: true}, nil, nil, nowMs)
	}
	if c.active && !c.busy() && c.cfg.MaxIdleIntervalMs > 0 && nowMs-c.lastAppendMs >= c.cfg.MaxIdleIntervalMs &&
		c.metadataVersion() >= mv33IV1 {
		c.write(Result{Records: []records.Record{{Message: &records.NoOpRecord{}}}}, nil, nil, nowMs)
	}
}

// nextDeadlineMs is when tick next has work, or MaxInt64.
func (c *core) nextDeadlineMs() int64 {
	if !c.active {
		return math.MaxInt64
	}
	next := c.sessions.nextExpiryMs()
	if c.cfg.MaxIdleIntervalMs > 0 {
		next = min(next, c.lastAppendMs+c.cfg.MaxIdleIntervalMs)
	}
	return next
}

// shutdown answers every waiter with NOT_CONTROLLER (the Controller is
// closing).
func (c *core) shutdown() { c.renounce("controller closing") }
