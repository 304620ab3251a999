package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGroupTransactSession runs franz-go's consume-transform-produce
// loop (GroupTransactSession: TxnOffsetCommit inside each transaction)
// over 200 input records in two sessions with the same transactional id and
// group, the second resuming from the offsets the first committed in its
// transactions; the output read read_committed holds every input record
// exactly once.
func TestFranzGroupTransactSession(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1), Override("offsets.topic.replication.factor", "1"),
		Override("group.initial.rebalance.delay.ms", "0"),
		Override("transaction.state.log.replication.factor", "1"),
		Override("transaction.state.log.min.isr", "1"), Override("transaction.state.log.num.partitions", "4"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	for _, topic := range []string{"eos-in", "eos-out"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		waitTopicEverywhere(t, c, topic)
	}
	const n = 200
	in, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("eos-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for i := range n {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%03d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// session processes records until at least upTo have been committed
	// in all (across sessions) and returns the new total.
	session := func(done, upTo int) int {
		t.Helper()
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("eos-tx"),
			kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("eos-in"), kgo.DefaultProduceTopic("eos-out"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionTimeout(10*time.Second),
			kgo.FetchMaxPartitionBytes(1000))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for done < upTo {
			fs := s.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("after %d records: %v", done, ctx.Err())
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) {
				recs = append(recs, &kgo.Record{Value: append([]byte("out-"), r.Value...)})
			})
			for _, r := range recs {
				if err := s.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			committed, err := s.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Fatalf("End after %d records: %v", done, err)
			}
			if committed {
				done += len(recs)
			}
		}
		return done
	}
	done := session(0, n/2)
	session(done, n)

	out, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("eos-out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	seen := map[string]int{}
	total := 0
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	for total < n && rctx.Err() == nil {
		out.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	// Anything past n would be a duplicate: give it a moment to show.
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	for sctx.Err() == nil {
		out.PollFetches(sctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	for i := range n {
		if k := fmt.Sprintf("out-r%03d", i); seen[k] != 1 {
			t.Errorf("%s read %d times", k, seen[k])
		}
	}
	if total != n {
		t.Fatalf("read %d output records, want %d exactly once each", total, n)
	}
}
