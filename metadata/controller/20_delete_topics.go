package controller

// DeleteTopics, API key 20, versions 0-6 (v5 ErrorMessage, v6 (KIP-516)
// topics by name or by id). Brokers forward it here (KIP-590).
//
// Names and ids are resolved against the latest appended state, as Kafka's
// ControllerApis.deleteTopics does: a name or id given twice is
// INVALID_REQUEST ("Duplicate topic name." / "Duplicate topic id."), a
// v6 entry with both or neither is INVALID_REQUEST, an unknown name is
// UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID, and a name
// that resolves to an id also given is INVALID_REQUEST. Each deleted topic
// is one RemoveTopicRecord (which also drops its configs on replay).
//
// Deletions past Config.MaxRecordsPerUserOp: Kafka's deleteTopics adds the
// RemoveTopicRecords to a BoundedList of MAX_RECORDS_PER_USER_OP and
// catches every exception per topic, so the topics that fit are deleted
// and each one after them is answered UNKNOWN_SERVER_ERROR with no message
// (ApiError.fromThrowable of the BoundedListTooLongException); the request
// as a whole succeeds. kraftd does the same, in request order (Kafka's is
// that of a HashMap of the ids, and it shuffles its answers).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

// deleteTarget is one requested deletion: by name (id zero) or by id.
type deleteTarget struct {
	name *string
	id   records.UUID
}

func (c *core) deleteTopics(req *kmsg.DeleteTopicsRequest) Result {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(req.Version)
	add := func(name *string, id records.UUID, err *apiError) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = name, id
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.code, err.msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	targets := deleteTargets(req, add)
	img := c.pending.img
	var recs []records.Record
	budget := recordBudget(c.cfg.MaxRecordsPerUserOp)
	deleted := map[records.UUID]bool{}
	for _, t := range targets {
		id, name := t.id, t.name
		if name != nil {
			topic, ok := img.TopicByName(*name)
			if !ok {
				add(name, records.ZeroUUID, &apiError{code: kerr.UnknownTopicOrPartition.Code})
				continue
			}
			id = topic.ID()
		} else {
			topic, ok := img.TopicByID(id)
			if !ok {
				add(nil, id, &apiError{code: kerr.UnknownTopicID.Code})
				continue
			}
			name = kmsg.StringPtr(topic.Name())
		}
		if deleted[id] {
			add(name, id, errf(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied."))
			continue
		}
		deleted[id] = true
		if !budget.take(1) {
			add(name, id, &apiError{code: kerr.UnknownServerError.Code})
			continue
		}
		recs = append(recs, records.Record{Message: &records.RemoveTopicRecord{TopicID: id}})
		add(name, id, nil)
	}
	return Result{Records: recs, Response: resp}
}

// deleteTargets collects the request's names and ids, reporting malformed
// and duplicate entries through add.
func deleteTargets(req *kmsg.DeleteTopicsRequest, add func(*string, records.UUID, *apiError)) []deleteTarget {
	var names []string
	var ids []records.UUID
	names = append(names, req.TopicNames...)
	for _, t := range req.Topics {
		id := records.UUID(t.TopicID)
		switch {
		case t.Topic == nil && id.IsZero():
			add(nil, records.ZeroUUID, errf(kerr.InvalidRequest, "Neither topic name nor id were specified."))
		case t.Topic == nil:
			ids = append(ids, id)
		case id.IsZero():
			names = append(names, *t.Topic)
		default:
			add(t.Topic, id, errf(kerr.InvalidRequest, "You may not specify both topic name and topic id."))
		}
	}
	var out []deleteTarget
	nameCount := map[string]int{}
	for _, n := range names {
		nameCount[n]++
	}
	idCount := map[records.UUID]int{}
	for _, id := range ids {
		idCount[id]++
	}
	for _, n := range names {
		switch nameCount[n] {
		case 0:
		case 1:
			out = append(out, deleteTarget{name: kmsg.StringPtr(n)})
		default:
			add(kmsg.StringPtr(n), records.ZeroUUID, errf(kerr.InvalidRequest, "Duplicate topic name."))
		}
		nameCount[n] = 0
	}
	for _, id := range ids {
		switch idCount[id] {
		case 0:
		case 1:
			out = append(out, deleteTarget{id: id})
		default:
			add(nil, id, errf(kerr.InvalidRequest, "Duplicate topic id."))
		}
		idCount[id] = 0
	}
	return out
}
