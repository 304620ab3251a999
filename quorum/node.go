package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// NodeConfig configures the driver around a Raft core.
type NodeConfig struct {
	// Raft configures the core. Raft.Voters must match VoterAddrs' keys.
	Raft Config
	// Storage persists the log and quorum state; the Node owns it and closes it.
	Storage raftlog.Storage
	// VoterAddrs maps each voter id to its controller listener host:port
	// (controller.quorum.voters).
	VoterAddrs map[int32]string
	// BootstrapAddrs are controller host:port addresses an observer with no voter set
	// (Raft.Voters empty) discovers the leader through (controller.quorum.bootstrap.servers);
	// it then fetches from the address the leader's answers advertise (Fetch v16+
	// NodeEndpoints). Ignored when Raft.Voters is set.
	BootstrapAddrs []string
	// ListenerName is the controller listener's name, used in DescribeQuorum's Nodes
	// and the endpoint hints of responses.
	ListenerName string
	// Client overrides the client used for raft RPCs (tests). By default the Node opens
	// its own, so a long-polling Fetch never queues behind other traffic to the peer.
	Client *protocol.Client
	// OnFatal is called once, from the driver goroutine, when the node must stop: a
	// storage failure or a broken invariant reported by the core. The node has already
	// stopped serving. nil logs the error only.
	OnFatal func(error)
	// OnCommitLatency, when set, is called on the driver goroutine with the time from
	// Propose accepting a batch to its commit being delivered to listeners (leader
	// only). It must not block: it is meant for a histogram's Observe.
	OnCommitLatency func(time.Duration)
	// RetentionBytes and RetentionMs bound the log kept below the latest snapshot
	// (metadata.max.retention.bytes / .ms): past either, the log start moves to the
	// snapshot. 0 is the default (100 MiB, 7 days); negative disables that bound.
	RetentionBytes int64
	RetentionMs    int64
	Logger         *zap.Logger
}

// Node drives a Raft core: it persists what Ready asks for, sends messages, feeds
// committed batches to listeners, runs the leader's flusher and the snapshot writer.
//
// Its logic is a single-threaded step machine: the on* methods (a request, a
// response, a timer, a flush or snapshot write completing) each handle one event and
// settle hands the core's Ready to storage, network and listeners until it has
// nothing left. Everything outside the process (clock, network, the flusher's and the
// snapshot writer's work) goes through its NodeHost. In production that is the
// goroutine shell of node_shell.go (liveHost and run); the seeded simulator
// (sim_*_test.go) is another host that delivers the same events itself, so one seed
// replays one run of this very code.
//
// Goroutines (production): the driver loop (run), plus one per outbound request in
// flight, each owned by the Node and stopped by Close through the node context, on a
// leader the flusher of appendAsync (one at a time; the driver waits for it before
// other storage work and before it exits), and the snapshot writer.
type Node struct {
	cfg    NodeConfig
	log    *zap.Logger
	raft   *Raft
	host   NodeHost
	live   *liveHost // the production host; nil under a simulator
	client *protocol.Client
	ownCl  bool

	events chan func()
	// voterAddrs are the controller addresses of a dynamic quorum's voters, from the
	// voter set in force (refreshVoterAddrs); written by the driver, read by handlers.
	voterAddrs atomic.Pointer[map[int32]string]
	// voterSet is the voter set in force of a dynamic quorum (empty otherwise), for
	// DescribeQuorum; written by the driver with voterAddrs.
	voterSet atomic.Pointer[VoterSet]
	// kraftVersion is the kraft.version in force, for ApiVersions; written by the
	// driver at every settle.
	kraftVersion atomic.Int32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	// Owned by the driver goroutine.
	listeners []Listener
	// A leader's appends being fsynced by the host's flusher (flushing) and those
	// written since, not yet handed to it.
	flushing  *flush
	unflushed []Ready
	// recording: a write of the log's durable-end record is in flight on the host
	// (startRecord).
	recording     bool
	learned       map[int32]string // leader endpoints advertised to an observer of bootstrap addresses
	voterGen      uint64           // the core's voter set generation voterAddrs was built from
	voterWaiters  []*voterWaiter   // voter changes waiting for their record to commit
	nextInbound   uint64
	applied       int64 // next offset to deliver to listeners
	knownHW       int64 // last KnownHighWatermark told to HighWatermarkListeners
	pendingLeader *LeaderAndEpoch
	fatal         error

	// Snapshots (snapshot_node.go); snaps is nil when the storage keeps none.
	snaps     snapshotStore
	writing   bool
	dl        *download
	toLoad    *Snapshot // downloaded, loaded into listeners by deliver
	startSnap *Snapshot // loaded into listeners by Start
	// busyMs is when the driver last appended or committed (host clock); the snapshot
	// writer paces itself while the node is busy. Written by the driver, read by
	// the writer goroutine.
	busyMs atomic.Int64
	// nextCleanMs is when the log is next checked against metadata.max.retention.ms
	// without a new snapshot (snapshot_node.go periodicClean).
	nextCleanMs int64
	commits     commitTimer

	gauges nodeGauges // written by the driver, read by Metrics
}

// ErrNodeStopped is returned by calls on a Node whose driver loop has exited.
var ErrNodeStopped = errors.New("quorum: node stopped")

// NewNode loads storage and builds the core. Start runs it.
func NewNode(cfg NodeConfig) (*Node, error) {
	live := newLiveHost()
	n, err := newNode(cfg, live)
	if err != nil {
		return nil, err
	}
	live.n, n.live = n, live
	n.client = cfg.Client
	if n.client == nil {
		n.client = protocol.NewClient(raftClientConfig(n.cfg, n.log))
		n.ownCl = true
	}
	return n, nil
}

// raftClientConfig configures the client a Node opens for its raft RPCs. A request
// to a peer in its reconnect backoff fails at once (FailWhileBackingOff), as in
// Kafka's raft NetworkClient, and the core moves on: an observer whose leader was
// killed asks another voter who leads now instead of waiting in the dial backoff of
// the dead leader's address (up to a second), which it would otherwise do every
// other Fetch until its fetch timeout.
func raftClientConfig(cfg NodeConfig, log *zap.Logger) protocol.ClientConfig {
	return protocol.ClientConfig{
		ClientID:            fmt.Sprintf("raft-client-%d", cfg.Raft.NodeID),
		RequestTimeout:      time.Duration(cfg.Raft.RequestTimeoutMs) * time.Millisecond,
		FailWhileBackingOff: true,
		Logger:              log.Named("raft-client"),
	}
}

// newNode builds the step machine on host: it loads storage and the core. It starts
// no goroutine; under a simulator nothing ever does.
func newNode(cfg NodeConfig, host NodeHost) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Storage == nil {
		return nil, fmt.Errorf("%w: no storage", ErrInvalidConfig)
	}
	for _, v := range cfg.Raft.Voters {
		if cfg.VoterAddrs[v] == "" {
			return nil, fmt.Errorf("%w: no address for voter %d", ErrInvalidConfig, v)
		}
	}
	if len(cfg.Raft.Voters) == 0 && len(cfg.BootstrapAddrs) == 0 {
		return nil, fmt.Errorf("%w: neither voters nor bootstrap addresses", ErrInvalidConfig)
	}
	if cfg.Raft.Logger == nil {
		cfg.Raft.Logger = cfg.Logger
	}
	if cfg.Raft.Rand == nil {
		cfg.Raft.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	// The driver reads timeouts from the config too: fill in the defaults first.
	if err := cfg.Raft.Validate(); err != nil {
		return nil, err
	}
	if cfg.RetentionBytes == 0 {
		cfg.RetentionBytes = DefaultRetentionBytes
	}
	if cfg.RetentionMs == 0 {
		cfg.RetentionMs = DefaultRetentionMs
	}
	snaps := snapshotStoreOf(cfg.Storage)
	if snaps != nil {
		cfg.Raft.Snapshots = snaps
	}
	loaded, err := cfg.Storage.Load()
	if err != nil {
		return nil, err
	}
	if mutNoRecovery && loaded.Recovery != nil {
		// The norecovery mutant: start as --unsafe-accept-data-loss leaves the node.
		if loaded.StateMissing {
			loaded.State = raftlog.EmptyQuorumState()
			loaded.State.LeaderEpoch, loaded.StateMissing = loaded.Recovery.Epoch, false
			if err := cfg.Storage.SaveQuorumState(loaded.State); err != nil {
				return nil, err
			}
		}
		if c, ok := cfg.Storage.(raftlog.RecoveryClearer); ok {
			if err := c.ClearRecovery(); err != nil {
				return nil, err
			}
		}
		loaded.Recovery = nil
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		host:    host,
		events:  make(chan func(), 256),
		done:    make(chan struct{}),
		learned: make(map[int32]string),
		applied: loaded.StartOffset,
		knownHW: -1,
	}
	var snapKRaft SnapshotKRaft
	if loaded.Snapshot != nil && snaps != nil {
		// Listeners start from the latest snapshot and replay only the log after it;
		// the core takes the voter set it holds (KIP-853).
		s, err := readSnapshot(snaps, *loaded.Snapshot)
		if err != nil {
			return nil, err
		}
		n.startSnap, snapKRaft = &s, s.KRaft
	}
	n.raft, err = NewRaftFromSnapshot(cfg.Raft, loaded, snapKRaft, n.nowMs())
	if errors.Is(err, ErrUnusableQuorumState) && snaps != nil {
		return nil, fmt.Errorf("%w (directory %s)", err, snaps.Where())
	}
	if err != nil {
		return nil, err
	}
	n.snaps = snaps
	n.refreshVoterAddrs()
	n.kraftVersion.Store(int32(n.raft.kraftVersion()))
	n.applied = n.raft.Status().AppliedOffset
	n.nextCleanMs = n.nowMs() + cleanIntervalMs
	n.commits.observe = cfg.OnCommitLatency
	n.gauges.update(n.raft, n.applied)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// nowMs is the host's clock: milliseconds that never go backwards.
func (n *Node) nowMs() int64 { return n.host.NowMs() }

// Register adds a listener. Call before Start.
func (n *Node) Register(l Listener) { n.listeners = append(n.listeners, l) }

// Start runs the driver loop.
func (n *Node) Start() {
	n.begin()
	n.wg.Go(n.run)
}

// begin loads the snapshot the node starts from into the listeners (registered by
// now). The first event of a node's life.
func (n *Node) begin() {
	if s := n.startSnap; s != nil {
		n.startSnap = nil
		if err := n.loadIntoListeners(*s); err != nil {
			n.fail(err)
		}
	}
}

// NodeID is this node's id.
func (n *Node) NodeID() int32 { return n.cfg.Raft.NodeID }

// do runs fn on the driver goroutine and waits for it. It fails with ErrNodeStopped
// once the node stopped.
func (n *Node) do(ctx context.Context, fn func()) error {
	ran := make(chan struct{})
	select {
	case n.events <- func() { fn(); close(ran) }:
	case <-n.done:
		return ErrNodeStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, fn will run soon (the loop never waits long): wait for it even if ctx
	// ends, because fn writes into the caller's variables.
	select {
	case <-ran:
		return nil
	case <-n.done:
		return ErrNodeStopped
	}
}

// post queues fn on the driver goroutine without waiting. It reports false if the node
// stopped.
func (n *Node) post(fn func()) bool {
	select {
	case n.events <- fn:
		return true
	case <-n.done:
		return false
	}
}

// Propose appends records as one atomic batch in epoch, which must be the epoch this
// node leads. It returns the offset of the last record once the batch is accepted;
// commit is reported to listeners through HandleCommit.
func (n *Node) Propose(ctx context.Context, epoch int32, records []raftlog.Record) (int64, error) {
	var last int64
	var perr error
	err := n.do(ctx, func() {
		st := n.raft.Status()
		if st.Role != Leader || st.Epoch != epoch {
			perr = fmt.Errorf("%w: epoch %d requested, node is %s at epoch %d", ErrNotLeader, epoch, st.Role, st.Epoch)
			return
		}
		var base int64
		base, _, perr = n.raft.Propose(n.nowMs(), records)
		last = base + int64(len(records)) - 1
		if perr == nil {
			n.commits.proposed(epoch, last, n.host.Now())
		}
	})
	if err != nil {
		return 0, err
	}
	return last, perr
}

// Resign makes a leader hand over leadership now: it becomes Resigned in its epoch
// and sends EndQuorumEpoch, so another voter is elected without waiting for a fetch
// timeout; the node keeps running. A node that does not lead returns ErrNotLeader. The
// controller calls it when it can no longer apply the log it leads.
func (n *Node) Resign(ctx context.Context) error {
	var rerr error
	if err := n.do(ctx, func() { rerr = n.raft.Resign(n.nowMs()) }); err != nil {
		return err
	}
	return rerr
}

// Status returns the core's status.
func (n *Node) Status(ctx context.Context) (Status, error) {
	var st Status
	err := n.do(ctx, func() { st = n.raft.Status() })
	return st, err
}

// Step delivers an inbound request and waits for the core's answer (which may be a
// parked Fetch completing later). It is what the RPC handlers call.
func (n *Node) Step(ctx context.Context, m Message) (Message, error) {
	reply := make(chan Message, 1)
	var id uint64
	if err := n.do(ctx, func() {
		id = n.onRequest(m)
		n.live.pending[id] = reply // answered by settle, after this function
	}); err != nil {
		return Message{}, err
	}
	select {
	case resp, ok := <-reply:
		if !ok {
			return Message{}, ErrNodeStopped
		}
		return resp, nil
	case <-ctx.Done():
		n.post(func() { delete(n.live.pending, id) })
		return Message{}, ctx.Err()
	case <-n.done:
		return Message{}, ErrNodeStopped
	}
}

// Close resigns leadership gracefully (EndQuorumEpoch to the voters, waiting until they
// acknowledge or ctx expires; fetchers get BROKER_NOT_AVAILABLE meanwhile), then stops
// the driver and closes storage.
func (n *Node) Close(ctx context.Context) error {
	_ = n.do(ctx, func() {
		_ = n.raft.Shutdown(n.nowMs()) // ErrNotLeader: nothing to hand over
	})
	n.waitEndEpochAcked(ctx)
	n.cancel()
	n.wg.Wait()
	var err error
	if n.ownCl {
		err = n.client.Close()
	}
	if cerr := n.cfg.Storage.Close(); err == nil {
		err = cerr
	}
	return err
}

// waitEndEpochAcked polls until a resigned leader's EndQuorumEpoch was acknowledged by
// every voter, or ctx is done. Polling the driver costs one event per few ms during a
// shutdown, which is not a hot path.
func (n *Node) waitEndEpochAcked(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := n.Status(ctx)
		if err != nil || st.Role != Resigned || len(st.EndEpochPending) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fail stops the node after a fatal error. Called on the driver goroutine.
func (n *Node) fail(err error) {
	if n.fatal != nil {
		return
	}
	n.log.Error("quorum node stopping after a fatal error; restart the process after fixing the cause", zap.Error(err))
	n.fatal = err
	n.cancel()
	if n.cfg.OnFatal != nil {
		n.cfg.OnFatal(err)
	}
}

// Done is closed when the driver loop has exited.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the fatal error that stopped the node, if any. Valid after Done is closed.
func (n *Node) Err() error { return n.fatal }

// onRequest steps an inbound request into the core; its answer goes out through
// NodeHost.Reply with the returned id as RequestID (the core may park a Fetch, so the
// answer can come with a later event).
func (n *Node) onRequest(m Message) uint64 {
	n.nextInbound++
	m.RequestID = n.nextInbound
	if err := n.raft.Step(n.nowMs(), m); err != nil {
		n.fail(err)
	}
	if b := m.BeginEpoch; b != nil && b.LeaderAddr != "" && n.cfg.VoterAddrs[b.LeaderID] == "" {
		// Learned only once the core follows that leader in that epoch: a request
		// the core refused teaches nothing.
		if st := n.raft.Status(); st.LeaderID == b.LeaderID && st.Epoch == b.LeaderEpoch {
			n.learnLeaderAddr(b.LeaderID, b.LeaderAddr)
		}
	}
	return m.RequestID
}

// onResponse steps the answer to an outbound request (or the host's failure for it).
func (n *Node) onResponse(resp Message) {
	if f := resp.FetchResp; f != nil && f.LeaderAddr != "" && n.cfg.VoterAddrs[f.LeaderID] == "" {
		n.learnLeaderAddr(f.LeaderID, f.LeaderAddr)
	}
	if err := n.raft.Step(n.nowMs(), resp); err != nil {
		n.fail(err)
	}
	if v := resp.VoteResp; v != nil && v.LeaderAddr != "" && n.cfg.VoterAddrs[v.LeaderID] == "" {
		// A voter's answer naming the leader it follows (KIP-853 NodeEndpoints): a
		// replica whose log's voter set does not include that leader, which sends
		// it no BeginQuorumEpoch, learns where to fetch once its core follows it.
		if st := n.raft.Status(); st.LeaderID == v.LeaderID && st.Epoch == v.LeaderEpoch {
			n.learnLeaderAddr(v.LeaderID, v.LeaderAddr)
		}
	}
}

// onTick runs the core's timers and the periodic log cleaning; the host calls it at
// nextDeadlineMs.
func (n *Node) onTick() {
	n.raft.Tick(n.nowMs())
	n.periodicClean()
}

// onFlushDone is the flusher's fsync completing with err.
func (n *Node) onFlushDone(err error) {
	n.flushCompleted(err)
	if async, ok := n.cfg.Storage.(raftlog.AsyncSyncer); ok && n.fatal == nil {
		n.startFlush(async)
	}
}

// nextDeadlineMs is when the host must call onTick next.
func (n *Node) nextDeadlineMs() int64 {
	return min(n.raft.NextDeadlineMs(), n.nextCleanMs)
}

// settle hands the core's work to storage, network and listeners until it has none
// left. The host calls it after every event.
func (n *Node) settle() {
	n.drainReady()
	n.startRecord()
	n.resolveVoterWaiters()
	n.kraftVersion.Store(int32(n.raft.kraftVersion()))
	n.gauges.update(n.raft, n.applied)
}

// stopped releases what the step machine holds when the node stops.
func (n *Node) stopped() {
	if d := n.dl; d != nil && d.w != nil {
		_ = d.w.Abort() // an unfinished download; a later start fetches it again
		n.dl = nil
	}
}

// drainReady handles Ready until the core has nothing left, in the order the Ready
// contract prescribes: messages, quorum state, log (with fsync), messages that need
// durability, committed batches, Advance.
func (n *Node) drainReady() {
	for n.fatal == nil && n.raft.HasReady() {
		n.refreshVoterAddrs()
		rd := n.raft.Ready()
		n.sendAll(rd.Messages)
		if mutSendFirst {
			n.sendAll(rd.MessagesAfterPersist)
			rd.MessagesAfterPersist = nil
		}
		if n.appendAsync(rd) || n.beginEpochAsync(rd) {
			continue
		}
		if n.needsStorage(rd) {
			if err := n.joinFlush(); err != nil {
				n.fail(err)
				return
			}
		}
		if err := n.persistDownload(&rd); err != nil {
			n.fail(err)
			return
		}
		if err := n.persist(rd); err != nil {
			n.fail(err)
			return
		}
		n.sendAll(rd.MessagesAfterPersist)
		if len(rd.Append) > 0 || len(rd.Committed) > 0 {
			n.busyMs.Store(n.nowMs())
		}
		n.deliver(rd)
		n.advance(rd)
	}
}

// advance calls Advance(rd) once everything appended before rd is durable: at once,
// or after the leader's flushes in flight (Advance calls stay in Ready order).
func (n *Node) advance(rd Ready) {
	switch {
	case len(n.unflushed) > 0:
		n.unflushed = append(n.unflushed, rd)
	case n.flushing != nil:
		n.flushing.readys = append(n.flushing.readys, rd)
	default:
		n.raft.Advance(rd)
	}
}

// needsStorage reports whether handling rd touches storage, or sends messages that
// may vouch for what earlier Readys appended (a follower's Fetch is its durability
// ack); such a Ready waits for the flush in flight.
func (n *Node) needsStorage(rd Ready) bool {
	return rd.QuorumState != nil || rd.TruncateTo >= 0 || len(rd.Append) > 0 ||
		len(rd.SnapshotChunks) > 0 || rd.LoadSnapshot != nil || rd.RecoveryDone ||
		(len(rd.MessagesAfterPersist) > 0 && n.raft.role != Leader)
}

// appendAsync handles a leader's Ready that only appends: the batches are written at
// once, their fsync runs on the flusher goroutine, and only Advance, which counts
// them toward the high watermark, waits for it. The driver meanwhile keeps serving
// the followers' Fetches from memory, so their fsyncs overlap the leader's instead of
// queueing behind it (Raft allows a leader to replicate what is not yet durable
// locally; it only may not count it). Committed batches in rd are below the high
// watermark, hence already durable here, and are delivered at once.
func (n *Node) appendAsync(rd Ready) bool {
	async, ok := n.cfg.Storage.(raftlog.AsyncSyncer)
	if !ok || n.raft.role != Leader || len(rd.Append) == 0 || rd.QuorumState != nil || rd.TruncateTo >= 0 ||
		len(rd.MessagesAfterPersist) > 0 || len(rd.SnapshotChunks) > 0 || rd.LoadSnapshot != nil || n.toLoad != nil {
		return false
	}
	if err := n.cfg.Storage.Append(rd.Append); err != nil {
		n.fail(err)
		return true
	}
	n.busyMs.Store(n.nowMs())
	n.deliver(rd)
	n.unflushed = append(n.unflushed, rd)
	n.startFlush(async)
	return true
}

// beginEpochAsync handles a new leader's first Ready: the quorum state that
// names it leader, the LeaderChange batch, and the BeginQuorumEpoch requests. The
// quorum state is written and fsynced at once; the requests leave as soon as it is
// durable, and the batch's fsync runs on the flusher as appendAsync's do. The
// voters start fetching while the leader's log fsync runs instead of after it: one
// fsync fewer between an election and its first commit, which activates the new
// controller (Kafka flushes the LeaderChange before it sends BeginQuorumEpoch; Raft
// lets a leader replicate what is not yet durable locally, and the batch counts
// toward the high watermark only after its fsync, through Advance). Nothing else a
// leader sends after persisting vouches for its own log: those are BeginQuorumEpoch,
// EndQuorumEpoch, Vote refusals, and Fetch answers, which may carry records not yet
// durable here. The core learns that the state is durable (statePersisted) before
// the LeaderChange fsync completes, so that its Fetch answers leave at once and a
// proposal appended meanwhile takes the flusher (appendAsync) instead of waiting
// for that fsync in joinFlush.
func (n *Node) beginEpochAsync(rd Ready) bool {
	async, ok := n.cfg.Storage.(raftlog.AsyncSyncer)
	if !ok || mutSendFirst || n.raft.role != Leader || rd.QuorumState == nil || len(rd.Append) == 0 || rd.TruncateTo >= 0 ||
		len(rd.SnapshotChunks) > 0 || rd.LoadSnapshot != nil || rd.RecoveryDone || n.toLoad != nil || mutSkipStateSave {
		return false
	}
	if err := n.joinFlush(); err != nil {
		n.fail(err)
		return true
	}
	if err := n.cfg.Storage.SaveQuorumState(*rd.QuorumState); err != nil {
		n.fail(err)
		return true
	}
	n.raft.statePersisted()
	if err := n.cfg.Storage.Append(rd.Append); err != nil {
		n.fail(err)
		return true
	}
	n.sendAll(rd.MessagesAfterPersist)
	n.busyMs.Store(n.nowMs())
	n.deliver(rd)
	n.unflushed = append(n.unflushed, rd)
	n.startFlush(async)
	return true
}

// startFlush hands the appends not yet being flushed to the flusher goroutine, unless
// a flush is in flight (its completion starts the next).
func (n *Node) startFlush(async raftlog.AsyncSyncer) {
	if n.flushing != nil || len(n.unflushed) == 0 {
		return
	}
	work, finish := async.PrepareSync()
	batch := n.unflushed
	n.unflushed = nil
	n.flushing = &flush{readys: batch, finish: finish}
	n.host.StartFlush(work)
}

// flushCompleted records the outcome of the flush in flight: on success its Readys
// are durable and Advance may count them.
func (n *Node) flushCompleted(err error) {
	f := n.flushing
	n.flushing = nil
	if err := f.finish(err); err != nil {
		n.fail(err)
		return
	}
	for _, rd := range f.readys {
		n.raft.Advance(rd)
	}
}

// joinFlush waits for the flush in flight and makes everything appended since durable
// too, so that the caller may use storage directly. Driver goroutine only.
func (n *Node) joinFlush() error {
	if n.flushing != nil {
		n.flushCompleted(n.host.WaitFlush())
	}
	if n.fatal != nil {
		return n.fatal
	}
	if len(n.unflushed) > 0 {
		if err := n.cfg.Storage.Sync(); err != nil {
			return err
		}
		for _, rd := range n.unflushed {
			n.raft.Advance(rd)
		}
		n.unflushed = nil
	}
	return nil
}

// startRecord hands the write of the durable-end record, for the end the last
// completed Sync or flush made durable, to the host (raftlog.EndRecorder): off the
// acknowledgement path, since settle calls it after every event, so after a follower
// sent the Fetch that acknowledges its Sync and after a leader's flush completed and
// counted toward the high watermark. The write overlaps the next flush; the storage
// itself makes the next Sync or flush wait for it (or do it) before it counts, so the
// record trails what this node acknowledged by one Sync at most. One write at a
// time; its completion event settles, which starts the next if the end moved.
func (n *Node) startRecord() {
	rec, ok := n.cfg.Storage.(raftlog.EndRecorder)
	if !ok || n.recording || n.fatal != nil {
		return
	}
	work, finish := rec.PrepareRecord()
	if work == nil {
		return
	}
	n.recording = true
	n.host.StartRecord(work, func(error) {
		n.recording = false
		if err := finish(); err != nil {
			n.fail(err)
		}
	})
}

// flush is a leader's fsync in flight on the flusher goroutine.
type flush struct {
	readys []Ready
	finish func(error) error
}

func (n *Node) persist(rd Ready) error {
	st := n.cfg.Storage
	if rd.QuorumState != nil && !mutSkipStateSave {
		if err := st.SaveQuorumState(*rd.QuorumState); err != nil {
			return err
		}
	}
	dirty := false
	if rd.TruncateTo >= 0 {
		if err := st.TruncateTo(rd.TruncateTo); err != nil {
			return err
		}
		dirty = true
	}
	if len(rd.Append) > 0 {
		if err := st.Append(rd.Append); err != nil {
			return err
		}
		dirty = true
	}
	// An observer on a broker-only node does not fsync what it fetches, like Kafka's
	// observers: its offsets never count toward the high watermark, and a tail lost in
	// a machine crash is fetched again. Its commits then never wait behind its disk.
	// A controller does (FollowersAlwaysFlush): it may become a voter, and then the
	// offset of its last Fetch counts at once.
	if dirty && (n.raft.isVoter || n.raft.cfg.FollowersAlwaysFlush || rd.RecoveryDone) {
		if err := st.Sync(); err != nil {
			return err
		}
	}
	if rd.RecoveryDone {
		// The log holds the leader's high watermark durably: the marker may go.
		if c, ok := st.(raftlog.RecoveryClearer); ok {
			if err := c.ClearRecovery(); err != nil {
				return err
			}
		}
		n.log.Info("recovery finished: the recovery marker is removed", zap.Int64("log_end_offset", n.raft.log.endOffset()))
	}
	return nil
}

// deliver feeds committed batches to listeners and reports leader changes. A change to
// "this node leads" waits until every batch below the epoch start was delivered.
func (n *Node) deliver(rd Ready) {
	if s := n.toLoad; s != nil {
		n.toLoad = nil
		if err := n.loadIntoListeners(*s); err != nil {
			n.fail(err)
			return
		}
	}
	if rd.KnownHighWatermark > n.knownHW {
		n.knownHW = rd.KnownHighWatermark
		for _, l := range n.listeners {
			if hl, ok := l.(HighWatermarkListener); ok {
				hl.HandleHighWatermark(n.knownHW)
			}
		}
	}
	if len(rd.Committed) > 0 {
		for _, l := range n.listeners {
			l.HandleCommit(rd.Committed)
		}
		n.applied = rd.Committed[len(rd.Committed)-1].NextOffset()
		n.commits.delivered(n.applied, n.host.Now())
	}
	if s := rd.SoftState; s != nil {
		n.commits.reset()
		le := LeaderAndEpoch{LeaderID: s.LeaderID, Epoch: s.Epoch, EpochStartOffset: -1, LeaderAddr: n.addrOf(s.LeaderID)}
		if s.Role == Leader {
			le.EpochStartOffset = s.EpochStartOffset
		}
		n.pendingLeader = &le
	}
	if le := n.pendingLeader; le != nil && (le.EpochStartOffset < 0 || n.applied > le.EpochStartOffset) {
		n.pendingLeader = nil
		for _, l := range n.listeners {
			l.HandleLeaderChange(*le)
		}
	}
}

func (n *Node) sendAll(msgs []Message) {
	for _, m := range msgs {
		if m.IsRequest() {
			n.sendRequest(m)
			continue
		}
		n.host.Reply(m)
	}
}

// sendRequest resolves where m goes and hands it to the host, which steps exactly
// one answer (the peer's or a synthesized failure) back through onResponse.
func (n *Node) sendRequest(m Message) {
	to := m.To
	var addr string
	rng := n.cfg.Raft.Rand // the core's seeded source: a simulated run replays
	switch voters := n.cfg.Raft.Voters; {
	case to == AnyVoter && len(voters) > 0:
		to = voters[rng.IntN(len(voters))]
		addr = n.cfg.VoterAddrs[to]
	case to == AnyVoter:
		// A bootstrap address of unknown id: the answer comes back from AnyVoter, and
		// the core learns the leader from its CurrentLeader.
		addr = n.cfg.BootstrapAddrs[rng.IntN(len(n.cfg.BootstrapAddrs))]
	default:
		addr = n.addrOf(to)
	}
	timeoutMs := n.cfg.Raft.RequestTimeoutMs
	if m.Fetch != nil {
		timeoutMs += int64(m.Fetch.MaxWaitMs)
	}
	n.host.SendRequest(m, to, addr, timeoutMs)
}

// roundTrip converts m to its kmsg request, sends it and converts the answer back. Any
// failure becomes a response carrying Err, which the core treats as a failed request.
func (n *Node) roundTrip(ctx context.Context, addr string, to int32, m Message) Message {
	resp := Message{From: to, To: m.From, RequestID: m.RequestID}
	if addr == "" {
		resp.Err = fmt.Errorf("%w: no address for node %d", ErrRequestFailed, to)
		return failedResponse(m, resp)
	}
	if m.Vote != nil && m.Vote.PreVote {
		vs, err := n.client.PeerVersions(ctx, addr)
		if err == nil && vs[52][1] < 2 {
			// KIP-996: a peer without Vote v2 cannot answer a pre-vote; tell the core so it
			// campaigns for real instead of waiting on this voter.
			n.post(func() { n.raft.SetPeerSupportsPreVote(to, false) })
			resp.Err = fmt.Errorf("%w: node %d does not support pre-vote", ErrRequestFailed, to)
			return failedResponse(m, resp)
		}
	}
	version, err := n.pickVersion(ctx, addr, m)
	if err != nil {
		resp.Err = fmt.Errorf("%w: %v", ErrRequestFailed, err)
		return failedResponse(m, resp)
	}
	req := encodeRequest(m, n.cfg.Raft.ClusterID, version)
	n.addLeaderEndpoints(req)
	kresp, err := n.client.Request(ctx, addr, req)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			n.log.Debug("raft request failed", zap.Int32("to", to), zap.String("addr", addr), zap.Error(err))
		}
		resp.Err = fmt.Errorf("%w: %v", ErrRequestFailed, err)
		return failedResponse(m, resp)
	}
	out, err := decodeResponse(m, kresp)
	if err != nil {
		resp.Err = fmt.Errorf("%w: %v", ErrRequestFailed, err)
		return failedResponse(m, resp)
	}
	out.From, out.To, out.RequestID = to, m.From, m.RequestID
	return out
}

// failedResponse sets the empty response payload matching m's request type.
func failedResponse(m Message, resp Message) Message {
	switch {
	case m.Vote != nil:
		resp.VoteResp = &VoteResponse{PreVote: m.Vote.PreVote, LeaderID: -1, LeaderEpoch: -1}
	case m.BeginEpoch != nil:
		resp.BeginEpochResp = &BeginQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case m.EndEpoch != nil:
		resp.EndEpochResp = &EndQuorumEpochResponse{LeaderID: -1, LeaderEpoch: -1}
	case m.Fetch != nil:
		resp.FetchResp = &FetchResponse{LeaderID: -1, LeaderEpoch: -1, HighWatermark: -1}
	case m.FetchSnapshot != nil:
		resp.FetchSnapshotResp = &FetchSnapshotResponse{LeaderID: -1, LeaderEpoch: -1}
	case m.UpdateVoter != nil:
		resp.UpdateVoterResp = &UpdateVoterResponse{LeaderID: -1, LeaderEpoch: -1}
	}
	return resp
}

// pickVersion is the highest version of m's API that both sides serve. The request is
// built for that exact version because kmsg writes tagged fields at any version.
func (n *Node) pickVersion(ctx context.Context, addr string, m Message) (int16, error) {
	key, ours := requestKeyAndMax(m)
	vs, err := n.client.PeerVersions(ctx, addr)
	if err != nil {
		return 0, err
	}
	r, ok := vs[key]
	if !ok || r[0] > ours {
		return 0, fmt.Errorf("peer %s does not serve API key %d at a version we send", addr, key)
	}
	return min(ours, r[1]), nil
}

// addLeaderEndpoints fills the leader's listener endpoint into BeginQuorumEpoch and
// EndQuorumEpoch v1+ (KIP-853), where followers learn how to reach the leader.
func (n *Node) addLeaderEndpoints(req kmsg.Request) {
	name, host, port, ok := n.leaderEndpoints()
	if !ok {
		return
	}
	switch r := req.(type) {
	case *kmsg.BeginQuorumEpochRequest:
		if r.Version >= 1 {
			r.LeaderEndpoints = []kmsg.BeginQuorumEpochRequestLeaderEndpoint{{Name: name, Host: host, Port: port}}
		}
	case *kmsg.EndQuorumEpochRequest:
		if r.Version >= 1 {
			r.LeaderEndpoints = []kmsg.EndQuorumEpochRequestLeaderEndpoint{{Name: name, Host: host, Port: port}}
		}
	}
}

// maxLearnedAddrs bounds the leader endpoints an observer remembers. Each Fetch answer
// may name a new leader id with its address, so without a bound a peer could grow the
// map by one entry per answer; only the current leader's address is needed, and a
// forgotten one comes back with that leader's next answer.
const maxLearnedAddrs = 16

// learnLeaderAddr remembers the address a Fetch answer advertised for leader id.
func (n *Node) learnLeaderAddr(id int32, addr string) {
	if _, ok := n.learned[id]; !ok && len(n.learned) >= maxLearnedAddrs {
		clear(n.learned)
	}
	n.learned[id] = addr
}

// addrOf is where node id is reached: a static voter's address, or the endpoint the
// leader's Fetch answers advertised (observers of bootstrap addresses); "" if unknown.
func (n *Node) addrOf(id int32) string {
	if a := n.cfg.VoterAddrs[id]; a != "" {
		return a
	}
	if a := (*n.voterAddrs.Load())[id]; a != "" {
		return a
	}
	return n.learned[id]
}

// refreshVoterAddrs rebuilds the addresses of a dynamic quorum's voters (KIP-853:
// the endpoint on ListenerName each VoterNode lists, or its first) when the voter
// set in force changed. Driver goroutine only; handlers read voterAddrs from theirs.
func (n *Node) refreshVoterAddrs() {
	vs, gen, ok := n.raft.VoterSet()
	if gen == n.voterGen && n.voterAddrs.Load() != nil {
		return
	}
	n.voterGen = gen
	addrs := make(map[int32]string, len(vs.Voters))
	for _, v := range vs.Voters {
		for i, e := range v.Endpoints {
			if e.Name == n.cfg.ListenerName || (i == 0 && n.cfg.ListenerName == "") {
				addrs[v.Key.ID] = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
				break
			}
		}
	}
	_ = ok // a static quorum or an unnamed set leaves both empty
	n.voterAddrs.Store(&addrs)
	n.voterSet.Store(&vs)
}
