package interop

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// BenchmarkOffsetCommit: one kadm client commits an offset of one partition
// (generation -1, an Empty group) b.N times in a row and reports the p50
// and p99 of the OffsetCommit round trip: the coordinator writes the
// commit to __consumer_offsets and answers once its high watermark passes
// it. RF 1 on one broker, RF 3 on three (the followers' fetches in the
// way), every node in one process:
//
//	go test ./interop -run '^$' -bench 'OffsetCommit' -benchtime 2000x
func BenchmarkOffsetCommitRF1(b *testing.B) { benchOffsetCommit(b, 1) }
func BenchmarkOffsetCommitRF3(b *testing.B) { benchOffsetCommit(b, 3) }

func benchOffsetCommit(b *testing.B, rf int) {
	c := newCluster(b, append(groupOpts(rf), Controllers(1), Brokers(rf))...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := newFranzAdminTB(b, c)
	if _, err := adm.adm.CreateTopic(ctx, 1, int16(rf), nil, "bench-commits"); err != nil {
		b.Fatal(err)
	}
	waitTopicEverywhere(b, c, "bench-commits")
	commit := func(i int) error {
		var os kadm.Offsets
		os.AddOffset("bench-commits", 0, int64(i), -1)
		resp, err := adm.adm.CommitOffsets(ctx, "bench-group", os)
		if err != nil {
			return err
		}
		return resp.Error()
	}
	waitFor(b, "a coordinator", 30*time.Second, func() bool { return commit(0) == nil })
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := commit(i); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
