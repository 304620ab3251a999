package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkFranzTransaction: one franz-go transaction per op on one
// in-process broker (RF 1): BeginTransaction, one 100-byte record to each
// of 3 partitions, EndTransaction(commit) (AddPartitionsToTxn, Produce
// with the leader's verification, EndTxn, then COMMIT markers written by
// the coordinator before the next transaction may start):
//
//	go test ./interop -run '^$' -bench FranzTransaction -benchtime 300x
//
// ns/op is the time of one whole transaction as the producer sees it.
func BenchmarkFranzTransaction(b *testing.B) {
	c := newCluster(b, Controllers(1), Brokers(1), Override("transaction.state.log.replication.factor", "1"),
		Override("transaction.state.log.min.isr", "1"), Override("transaction.state.log.num.partitions", "4"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := newFranzAdminTB(b, c)
	if _, err := adm.adm.CreateTopic(ctx, 3, 1, nil, "bench-txn"); err != nil {
		b.Fatal(err)
	}
	waitTopicEverywhere(b, c, "bench-txn")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("bench-txn"),
		kgo.DefaultProduceTopic("bench-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 100)
	run := func() {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for p := range int32(3) {
			cl.Produce(ctx, &kgo.Record{Value: value, Partition: p}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	run() // the coordinator, __transaction_state and the producer id exist from here
	b.ResetTimer()
	for range b.N {
		run()
	}
}
