package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// The broker's side of replication: the wire for the replica manager's
// follower fetches (Fetch with the replica id and broker epoch to the
// leader's inter-broker listener) and ISR changes (AlterPartition to the
// active controller through the controller channel), and the image's broker
// registrations the leader checks ISR candidates against.

// minReplicaFetchVersion is the oldest Fetch a follower sends: v12 brings
// LastFetchedEpoch and DivergingEpoch (KIP-595's truncation in the fetch),
// so no OffsetForLeaderEpoch round is needed.
const minReplicaFetchVersion = 12

// maxReplicaFetchVersion is the newest Fetch a KRaft follower sends.
const maxReplicaFetchVersion = 16

// FetchTransport sends follower fetches over clients of their own, so fetch
// long-polls do not queue behind anything else: one per fetcher
// (FetchRequest.ConnID: a leader and index among num.replica.fetchers), as
// each of Kafka's fetcher threads has its own connection (a connection
// serves one request at a time, so fetchers sharing one would wait for each
// other's long-polls). It implements replica.FetchTransport and
// replica.FetcherConnCloser.
type FetchTransport struct {
	clientID   string
	log        *zap.Logger
	addr       func(leader int32) (string, error)
	maxVersion int16

	mu       sync.Mutex
	clients  map[int64]*protocol.Client
	sessions map[int64]*followerSession // by connID; a fetcher sends one request at a time
	closed   bool
}

// NewReplicaFetchTransport is the follower fetch wire: fetches go to
// addr(leader) at the highest Fetch version both the leader and maxVersion
// allow (at least v12; a KRaft broker sends up to v16, Kafka 3.3's
// inter.broker.protocol.version 3.3 sends v13, which carries no broker
// epoch). Client ids are clientID-<connID>. Close it after replication stops.
func NewReplicaFetchTransport(clientID string, log *zap.Logger, addr func(leader int32) (string, error), maxVersion int16) *FetchTransport {
	return &FetchTransport{clientID: clientID, log: log, addr: addr, maxVersion: maxVersion, clients: map[int64]*protocol.Client{},
		sessions: map[int64]*followerSession{}}
}

// client returns the client of fetcher connection connID, created on first
// use, or anew (the old one closed: its connection may carry an abandoned
// long-poll) with reconnect.
func (t *FetchTransport) client(connID int64, reconnect bool) (*protocol.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("broker: replica fetch transport closed")
	}
	c := t.clients[connID]
	if c != nil && reconnect {
		_ = c.Close()
		c = nil
	}
	if c == nil {
		c = protocol.NewClient(protocol.ClientConfig{
			ClientID: fmt.Sprintf("%s-%d", t.clientID, connID),
			Logger:   t.log,
		})
		t.clients[connID] = c
	}
	return c, nil
}

// CloseFetcher implements replica.FetcherConnCloser: the fetcher stopped
// (it follows nothing of its leader any more), so its connection goes.
func (t *FetchTransport) CloseFetcher(connID int64) {
	t.mu.Lock()
	c := t.clients[connID]
	delete(t.clients, connID)
	delete(t.sessions, connID)
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Close closes every client (after the fetchers stopped); later fetches fail.
func (t *FetchTransport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, c := range t.clients {
		_ = c.Close()
		delete(t.clients, id)
	}
}

// leaderAddr is broker id's inter-broker endpoint in the published image.
func (b *Broker) leaderAddr(id int32) (string, error) {
	br, ok := b.Image().Broker(id)
	if !ok {
		return "", fmt.Errorf("broker: leader %d is not registered", id)
	}
	ep, ok := br.Listener(b.cfg.InterBrokerListenerName)
	if !ok {
		return "", fmt.Errorf("broker: leader %d has no %s listener", id, b.cfg.InterBrokerListenerName)
	}
	return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), nil
}

// FetchesIncrementally implements replica.IncrementalFetchTransport: the
// fetchers hand Fetch only what changed (followerSession).
func (t *FetchTransport) FetchesIncrementally() {}

// Fetch implements replica.FetchTransport. After an error the connection's
// session starts over with a full request (FetchRequest.Incremental: the
// fetcher counts what it handed over as taken), also when the request
// never left.
func (t *FetchTransport) Fetch(ctx context.Context, leader int32, in *replica.FetchRequest) ([]replica.FetchedPartition, error) {
	answers, err := t.fetch(ctx, leader, in)
	if err != nil {
		t.mu.Lock()
		if s := t.sessions[in.ConnID]; s != nil {
			s.reset()
		}
		t.mu.Unlock()
	}
	return answers, err
}

func (t *FetchTransport) fetch(ctx context.Context, leader int32, in *replica.FetchRequest) ([]replica.FetchedPartition, error) {
	addr, err := t.addr(leader)
	if err != nil {
		return nil, err
	}
	client, err := t.client(in.ConnID, in.Reconnect)
	if err != nil {
		return nil, err
	}
	versions, err := client.PeerVersions(ctx, addr)
	if err != nil {
		return nil, err
	}
	r, ok := versions[1]
	if !ok || r[1] < minReplicaFetchVersion {
		return nil, fmt.Errorf("%w: leader %d serves Fetch up to v%d, replication needs v%d", protocol.ErrUnsupportedVersion, leader, r[1], minReplicaFetchVersion)
	}
	version := min(r[1], t.maxVersion)
	sess := t.session(in.ConnID, leader, version)
	for attempt := 0; ; attempt++ {
		req, sent := sess.request(in, version)
		if in.Opening != nil {
			in.Opening.Store(sent.full && req.SessionEpoch == 0)
		}
		resp, err := client.Request(ctx, addr, req)
		if err != nil {
			sess.reset() // the leader may or may not have taken it: start over
			return nil, err
		}
		fr := resp.(*kmsg.FetchResponse)
		if sessionError(fr.ErrorCode) && attempt == 0 {
			sess.reset() // the leader lost or moved on from the session: fetch in full at once
			continue
		}
		if fr.ErrorCode != 0 {
			return nil, fmt.Errorf("broker: replica fetch: %w", kerr.ErrorForCode(fr.ErrorCode))
		}
		// Names first: the answer is to the session as it was.
		answers := fetchedPartitions(fr, sess.topicName(sent))
		sess.answered(sent, fr.SessionID)
		return answers, nil
	}
}

// ListOffset implements replica.FetchTransport: ListOffsets with the
// follower's replica id (so latest is the leader's log end offset) on the
// fetcher's connection, v4+ for CurrentLeaderEpoch (KIP-320).
func (t *FetchTransport) ListOffset(ctx context.Context, leader int32, in replica.ListOffsetRequest) (int64, error) {
	addr, err := t.addr(leader)
	if err != nil {
		return -1, err
	}
	client, err := t.client(in.ConnID, false)
	if err != nil {
		return -1, err
	}
	versions, err := client.PeerVersions(ctx, addr)
	if err != nil {
		return -1, err
	}
	r, ok := versions[2]
	if !ok || r[1] < 4 {
		return -1, fmt.Errorf("%w: leader %d serves ListOffsets up to v%d, replication needs v4", protocol.ErrUnsupportedVersion, leader, r[1])
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = min(r[1], 8)
	req.ReplicaID = in.ReplicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = in.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = in.Partition, in.CurrentLeaderEpoch, in.Timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := client.Request(ctx, addr, req)
	if err != nil {
		return -1, err
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 || lr.Topics[0].Partitions[0].Partition != in.Partition {
		return -1, errors.New("broker: ListOffsets answer does not match the request")
	}
	sp := lr.Topics[0].Partitions[0]
	if err := fetchErr(sp.ErrorCode); err != nil {
		return -1, fmt.Errorf("broker: leader's ListOffsets: %w", err)
	}
	return sp.Offset, nil
}

// replicaFetchRequest is in on the wire at version, with partitions parts
// (all of in's, or a session's changes).
func replicaFetchRequest(in *replica.FetchRequest, version int16, parts []replica.FetchPartition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = in.ReplicaID
	if version >= 15 {
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = in.ReplicaID, in.BrokerEpoch
	}
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = in.MaxWaitMs, in.MinBytes, in.MaxBytes
	req.SessionEpoch = -1 // full fetches, no session (KIP-227); followerSession sets both
	byTopic := map[string]int{}
	for _, p := range parts {
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, p.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset = p.Partition, p.FetchOffset, p.LogStartOffset
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// fetchedPartitions reads the leader's answer (without a top-level error)
// back, by topic name or (v13+) topic id, named by name (followerSession's
// topicName: an answer names a few of the session's partitions, and a map
// of every requested partition's topic cost O(partitions) each round,
// issue 17); partitions it did not answer are left out.
func fetchedPartitions(resp *kmsg.FetchResponse, name func(id [16]byte) string) []replica.FetchedPartition {
	var out []replica.FetchedPartition
	for _, rt := range resp.Topics {
		topic := rt.Topic
		if resp.Version >= 13 {
			topic = name(rt.TopicID)
		}
		for _, rp := range rt.Partitions {
			a := replica.FetchedPartition{TopicPartition: replica.TopicPartition{Topic: topic, Partition: rp.Partition},
				Err: fetchErr(rp.ErrorCode), HighWatermark: rp.HighWatermark, LogStartOffset: rp.LogStartOffset,
				Records: rp.RecordBatches}
			if rp.DivergingEpoch.EndOffset >= 0 && rp.DivergingEpoch.Epoch >= 0 {
				a.Diverging = &replica.EpochEndOffset{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset}
			}
			out = append(out, a)
		}
	}
	return out
}

// fetchErr maps a partition error code to the replica package's errors.
func fetchErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotLeaderForPartition.Code:
		return replica.ErrNotLeader
	case kerr.FencedLeaderEpoch.Code:
		return replica.ErrFencedLeaderEpoch
	case kerr.UnknownLeaderEpoch.Code:
		return replica.ErrUnknownLeaderEpoch
	case kerr.OffsetOutOfRange.Code:
		return replica.ErrOffsetOutOfRange
	case kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
		return replica.ErrUnknownPartition
	}
	return kerr.ErrorForCode(code)
}

// alterPartitionTransport sends ISR changes to the controller: send carries
// one request and returns its answer.
type alterPartitionTransport struct {
	version int16
	send    func(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)
}

// NewAlterPartitionTransport is the ISR-change wire for a broker whose
// controller is not reached through the KRaft controller channel (a
// ZooKeeper-era broker): requests are built at version (2 for Kafka 3.3:
// topic ids, no broker epochs per ISR member) and handed to send, and the
// answers are classified as for a KRaft broker.
func NewAlterPartitionTransport(version int16,
	send func(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)) replica.AlterPartitionTransport {
	return &alterPartitionTransport{version: version, send: send}
}

// sendAlterPartition is the KRaft send: v3 (KIP-903's broker epochs) unless
// the controller serves less; the controller channel retries NOT_CONTROLLER
// answers and unreachable controllers within ctx.
func (b *Broker) sendAlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, ms(b.cfg.ControllerRequestTimeoutMs))
	defer cancel()
	resp, err := b.ch.forward(ctx, req, func(r kmsg.Response) bool {
		return isNotControllerCode(r.(*kmsg.AlterPartitionResponse).ErrorCode)
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}

// AlterPartition implements replica.AlterPartitionTransport: one request
// for every item.
func (t *alterPartitionTransport) AlterPartition(ctx context.Context, brokerID int32, brokerEpoch int64,
	items []replica.AlterPartitionItem) ([]replica.AlterPartitionResult, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = t.version
	req.BrokerID, req.BrokerEpoch = brokerID, brokerEpoch
	for _, it := range items {
		rt := kmsg.NewAlterPartitionRequestTopic()
		rt.Topic, rt.TopicID = it.Topic, it.TopicID
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = it.Partition, it.LeaderEpoch, it.PartitionEpoch
		for _, m := range it.NewISR {
			rp.NewISR = append(rp.NewISR, m.BrokerID)
			e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			e.BrokerID, e.BrokerEpoch = m.BrokerID, m.BrokerEpoch
			rp.NewEpochISR = append(rp.NewEpochISR, e)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := t.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return alterResults(items, resp)
}

// alterResults matches the answer to the items (one topic entry per item, in
// order, as sent) and classifies each error as Kafka's
// Partition.handleAlterPartitionError does.
func alterResults(items []replica.AlterPartitionItem, resp *kmsg.AlterPartitionResponse) ([]replica.AlterPartitionResult, error) {
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("broker: AlterPartition: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Topics) != len(items) {
		return nil, fmt.Errorf("broker: AlterPartition answered %d topics for %d", len(resp.Topics), len(items))
	}
	out := make([]replica.AlterPartitionResult, len(items))
	for i, rt := range resp.Topics {
		if len(rt.Partitions) != 1 || rt.Partitions[0].Partition != items[i].Partition {
			return nil, errors.New("broker: AlterPartition answer does not match the request")
		}
		rp := rt.Partitions[0]
		out[i] = replica.AlterPartitionResult{Outcome: alterOutcome(rp.ErrorCode), ErrorCode: rp.ErrorCode,
			LeaderID: rp.LeaderID, LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, ISR: rp.ISR}
	}
	return out, nil
}

func alterOutcome(code int16) replica.AlterOutcome {
	switch code {
	case 0:
		return replica.AlterCommitted
	case kerr.OperationNotAttempted.Code, kerr.IneligibleReplica.Code:
		return replica.AlterRejected
	case kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.FencedLeaderEpoch.Code,
		kerr.InvalidUpdateVersion.Code, kerr.InvalidRequest.Code, kerr.NewLeaderElected.Code:
		return replica.AlterStale
	}
	return replica.AlterRetry
}

// brokerView answers the leader's ISR eligibility questions from the
// published image.
type brokerView struct{ b *Broker }

// ISRBroker implements replica.BrokerView, from the image the replica
// manager is synced to.
func (v brokerView) ISRBroker(id int32) (int64, bool, bool) {
	img := v.b.replicaImage.Load()
	if img == nil {
		img = v.b.Image()
	}
	br, ok := img.Broker(id)
	if !ok {
		return -1, false, false
	}
	return br.Epoch, !br.Fenced && !br.InControlledShutdown, true
}

// startReplication hands the replica manager its transports.
func (b *Broker) startReplication() error {
	if b.cfg.Replicas == nil {
		return nil
	}
	b.fetchTransport = NewReplicaFetchTransport(fmt.Sprintf("broker-%d-fetcher", b.cfg.NodeID), b.log.Named("fetch-client"), b.leaderAddr, maxReplicaFetchVersion)
	return b.cfg.Replicas.StartReplication(replica.Replication{
		Fetch:          b.fetchTransport,
		AlterPartition: NewAlterPartitionTransport(3, b.sendAlterPartition),
		Brokers:        brokerView{b: b},
		BrokerEpoch:    b.BrokerEpoch,
	})
}

// stopReplication stops the fetchers and ISR changes, then their client.
func (b *Broker) stopReplication() {
	if b.cfg.Replicas == nil {
		return
	}
	b.cfg.Replicas.StopReplication()
	if b.fetchTransport != nil {
		b.fetchTransport.Close()
	}
}
