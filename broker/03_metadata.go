package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

// Metadata: v0-v13, answered from the last published image
// (Kafka's KRaftMetadataCache; KIP-631, KIP-590).
//
// Behaviour:
//   - Brokers: unfenced brokers that have the listener the request came in
//     on. Fenced brokers are invisible to clients.
//   - ControllerID (v1+): ClientAPIConfig.ControllerID. KRaft: a random
//     alive broker, not the real controller: clients send admin requests
//     there and the broker forwards them. ZooKeeper mode: the controller.
//   - Topics: v0 empty = all topics; v1+ null = all, empty = none.
//     Requested names that do not exist: UNKNOWN_TOPIC_OR_PARTITION
//     (INVALID_TOPIC_EXCEPTION for a name Kafka's Topic.validate refuses), or,
//     when auto.create.topics.enable is true and the request allows it (v4+
//     AllowAutoTopicCreation, implied below v4), a CreateTopics is forwarded
//     and the topic answers LEADER_NOT_AVAILABLE (invalid names:
//     INVALID_TOPIC_EXCEPTION). v10+ carries topic ids; v12+ may look topics
//     up by id (null name), unknown ids: UNKNOWN_TOPIC_ID; a null name below
//     v12 or an id below v12: INVALID_REQUEST.
//   - Partitions: a leader that is missing or fenced: LEADER_NOT_AVAILABLE
//     with leader -1; a leader without the listener: LISTENER_NOT_FOUND
//     (v6+; LEADER_NOT_AVAILABLE below). OfflineReplicas (v5+) are replicas
//     whose broker is missing, fenced or lacks the listener. v0 filters
//     replicas and ISR to live brokers and says REPLICA_NOT_AVAILABLE when
//     that removed any.
//   - Authorized operations (v8+, KIP-430): there is no authorizer, so a
//     requested bitfield holds every operation the resource type supports;
//     otherwise the field stays -2147483648.
//   - v13 ErrorCode (KIP-1102) is always 0.
func (c *ClientAPI) handleMetadata(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.MetadataRequest)
	resp := body.ResponseKind().(*kmsg.MetadataResponse)
	img := c.cfg.Metadata.Image()
	clusterID := c.cfg.ClusterID
	resp.ClusterID = &clusterID
	resp.Brokers = metadataBrokers(img, req.Listener)
	resp.ControllerID = c.controllerID(img, req.Listener)
	if body.Version >= 8 && body.Version <= 10 && body.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperations
	}
	v := metadataView{img: img, listener: req.Listener, version: body.Version,
		topicOps: body.Version >= 8 && body.IncludeTopicAuthorizedOperations}
	allTopics := body.Topics == nil || (body.Version == 0 && len(body.Topics) == 0)
	if allTopics {
		for t := range img.Topics() {
			resp.Topics = append(resp.Topics, v.topic(t))
		}
		return resp, nil
	}
	var missing []string
	for _, rt := range body.Topics {
		mt, missingName := v.requested(rt)
		if missingName != "" && c.mayAutoCreate(body) {
			missing = append(missing, missingName)
			mt.ErrorCode = autoCreateError(missingName)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	if len(missing) > 0 {
		c.autoCreate(missing)
	}
	return resp, nil
}

// IsInternalTopic reports whether Kafka 4.x treats name as an internal
// topic (Topic.INTERNAL_TOPICS): the group coordinator's offsets, the
// transaction coordinator's state and the share-group state (KIP-932).
// __cluster_metadata is not a topic clients see at all.
func IsInternalTopic(name string) bool {
	switch name {
	case "__consumer_offsets", "__transaction_state", "__share_group_state":
		return true
	}
	return false
}

// Bitfields of AclOperation codes for "everything allowed" (Kafka's
// AclEntry.supportedOperations): topic READ, WRITE, CREATE, DELETE, ALTER,
// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS; cluster CREATE, ALTER,
// DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
// IDEMPOTENT_WRITE.
const (
	topicOperations   int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	clusterOperations int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)

// metadataBrokers lists the unfenced brokers having listener.
func metadataBrokers(img *image.Image, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, br := range img.UnfencedBrokers() {
		ep, ok := br.Listener(listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = br.ID, ep.Host, int32(ep.Port), br.Rack
		out = append(out, mb)
	}
	return out
}

// randomAliveBroker is what KRaft brokers report as ControllerID; -1 when
// no broker is alive on listener.
func (c *ClientAPI) randomAliveBroker(img *image.Image, listener string) int32 {
	var ids []int32
	for _, br := range img.UnfencedBrokers() {
		if _, ok := br.Listener(listener); ok {
			ids = append(ids, br.ID)
		}
	}
	if len(ids) == 0 {
		return -1
	}
	return ids[c.rnd.intN(len(ids))]
}

// metadataView renders topics of one image for one request.
type metadataView struct {
	img      *image.Image
	listener string
	version  int16
	topicOps bool
}

// requested answers one requested topic. missingName is the name of a topic
// that does not exist (a candidate for auto-creation).
func (v metadataView) requested(rt kmsg.MetadataRequestTopic) (mt kmsg.MetadataResponseTopic, missingName string) {
	mt = kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
	switch {
	case rt.Topic == nil && v.version < 12, rt.TopicID != [16]byte{} && v.version < 12:
		mt.ErrorCode = kerr.InvalidRequest.Code
	case rt.Topic != nil:
		if t, ok := v.img.TopicByName(*rt.Topic); ok {
			return v.topic(t), ""
		}
		// Kafka's getTopicMetadata: Topic.validate first, so a name that
		// could never exist is INVALID_TOPIC_EXCEPTION, not unknown.
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if !validTopicName(*rt.Topic) {
			mt.ErrorCode = kerr.InvalidTopicException.Code
		}
		mt.IsInternal = IsInternalTopic(*rt.Topic)
		return mt, *rt.Topic
	case rt.TopicID == [16]byte{}:
		mt.ErrorCode = kerr.InvalidRequest.Code
	default:
		if t, ok := v.img.TopicByID(rt.TopicID); ok {
			return v.topic(t), ""
		}
		mt.ErrorCode = kerr.UnknownTopicID.Code
	}
	return mt, ""
}

// topic renders an existing topic.
func (v metadataView) topic(t *image.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name()
	mt.Topic = &name
	if v.version >= 10 {
		mt.TopicID = t.ID()
	}
	mt.IsInternal = IsInternalTopic(name)
	if v.topicOps {
		mt.AuthorizedOperations = topicOperations
	}
	for id, p := range t.Partitions() {
		mt.Partitions = append(mt.Partitions, v.partition(id, p))
	}
	return mt
}

// partition renders one partition; see the file comment for the errors.
func (v metadataView) partition(id int32, p image.Partition) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = id
	mp.LeaderEpoch = p.LeaderEpoch
	replicas, isr := slices.Clone(p.Replicas()), slices.Clone(p.ISR())
	mp.OfflineReplicas = []int32{}
	for _, r := range replicas {
		if !v.live(r) {
			mp.OfflineReplicas = append(mp.OfflineReplicas, r)
		}
	}
	mp.Leader = p.Leader
	if code := v.leaderError(p.Leader); code != 0 {
		mp.ErrorCode, mp.Leader = code, -1
	}
	if v.version == 0 {
		liveReplicas := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !v.live(r) })
		liveISR := slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return !v.live(r) })
		if mp.ErrorCode == 0 && (len(liveReplicas) < len(replicas) || len(liveISR) < len(isr)) {
			mp.ErrorCode = kerr.ReplicaNotAvailable.Code
		}
		replicas, isr = liveReplicas, liveISR
	}
	mp.Replicas, mp.ISR = replicas, isr
	return mp
}

// live reports whether broker id is registered, unfenced and has the
// request's listener.
func (v metadataView) live(id int32) bool {
	br, ok := v.img.Broker(id)
	if !ok || br.Fenced {
		return false
	}
	_, ok = br.Listener(v.listener)
	return ok
}

// leaderError is the partition error for leader (0 if it is usable).
func (v metadataView) leaderError(leader int32) int16 {
	br, ok := v.img.Broker(leader)
	switch {
	case !ok || br.Fenced:
		return kerr.LeaderNotAvailable.Code
	case v.live(leader):
		return 0
	case v.version >= 6:
		return kerr.ListenerNotFound.Code
	}
	return kerr.LeaderNotAvailable.Code
}
