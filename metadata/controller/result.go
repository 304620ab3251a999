package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// Result is what a handler decides: the records to append and the response
// to send once they (and everything appended before them) are committed.
// It is Kafka's ControllerResult.
type Result struct {
	Records  []records.Record
	Response kmsg.Response
	// nonAtomic marks records that need not commit all or nothing (Kafka's
	// ControllerResult.of, against atomicOf): over the batch limits they
	// go out as plain batches, no transaction markers, each standing on
	// its own once committed, so a leader change keeps what committed.
	// Kafka builds this way the heartbeat's fencing, unfencing and
	// controlled-shutdown moves, the stale-session fencing,
	// UnregisterBroker and AlterPartition; the zero value is atomic.
	nonAtomic bool
	// appended, if set, runs after the records are appended with the
	// offset the response waits for (Kafka's processBatchEndOffset); the
	// heartbeat handler records the controlled-shutdown offset with it.
	appended func(waitOffset int64)
}

// batchOverheadBytes bounds a RecordBatch v2 header plus slack, and
// recordOverheadBytes the per-record framing (length, attributes, deltas,
// null key, value length, header count), both generously.
const (
	batchOverheadBytes  = 256
	recordOverheadBytes = 24
)

// encoded is one batch's worth of records, ready for Propose.
type encoded struct {
	recs []records.Record
	raw  []raftlog.Record
}

// split encodes recs and groups them into batches within the limits. A
// single batch is returned as is. Several batches of an atomic operation
// are wrapped in a metadata transaction (Begin in the first, End in the
// last) so readers apply them atomically; ok is false when the
// metadata.version has no transactions. A non-atomic operation is cut
// into plain batches (Kafka's QuorumController.appendRecords for a
// non-atomic ControllerResult), whatever the metadata.version.
func split(recs []records.Record, maxRecords, maxBytes int, txns, atomic bool) (out []encoded, ok bool, err error) {
	raw, size, err := encodeAll(recs)
	if err != nil {
		return nil, false, err
	}
	if len(recs) <= maxRecords && size+len(recs)*recordOverheadBytes+batchOverheadBytes <= maxBytes {
		return []encoded{{recs: recs, raw: raw}}, true, nil
	}
	if !atomic {
		return splitPlain(recs, raw, maxRecords, maxBytes), true, nil
	}
	if !txns {
		return nil, false, nil
	}
	begin, _, _ := encodeAll([]records.Record{{Message: &records.BeginTransactionRecord{}}})
	end, _, _ := encodeAll([]records.Record{{Message: &records.EndTransactionRecord{}}})
	// First find where each batch ends, then build every batch at its
	// exact size: a million-record operation is not copied while growing.
	// ends[k] is the index in raw after batch k's last record.
	var ends []int
	count, curBytes := 1, batchOverheadBytes+len(begin[0].Value)+recordOverheadBytes
	for _, r := range raw {
		n := len(r.Value) + recordOverheadBytes
		// Keep one slot (and its bytes) free in every batch for the End marker.
		if count+2 > maxRecords || curBytes+n+len(end[0].Value)+recordOverheadBytes > maxBytes {
			ends = append(ends, count)
			count, curBytes = 0, batchOverheadBytes
		}
		count++
		curBytes += n
	}
	out = make([]encoded, 0, len(ends)+1)
	lo := 0
	for k := 0; k <= len(ends); k++ {
		first, last := k == 0, k == len(ends)
		hi := len(raw)
		if !last {
			hi = lo + ends[k]
			if first {
				hi-- // ends[0] counts the Begin marker
			}
		}
		if !first && !last {
			out = append(out, encoded{recs: recs[lo:hi:hi], raw: raw[lo:hi:hi]})
			lo = hi
			continue
		}
		n := hi - lo
		if first {
			n++
		}
		if last {
			n++
		}
		b := encoded{recs: make([]records.Record, 0, n), raw: make([]raftlog.Record, 0, n)}
		if first {
			b.recs = append(b.recs, records.Record{Message: &records.BeginTransactionRecord{}})
			b.raw = append(b.raw, begin...)
		}
		b.recs = append(b.recs, recs[lo:hi]...)
		b.raw = append(b.raw, raw[lo:hi]...)
		if last {
			b.recs = append(b.recs, records.Record{Message: &records.EndTransactionRecord{}})
			b.raw = append(b.raw, end...)
		}
		out = append(out, b)
		lo = hi
	}
	return out, true, nil
}

// splitPlain cuts recs (encoded as raw) greedily into batches of at most
// maxRecords records and maxBytes bytes (a record alone over maxBytes
// gets a batch of its own), sharing recs' and raw's arrays.
func splitPlain(recs []records.Record, raw []raftlog.Record, maxRecords, maxBytes int) []encoded {
	var out []encoded
	lo, count, curBytes := 0, 0, batchOverheadBytes
	for i, r := range raw {
		n := len(r.Value) + recordOverheadBytes
		if count > 0 && (count+1 > maxRecords || curBytes+n > maxBytes) {
			out = append(out, encoded{recs: recs[lo:i:i], raw: raw[lo:i:i]})
			lo, count, curBytes = i, 0, batchOverheadBytes
		}
		count++
		curBytes += n
	}
	if lo < len(raw) {
		out = append(out, encoded{recs: recs[lo:len(raw):len(raw)], raw: raw[lo:len(raw):len(raw)]})
	}
	return out
}

// encodeArenaBytes is the size of the shared buffers encodeAll encodes
// records into.
const encodeArenaBytes = 64 << 10

// encodeAll encodes recs; the values share a few large buffers rather than
// taking one allocation each (they are only read: proposed, then copied
// into the log's batch).
func encodeAll(recs []records.Record) ([]raftlog.Record, int, error) {
	out := make([]raftlog.Record, len(recs))
	size := 0
	var arena []byte
	for i, r := range recs {
		if cap(arena)-len(arena) < 512 {
			arena = make([]byte, 0, encodeArenaBytes)
		}
		start := len(arena)
		v, err := r.AppendTo(arena)
		if err != nil {
			return nil, 0, fmt.Errorf("controller: encoding %s: %w", r.Message.Type(), err)
		}
		out[i].Value = v[start:len(v):len(v)]
		size += len(v) - start
		if cap(v) == cap(arena) {
			arena = v // it fit: the next record follows it
		} else {
			arena = nil // it outgrew the buffer and got its own
		}
	}
	return out, size, nil
}

// errorResponse is req's response with every error code set to code, as
// Kafka's AbstractRequest.getErrorResponse builds it; used for
// NOT_CONTROLLER and for failures before any record is written.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	return errorResponseMessage(req, code, nil)
}

// errorResponseMessage is errorResponse with msg as the error message where
// Kafka's getErrorResponse sets one (CreateTopics, CreatePartitions).
func errorResponseMessage(req kmsg.Request, code int16, msg *string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		r.ErrorCode, r.BrokerEpoch = code, -1
	case *kmsg.BrokerHeartbeatResponse:
		r.ErrorCode, r.IsFenced = code, true
	case *kmsg.UnregisterBrokerResponse:
		r.ErrorCode = code
	case *kmsg.AllocateProducerIDsResponse:
		r.ErrorCode = code
	case *kmsg.AlterPartitionResponse:
		r.ErrorCode = code
	case *kmsg.DescribeClusterResponse:
		r.ErrorCode = code
	case *kmsg.UpdateFeaturesResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *kmsg.CreateTopicsResponse:
		for _, t := range req.(*kmsg.CreateTopicsRequest).Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, msg, -1, -1
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DeleteTopicsResponse:
		deleteTopicsErrors(req.(*kmsg.DeleteTopicsRequest), r, code)
	case *kmsg.AlterConfigsResponse:
		for _, res := range req.(*kmsg.AlterConfigsRequest).Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			r.Resources = append(r.Resources, rr)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, res := range req.(*kmsg.IncrementalAlterConfigsRequest).Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			r.Resources = append(r.Resources, rr)
		}
	case *kmsg.ElectLeadersResponse:
		electLeadersErrors(req.(*kmsg.ElectLeadersRequest), r, code, msg)
	case *kmsg.CreatePartitionsResponse:
		for _, t := range req.(*kmsg.CreatePartitionsRequest).Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			r.Topics = append(r.Topics, rt)
		}
	}
	return resp
}

// maxElectErrorEntries bounds the per-partition results of an ElectLeaders
// error answer: a request naming more topic and partition entries is
// answered with the top-level error code only (v1+), so an answer never
// grows ten times larger than a hostile request that was not even looked at.
const maxElectErrorEntries = 100_000

// electLeadersErrors is Kafka's ElectLeadersRequest.getErrorResponse: the
// top-level code and, for each partition named, code and msg (none for a
// null topic list, nor past maxElectErrorEntries).
func electLeadersErrors(req *kmsg.ElectLeadersRequest, r *kmsg.ElectLeadersResponse, code int16, msg *string) {
	r.ErrorCode = code
	if electLeadersEntries(req) > maxElectErrorEntries {
		return
	}
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, partitionResult(p, code, msg))
		}
		r.Topics = append(r.Topics, rt)
	}
}

func deleteTopicsErrors(req *kmsg.DeleteTopicsRequest, r *kmsg.DeleteTopicsResponse, code int16) {
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
		r.Topics = append(r.Topics, rt)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		r.Topics = append(r.Topics, rt)
	}
}

// notController is the NOT_CONTROLLER answer to req.
func notController(req kmsg.Request) kmsg.Response {
	return errorResponse(req, kerr.NotController.Code)
}

// excessivelyLargeMessage is Kafka's answer to an operation over its record
// cap (EventHandlerExceptionInfo maps BoundedListTooLongException to
// POLICY_VIOLATION with it).
const excessivelyLargeMessage = "Unable to perform excessively large batch operation."

// errExcessivelyLarge is what a handler step returns when the records it
// would write do not fit the request's recordBudget: the whole request is
// answered with excessivelyLarge, nothing is written.
var errExcessivelyLarge = &apiError{code: kerr.PolicyViolation.Code, msg: kmsg.StringPtr(excessivelyLargeMessage)}

// recordBudget is how many more records one user operation may write:
// Config.MaxRecordsPerUserOp at the start, Kafka's BoundedList of
// MAX_RECORDS_PER_USER_OP. Handlers take a topic's records from it before
// they build (or place, or copy) anything for them.
type recordBudget int

// take reserves n records and reports whether they fit.
func (b *recordBudget) take(n int) bool {
	if n < 0 || n > int(*b) {
		return false
	}
	*b -= recordBudget(n)
	return true
}

// excessivelyLarge is Kafka's answer to a request over the record cap:
// its error response (AbstractRequest.getErrorResponse) with
// POLICY_VIOLATION and the message for every topic.
func excessivelyLarge(req kmsg.Request) Result {
	return Result{Response: errorResponseMessage(req, kerr.PolicyViolation.Code, errExcessivelyLarge.msg)}
}
