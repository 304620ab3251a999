package quorum

import "github.com/kraftd/kraftd/quorum/raftlog"

// LeaderAndEpoch is the quorum's view of who leads which epoch.
//
// For the local node becoming leader, EpochStartOffset is the offset of its
// LeaderChange batch; the Node reports the change only after every committed batch
// below it was delivered through HandleCommit (KAFKA-15345), so a state machine that
// hears "you lead epoch E" already holds all earlier committed state.
type LeaderAndEpoch struct {
	LeaderID         int32 // -1 when unknown
	Epoch            int32
	EpochStartOffset int64 // -1 unless LeaderID is the local node
	// LeaderAddr is the leader's host:port on the controller listener when the
	// node knows it (a static voter's address, or the endpoint an observer of
	// controller.quorum.bootstrap.servers learned from the leader); "" otherwise.
	LeaderAddr string
}

// Listener is a state machine fed by the quorum (the metadata controller, a broker's
// metadata publisher). The Node calls it from its driver goroutine: implementations must
// not block (queue the work to their own goroutine) and must not call back into the
// Node synchronously. A Listener on a node that may catch up from a snapshot (at
// restart, or when its log is behind the leader's log start) must also implement
// SnapshotListener; the Node stops with ErrListenerCannotLoad otherwise.
type Listener interface {
	// HandleCommit receives committed batches strictly in offset order, gap-free, control
	// batches included (so the listener sees every offset).
	HandleCommit(batches []raftlog.Batch)
	// HandleLeaderChange reports a new leader or epoch.
	HandleLeaderChange(l LeaderAndEpoch)
}

// HighWatermarkListener is a Listener that also wants the quorum's high watermark
// as this node knows it (Ready.KnownHighWatermark): a leader's Fetch answer names
// it before the local log reaches it, so a state machine restarting behind can tell
// that the batches it receives are an initial catch-up (Kafka's MetadataLoader
// publishes nothing until it reached the high watermark). The Node calls
// HandleHighWatermark on its driver goroutine whenever the value grows, before
// the HandleCommit of the same Ready; it must not block.
type HighWatermarkListener interface {
	HandleHighWatermark(hw int64)
}
