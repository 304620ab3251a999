package broker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// dataHarness is a broker (node 1) with a replica manager, fed an image where
// it leads demo-0, follows demo-1 (led by node 2), and does not host other-0.
type dataHarness struct {
	*harness
	replicas *replica.Manager
	demoID   records.UUID
}

func newDataHarness(t testing.TB, maxMessageBytes int) *dataHarness {
	t.Helper()
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1, Topic: replica.TopicConfig{MaxMessageBytes: maxMessageBytes},
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	h := newHarness(t, func(c *Config) { c.Replicas = m })
	h.runPublisher()
	d := &dataHarness{harness: h, replicas: m, demoID: uuid(7)}
	h.commit(mvRecord(14),
		brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 19001)),
		brokerRecord(2, 11, false, nil, ep("PLAINTEXT", 19002)),
		topicRecord("demo", d.demoID),
		partitionRecord(d.demoID, 0, 1, []int32{1}, []int32{1}),
		partitionRecord(d.demoID, 1, 2, []int32{2, 1}, []int32{2, 1}),
		topicRecord("other", uuid(8)),
		partitionRecord(uuid(8), 0, 2, []int32{2}, []int32{2}))
	if got := m.Hosted(); len(got) != 2 {
		t.Fatalf("hosted %v after the image, want demo-0 and demo-1", got)
	}
	return d
}

// records builds one uncompressed producer batch of n records.
func recordBatch(n int) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{Value: []byte{'v', byte('0' + i)}}
	}
	return storage.EncodeBatch(0, -1, time.Now().UnixMilli(), false, recs).Raw
}

func produceReq(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (d *dataHarness) produce(version int16, acks int16, topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	d.t.Helper()
	resp := d.request(produceReq(version, acks, topic, partition, records)).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

func fetchReq(version int16, topic string, id records.UUID, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (d *dataHarness) fetch(req *kmsg.FetchRequest) (*kmsg.FetchResponse, kmsg.FetchResponseTopicPartition) {
	d.t.Helper()
	resp := d.request(req).(*kmsg.FetchResponse)
	return resp, resp.Topics[0].Partitions[0]
}

func TestProduceAndFetch(t *testing.T) {
	d := newDataHarness(t, 0)
	for i, v := range []int16{3, 7, 11} {
		sp := d.produce(v, -1, "demo", 0, recordBatch(2))
		if sp.ErrorCode != 0 || sp.BaseOffset != int64(2*i) || (v >= 5 && sp.LogStartOffset != 0) {
			t.Fatalf("produce v%d: %+v", v, sp)
		}
	}
	for _, v := range []int16{4, 11, 12, 13, 16} {
		_, fp := d.fetch(fetchReq(v, "demo", d.demoID, 0, 2))
		bs, n, err := storage.SplitBatches(fp.RecordBatches)
		if fp.ErrorCode != 0 || err != nil || n != len(fp.RecordBatches) || len(bs) != 2 || bs[0].BaseOffset != 2 ||
			fp.HighWatermark != 6 || fp.LastStableOffset != 6 || (v >= 5 && fp.LogStartOffset != 0) {
			t.Fatalf("fetch v%d: error %d, %d batches from %v, hw %d lso %d", v, fp.ErrorCode, len(bs), bs, fp.HighWatermark, fp.LastStableOffset)
		}
	}
	// At the end: empty records, never null (librdkafka rejects a null record set).
	_, fp := d.fetch(fetchReq(11, "demo", d.demoID, 0, 6))
	if fp.ErrorCode != 0 || fp.RecordBatches == nil || len(fp.RecordBatches) != 0 {
		t.Fatalf("fetch at the end: error %d records %v", fp.ErrorCode, fp.RecordBatches)
	}
	// KIP-74: a response limit below one batch still returns the first batch whole.
	req := fetchReq(11, "demo", d.demoID, 0, 0)
	req.MaxBytes = 1
	if _, fp := d.fetch(req); len(fp.RecordBatches) != len(recordBatch(2)) {
		t.Fatalf("MaxBytes 1 returned %d bytes", len(fp.RecordBatches))
	}
	if _, fp := d.fetch(fetchReq(11, "demo", d.demoID, 0, 7)); fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.HighWatermark != 6 {
		t.Fatalf("fetch past the end: %+v", fp)
	}
	if _, fp := d.fetch(fetchReq(13, "", uuid(99), 0, 0)); fp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: error %d", fp.ErrorCode)
	}
	if _, fp := d.fetch(fetchReq(11, "nope", records.UUID{}, 0, 0)); fp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: error %d", fp.ErrorCode)
	}
	fr := fetchReq(11, "demo", d.demoID, 0, 0)
	fr.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	if _, fp := d.fetch(fr); fp.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer leader epoch: error %d", fp.ErrorCode)
	}
	// A follower replica answers NOT_LEADER_OR_FOLLOWER with the KIP-951 hint (v16).
	resp, fp := d.fetch(fetchReq(16, "", d.demoID, 1, 0))
	if fp.ErrorCode != kerr.NotLeaderForPartition.Code || fp.CurrentLeader.LeaderID != 2 ||
		len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Port != 19002 {
		t.Fatalf("follower fetch: %+v brokers %+v", fp, resp.Brokers)
	}
	// A named session was never created here.
	fs := fetchReq(11, "demo", d.demoID, 0, 0)
	fs.SessionID, fs.SessionEpoch = 42, 1
	if resp := d.request(fs).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("session 42: error %d", resp.ErrorCode)
	}
}

func TestProduceErrors(t *testing.T) {
	d := newDataHarness(t, 200)
	corrupt := recordBatch(1)
	corrupt[len(corrupt)-1] ^= 1
	twoBatches := append(recordBatch(1), recordBatch(1)...)
	big := storage.EncodeBatch(0, -1, 0, false, []storage.Record{{Value: make([]byte, 300)}}).Raw
	for _, tc := range []struct {
		name      string
		version   int16
		acks      int16
		topic     string
		partition int32
		records   []byte
		want      int16
	}{
		{"acks 2", 11, 2, "demo", 0, recordBatch(1), kerr.InvalidRequiredAcks.Code},
		{"crc", 11, 1, "demo", 0, corrupt, kerr.CorruptMessage.Code},
		{"two batches v8+", 11, 1, "demo", 0, twoBatches, kerr.InvalidRecord.Code},
		{"two batches v7", 7, 1, "demo", 0, twoBatches, kerr.CorruptMessage.Code},
		{"too large", 11, 1, "demo", 0, big, kerr.MessageTooLarge.Code},
		{"unknown topic", 11, 1, "nope", 0, recordBatch(1), kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", 11, 1, "demo", 9, recordBatch(1), kerr.UnknownTopicOrPartition.Code},
		{"not hosted", 11, 1, "other", 0, recordBatch(1), kerr.NotLeaderForPartition.Code},
		{"follower", 11, 1, "demo", 1, recordBatch(1), kerr.NotLeaderForPartition.Code},
	} {
		sp := d.produce(tc.version, tc.acks, tc.topic, tc.partition, tc.records)
		if sp.ErrorCode != tc.want || sp.BaseOffset != -1 {
			t.Errorf("%s: error %d base %d, want error %d", tc.name, sp.ErrorCode, sp.BaseOffset, tc.want)
		}
	}
	// KIP-951: from v10 the leader and its endpoint come with the error.
	resp := d.request(produceReq(10, 1, "demo", 1, recordBatch(1))).(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.CurrentLeader.LeaderID != 2 || len(resp.Brokers) != 1 || resp.Brokers[0].Port != 19002 {
		t.Fatalf("v10 hint: leader %+v brokers %+v", sp.CurrentLeader, resp.Brokers)
	}
	if p, _ := d.replicas.Partition(replica.TopicPartition{Topic: "demo", Partition: 0}); p.Log().EndOffset() != 0 {
		t.Fatalf("refused produces reached the log: end offset %d", p.Log().EndOffset())
	}
}

// acks=0 has no response; a failure closes the connection instead.
func TestProduceAcksZero(t *testing.T) {
	d := newDataHarness(t, 0)
	call := func(records []byte) (kmsg.Response, error) {
		return d.b.api.handleProduce(context.Background(), &protocol.Request{Key: 0, Version: 11, Listener: "PLAINTEXT",
			Body: produceReq(11, 0, "demo", 0, records)})
	}
	if resp, err := call(recordBatch(1)); resp != nil || err != nil {
		t.Fatalf("acks=0 success: %v %v", resp, err)
	}
	corrupt := recordBatch(1)
	corrupt[len(corrupt)-1] ^= 1
	if _, err := call(corrupt); err == nil {
		t.Fatal("acks=0 failure kept the connection")
	}
	if p, _ := d.replicas.Partition(replica.TopicPartition{Topic: "demo", Partition: 0}); p.Log().EndOffset() != 1 {
		t.Fatalf("end offset %d", p.Log().EndOffset())
	}
}

// A fetch waiting for MinBytes is answered as soon as an append moves the
// high watermark, not at MaxWaitMillis; with nothing appended it waits
// MaxWaitMillis and answers empty. In a synctest bubble: synctest.Wait
// returns once the fetch is parked, so the append surely comes after it.
func TestFetchLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		img := testImage(t,
			brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 9001)),
			topicRecord("demo", uuid(7)),
			partitionRecord(uuid(7), 0, 1, []int32{1}, []int32{1}))
		SyncReplicas(m, 1, image.Empty(), img, zaptest.NewLogger(t))
		c := newTestClientAPI(t, &recordingAdmin{}, func(cfg *ClientAPIConfig) {
			cfg.Metadata, cfg.Replicas, cfg.ProducerIDs = staticSource{img}, m, noProducerIDs{}
		})
		p, _ := m.Partition(replica.TopicPartition{Topic: "demo", Partition: 0})

		req := fetchReq(11, "demo", uuid(7), 0, 0)
		req.MaxWaitMillis = 150
		start := time.Now()
		fp := call(t, c.handleFetch, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if len(fp.RecordBatches) != 0 || time.Since(start) != 150*time.Millisecond {
			t.Fatalf("empty long poll: %d bytes after %v", len(fp.RecordBatches), time.Since(start))
		}

		req = fetchReq(11, "demo", uuid(7), 0, 0)
		req.MaxWaitMillis = 60000
		done := make(chan kmsg.FetchResponseTopicPartition, 1)
		start = time.Now()
		go func() { done <- call(t, c.handleFetch, req).(*kmsg.FetchResponse).Topics[0].Partitions[0] }()
		synctest.Wait()
		if _, err := p.AppendAsLeader(recordBatch(3), replica.AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
			t.Fatal(err)
		}
		fp = <-done
		if len(fp.RecordBatches) == 0 || fp.HighWatermark != 3 || time.Since(start) != 0 {
			t.Fatalf("woken fetch: %d bytes, hw %d, after %v", len(fp.RecordBatches), fp.HighWatermark, time.Since(start))
		}
	})
}

// testImage replays msgs into an image.
func testImage(t *testing.T, msgs ...records.Message) *image.Image {
	t.Helper()
	d := image.NewDelta(image.Empty())
	for i, m := range append([]records.Message{mvRecord(14)}, msgs...) {
		if err := d.Replay(int64(i), 1, records.Record{Version: versionFor(m), Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	return d.Apply()
}

type noProducerIDs struct{}

func (noProducerIDs) NextProducerID(context.Context) (int64, error) { return -1, errNoProducerIDBlock }

func TestListOffsets(t *testing.T) {
	d := newDataHarness(t, 0)
	d.produce(11, -1, "demo", 0, storage.EncodeBatch(0, -1, 1000, false, []storage.Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampMs: 2000}}).Raw)
	d.produce(11, -1, "demo", 0, storage.EncodeBatch(0, -1, 3000, false, []storage.Record{{Value: []byte("c")}}).Raw)
	for _, tc := range []struct {
		version       int16
		ts            int64
		err           int16
		offset, tsOut int64
	}{
		{8, -2, 0, 0, -1}, {8, -1, 0, 3, -1}, {8, 0, 0, 0, 1000}, {8, 1500, 0, 1, 2000}, {8, 3000, 0, 2, 3000},
		{8, 3001, 0, -1, -1}, {8, -3, 0, 2, 3000}, {8, -4, 0, 0, -1}, {6, -3, kerr.UnsupportedVersion.Code, -1, -1},
		{1, -1, 0, 3, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(tc.version)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "demo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		sp := d.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != tc.err || sp.Offset != tc.offset || sp.Timestamp != tc.tsOut {
			t.Errorf("v%d ts %d: error %d offset %d ts %d, want %d %d %d", tc.version, tc.ts, sp.ErrorCode, sp.Offset, sp.Timestamp, tc.err, tc.offset, tc.tsOut)
		}
	}
}

// InitProducerId takes ids from AllocateProducerIds blocks: consecutive ids
// within a block, the next block when it runs out, COORDINATOR_LOAD_IN_PROGRESS
// when the controller refuses, NOT_COORDINATOR for a transactional id.
func TestInitProducerID(t *testing.T) {
	active := newFakeController(t, true, nil)
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := newHarness(t, func(c *Config) { c.ControllerAddrs = map[int32]string{3001: active.addr}; c.Replicas = m })
	h.runPublisher()
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})
	init := func(txn *string) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID = txn
		return h.request(req).(*kmsg.InitProducerIDResponse)
	}
	if r := init(nil); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("unregistered broker: %+v", r)
	}
	h.b.life.brokerEpoch.Store(10)
	active.mu.Lock()
	active.producerIDBlock = 3
	active.mu.Unlock()
	var ids []int64
	for range 4 {
		r := init(nil)
		if r.ErrorCode != 0 || r.ProducerEpoch != 0 {
			t.Fatalf("init: %+v", r)
		}
		ids = append(ids, r.ProducerID)
	}
	if ids[0] != 0 || ids[1] != 1 || ids[2] != 2 || ids[3] != 3 {
		t.Fatalf("ids %v, want 0 1 2 3 from blocks of 3", ids)
	}
	active.mu.Lock()
	allocs := active.requests[67]
	active.mu.Unlock()
	if allocs != 2 { // the unregistered attempt never left the broker
		t.Fatalf("%d AllocateProducerIds requests, want 2", allocs)
	}
	txn := "tx"
	if r := init(&txn); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("transactional: %+v", r)
	}
}

// Topic configs from the image shape appends: message.timestamp.type
// LogAppendTime stamps the batch and answers LogAppendTime; a topic
// min.insync.replicas above the ISR refuses acks=-1 with NOT_ENOUGH_REPLICAS
// (acks=1 still appends).
func TestProduceTopicConfigs(t *testing.T) {
	d := newDataHarness(t, 0)
	set := func(name, value string) *records.ConfigRecord {
		return &records.ConfigRecord{ResourceType: 2, ResourceName: "demo", Name: name, Value: &value}
	}
	d.commit(set("message.timestamp.type", "LogAppendTime"), set("min.insync.replicas", "2"))
	before := time.Now().UnixMilli()
	sp := d.produce(11, 1, "demo", 0, recordBatch(1))
	if sp.ErrorCode != 0 || sp.LogAppendTime < before || sp.LogAppendTime > time.Now().UnixMilli() {
		t.Fatalf("LogAppendTime produce: %+v", sp)
	}
	// min.insync.replicas counts at most the replicas (Kafka 3.7+'s
	// effectiveMinIsr): demo-0 has one, so acks=-1 passes; mini-0 has two
	// with one in sync, so it does not.
	miniID := uuid(10)
	d.commit(topicRecord("mini", miniID), partitionRecord(miniID, 0, 1, []int32{1, 2}, []int32{1}),
		&records.ConfigRecord{ResourceType: 2, ResourceName: "mini", Name: "min.insync.replicas", Value: kmsg.StringPtr("2")})
	if sp := d.produce(11, -1, "mini", 0, recordBatch(1)); sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=-1 below min.insync.replicas: error %d", sp.ErrorCode)
	}
	_, fp := d.fetch(fetchReq(11, "demo", d.demoID, 0, 0))
	b, err := storage.ParseBatch(fp.RecordBatches)
	if err != nil || !b.LogAppendTime() || b.MaxTimestampMs != sp.LogAppendTime {
		t.Fatalf("fetched batch: append time %v, max ts %d, want %d (%v)", b.LogAppendTime(), b.MaxTimestampMs, sp.LogAppendTime, err)
	}
	if sp := d.produce(11, -1, "demo", 0, recordBatch(1)); sp.ErrorCode != 0 {
		t.Fatalf("acks=-1, min.insync.replicas 2 on one replica: error %d", sp.ErrorCode)
	}
}

// replicaFetchReq is fetchReq from follower replicaID (ReplicaState from
// v15, ReplicaID before) with a last fetched epoch.
func replicaFetchReq(version int16, topic string, id records.UUID, offset int64, replicaID int32, brokerEpoch int64, lastEpoch int32) *kmsg.FetchRequest {
	req := fetchReq(version, topic, id, 0, offset)
	req.ReplicaID = replicaID
	if version >= 15 {
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = replicaID, brokerEpoch
	}
	req.Topics[0].Partitions[0].LastFetchedEpoch = lastEpoch
	return req
}

// Fetches from followers read up to the log end (consumers stop at the high
// watermark), move the follower's log end offset and with it the high
// watermark, are refused from a replica outside the assignment, and answer
// DivergingEpoch when the follower's last fetched epoch ends before its fetch
// offset.
func TestReplicaFetch(t *testing.T) {
	d := newDataHarness(t, 0)
	repID := uuid(9)
	d.commit(topicRecord("rep", repID), partitionRecord(repID, 0, 1, []int32{1, 2}, []int32{1, 2}))
	for range 2 {
		if sp := d.produce(11, 1, "rep", 0, recordBatch(2)); sp.ErrorCode != 0 {
			t.Fatalf("produce: %+v", sp)
		}
	}
	if _, fp := d.fetch(fetchReq(16, "rep", repID, 0, 0)); fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 || fp.HighWatermark != 0 {
		t.Fatalf("consumer fetch before replication: error %d, %d bytes, hw %d", fp.ErrorCode, len(fp.RecordBatches), fp.HighWatermark)
	}
	for _, v := range []int16{11, 16} {
		_, fp := d.fetch(replicaFetchReq(v, "rep", repID, 0, 2, 11, -1))
		bs, _, err := storage.SplitBatches(fp.RecordBatches)
		if fp.ErrorCode != 0 || err != nil || len(bs) != 2 {
			t.Fatalf("replica fetch v%d: error %d, %d batches (%v)", v, fp.ErrorCode, len(bs), err)
		}
	}
	// The follower reached the log end: the high watermark follows.
	if _, fp := d.fetch(replicaFetchReq(16, "rep", repID, 4, 2, 11, 0)); fp.ErrorCode != 0 || fp.DivergingEpoch.EndOffset != -1 {
		t.Fatalf("replica fetch at the end: %+v", fp)
	}
	if _, fp := d.fetch(fetchReq(16, "rep", repID, 0, 0)); fp.HighWatermark != 4 || len(fp.RecordBatches) == 0 {
		t.Fatalf("consumer fetch after replication: hw %d, %d bytes", fp.HighWatermark, len(fp.RecordBatches))
	}
	// Epoch 0 ends at 4 here: a follower claiming epoch-0 data up to 9 diverges.
	if _, fp := d.fetch(replicaFetchReq(12, "rep", repID, 9, 2, -1, 0)); fp.ErrorCode != 0 ||
		fp.DivergingEpoch.Epoch != 0 || fp.DivergingEpoch.EndOffset != 4 || len(fp.RecordBatches) != 0 {
		t.Fatalf("divergent follower: error %d diverging %+v, %d bytes", fp.ErrorCode, fp.DivergingEpoch, len(fp.RecordBatches))
	}
	// A last fetched epoch newer than any the leader knows: OFFSET_OUT_OF_RANGE.
	if _, fp := d.fetch(replicaFetchReq(12, "rep", repID, 4, 2, -1, 7)); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("unknown last fetched epoch: error %d", fp.ErrorCode)
	}
	if _, fp := d.fetch(replicaFetchReq(16, "rep", repID, 0, 3, 12, -1)); fp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from a non-replica: error %d", fp.ErrorCode)
	}
}

func offsetForLeaderEpochReq(version int16, topic string, partition, current, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(version)
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	d := newDataHarness(t, 0)
	if sp := d.produce(11, 1, "demo", 0, recordBatch(3)); sp.ErrorCode != 0 {
		t.Fatalf("produce: %+v", sp)
	}
	for _, tc := range []struct {
		v                     int16
		topic                 string
		partition, cur, epoch int32
		code                  int16
		leaderEpoch           int32
		end                   int64
	}{
		{4, "demo", 0, -1, 0, 0, 0, 3},
		{0, "demo", 0, -1, 0, 0, -1, 3}, // v0 has no LeaderEpoch in the answer
		{4, "demo", 0, 0, 5, 0, -1, -1}, // newer than the cache
		{4, "demo", 0, 5, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{4, "demo", 1, -1, 0, kerr.NotLeaderForPartition.Code, -1, -1}, // a follower
		{4, "other", 0, -1, 0, kerr.NotLeaderForPartition.Code, -1, -1},
		{4, "nope", 0, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	} {
		resp := d.request(offsetForLeaderEpochReq(tc.v, tc.topic, tc.partition, tc.cur, tc.epoch)).(*kmsg.OffsetForLeaderEpochResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != tc.code || sp.LeaderEpoch != tc.leaderEpoch || sp.EndOffset != tc.end {
			t.Errorf("%+v: error %d epoch %d end %d", tc, sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset)
		}
	}
}

// Topic configs reach the open logs through SyncReplicas: the topic's
// max.message.bytes refuses a larger batch; the cluster-wide dynamic
// compression.type makes the leader store batches gzip; the topic's
// cleanup.policy=compact refuses a keyless record with a per-record error
// (Produce v8+); removing the topic's override restores the broker default.
func TestProduceTopicConfigsReachTheLog(t *testing.T) {
	d := newDataHarness(t, 0)
	cfgRecord := func(typ int8, name, key, value string) *records.ConfigRecord {
		return &records.ConfigRecord{ResourceType: typ, ResourceName: name, Name: key, Value: &value}
	}
	d.commit(cfgRecord(image.ConfigTopic, "demo", "max.message.bytes", "100"))
	if sp := d.produce(11, 1, "demo", 0, recordBatch(30)); sp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("batch over the topic's max.message.bytes: error %d", sp.ErrorCode)
	}
	d.commit(&records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: "demo", Name: "max.message.bytes"},
		cfgRecord(image.ConfigBroker, "", "compression.type", "gzip"))
	if sp := d.produce(11, 1, "demo", 0, recordBatch(30)); sp.ErrorCode != 0 {
		t.Fatalf("after the override is removed: error %d", sp.ErrorCode)
	}
	_, fp := d.fetch(fetchReq(11, "demo", d.demoID, 0, 0))
	b, err := storage.ParseBatch(fp.RecordBatches)
	if err != nil || b.Compression() != storage.CompressionGzip {
		t.Fatalf("stored batch codec %d (%v), want gzip from the cluster default", b.Compression(), err)
	}
	d.commit(cfgRecord(image.ConfigTopic, "demo", "cleanup.policy", "compact"))
	sp := d.produce(11, 1, "demo", 0, recordBatch(2))
	if sp.ErrorCode != kerr.InvalidRecord.Code || len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 0 {
		t.Fatalf("keyless record on a compacted topic: %+v", sp)
	}
	if sp := d.produce(7, 1, "demo", 0, recordBatch(2)); sp.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("v7 (no INVALID_RECORD): error %d", sp.ErrorCode)
	}
}

// ListOffsets right after an election: while the new leader's high watermark
// is below its leader epoch's start offset, latest and a timestamp lookup that
// finds nothing below the high watermark are OFFSET_NOT_AVAILABLE (KIP-207);
// earliest is answered, and a replica's latest is the log end; once a
// follower's fetch moves the high watermark past the epoch start, latest is
// the high watermark again.
func TestListOffsetsNotAvailableAfterElection(t *testing.T) {
	d := newDataHarness(t, 0)
	id := uuid(9)
	d.commit(topicRecord("kip207", id), partitionRecord(id, 0, 1, []int32{1, 2}, []int32{1, 2}))
	for range 2 {
		if r := d.produce(11, 1, "kip207", 0, recordBatch(1)); r.ErrorCode != 0 {
			t.Fatalf("produce: error %d", r.ErrorCode)
		}
	}
	listOffsetAs := func(replicaID int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(8)
		req.ReplicaID = replicaID
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "kip207"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return d.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	listOffset := func(ts int64) kmsg.ListOffsetsResponseTopicPartition { return listOffsetAs(-1, ts) }
	// Follower 2 has not fetched: the high watermark is 0, the log end 2;
	// no epoch change yet, so latest is 0.
	if sp := listOffset(-1); sp.ErrorCode != 0 || sp.Offset != 0 {
		t.Fatalf("latest before the election: error %d offset %d", sp.ErrorCode, sp.Offset)
	}
	change := &records.PartitionChangeRecord{}
	change.Default()
	change.TopicID, change.PartitionID, change.Leader = id, 0, 1 // re-elected: leader epoch 1 starts at 2
	d.commit(change)
	for _, ts := range []int64{-1, 0, -3} {
		if sp := listOffset(ts); sp.ErrorCode != kerr.OffsetNotAvailable.Code {
			t.Errorf("timestamp %d after the election: error %d offset %d, want OFFSET_NOT_AVAILABLE", ts, sp.ErrorCode, sp.Offset)
		}
	}
	if sp := listOffset(-2); sp.ErrorCode != 0 || sp.Offset != 0 {
		t.Errorf("earliest after the election: error %d offset %d", sp.ErrorCode, sp.Offset)
	}
	// A replica (a follower out of range) gets the leader's log end, with no
	// KIP-207 error.
	if sp := listOffsetAs(2, -1); sp.ErrorCode != 0 || sp.Offset != 2 || sp.LeaderEpoch != 1 {
		t.Errorf("replica's latest: error %d offset %d epoch %d, want the log end 2 at epoch 1", sp.ErrorCode, sp.Offset, sp.LeaderEpoch)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = 2, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "kip207"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.PartitionMaxBytes = 2, 1, 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if rp := d.request(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; rp.ErrorCode != 0 {
		t.Fatalf("follower fetch: error %d", rp.ErrorCode)
	}
	if p, _ := d.replicas.Partition(replica.TopicPartition{Topic: "kip207"}); p.HighWatermark() != 2 {
		t.Fatalf("high watermark %d after the follower's fetch, want 2", p.HighWatermark())
	}
	if sp := listOffset(-1); sp.ErrorCode != 0 || sp.Offset != 2 {
		t.Fatalf("latest once the high watermark passed the epoch start: error %d offset %d", sp.ErrorCode, sp.Offset)
	}
}

// TestMetadataVisibleBeforeReplicaApply: a new image is served to Metadata
// as soon as it is published, while the replica manager still creates the
// new partition's log (Kafka's BrokerMetadataPublisher sets the metadata
// cache's image before ReplicaManager.applyDelta). In that window a produce
// to the partition answers the retriable NOT_LEADER_OR_FOLLOWER (Kafka's
// getPartitionOrError for a partition the metadata cache has and the replica
// manager does not), and the offset heartbeats report does not cover the
// image until the replica manager applied it. Afterwards the produce
// succeeds: the replica manager was synced from the previous image to the
// new one.
func TestMetadataVisibleBeforeReplicaApply(t *testing.T) {
	d := newDataHarness(t, 0)
	apply := d.b.pub.onPublish
	entered, release := make(chan struct{}), make(chan struct{})
	// Set before HandleCommit, whose queue lock orders it before the run
	// goroutine's read.
	d.b.pub.onPublish = func(prev, next *image.Image) {
		close(entered)
		<-release
		apply(prev, next)
	}
	freshID := uuid(9)
	b := encodeBatch(t, d.next, topicRecord("fresh", freshID), partitionRecord(freshID, 0, 1, []int32{1}, []int32{1}))
	d.next = b.NextOffset()
	commitTo(d.b.Listener(), []raftlog.Batch{b})
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the replica manager was never asked to apply the new image")
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	mr := d.request(metadataRequest(12, "fresh")).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 || len(mr.Topics[0].Partitions) != 1 ||
		mr.Topics[0].Partitions[0].Leader != 1 {
		t.Fatalf("Metadata while the replica manager applies: %+v, want fresh-0 led by 1", mr.Topics)
	}
	if got := d.b.AppliedOffset(); got >= b.LastOffset {
		t.Fatalf("heartbeat offset %d covers %d before the replica manager applied it", got, b.LastOffset)
	}
	if sp := d.produce(11, -1, "fresh", 0, recordBatch(1)); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce while the replica manager applies: error %d, want NOT_LEADER_OR_FOLLOWER", sp.ErrorCode)
	}
	close(release)
	released = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.b.WaitApplied(ctx, b.LastOffset); err != nil {
		t.Fatal(err)
	}
	if sp := d.produce(11, -1, "fresh", 0, recordBatch(1)); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("produce once applied: %+v", sp)
	}
}

// TestDeleteTopicRemovesOnlyItsLogs: applying a topic delete removes the
// logs of that topic's partitions (looked up by name from the previous
// image, issue 17) and no other: not another topic's, nor those of a newer
// topic of the same name created in the same publish.
func TestDeleteTopicRemovesOnlyItsLogs(t *testing.T) {
	m, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := testImage(t, brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 9001)),
		topicRecord("gone", uuid(7)),
		partitionRecord(uuid(7), 0, 1, []int32{1}, []int32{1}),
		partitionRecord(uuid(7), 1, 1, []int32{1}, []int32{1}),
		topicRecord("again", uuid(9)),
		partitionRecord(uuid(9), 0, 1, []int32{1}, []int32{1}),
		partitionRecord(uuid(9), 1, 1, []int32{1}, []int32{1}),
		topicRecord("other", uuid(8)),
		partitionRecord(uuid(8), 0, 1, []int32{1}, []int32{1}))
	SyncReplicas(m, 1, image.Empty(), before, zaptest.NewLogger(t))
	d := image.NewDelta(before)
	next := before.Provenance().Offset + 1
	for _, msg := range []records.Message{&records.RemoveTopicRecord{TopicID: uuid(7)}, &records.RemoveTopicRecord{TopicID: uuid(9)},
		topicRecord("again", uuid(10)), partitionRecord(uuid(10), 0, 1, []int32{1}, []int32{1})} {
		if err := d.Replay(next, 1, records.Record{Version: versionFor(msg), Message: msg}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	SyncReplicas(m, 1, before, d.Apply(), zaptest.NewLogger(t))
	got := map[string]bool{}
	for _, tp := range m.Hosted() {
		p, _ := m.Partition(tp)
		id, _ := p.Log().TopicID()
		got[fmt.Sprintf("%s-%d@%02x", tp.Topic, tp.Partition, id[0])] = true
	}
	want := map[string]bool{"other-0@08": true, "again-0@0a": true}
	if !maps.Equal(got, want) {
		t.Fatalf("hosted after the deletes %v, want %v", got, want)
	}
}

// TestProduceWaitAnsweredOnLeaderMove: an acks=-1 produce waiting for a
// silent follower is answered as soon as the partition's leadership moves
// away (the image's PartitionChangeRecord reaching the replica manager),
// not at its timeout: NOT_LEADER_OR_FOLLOWER with the new leader and its
// endpoint (KIP-951, Produce v10+, as Kafka's KafkaApis fills
// CurrentLeader when a delayed produce completes with that error), so the
// producer retries on the new leader without a metadata refresh.
func TestProduceWaitAnsweredOnLeaderMove(t *testing.T) {
	d := newDataHarness(t, 0)
	id := uuid(9)
	d.commit(topicRecord("moving", id), partitionRecord(id, 0, 1, []int32{1, 2}, []int32{1, 2}))
	p, ok := d.replicas.Partition(replica.TopicPartition{Topic: "moving"})
	if !ok {
		t.Fatal("moving-0 not hosted")
	}
	req := produceReq(11, -1, "moving", 0, recordBatch(1))
	req.TimeoutMillis = 15000 // far past the test's patience: only the move may answer it
	type answer struct {
		resp kmsg.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := d.client.Request(ctx, d.addr, req)
		answered <- answer{resp, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.Log().EndOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.Log().EndOffset() != 1 {
		t.Fatalf("the produce was not appended: log end %d", p.Log().EndOffset())
	}
	change := &records.PartitionChangeRecord{}
	change.Default()
	change.TopicID, change.PartitionID, change.Leader, change.ISR = id, 0, 2, []int32{2}
	d.commit(change)
	a := <-answered
	if a.err != nil {
		t.Fatal(a.err)
	}
	resp := a.resp.(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce waiting across the move: error %d, want NOT_LEADER_OR_FOLLOWER", sp.ErrorCode)
	}
	if sp.CurrentLeader.LeaderID != 2 || sp.CurrentLeader.LeaderEpoch != 1 {
		t.Fatalf("current leader %+v, want node 2 at epoch 1", sp.CurrentLeader)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Port != 19002 {
		t.Fatalf("leader endpoints %+v, want node 2 on port 19002", resp.Brokers)
	}
}
