package interop

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// TestFranzTransactions: franz-go's transactional producer against one
// broker: FindCoordinator for its transactional id (creating
// __transaction_state), InitProducerId, AddPartitionsToTxn, transactional
// Produce, EndTxn commit and abort. A read_committed consumer sees the
// committed records only, a read_uncommitted one all of them; neither sees
// the markers. A second producer with the same transactional id fences the
// first.
func TestFranzTransactions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1), Override("transaction.state.log.replication.factor", "1"),
		Override("transaction.state.log.min.isr", "1"), Override("transaction.state.log.num.partitions", "4"))
	franzTransactions(t, c, waitTopicEverywhere, 2, 11)
}

// franzTransactions is the body of TestFranzTransactions against c, whose
// one broker is brokerID and serves Produce up to produceVersion;
// waitTopic waits until c's brokers host a new topic.
func franzTransactions(t *testing.T, c *cluster, waitTopic func(testing.TB, *cluster, string), brokerID int32, produceVersion int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "txn-out"); err != nil {
		t.Fatal(err)
	}
	waitTopic(t, c, "txn-out")
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("tx-interop"),
		kgo.DefaultProduceTopic("txn-out"), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	txn(true, "c1", "c2")
	txn(false, "a1")
	txn(true, "c3")
	read := func(level kgo.IsolationLevel) []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("txn-out"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []string
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		for rctx.Err() == nil {
			fs := cl.PollFetches(rctx)
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}
	if got := read(kgo.ReadCommitted()); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("read_committed read %v", got)
	}
	if got := read(kgo.ReadUncommitted()); !slices.Equal(got, []string{"c1", "c2", "a1", "c3"}) {
		t.Fatalf("read_uncommitted read %v", got)
	}
	// librdkafka (kcat) reads read_committed by default: it drops the
	// aborted record by the AbortedTransactions answer, and the markers.
	if bin, err := exec.LookPath("kcat"); err == nil {
		out, err := exec.CommandContext(ctx, bin, "-C", "-b", strings.Join(c.bootstrap(), ","), "-t", "txn-out", "-e", "-q", "-f", "%s\n").Output()
		if err != nil {
			t.Fatalf("kcat: %v", err)
		}
		if got := strings.Fields(string(out)); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
			t.Fatalf("kcat (read_committed) read %v", got)
		}
	}
	// A second instance with the same transactional id fences the first.
	second, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("tx-interop"),
		kgo.DefaultProduceTopic("txn-out"))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Value: []byte("s1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err == nil {
		if err := producer.EndTransaction(ctx, kgo.TryCommit); err == nil {
			t.Fatal("the fenced producer committed a transaction")
		}
	}
	if got := read(kgo.ReadCommitted()); !slices.Equal(got, []string{"c1", "c2", "c3", "s1"}) {
		t.Fatalf("read_committed after the fencing read %v", got)
	}
	rawTransactionalProduce(t, ctx, c, brokerID, produceVersion)
}

// rawTransactionalProduce: the broker admits a transactional batch only for
// a partition in its producer's ongoing transaction (the coordinator is on
// this broker), and never without a transactional id; Produce at
// version v to broker brokerID.
func rawTransactionalProduce(t *testing.T, ctx context.Context, c *cluster, brokerID int32, v int16) {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop-txn-raw"})
	defer cl.Close()
	addr := c.brokerAddr(brokerID)
	id := "tx-raw"
	var pid int64
	var epoch int16
	waitFor(t, "InitProducerId for tx-raw", 10*time.Second, func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := cl.Request(ctx, addr, req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.InitProducerIDResponse)
		pid, epoch = r.ProducerID, r.ProducerEpoch
		return r.ErrorCode == 0
	})
	batch := idempotentBatch(1, pid, epoch, 0, "raw")
	binary.BigEndian.PutUint16(batch[21:], 0x10) // transactional
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	produce := func(txnID *string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.TransactionID, req.Acks, req.TimeoutMillis = txnID, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "txn-out"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		resp, err := cl.Request(ctx, addr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(&id); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a transactional batch before AddPartitionsToTxn: error %d, want INVALID_TXN_STATE", code)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "txn-out", []int32{0}
	add.Topics = append(add.Topics, at)
	if resp, err := cl.Request(ctx, addr, add); err != nil || resp.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %+v %v", resp, err)
	}
	if code := produce(nil); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a transactional batch without a transactional id: error %d, want INVALID_TXN_STATE", code)
	}
	if code := produce(&id); code != 0 {
		t.Fatalf("a transactional batch in its transaction: error %d", code)
	}
}

// TestFranzTransactionsAcrossBrokers: three brokers, __transaction_state at
// replication factor 3, an output topic whose partitions are led by
// different brokers: the coordinator sends markers to the other leaders
// with WriteTxnMarkers, and read_committed consumers see each committed
// transaction on every partition and no aborted one.
func TestFranzTransactionsAcrossBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers")
	}
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3), Override("transaction.state.log.num.partitions", "3"))
	waitRunning(t, c) // every broker unfenced, so the partitions' leaders spread over them
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 3, 2, nil, "txn-spread"); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "txn-spread")
	parts, err := partitionISR(ctx, adm, "txn-spread")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range parts {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("txn-spread's partitions are all led by %v: no marker would cross brokers", leaders)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("tx-spread"),
		kgo.DefaultProduceTopic("txn-spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	want := map[string]bool{}
	for i, commit := range []bool{true, false, true} {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			v := []byte{byte('a' + i), byte('0' + p)}
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: v, Partition: p}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				want[string(v)] = true
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("txn-spread"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]bool{}
	waitFor(t, "every committed record", 20*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			if !want[string(r.Value)] {
				t.Errorf("read_committed read %s (partition %d), not committed", r.Value, r.Partition)
			}
			got[string(r.Value)] = true
		})
		return len(got) == len(want)
	})
	rawVerifiedAcrossBrokers(t, ctx, c, adm)
}

// rawVerifiedAcrossBrokers: a transactional batch sent to a partition
// leader that is not the id's coordinator is refused until the partition
// was added to the transaction (the leader asks the coordinator, KIP-890),
// then admitted.
func rawVerifiedAcrossBrokers(t *testing.T, ctx context.Context, c *cluster, adm *kadm.Client) {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop-txn-verify"})
	defer cl.Close()
	id := "tx-raw-spread"
	var coordinator int32
	waitFor(t, "the coordinator of "+id, 10*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(3)
		req.CoordinatorType, req.CoordinatorKey = 1, id
		resp, err := cl.Request(ctx, c.bootstrap()[0], req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		coordinator = r.NodeID
		return r.ErrorCode == 0
	})
	parts, err := partitionISR(ctx, adm, "txn-spread")
	if err != nil {
		t.Fatal(err)
	}
	partition, leader := int32(-1), int32(-1)
	for p, d := range parts {
		if d.Leader != coordinator {
			partition, leader = p, d.Leader
		}
	}
	if partition < 0 {
		t.Fatalf("every partition of txn-spread is led by the coordinator %d", coordinator)
	}
	var pid int64
	var epoch int16
	waitFor(t, "InitProducerId for "+id, 10*time.Second, func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := cl.Request(ctx, c.brokerAddr(coordinator), req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.InitProducerIDResponse)
		pid, epoch = r.ProducerID, r.ProducerEpoch
		return r.ErrorCode == 0
	})
	batch := idempotentBatch(1, pid, epoch, 0, "raw")
	binary.BigEndian.PutUint16(batch[21:], 0x10) // transactional
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	produce := func() int16 {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(11)
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "txn-spread"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, batch
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		resp, err := cl.Request(ctx, c.brokerAddr(leader), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a transactional batch at broker %d before AddPartitionsToTxn at coordinator %d: error %d, want INVALID_TXN_STATE",
			leader, coordinator, code)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "txn-spread", []int32{partition}
	add.Topics = append(add.Topics, at)
	if resp, err := cl.Request(ctx, c.brokerAddr(coordinator), add); err != nil || resp.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %+v %v", resp, err)
	}
	if code := produce(); code != 0 {
		t.Fatalf("the batch once its partition is in the transaction: error %d", code)
	}
}

// TestTransactionSurvivesCoordinatorKill: the broker coordinating a
// transactional id is killed while the producer's transaction is open; the
// new leader of the id's __transaction_state partition loads the
// transaction from the log and the producer commits it there: a
// read_committed consumer reads the records of that transaction and of
// the one before it.
func TestTransactionSurvivesCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test")
	}
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3), Override("transaction.state.log.num.partitions", "1"))
	waitRunning(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "txn-failover"); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "txn-failover")
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("tx-failover"),
		kgo.DefaultProduceTopic("txn-failover"), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce := func(v string) {
		t.Helper()
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("before")
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "__transaction_state")
	waitFullISR(t, ctx, adm, "__transaction_state", 10*time.Second)
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("during")
	coordinator := leaderOf(t, ctx, adm, "__transaction_state")
	c.nodes[coordinator].Kill()
	delete(c.nodes, coordinator)
	waitFor(t, "a new transaction coordinator", 30*time.Second, func() bool {
		parts, err := partitionISR(ctx, adm, "__transaction_state")
		return err == nil && parts[0].Leader >= 0 && parts[0].Leader != coordinator
	})
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit at the new coordinator: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("txn-failover"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	waitFor(t, "both transactions' records", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return len(got) >= 2
	})
	if !slices.Equal(got, []string{"before", "during"}) {
		t.Fatalf("read_committed read %v", got)
	}
}
