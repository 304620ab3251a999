package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
)

// CreateTopics: v0-v7, forwarded to the active controller (KIP-590).
//
// The broker decides nothing: the controller validates, places replicas,
// commits TopicRecord + PartitionRecords and answers after the commit. The
// broker retries NOT_CONTROLLER against the next controller within the
// request's TimeoutMillis; when time runs out every topic answers
// REQUEST_TIMED_OUT. v5+ answers carry NumPartitions, ReplicationFactor and
// Configs, v7 the TopicID (KIP-516), exactly as the controller sent them.
// The advertised max is capped by the controller's (see 18_api_versions.go).
func (b *Broker) handleCreateTopics(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.CreateTopicsRequest)
	return b.forward(ctx, body, body.TimeoutMillis, forwarded{
		notController: func(r kmsg.Response) bool {
			for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
				if isNotControllerCode(t.ErrorCode) {
					return true
				}
			}
			return false
		},
		failure: func(code int16, msg string) kmsg.Response {
			resp := body.ResponseKind().(*kmsg.CreateTopicsResponse)
			for _, t := range body.Topics {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
				rt.NumPartitions, rt.ReplicationFactor = -1, -1
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		},
	})
}

// mayAutoCreate reports whether missing topics of this Metadata request
// are to be created: auto.create.topics.enable and, from v4, the client's
// AllowAutoTopicCreation.
func (b *Broker) mayAutoCreate(req *kmsg.MetadataRequest) bool {
	return b.cfg.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)
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

// autoCreate forwards a CreateTopics for the valid names in the background,
// as Kafka's AutoTopicCreationManager does: the Metadata answer does not
// wait for it. The request is tracked by the broker's WaitGroup and ends
// when Stop cancels it.
func (b *Broker) autoCreate(names []string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(b.cfg.ControllerRequestTimeoutMs)
	for _, n := range names {
		if !validTopicName(n) {
			continue
		}
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n
		t.NumPartitions, t.ReplicationFactor = b.cfg.DefaultNumPartitions, b.cfg.DefaultReplicationFactor
		req.Topics = append(req.Topics, t)
	}
	if len(req.Topics) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.wg.Go(func() {
		resp, err := b.forward(b.bgCtx, req, req.TimeoutMillis, forwarded{
			notController: func(r kmsg.Response) bool {
				ts := r.(*kmsg.CreateTopicsResponse).Topics
				return len(ts) > 0 && isNotControllerCode(ts[0].ErrorCode)
			},
			failure: func(code int16, _ string) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				t := kmsg.NewCreateTopicsResponseTopic()
				t.ErrorCode = code
				resp.Topics = append(resp.Topics, t)
				return resp
			},
		})
		if err != nil {
			return
		}
		for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if e := kerr.ErrorForCode(t.ErrorCode); e != nil && e != kerr.TopicAlreadyExists {
				b.log.Info("auto-creating a topic failed", zap.String("topic", t.Topic), zap.Error(e))
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
