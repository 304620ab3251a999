package broker

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// followerWait is a leader (node 1) of n partitions replicated to node 2,
// and node 2's replica fetch of all n at their log end: the long poll of an
// idle follower, as each broker of a 3-broker cluster at 100k partitions
// (RF 3) holds from each of its two peers with ~33k partitions.
type followerWait struct {
	c     *ClientAPI
	parts []*replica.Partition
	req   *kmsg.FetchRequest
}

func newFollowerWait(tb testing.TB, n int) *followerWait {
	tb.Helper()
	m, err := replica.New(replica.Config{Dir: tb.TempDir(), BrokerID: 1, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	id := uuid(7)
	msgs := []records.Message{mvRecord(14),
		brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 9001)),
		brokerRecord(2, 11, false, nil, ep("PLAINTEXT", 9002)),
		topicRecord("wait", id)}
	for i := range n {
		msgs = append(msgs, partitionRecord(id, int32(i), 1, []int32{1, 2}, []int32{1, 2}))
	}
	d := image.NewDelta(image.Empty())
	for i, msg := range msgs {
		if err := d.Replay(int64(i), 1, records.Record{Version: versionFor(msg), Message: msg}); err != nil {
			tb.Fatal(err)
		}
	}
	img := d.Apply()
	SyncReplicas(m, 1, image.Empty(), img, zap.NewNop())
	c, err := NewClientAPI(ClientAPIConfig{NodeID: 1, ClusterID: testCluster, Metadata: staticSource{img},
		Replicas: m, ProducerIDs: noProducerIDs{}, Admin: &recordingAdmin{}, InterBrokerListener: "PLAINTEXT",
		Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	fw := &followerWait{c: c}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 2, 60_000, 1, 10<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "wait"
	for i := range n {
		p, ok := m.Partition(replica.TopicPartition{Topic: "wait", Partition: int32(i)})
		if !ok {
			tb.Fatalf("partition %d not hosted", i)
		}
		fw.parts = append(fw.parts, p)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = int32(i), 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	fw.req = req
	return fw
}

// round parks the follower's fetch (at log end on every partition), appends
// one batch to partition i and returns the fetch's answer once woken, with
// the time from the request to the parked wait and from the append to the
// answer.
func (fw *followerWait) round(tb testing.TB, i int) (sp kmsg.FetchResponseTopicPartition, park, wake time.Duration) {
	tb.Helper()
	for j := range fw.req.Topics[0].Partitions {
		fw.req.Topics[0].Partitions[j].FetchOffset = fw.parts[j].Log().EndOffset()
	}
	type answer struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		resp, err := fw.c.handleFetch(context.Background(), &protocol.Request{Key: fw.req.Key(),
			Version: fw.req.GetVersion(), Body: fw.req, Listener: "PLAINTEXT"})
		done <- answer{resp, err}
	}()
	for fw.c.fetchWaiting.Load() == 0 { // the fetch read every partition and found nothing
		runtime.Gosched()
	}
	park = time.Since(start)
	start = time.Now()
	if _, err := fw.parts[i].AppendAsLeader(recordBatch(1), replica.AppendOptions{RequiredAcks: 1,
		MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
		tb.Fatal(err)
	}
	a := <-done
	wake = time.Since(start)
	if a.err != nil {
		tb.Fatal(a.err)
	}
	resp := a.resp
	if sf, ok := resp.(*splicedFetch); ok {
		m, err := sf.materialize()
		sf.Release()
		if err != nil {
			tb.Fatal(err)
		}
		resp = m
	}
	fr := resp.(*kmsg.FetchResponse)
	for _, sp := range fr.Topics[0].Partitions {
		if len(sp.RecordBatches) > 0 {
			return sp, park, wake
		}
	}
	tb.Fatalf("woken fetch carries no records (want partition %d's append)", i)
	return sp, park, wake
}

// BenchmarkFollowerFetchWake is the time from an append on one of n idle
// partitions to the answer of the follower fetch parked on all n (issue 17:
// at 100k partitions acks=all produces waited minutes for followers). The
// answer re-reads the n partitions, so some growth with n is the read; the
// wait itself should not grow.
//
//	go test ./broker -run '^$' -bench BenchmarkFollowerFetchWake -benchtime 20x
func BenchmarkFollowerFetchWake(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			fw := newFollowerWait(b, n)
			var parks, wakes time.Duration
			b.ResetTimer()
			for i := range b.N {
				_, park, wake := fw.round(b, (i*7919)%n)
				parks += park
				wakes += wake
			}
			b.ReportMetric(float64(parks.Microseconds())/float64(b.N), "park_us/op")
			b.ReportMetric(float64(wakes.Microseconds())/float64(b.N), "wake_us/op")
		})
	}
}
