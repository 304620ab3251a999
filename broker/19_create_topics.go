package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/protocol"
)

// CreateTopics: v0-v7. A KRaft broker forwards it to the active controller
// (KIP-590, Broker.CreateTopics); a ZooKeeper-era broker writes ZooKeeper
// (legacyzk). Either way the handler only passes the request to Admin.
//
// In KRaft mode the broker decides nothing: the controller validates,
// places replicas, commits TopicRecord + PartitionRecords and answers after
// the commit. v5+ answers carry NumPartitions, ReplicationFactor and
// Configs, v7 the TopicID (KIP-516), exactly as the controller sent them.
// The advertised max is capped by the controller's (see 18_api_versions.go).
func (c *ClientAPI) handleCreateTopics(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.CreateTopicsRequest)
	resp, err := c.cfg.Admin.CreateTopics(ctx, body)
	if err != nil {
		return adminFailed(ctx, err, createTopicsFailure(body))
	}
	return resp, nil
}

// CreateTopics forwards req to the active controller, retrying
// NOT_CONTROLLER against the next controller within the request's
// TimeoutMillis; when time runs out every topic answers REQUEST_TIMED_OUT.
// The error is non-nil only when ctx ended.
func (b *Broker) CreateTopics(ctx context.Context, body *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error) {
	resp, err := b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
				if isNotControllerCode(t.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: createTopicsFailure(body),
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.CreateTopicsResponse), nil
}

// createTopicsFailure answers every topic of body with one error.
func createTopicsFailure(body *kmsg.CreateTopicsRequest) func(code int16, msg string) kmsg.Response {
	return func(code int16, msg string) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range body.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// mayAutoCreate reports whether missing topics of this Metadata request
// are to be created: auto.create.topics.enable and, from v4, the client's
// AllowAutoTopicCreation.
func (c *ClientAPI) mayAutoCreate(req *kmsg.MetadataRequest) bool {
	return c.cfg.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)
}

// autoCreateError is the Metadata error for a topic being auto-created:
// LEADER_NOT_AVAILABLE (the client retries), or INVALID_TOPIC_EXCEPTION for
// a name Kafka would never create.
func autoCreateError(name string) int16 {
	if !validTopicName(name) {
		return kerr.InvalidTopicException.Code
	}
	return kerr.LeaderNotAvailable.Code
}

// autoCreate creates the valid names in the background, as Kafka's
// AutoTopicCreationManager does: the Metadata answer does not wait for it.
// The request is tracked by the ClientAPI's WaitGroup and ends when Close
// cancels it.
func (c *ClientAPI) autoCreate(names []string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = c.cfg.AutoCreateTimeoutMs
	for _, n := range names {
		if n == group.Topic && c.groups != nil {
			// Created as the group coordinator wants it (50 partitions,
			// offsets.topic.replication.factor, compacted), as Kafka's
			// AutoTopicCreationManager does: with num.partitions the
			// coordinator's partitions would be missing.
			c.createOffsetsTopic()
			continue
		}
		if !validTopicName(n) {
			continue
		}
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n
		t.NumPartitions, t.ReplicationFactor = c.cfg.DefaultNumPartitions, c.cfg.DefaultReplicationFactor
		req.Topics = append(req.Topics, t)
	}
	if len(req.Topics) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.wg.Go(func() {
		resp, err := c.cfg.Admin.CreateTopics(c.bgCtx, req)
		if err != nil {
			if c.bgCtx.Err() == nil {
				c.log.Info("auto-creating topics failed", zap.Error(err))
			}
			return
		}
		for _, t := range resp.Topics {
			if e := kerr.ErrorForCode(t.ErrorCode); e != nil && e != kerr.TopicAlreadyExists {
				c.log.Info("auto-creating a topic failed", zap.String("topic", t.Topic), zap.Error(e))
			}
		}
	})
}

// validTopicName is Kafka's Topic.validate: 1-249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
