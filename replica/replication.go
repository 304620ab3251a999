package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// FetchConfig configures the follower fetchers, with Kafka's replica.fetch.*
// names and defaults. A zero field takes Kafka's default; a negative one
// means zero (a fetch answered at once, no backoff, ...), as Kafka allows.
type FetchConfig struct {
	// MaxWaitMs is replica.fetch.wait.max.ms (500): how long a leader holds a
	// fetch that finds no new data.
	MaxWaitMs int32
	// MinBytes is replica.fetch.min.bytes (1).
	MinBytes int32
	// MaxBytes is replica.fetch.response.max.bytes (10 MiB).
	MaxBytes int32
	// PartitionMaxBytes is replica.fetch.max.bytes (1 MiB); the first batch
	// comes whole even when larger (KIP-74).
	PartitionMaxBytes int32
	// BackoffMs is replica.fetch.backoff.ms (1000): the pause after a failed
	// fetch, or a partition error from a leader that has served the
	// partition at its leader epoch (fetcher.go: a leader that has not caught
	// up with the metadata naming it is retried sooner).
	BackoffMs int64
	// NumFetchers is num.replica.fetchers (1): fetchers (goroutines, each
	// with its own connection) per leader broker.
	NumFetchers int
}

func (c *FetchConfig) fillDefaults() {
	c.MaxWaitMs = orDefault(c.MaxWaitMs, 500)
	c.MinBytes = orDefault(c.MinBytes, 1)
	c.MaxBytes = orDefault(c.MaxBytes, 10<<20)
	c.PartitionMaxBytes = orDefault(c.PartitionMaxBytes, 1<<20)
	c.BackoffMs = orDefault(c.BackoffMs, 1000)
	c.NumFetchers = max(c.NumFetchers, 1)
}

// orDefault is d for zero and zero for a negative v.
func orDefault[T int32 | int64](v, d T) T {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

// FetchPartition is one partition of a follower's Fetch.
type FetchPartition struct {
	TopicPartition
	TopicID            [16]byte
	FetchOffset        int64
	LogStartOffset     int64
	CurrentLeaderEpoch int32
	// LastFetchedEpoch is the epoch of the follower's last batch (Fetch
	// v12+), so the leader can answer DivergingEpoch; -1 when its log is empty.
	LastFetchedEpoch  int32
	PartitionMaxBytes int32
}

// FetchRequest is a follower's Fetch to its leader.
type FetchRequest struct {
	// ConnID names the sending fetcher's connection (not on the wire): one
	// per fetcher goroutine, never reused, as each of Kafka's fetcher
	// threads has its own connection; the transport keeps a connection per
	// ConnID. Reconnect asks for a new one: the fetcher abandoned its
	// previous request (a new partition interrupted a long-poll), which the
	// leader may still hold, and a connection serves one request at a time.
	ConnID    int64
	Reconnect bool
	// Opening, when not nil, is set by the transport while the request
	// opens a fetch session on the leader (a full fetch, SessionEpoch 0):
	// the fetcher then lets it finish instead of interrupting it, since an
	// abandoned answer would leave its new session on the leader with no
	// follower that knows its id (a slot and every partition held until
	// evicted: zk-legacy's one-partition-at-a-time LeaderAndIsr leaked
	// one per new partition).
	Opening     *atomic.Bool
	ReplicaID   int32
	BrokerEpoch int64
	MaxWaitMs   int32
	MinBytes    int32
	MaxBytes    int32
	// Partitions are the partitions asked, each once: all of them, or,
	// when Incremental, those whose fetch state may have changed.
	Partitions []FetchPartition
	// Incremental is set only on requests to an IncrementalFetchTransport
	// (KIP-227's FetchSessionHandler, split between the fetcher, which
	// knows what changed, and the transport, which holds the session).
	// Partitions then names the partitions whose fetch state may differ
	// from what this connection's previous Fetch call carried for them (a
	// superset of those that do: the transport compares), every partition
	// newly asked among them; Forgotten names those asked before and no
	// more (dropped, or backing off); the two are disjoint. Full reads and
	// returns every partition asked, for a request that must name them all
	// (a session starting or starting over); it may be called more than
	// once, on the calling goroutine, and each call is the new base of the
	// next request's changes. After a Fetch call that returned an error the
	// transport must use Full next: the fetcher counts what it handed over
	// as taken.
	Incremental bool
	Forgotten   []TopicPartition
	Full        func() []FetchPartition
}

// EpochEndOffset is where a leader epoch ends in a log (DivergingEpoch,
// OffsetForLeaderEpoch).
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// FetchedPartition is the leader's answer for one partition. Err is one of
// this package's errors (ErrNotLeader, ErrFencedLeaderEpoch,
// ErrUnknownLeaderEpoch, ErrOffsetOutOfRange, ErrUnknownPartition) or another
// error for any other code.
type FetchedPartition struct {
	TopicPartition
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	Diverging      *EpochEndOffset
	Records        []byte
}

// ListOffsetRequest is a follower's ListOffsets for one partition to its
// leader (the replica id makes latest the leader's log end offset).
type ListOffsetRequest struct {
	ConnID    int64 // as FetchRequest's
	ReplicaID int32
	TopicPartition
	TopicID            [16]byte
	CurrentLeaderEpoch int32
	// Timestamp is LatestTimestamp or EarliestTimestamp.
	Timestamp int64
}

// FetchTransport sends a follower's requests to broker leader: Fetch (an
// error means no answer; every partition backs off) and, when a fetch is
// out of range, ListOffsets (the error is the partition's, one of this
// package's errors as FetchedPartition.Err, or the request's).
type FetchTransport interface {
	Fetch(ctx context.Context, leader int32, req *FetchRequest) ([]FetchedPartition, error)
	ListOffset(ctx context.Context, leader int32, req ListOffsetRequest) (int64, error)
}

// IncrementalFetchTransport is implemented by a FetchTransport that keeps
// an incremental fetch session (KIP-227) per fetcher connection
// (FetchRequest.ConnID): the fetchers then send it only what changed
// (FetchRequest.Incremental), so an idle round costs O(1) however many
// partitions a fetcher follows (issue 17: ~33k per leader at 100k
// partitions), where a full request reads every partition's log.
type IncrementalFetchTransport interface {
	FetchTransport
	// FetchesIncrementally marks the implementation; it does nothing.
	FetchesIncrementally()
}

// FetcherConnCloser is implemented by a FetchTransport that keeps a
// connection per fetcher (FetchRequest.ConnID): the manager calls
// CloseFetcher when that fetcher stops because it has no partition left, so
// the connection to a leader no longer followed does not linger.
type FetcherConnCloser interface {
	CloseFetcher(connID int64)
}

// Replication is what the manager needs from the broker to replicate: the
// connections to leaders and to the controller, the metadata's broker
// registrations and this broker's own epoch.
type Replication struct {
	Fetch          FetchTransport
	AlterPartition AlterPartitionTransport
	Brokers        BrokerView
	// BrokerEpoch is this broker's epoch (-1 before it registered).
	BrokerEpoch func() int64
}

func (r *Replication) validate() error {
	if r.Fetch == nil || r.AlterPartition == nil || r.Brokers == nil || r.BrokerEpoch == nil {
		return errors.New("replica: replication needs a fetch transport, an AlterPartition transport, a broker view and the broker epoch")
	}
	return nil
}

// hooks is what every partition of a manager shares: the clock, the lag
// bound, and (once replication started) the broker's view and transports.
type hooks struct {
	log *zap.Logger
	now func() time.Time
	lag int64
	// producerExpiryMs is producer.id.expiration.ms.
	producerExpiryMs int64
	repl             atomic.Pointer[Replication]
	submit           func(p *Partition, item *AlterPartitionItem)
}

func (h *hooks) nowMs() int64 { return h.now().UnixMilli() }
func (h *hooks) lagMs() int64 { return h.lag }

func (h *hooks) brokers() BrokerView {
	if r := h.repl.Load(); r != nil {
		return r.Brokers
	}
	return nil
}

func (h *hooks) ownBrokerEpoch() int64 {
	if r := h.repl.Load(); r != nil {
		return r.BrokerEpoch()
	}
	return -1
}
