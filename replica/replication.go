package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// FetchConfig configures the follower fetchers, with Kafka's replica.fetch.*
// names and defaults.
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
	// fetch or a partition error.
	BackoffMs int64
}

func (c *FetchConfig) fillDefaults() {
	if c.MaxWaitMs <= 0 {
		c.MaxWaitMs = 500
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 1
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.BackoffMs <= 0 {
		c.BackoffMs = 1000
	}
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
	ReplicaID   int32
	BrokerEpoch int64
	MaxWaitMs   int32
	MinBytes    int32
	MaxBytes    int32
	Partitions  []FetchPartition
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

// FetchTransport sends a follower's Fetch to broker leader. An error means
// no answer; every partition backs off.
type FetchTransport interface {
	Fetch(ctx context.Context, leader int32, req *FetchRequest) ([]FetchedPartition, error)
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
