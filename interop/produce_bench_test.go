package interop

import (
	"context"
	"crypto/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceFranz: franz-go with its defaults (idempotent, acks=-1,
// snappy, linger 0) produces 1 KB records to a 3-partition topic on one
// in-process broker (RF 1), then a consumer reads them back:
//
//	go test ./interop -run '^$' -bench ProduceFranz -benchtime 200000x
//
// It reports produce MB/s, the p50/p99 of per-record ack latency while all
// b.N records are queued at once (so latency includes queueing in the
// client), and the consume MB/s. Record values are random (incompressible).
// One process, loopback, no replication: a ceiling for this slice of the data
// plane, not a comparison with Kafka.
func BenchmarkProduceFranz(b *testing.B) { benchProduceFranz(b, 1, 1) }

// BenchmarkProduceFranzRF3 is BenchmarkProduceFranz on three in-process
// brokers with RF 3: every acks=-1 ack waits for both followers' fetches.
//
//	go test ./interop -run '^$' -bench ProduceFranzRF3 -benchtime 100000x
func BenchmarkProduceFranzRF3(b *testing.B) { benchProduceFranz(b, 3, 3) }

func benchProduceFranz(b *testing.B, brokers int, rf int16) {
	c := newCluster(b, Controllers(1), Brokers(brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := newFranzAdminTB(b, c)
	if _, err := adm.adm.CreateTopic(ctx, 3, rf, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	waitTopicEverywhere(b, c, "bench")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("bench"),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	_, _ = rand.Read(value) // incompressible, so snappy does not shrink the work away
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		wg.Add(1)
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(sent)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)*1024/elapsed.Seconds()/1e6, "produce-MB/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	start = time.Now()
	for n := 0; n < b.N; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		n += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)*1024/time.Since(start).Seconds()/1e6, "consume-MB/s")
}

// newFranzAdminTB is newFranzAdmin for benchmarks.
func newFranzAdminTB(b *testing.B, c *cluster) *franzAdmin {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return &franzAdmin{cl: cl, adm: kadm.NewClient(cl)}
}
