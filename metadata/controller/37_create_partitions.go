package controller

// CreatePartitions, API key 37, versions 0-3 (v2 flexible, v3 = v2).
// Brokers forward it here (KIP-590).
//
// Per topic (Kafka's ReplicationControlManager.createPartitions): unknown
// topic: UNKNOWN_TOPIC_OR_PARTITION; Count equal to the current count:
// INVALID_PARTITIONS "Topic already has N partition(s)."; smaller:
// INVALID_PARTITIONS "... would not be an increase."; assignments not one
// per new partition, or not valid brokers of the topic's replication
// factor: INVALID_REPLICA_ASSIGNMENT. New partitions are placed like
// CreateTopics with the replication factor of partition 0, and written as
// PartitionRecords. ValidateOnly writes nothing. A topic named twice is
// INVALID_REQUEST, as Kafka's ControllerApis reports it.
//
// The new partitions count against Config.MaxRecordsPerUserOp (Kafka's
// BoundedList of MAX_RECORDS_PER_USER_OP): they are taken from the
// request's budget once the count, the replication factor and any manual
// assignment have passed, before anything is placed. Kafka catches the
// BoundedListTooLongException per topic, so the topic whose partitions do
// not fit is answered UNKNOWN_SERVER_ERROR with no message, the topics
// before it keep theirs, and, its list being full, every later topic that
// would add a partition is answered the same (ValidateOnly too). Kafka
// also writes the records of that topic that did fit (the topic grows by
// fewer partitions than asked while reported failed); kraftd writes none
// of them. More topics than the cap (names given twice not counted: Kafka's
// ControllerApis answers them) overflow Kafka's bounded list of results
// outside that catch: the whole request is answered POLICY_VIOLATION
// "Unable to perform excessively large batch operation.".

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) createPartitions(req *kmsg.CreatePartitionsRequest) Result {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.SetVersion(req.Version)
	counts := map[string]int{}
	for _, t := range req.Topics {
		counts[t.Topic]++
	}
	distinct := 0
	for _, n := range counts {
		if n == 1 {
			distinct++
		}
	}
	if distinct > c.cfg.MaxRecordsPerUserOp {
		return excessivelyLarge(req)
	}
	var recs []records.Record
	budget := recordBudget(c.cfg.MaxRecordsPerUserOp)
	done := map[string]bool{}
	for _, t := range req.Topics {
		if done[t.Topic] {
			continue
		}
		done[t.Topic] = true
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err *apiError
		if counts[t.Topic] > 1 {
			err = errf(kerr.InvalidRequest, "Duplicate topic name.")
		} else {
			left := budget
			if recs, err = c.createPartitionsFor(t, recs, &budget); err != nil {
				budget = left // a topic that fails writes nothing
			}
			if err == errExcessivelyLarge {
				// Kafka's record list is full from here on.
				err, budget = &apiError{code: kerr.UnknownServerError.Code}, 0
			}
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.code, err.msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ValidateOnly {
		recs = nil
	}
	return Result{Records: recs, Response: resp}
}

func (c *core) createPartitionsFor(t kmsg.CreatePartitionsRequestTopic, recs []records.Record,
	budget *recordBudget) ([]records.Record, *apiError) {
	topic, ok := c.pending.img.TopicByName(t.Topic)
	if !ok {
		return recs, &apiError{code: kerr.UnknownTopicOrPartition.Code}
	}
	cur := int32(topic.NumPartitions())
	switch {
	case t.Count == cur:
		return recs, errf(kerr.InvalidPartitions, "Topic already has %d partition(s).", cur)
	case t.Count < cur:
		return recs, errf(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.",
			t.Topic, cur, t.Count)
	}
	additional := int(t.Count - cur)
	if t.Assignment != nil && len(t.Assignment) != additional {
		return recs, errf(kerr.InvalidReplicaAssignment,
			"Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(t.Assignment))
	}
	p0, _ := topic.Partition(0)
	rf := len(p0.Replicas())
	var assignments [][]int32
	if t.Assignment != nil {
		// Kafka validates every assignment before it adds a record; they
		// are the request's own (len(t.Assignment) == additional).
		assignments = make([][]int32, 0, additional)
		for i, a := range t.Assignment {
			if err := c.validateManualAssignment(a.Replicas, rf); err != nil {
				return recs, err
			}
			if len(activeOf(c.pending.img, a.Replicas)) == 0 {
				return recs, errf(kerr.InvalidReplicaAssignment,
					"All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.",
					int(cur)+i)
			}
			assignments = append(assignments, a.Replicas)
		}
		if !budget.take(additional) {
			return recs, errExcessivelyLarge
		}
	} else {
		var err *apiError
		if assignments, err = c.place(additional, rf, 0, budget); err != nil {
			return recs, err
		}
	}
	for i, replicas := range assignments {
		recs = append(recs, c.partitionRecord(topic.ID(), cur+int32(i), replicas))
	}
	return recs, nil
}
