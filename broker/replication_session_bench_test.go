package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
)

// BenchmarkFollowerSessionRound is the follower's side of one incremental
// fetch round in a session of n partitions, without the wire: building the
// request from the fetcher's n partitions (one moved), and reading back an
// answer of that one partition (issue 17: ~33k partitions per leader at
// 100k).
//
//	go test ./broker -run '^$' -bench BenchmarkFollowerSessionRound
func BenchmarkFollowerSessionRound(b *testing.B) {
	for _, n := range []int{1000, 10_000, 30_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			id := [16]byte{7}
			in := &replica.FetchRequest{ReplicaID: 2, BrokerEpoch: 11, MaxBytes: 10 << 20, MinBytes: 1}
			for i := range n {
				in.Partitions = append(in.Partitions, replica.FetchPartition{TopicPartition: replica.TopicPartition{Topic: "wait", Partition: int32(i)},
					TopicID: id, FetchOffset: 10, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20})
			}
			s := &followerSession{leader: 1}
			_, d := s.request(in, 16)
			s.answered(d, 5)
			resp := kmsg.NewPtrFetchResponse()
			resp.Version, resp.SessionID = 16, 5
			rt := kmsg.NewFetchResponseTopic()
			rt.TopicID = id
			rt.Partitions = append(rt.Partitions, kmsg.NewFetchResponseTopicPartition())
			resp.Topics = append(resp.Topics, rt)
			b.ResetTimer()
			for i := range b.N {
				p := (i * 7919) % n
				in.Partitions[p].FetchOffset++
				req, d := s.request(in, 16)
				if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
					b.Fatalf("incremental request names %+v, want the moved partition", req.Topics)
				}
				resp.Topics[0].Partitions[0].Partition = int32(p)
				as, err := fetchedPartitions(in, resp)
				if err != nil || len(as) != 1 || as[0].Topic != "wait" {
					b.Fatalf("answer %+v, %v", as, err)
				}
				s.answered(d, 5)
			}
		})
	}
}
