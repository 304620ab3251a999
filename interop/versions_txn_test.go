package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sweepWriteTxnMarkers aborts a transaction of a producer that has none
// open on partition 0 (a marker that completes nothing, as Kafka writes
// it) at coordinator epoch v, then sends the same at an older coordinator
// epoch, which is fenced.
func sweepWriteTxnMarkers(ctx context.Context, e *sweepEnv, v int16) error {
	send := func(coordinatorEpoch int32) (int16, error) {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = 4242, 0, coordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = e.topic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := request[*kmsg.WriteTxnMarkersResponse](ctx, e, req, v)
		if err != nil {
			return 0, err
		}
		if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != 4242 || len(resp.Markers[0].Topics) != 1 ||
			len(resp.Markers[0].Topics[0].Partitions) != 1 || resp.Markers[0].Topics[0].Partitions[0].Partition != 0 {
			return 0, fmt.Errorf("answer %+v", resp.Markers)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode, nil
	}
	code, err := send(int32(v) + 10)
	if err != nil {
		return err
	}
	if code != 0 {
		return kafkaError(code, fmt.Errorf("abort marker at coordinator epoch %d", v+10))
	}
	if code, err = send(int32(v) + 9); err != nil {
		return err
	}
	if code != kerr.TransactionCoordinatorFenced.Code {
		return fmt.Errorf("marker from an older coordinator epoch: error %d, want TRANSACTION_COORDINATOR_FENCED", code)
	}
	return nil
}

// sweepDescribeProducers asks for both sweep partitions and one that does
// not exist; partition 0 knows producer 4242 (sweepWriteTxnMarkers' marker).
func sweepDescribeProducers(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = e.topic, []int32{0, 1, 99}
	req.Topics = append(req.Topics, rt)
	resp, err := request[*kmsg.DescribeProducersResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		return fmt.Errorf("answer %+v", resp.Topics)
	}
	ps := resp.Topics[0].Partitions
	for _, p := range ps[:2] {
		if p.ErrorCode != 0 {
			return kafkaError(p.ErrorCode, fmt.Errorf("partition %d", p.Partition))
		}
	}
	if ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		return fmt.Errorf("partition 99: error %d, want UNKNOWN_TOPIC_OR_PARTITION", ps[2].ErrorCode)
	}
	found := false
	for _, ap := range ps[0].ActiveProducers {
		found = found || ap.ProducerID == 4242 && ap.LastSequence == -1 && ap.CurrentTxnStartOffset == -1 && ap.CoordinatorEpoch >= 10
	}
	if !found {
		return fmt.Errorf("partition 0's producers %+v lack 4242's marker", ps[0].ActiveProducers)
	}
	return nil
}

// sweepTxnID is a transactional id of its own per sweeper and version.
func sweepTxnID(api string, v int16) string { return fmt.Sprintf("sweep-%s-v%d", api, v) }

// sweepFindCoordinator asks for a group's coordinator
// (sweepFindGroupCoordinator), then, from v1 (v0 knows groups only), for
// an unknown key type (INVALID_REQUEST) and a transactional id's (the first
// ask creates __transaction_state: COORDINATOR_NOT_AVAILABLE until it has a
// leader).
func sweepFindCoordinator(ctx context.Context, e *sweepEnv, v int16) error {
	if err := sweepFindGroupCoordinator(ctx, e, v); err != nil {
		return err
	}
	find := func(keyType int8, key string) (int16, int32, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = keyType, key, []string{key}
		resp, err := request[*kmsg.FindCoordinatorResponse](ctx, e, req, v)
		if err != nil {
			return 0, 0, err
		}
		if v >= 4 {
			if len(resp.Coordinators) != 1 || resp.Coordinators[0].Key != key {
				return 0, 0, fmt.Errorf("coordinators %+v", resp.Coordinators)
			}
			return resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID, nil
		}
		return resp.ErrorCode, resp.NodeID, nil
	}
	if v == 0 {
		return nil // v0 knows groups only
	}
	if code, _, err := find(2, "x"); err != nil || code != kerr.InvalidRequest.Code {
		return fmt.Errorf("key type 2: error %d %v", code, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, node, err := find(1, sweepTxnID("find", v))
		if err != nil {
			return err
		}
		if code == 0 {
			if node != e.brokerID {
				return fmt.Errorf("coordinator %d, want %d", node, e.brokerID)
			}
			return nil
		}
		if code != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			return kafkaError(code, errors.New("FindCoordinator for a transactional id"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // retry backoff, as clients do
		}
	}
}

// initTxn runs InitProducerId for a transactional id until its coordinator
// has loaded (retriable errors as clients retry them).
func initTxn(ctx context.Context, e *sweepEnv, id string) (int64, int16, error) {
	for deadline := time.Now().Add(20 * time.Second); ; {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := request[*kmsg.InitProducerIDResponse](ctx, e, req, 4)
		if err != nil {
			return 0, 0, err
		}
		if resp.ErrorCode == 0 {
			return resp.ProducerID, resp.ProducerEpoch, nil
		}
		if e := kerr.ErrorForCode(resp.ErrorCode); !kerr.IsRetriable(e) && e != kerr.NotCoordinator || time.Now().After(deadline) {
			return 0, 0, kafkaError(resp.ErrorCode, errors.New("InitProducerId with a transactional id"))
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func addPartitionsToTxn(ctx context.Context, e *sweepEnv, v int16, id string, pid int64, epoch int16, partitions ...int32) (*kmsg.AddPartitionsToTxnResponse, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = e.topic, partitions
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.AddPartitionsToTxnResponse](ctx, e, req, v)
}

// sweepAddPartitionsToTxn adds a sweep partition to a fresh transaction,
// then asks for one that does not exist (UNKNOWN_TOPIC_OR_PARTITION, and
// OPERATION_NOT_ATTEMPTED for the other), then at a stale epoch.
func sweepAddPartitionsToTxn(ctx context.Context, e *sweepEnv, v int16) error {
	id := sweepTxnID("add", v)
	pid, epoch, err := initTxn(ctx, e, id)
	if err != nil {
		return err
	}
	if v >= 4 {
		return sweepAddPartitionsToTxnV4(ctx, e, v, id, pid, epoch)
	}
	resp, err := addPartitionsToTxn(ctx, e, v, id, pid, epoch, 0)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return fmt.Errorf("adding partition 0: %+v", resp.Topics)
	}
	if resp, err = addPartitionsToTxn(ctx, e, v, id, pid, epoch, 1, 99); err != nil {
		return err
	}
	if ps := resp.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != kerr.OperationNotAttempted.Code || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		return fmt.Errorf("adding partitions 1 and 99: %+v", ps)
	}
	if resp, err = addPartitionsToTxn(ctx, e, v, id, pid, epoch-1, 0); err != nil {
		return err
	}
	want := kerr.ProducerFenced.Code
	if v < 2 {
		want = kerr.InvalidProducerEpoch.Code
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != want {
		return fmt.Errorf("a stale epoch: error %d, want %d", code, want)
	}
	return nil
}

// sweepAddOffsetsToTxn adds a group's offsets to a fresh transaction: the
// group's __consumer_offsets partition (Java's hashCode, Kafka's abs, over
// offsets.topic.num.partitions 50) is then in the transaction, as
// DescribeTransactions shows; a stale epoch is PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2); the transaction is aborted after.
func sweepAddOffsetsToTxn(ctx context.Context, e *sweepEnv, v int16) error {
	id := sweepTxnID("offsets", v)
	pid, epoch, err := initTxn(ctx, e, id)
	if err != nil {
		return err
	}
	addOffsets := func(epoch int16) (int16, error) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, "abc"
		resp, err := request[*kmsg.AddOffsetsToTxnResponse](ctx, e, req, v)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	}
	if code, err := addOffsets(epoch); err != nil || code != 0 {
		return kafkaError(code, fmt.Errorf("AddOffsetsToTxn: %v", err))
	}
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{id}
	dresp, err := request[*kmsg.DescribeTransactionsResponse](ctx, e, dreq, 0)
	if err != nil {
		return err
	}
	// "abc".hashCode() is 96354; 96354 % 50 is 4.
	if ts := dresp.TransactionStates; len(ts) != 1 || ts[0].State != "Ongoing" || len(ts[0].Topics) != 1 ||
		ts[0].Topics[0].Topic != "__consumer_offsets" || !slices.Equal(ts[0].Topics[0].Partitions, []int32{4}) {
		return fmt.Errorf("the transaction after AddOffsetsToTxn: %+v", ts)
	}
	want := kerr.ProducerFenced.Code
	if v < 2 {
		want = kerr.InvalidProducerEpoch.Code
	}
	if code, err := addOffsets(epoch - 1); err != nil || code != want {
		return fmt.Errorf("AddOffsetsToTxn at a stale epoch: error %d %v, want %d", code, err, want)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, false
	eresp, err := request[*kmsg.EndTxnResponse](ctx, e, end, 3)
	if err != nil || eresp.ErrorCode != 0 {
		return fmt.Errorf("aborting the transaction: %+v %v", eresp, err)
	}
	return nil
}

// sweepEndTxn aborts a fresh transaction holding a sweep partition, and
// refuses an EndTxn at a stale epoch.
func sweepEndTxn(ctx context.Context, e *sweepEnv, v int16) error {
	id := sweepTxnID("end", v)
	pid, epoch, err := initTxn(ctx, e, id)
	if err != nil {
		return err
	}
	if _, err := addPartitionsToTxn(ctx, e, 3, id, pid, epoch, 0); err != nil {
		return err
	}
	end := func(epoch int16) (int16, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, false
		resp, err := request[*kmsg.EndTxnResponse](ctx, e, req, v)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	}
	want := kerr.ProducerFenced.Code
	if v < 2 {
		want = kerr.InvalidProducerEpoch.Code
	}
	if code, err := end(epoch + 1); err != nil || code != want {
		return fmt.Errorf("EndTxn at a stale epoch: error %d %v, want %d", code, err, want)
	}
	if code, err := end(epoch); err != nil || code != 0 {
		return kafkaError(code, fmt.Errorf("EndTxn abort: %v", err))
	}
	return nil
}

// sweepAddPartitionsToTxnV4: the batched form adds partition 0, then
// verifies (VerifyOnly, as partition leaders do) partitions 0 (in the
// transaction) and 1 (not: INVALID_TXN_STATE).
func sweepAddPartitionsToTxnV4(ctx context.Context, e *sweepEnv, v int16, id string, pid int64, epoch int16) error {
	send := func(verify bool, partitions ...int32) ([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, error) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = id, pid, epoch, verify
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = e.topic, partitions
		t.Topics = append(t.Topics, tt)
		req.Transactions = append(req.Transactions, t)
		resp, err := request[*kmsg.AddPartitionsToTxnResponse](ctx, e, req, v)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode != 0 || len(resp.Transactions) != 1 || resp.Transactions[0].TransactionalID != id || len(resp.Transactions[0].Topics) != 1 {
			return nil, fmt.Errorf("answer %+v", resp)
		}
		return resp.Transactions[0].Topics[0].Partitions, nil
	}
	ps, err := send(false, 0)
	if err != nil {
		return err
	}
	if len(ps) != 1 || ps[0].ErrorCode != 0 {
		return fmt.Errorf("adding partition 0: %+v", ps)
	}
	if ps, err = send(true, 0, 1); err != nil {
		return err
	}
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.InvalidTxnState.Code {
		return fmt.Errorf("verifying partitions 0 and 1: %+v", ps)
	}
	return nil
}

// sweepDescribeTransactions describes the transaction sweepEndTxn aborted
// (its state, producer id and timeout) and an unknown id.
func sweepDescribeTransactions(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{sweepTxnID("add", 3), "sweep-unknown"}
	resp, err := request[*kmsg.DescribeTransactionsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.TransactionStates) != 2 {
		return fmt.Errorf("answer %+v", resp.TransactionStates)
	}
	ts := resp.TransactionStates[0]
	if ts.ErrorCode != 0 || ts.TransactionalID != sweepTxnID("add", 3) || ts.State != "Ongoing" || ts.TimeoutMillis != 60000 ||
		ts.ProducerID < 0 || ts.StartTimestamp <= 0 || len(ts.Topics) != 1 || ts.Topics[0].Topic != e.topic {
		return fmt.Errorf("an ongoing transaction: %+v", ts)
	}
	if code := resp.TransactionStates[1].ErrorCode; code != kerr.TransactionalIDNotFound.Code {
		return fmt.Errorf("an unknown id: error %d", code)
	}
	return nil
}

// sweepListTransactions lists the sweep's ongoing transactions (the ones
// sweepAddPartitionsToTxn left open), with an unknown state name, and from
// v1 a duration no transaction reached, from v2 an id pattern.
func sweepListTransactions(ctx context.Context, e *sweepEnv, v int16) error {
	list := func(states []string, durationMs int64, pattern *string) (*kmsg.ListTransactionsResponse, error) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters, req.DurationFilterMillis, req.TransactionalIDPattern = states, durationMs, pattern
		return request[*kmsg.ListTransactionsResponse](ctx, e, req, v)
	}
	resp, err := list([]string{"Ongoing", "Nope"}, -1, nil)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 || !slices.Equal(resp.UnknownStateFilters, []string{"Nope"}) {
		return fmt.Errorf("answer %+v", resp)
	}
	ongoing := 0
	for _, ts := range resp.TransactionStates {
		if ts.TransactionState != "Ongoing" {
			return fmt.Errorf("state filter Ongoing listed %+v", ts)
		}
		if strings.HasPrefix(ts.TransactionalID, "sweep-add-") {
			ongoing++
		}
	}
	if ongoing == 0 {
		return fmt.Errorf("no ongoing sweep transaction listed: %+v", resp.TransactionStates)
	}
	if v >= 1 {
		if resp, err = list(nil, 3600000, nil); err != nil || len(resp.TransactionStates) != 0 {
			return fmt.Errorf("running for an hour: %+v %v", resp, err)
		}
	}
	if v >= 2 {
		pattern := "^sweep-end-"
		if resp, err = list(nil, -1, &pattern); err != nil || len(resp.TransactionStates) == 0 {
			return fmt.Errorf("pattern %s: %+v %v", pattern, resp, err)
		}
		for _, ts := range resp.TransactionStates {
			if !strings.HasPrefix(ts.TransactionalID, "sweep-end-") {
				return fmt.Errorf("pattern %s listed %s", pattern, ts.TransactionalID)
			}
		}
	}
	return nil
}
