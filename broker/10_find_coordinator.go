package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

// FindCoordinator: v0-v4 (v4 batches keys, KIP-699), for groups and
// transactional ids.
//
// Behaviour, as Kafka's KafkaApis.handleFindCoordinatorRequest:
//   - A group's coordinator (key type 0) is the leader of __consumer_offsets
//     partition abs(javaHashCode(group)) % offsets.topic.num.partitions; a
//     transactional id's (key type 1) is the leader of __transaction_state
//     partition abs(javaHashCode(id)) % transaction.state.log.num.partitions;
//     either with its endpoint on the request's listener.
//   - No __consumer_offsets (or __transaction_state) yet: it is created
//     through the controller (in the background) and the answer is
//     COORDINATOR_NOT_AVAILABLE, which clients retry; so is a partition
//     without a leader, a leader that is not registered (ZooKeeper mode:
//     dead, not in the last UpdateMetadata's live brokers) or fenced, or a
//     leader without this listener: the answer never names a broker that
//     Metadata does not list.
//   - A key type whose coordinator this broker does not run:
//     COORDINATOR_NOT_AVAILABLE; other key types INVALID_REQUEST.
func (c *ClientAPI) handleFindCoordinator(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := body.CoordinatorKeys
	if body.Version < 4 {
		keys = []string{body.CoordinatorKey}
	}
	img := c.cfg.Metadata.Image()
	for _, k := range keys {
		resp.Coordinators = append(resp.Coordinators, c.findCoordinator(img, body.CoordinatorType, k, req.Listener))
	}
	if body.Version < 4 {
		co := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
	}
	return resp, nil
}

func (c *ClientAPI) findCoordinator(img *image.Image, keyType int8, key, listener string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key, co.NodeID, co.Port = key, -1, -1
	fail := func(e *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		co.ErrorCode = e.Code
		msg := e.Message
		co.ErrorMessage = &msg
		return co
	}
	var topic string
	var partition int32
	switch keyType {
	case 0:
		if c.groups == nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		topic, partition = group.Topic, c.groups.PartitionFor(key)
	case 1:
		if c.txns == nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		topic, partition = txn.Topic, c.txns.PartitionFor(key)
	default:
		return fail(kerr.InvalidRequest)
	}
	t, ok := img.TopicByName(topic)
	if !ok {
		if keyType == 0 {
			c.createOffsetsTopic()
		} else {
			c.createTxnStateTopic()
		}
		return fail(kerr.CoordinatorNotAvailable)
	}
	p, ok := t.Partition(partition)
	if !ok || p.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	// Kafka's getAliveBrokerNode: the leader must be registered and
	// unfenced, as Metadata lists only such brokers. A client (franz-go)
	// told a coordinator id that its next Metadata does not list fails
	// the request with "unknown broker", fatal to a transactional
	// producer's AddPartitionsToTxn.
	br, ok := img.Broker(p.Leader)
	if !ok || br.Fenced {
		return fail(kerr.CoordinatorNotAvailable)
	}
	ep, ok := br.Listener(listener)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable)
	}
	co.NodeID, co.Host, co.Port = br.ID, ep.Host, int32(ep.Port)
	return co
}
