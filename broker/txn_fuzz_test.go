package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

type countingProducerIDs struct{ next int64 }

func (p *countingProducerIDs) NextProducerID(context.Context) (int64, error) {
	p.next++
	return p.next, nil
}

// FuzzTxnAPIs decodes arbitrary bytes as a request of the transaction APIs
// (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn,
// WriteTxnMarkers, DescribeProducers, DescribeTransactions,
// ListTransactions) at any version served, and runs the real handler on a
// broker that leads foo-0 and both partitions of a 2-partition
// __transaction_state. Byte 0 picks the API, byte 1 the version; the rest
// is the body. Invariants: no panic, an answer of the request's kind.
func FuzzTxnAPIs(f *testing.F) {
	apis := []int16{10, 22, 24, 26, 27, 61, 65, 66}
	add := func(req kmsg.Request) {
		i := 0
		for apis[i] != req.Key() {
			i++
		}
		f.Add(append([]byte{byte(i), byte(req.GetVersion())}, req.AppendTo(nil)...))
	}
	id := "fuzz-tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID, ip.TransactionTimeoutMillis = 4, &id, 60000
	add(ip)
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version, ap.TransactionalID, ap.ProducerID = 3, id, 1
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = "foo", []int32{0, 1}
	ap.Topics = append(ap.Topics, apt)
	add(ap)
	et := kmsg.NewPtrEndTxnRequest()
	et.Version, et.TransactionalID, et.ProducerID, et.Commit = 3, id, 1, true
	add(et)
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Topics = 1, []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "foo", Partitions: []int32{0}}}
	wm.Markers = append(wm.Markers, m)
	add(wm)
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version, lt.StateFilters = 1, []string{"Ongoing"}
	add(lt)

	rm, err := replica.New(replica.Config{Dir: f.TempDir(), BrokerID: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = rm.Close() })
	for _, tp := range []replica.TopicPartition{{Topic: "foo", Partition: 0}, {Topic: txn.Topic, Partition: 0}, {Topic: txn.Topic, Partition: 1}} {
		if err := rm.Apply(replica.PartitionState{TopicPartition: tp, TopicID: [16]byte{byte(tp.Partition + 1), 7}, Leader: 1,
			LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
			f.Fatal(err)
		}
	}
	c, err := NewClientAPI(ClientAPIConfig{NodeID: 1, ClusterID: testCluster, Metadata: staticSource{legacyImage(f)},
		Admin: echoAdmin{}, Replicas: rm, ProducerIDs: &countingProducerIDs{}, Txns: TxnConfig{NumPartitions: 2, MinInsyncReplicas: 1},
		InterBrokerListener: "PLAINTEXT"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.Close)
	reg := protocol.NewRegistry()
	c.Register(reg)
	c.Txns().Tick(0)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := apis[int(data[0])%len(apis)]
		minV, maxV, h, ok := reg.Lookup(key)
		if !ok {
			t.Fatalf("key %d not registered", key)
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(minV + int16(int(data[1])%int(maxV-minV+1)))
		if err := req.ReadFrom(data[2:]); err != nil {
			return
		}
		resp, err := h(context.Background(), &protocol.Request{Key: key, Version: req.GetVersion(), Body: req, Listener: "PLAINTEXT"})
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if resp == nil || resp.Key() != key {
			t.Fatalf("%T answered with %T", req, resp)
		}
	})
}
