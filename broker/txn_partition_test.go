package broker

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

func writeTxnMarkersReq(version int16, pid int64, epoch int16, coordEpoch int32, commit bool, topic string, partitions ...int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(version)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = pid, epoch, coordEpoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, partitions
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

// The partition side of transactions over the wire: a transactional
// producer's batch holds the last stable offset (Fetch's LastStableOffset,
// read_committed Fetch and ListOffsets) until WriteTxnMarkers aborts it; the
// abort then shows in read_committed fetches' AbortedTransactions; a zombie
// coordinator's marker is TRANSACTION_COORDINATOR_FENCED; DescribeProducers
// shows the open transaction; Produce without a coordinator still refuses
// transactional batches.
func TestWriteTxnMarkersAndReadCommitted(t *testing.T) {
	d := newDataHarness(t, 0)
	p, ok := d.replicas.Partition(replica.TopicPartition{Topic: "demo", Partition: 0})
	if !ok {
		t.Fatal("demo-0 not hosted")
	}
	farTs := time.Now().UnixMilli() + 3600000 // the transaction's records are the only ones this late
	raw := storage.EncodeBatch(0, -1, farTs, false, []storage.Record{{Value: []byte("t1")}, {Value: []byte("t2")}}).Raw
	binary.BigEndian.PutUint64(raw[43:], 42)   // producer id
	binary.BigEndian.PutUint16(raw[51:], 3)    // epoch
	binary.BigEndian.PutUint32(raw[53:], 0)    // sequence
	binary.BigEndian.PutUint16(raw[21:], 0x10) // transactional
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	if sp := d.produce(11, -1, "demo", 0, raw); sp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional produce without a coordinator: error %d", sp.ErrorCode)
	}
	if sp := d.produce(11, -1, "demo", 0, recordBatch(1)); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("produce: %+v", sp)
	}
	if _, err := p.AppendAsLeader(raw, replica.AppendOptions{RequiredAcks: -1, MinInsyncReplicas: 1, LogAppendTimeMs: -1,
		VerifyTxn: func(int64, int16) error { return nil }}); err != nil { // offsets 1-2, as a coordinator would allow
		t.Fatal(err)
	}
	fetch := func(isolation int8) kmsg.FetchResponseTopicPartition {
		req := fetchReq(16, "demo", d.demoID, 0, 0)
		req.IsolationLevel = isolation
		_, sp := d.fetch(req)
		return sp
	}
	countBatches := func(b []byte) int {
		bs, _, err := storage.SplitBatches(b)
		if err != nil {
			t.Fatal(err)
		}
		return len(bs)
	}
	if sp := fetch(1); sp.HighWatermark != 3 || sp.LastStableOffset != 1 || countBatches(sp.RecordBatches) != 1 || len(sp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed with the transaction open: hw %d lso %d %d batches aborted %v", sp.HighWatermark, sp.LastStableOffset,
			countBatches(sp.RecordBatches), sp.AbortedTransactions)
	}
	if sp := fetch(0); sp.LastStableOffset != 1 || countBatches(sp.RecordBatches) != 2 || sp.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted: lso %d %d batches aborted %v", sp.LastStableOffset, countBatches(sp.RecordBatches), sp.AbortedTransactions)
	}
	listOffset := func(isolation int8, ts int64) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(8)
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "demo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return d.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	listLatest := func(isolation int8) int64 { return listOffset(isolation, -1) }
	if c, u := listLatest(1), listLatest(0); c != 1 || u != 3 {
		t.Fatalf("ListOffsets latest: read_committed %d, read_uncommitted %d; want 1 and 3", c, u)
	}
	if c, u := listOffset(1, farTs), listOffset(0, farTs); c != -1 || u != 1 {
		t.Fatalf("ListOffsets by the transaction's timestamp: read_committed %d, read_uncommitted %d; want -1 and 1", c, u)
	}
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "demo", []int32{0, 1, 9}
	dreq.Topics = append(dreq.Topics, dt)
	dps := d.request(dreq).(*kmsg.DescribeProducersResponse).Topics[0].Partitions
	if len(dps) != 3 || dps[0].ErrorCode != 0 || len(dps[0].ActiveProducers) != 1 || dps[1].ErrorCode != kerr.NotLeaderForPartition.Code ||
		dps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeProducers: %+v", dps)
	}
	if ap := dps[0].ActiveProducers[0]; ap.ProducerID != 42 || ap.ProducerEpoch != 3 || ap.LastSequence != 1 ||
		ap.CurrentTxnStartOffset != 1 || ap.CoordinatorEpoch != -1 {
		t.Fatalf("active producer %+v", ap)
	}
	for _, v := range []int16{0, 1} {
		resp := d.request(writeTxnMarkersReq(v, 42, 3, 7, false, "demo", 0, 1)).(*kmsg.WriteTxnMarkersResponse)
		ps := resp.Markers[0].Topics[0].Partitions
		if v == 0 {
			if resp.Markers[0].ProducerID != 42 || len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("WriteTxnMarkers v0: %+v", resp.Markers)
			}
			continue
		}
		if ps[0].ErrorCode != 0 { // a second abort writes a marker that completes nothing
			t.Fatalf("WriteTxnMarkers v1: %+v", ps)
		}
	}
	sp := fetch(1)
	if sp.HighWatermark != 5 || sp.LastStableOffset != 5 || countBatches(sp.RecordBatches) != 4 || len(sp.AbortedTransactions) != 1 ||
		sp.AbortedTransactions[0].ProducerID != 42 || sp.AbortedTransactions[0].FirstOffset != 1 {
		t.Fatalf("read_committed after the abort: hw %d lso %d %d batches aborted %+v", sp.HighWatermark, sp.LastStableOffset,
			countBatches(sp.RecordBatches), sp.AbortedTransactions)
	}
	if c := listLatest(1); c != 5 {
		t.Fatalf("ListOffsets latest read_committed %d after the abort", c)
	}
	resp := d.request(writeTxnMarkersReq(1, 42, 3, 6, true, "demo", 0)).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker from coordinator epoch 6 after 7: error %d", code)
	}
	resp = d.request(writeTxnMarkersReq(1, 42, 2, 7, true, "demo", 0)).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker for producer epoch 2 after 3: error %d", code)
	}
}

// A transactional batch whose coordinator (another broker) cannot be
// asked is NOT_ENOUGH_REPLICAS, which producers retry, not a refusal: the
// coordinator may be moving or loading (as Kafka's AddPartitionsToTxnManager
// answers Produce).
func TestTransactionalProduceRetriableWhenCoordinatorUnreachable(t *testing.T) {
	d := newDataHarness(t, 0)
	id := "tx-elsewhere"
	msgs := []records.Message{topicRecord(txn.Topic, uuid(9))}
	for p := range int32(txn.DefaultNumPartitions) {
		msgs = append(msgs, partitionRecord(uuid(9), p, 2, []int32{2}, []int32{2})) // broker 2: nothing listens on its port
	}
	d.commit(msgs...)
	raw := storage.EncodeBatch(0, -1, time.Now().UnixMilli(), false, []storage.Record{{Value: []byte("t")}}).Raw
	binary.BigEndian.PutUint64(raw[43:], 42)
	binary.BigEndian.PutUint16(raw[51:], 0)
	binary.BigEndian.PutUint32(raw[53:], 0)
	binary.BigEndian.PutUint16(raw[21:], 0x10)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	req := produceReq(11, -1, "demo", 0, raw)
	req.TransactionID = &id
	start := time.Now()
	sp := d.request(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("coordinator unreachable: error %d, want NOT_ENOUGH_REPLICAS (retriable)", sp.ErrorCode)
	}
	t.Logf("answered in %v", time.Since(start))
}
