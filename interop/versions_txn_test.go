package interop

import (
	"context"
	"fmt"

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
