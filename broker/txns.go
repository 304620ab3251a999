package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// TxnConfig holds the transaction coordinator's broker settings; zero values
// take Kafka's defaults.
type TxnConfig struct {
	// Disabled: no transaction coordinator and none of its APIs even with a
	// replica manager. The partition side (transactional Produce, WriteTxnMarkers,
	// DescribeProducers, read_committed Fetch) is served regardless.
	Disabled bool
	// NumPartitions is transaction.state.log.num.partitions (50).
	NumPartitions int32
	// ReplicationFactor is transaction.state.log.replication.factor (3):
	// __transaction_state is created with it on the first FindCoordinator
	// for a transactional id; while fewer brokers are alive the creation
	// fails and FindCoordinator answers COORDINATOR_NOT_AVAILABLE.
	ReplicationFactor int16
	// MinInsyncReplicas is transaction.state.log.min.isr (2, capped by the
	// partition's replicas as min.insync.replicas is).
	MinInsyncReplicas int
	// SegmentBytes is transaction.state.log.segment.bytes (100 MiB).
	SegmentBytes int32
	// MaxTimeoutMs is transaction.max.timeout.ms (900000).
	MaxTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms (7 days).
	IDExpirationMs int64
	// TickIntervalMs is how often the coordinator checks leadership,
	// timeouts and marker retries (100).
	TickIntervalMs int
}

func (t *TxnConfig) setDefaults() {
	if t.NumPartitions <= 0 {
		t.NumPartitions = txn.DefaultNumPartitions
	}
	if t.ReplicationFactor <= 0 {
		t.ReplicationFactor = 3
	}
	if t.MinInsyncReplicas <= 0 {
		t.MinInsyncReplicas = 2
	}
	if t.SegmentBytes <= 0 {
		t.SegmentBytes = 100 * 1024 * 1024
	}
	if t.MaxTimeoutMs <= 0 {
		t.MaxTimeoutMs = txn.DefaultMaxTimeoutMs
	}
	if t.TickIntervalMs <= 0 {
		t.TickIntervalMs = 100
	}
}

// newTxnCoordinator builds the transaction coordinator over the replica
// manager, with a protocol client of its own for WriteTxnMarkers.
func (c *ClientAPI) newTxnCoordinator() {
	c.cfg.Txns.setDefaults()
	c.markerClient = protocol.NewClient(protocol.ClientConfig{ClientID: fmt.Sprintf("broker-%d-txn-markers", c.cfg.NodeID),
		Logger: c.log.Named("txn-markers")})
	co, err := txn.New(txn.Config{
		BrokerID: c.cfg.NodeID, Replicas: c.cfg.Replicas, NumPartitions: c.cfg.Txns.NumPartitions,
		MaxTimeoutMs: c.cfg.Txns.MaxTimeoutMs, MinInsyncReplicas: c.cfg.Txns.MinInsyncReplicas,
		IDExpirationMs: c.cfg.Txns.IDExpirationMs, TopicPartitions: c.txnTopicPartitions,
		ProducerIDs: c.cfg.ProducerIDs.NextProducerID, Markers: txnMarkers{c}, Logger: c.log,
	})
	if err != nil { // only a missing dependency, which newClientAPI's caller checked
		c.log.Error("no transaction coordinator", zap.Error(err))
		return
	}
	c.txns = co
}

// txnTopicPartitions is __transaction_state's partition count in the
// metadata, 0 while it does not exist.
func (c *ClientAPI) txnTopicPartitions() int32 {
	if t, ok := c.cfg.Metadata.Image().TopicByName(txn.Topic); ok {
		return int32(t.NumPartitions())
	}
	return 0
}

// startTxnDriver runs the coordinator's Tick every TickIntervalMs until
// Close; once.
func (c *ClientAPI) startTxnDriver() {
	if c.txns == nil {
		return
	}
	c.txnDriver.Do(func() {
		c.wg.Go(func() {
			t := time.NewTicker(time.Duration(c.cfg.Txns.TickIntervalMs) * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-c.bgCtx.Done():
					return
				case now := <-t.C:
					c.txns.Tick(now.UnixMilli())
				}
			}
		})
	})
}

// Txns is the transaction coordinator (nil without a replica manager).
func (c *ClientAPI) Txns() *txn.Coordinator { return c.txns }

// txnMarkers sends a transaction's markers to the leaders of its
// partitions: appended here for the partitions this broker leads, through
// WriteTxnMarkers v1 on the inter-broker listener for the others.
type txnMarkers struct{ c *ClientAPI }

func (s txnMarkers) WriteTxnMarkers(ctx context.Context, mk txn.Markers) error {
	img := s.c.cfg.Metadata.Image()
	byLeader := map[int32][]txn.TopicPartition{}
	for _, tp := range mk.Partitions {
		t, ok := img.TopicByName(tp.Topic)
		if !ok {
			continue // the topic is gone: nothing to mark (Kafka drops it too)
		}
		p, ok := t.Partition(tp.Partition)
		if !ok {
			continue
		}
		if p.Leader < 0 {
			return fmt.Errorf("txn markers: %s-%d has no leader", tp.Topic, tp.Partition)
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], tp)
	}
	var errs []error
	for leader, tps := range byLeader {
		if leader == s.c.cfg.NodeID {
			errs = append(errs, s.local(ctx, mk, tps))
			continue
		}
		errs = append(errs, s.remote(ctx, mk, leader, tps))
	}
	return errors.Join(errs...)
}

func (s txnMarkers) local(ctx context.Context, mk txn.Markers, tps []txn.TopicPartition) error {
	for _, tp := range tps {
		p, ok := s.c.cfg.Replicas.Partition(replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		if !ok {
			return fmt.Errorf("txn markers: %s-%d not hosted here", tp.Topic, tp.Partition)
		}
		off, err := p.AppendTxnMarker(replica.TxnMarker{ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch,
			CoordinatorEpoch: mk.CoordinatorEpoch, Commit: mk.Commit})
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, writeTxnMarkersTimeout)
		err = p.WaitCommitted(wctx, off)
		cancel()
		if err != nil {
			return err
		}
		s.c.markerCommitted(replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, mk.ProducerID, mk.Commit, off)
	}
	return nil
}

func (s txnMarkers) remote(ctx context.Context, mk txn.Markers, leader int32, tps []txn.TopicPartition) error {
	br, ok := s.c.cfg.Metadata.Image().Broker(leader)
	if !ok {
		return fmt.Errorf("txn markers: leader %d unknown", leader)
	}
	ep, ok := br.Listener(s.c.cfg.InterBrokerListener)
	if !ok {
		return fmt.Errorf("txn markers: leader %d has no listener %q", leader, s.c.cfg.InterBrokerListener)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, mk.Commit
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for topic, parts := range byTopic {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, parts
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	rctx, cancel := context.WithTimeout(ctx, writeTxnMarkersTimeout+5*time.Second)
	defer cancel()
	resp, err := s.c.markerClient.Request(rctx, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), req)
	if err != nil {
		return err
	}
	for _, rm := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
					return fmt.Errorf("txn markers: %s-%d at %d: %w", rt.Topic, rp.Partition, leader, e)
				}
			}
		}
	}
	return nil
}

// createTxnStateTopic asks the controller for __transaction_state, as
// Kafka's AutoTopicCreationManager does on the first FindCoordinator for a
// transactional id: transaction.state.log.num.partitions, its replication
// factor, min.insync.replicas and segment size, compacted. It runs in the
// background; one request at a time.
func (c *ClientAPI) createTxnStateTopic() {
	cfg := c.cfg.Txns
	c.createInternalTopic(txn.Topic, cfg.NumPartitions, cfg.ReplicationFactor, [][2]string{
		{"cleanup.policy", "compact"},
		{"compression.type", "uncompressed"},
		{"min.insync.replicas", strconv.Itoa(cfg.MinInsyncReplicas)},
		{"segment.bytes", strconv.Itoa(int(cfg.SegmentBytes))},
	}, &c.creatingTxnTopic)
}

// verifyTxn is Produce's word on a transactional batch for tp
// (replica.AppendOptions.VerifyTxn, asked for the first batch of a
// transaction on the partition), as KIP-890's verification: without a
// transactional id, or for __transaction_state itself, no; otherwise yes
// only if tp is in the producer's ongoing transaction at its epoch, asked
// of the coordinator here, or of the one on another broker with
// AddPartitionsToTxn v4 VerifyOnly.
func (c *ClientAPI) verifyTxn(transactionalID *string, tp replica.TopicPartition) func(int64, int16) error {
	return func(pid int64, epoch int16) error {
		switch {
		case c.txns == nil:
			return errors.New("no transaction coordinator")
		case transactionalID == nil:
			return errors.New("transactional batch without a transactional id")
		case tp.Topic == txn.Topic:
			return errors.New("transactional batch to __transaction_state")
		}
		want := txn.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		each, all := c.txns.Verify(*transactionalID, pid, epoch, []txn.TopicPartition{want})
		if all == kerr.NotCoordinator {
			return retriableVerify(c.verifyTxnRemote(*transactionalID, pid, epoch, want))
		}
		if all != nil {
			return retriableVerify(all)
		}
		if e := each[want]; e != nil {
			return fmt.Errorf("%s-%d is not in producer %d epoch %d's transaction: %w", tp.Topic, tp.Partition, pid, epoch, e)
		}
		return nil
	}
}

// retriableVerify makes a verification that could not be had yet (the
// coordinator loading, moving, busy or unreachable) NOT_ENOUGH_REPLICAS,
// which producers retry, as Kafka's AddPartitionsToTxnManager answers
// Produce (older clients do not know the coordinator errors there); other
// errors stay refusals.
func retriableVerify(err error) error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke) && ke != kerr.CoordinatorNotAvailable && ke != kerr.CoordinatorLoadInProgress &&
		ke != kerr.NotCoordinator && ke != kerr.ConcurrentTransactions:
		return err // the coordinator answered: the partition is not in the transaction, or the producer is fenced
	}
	return fmt.Errorf("%w: transaction verification: %w", replica.ErrNotEnoughReplicas, err)
}

// verifyTxnRemoteTimeout bounds a verification round trip on the produce
// path.
const verifyTxnRemoteTimeout = 5 * time.Second

// verifyTxnRemote asks the broker leading the id's __transaction_state
// partition, on the inter-broker listener.
func (c *ClientAPI) verifyTxnRemote(id string, pid int64, epoch int16, tp txn.TopicPartition) error {
	img := c.cfg.Metadata.Image()
	t, ok := img.TopicByName(txn.Topic)
	if !ok || t.NumPartitions() == 0 {
		return kerr.CoordinatorNotAvailable
	}
	p, ok := t.Partition(txn.PartitionFor(id, int32(t.NumPartitions())))
	if !ok || p.Leader < 0 {
		return kerr.CoordinatorNotAvailable
	}
	br, ok := img.Broker(p.Leader)
	if !ok {
		return kerr.CoordinatorNotAvailable
	}
	ep, ok := br.Listener(c.cfg.InterBrokerListener)
	if !ok {
		return kerr.CoordinatorNotAvailable
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(4)
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	rt.Topics = append(rt.Topics, tt)
	req.Transactions = append(req.Transactions, rt)
	ctx, cancel := context.WithTimeout(c.bgCtx, verifyTxnRemoteTimeout)
	defer cancel()
	resp, err := c.markerClient.Request(ctx, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), req)
	if err != nil {
		return fmt.Errorf("verifying with coordinator %d: %w", p.Leader, err)
	}
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
		return e
	}
	for _, rt := range r.Transactions {
		for _, st := range rt.Topics {
			for _, sp := range st.Partitions {
				if e := kerr.ErrorForCode(sp.ErrorCode); e != nil {
					return fmt.Errorf("%s-%d: %w", st.Topic, sp.Partition, e)
				}
			}
		}
	}
	if len(r.Transactions) != 1 {
		return fmt.Errorf("verifying with coordinator %d: %d transactions answered", p.Leader, len(r.Transactions))
	}
	return nil
}
