package legacyzk

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkCreateTopicWithExisting measures creating one topic of 100
// partitions (RF 3, 3 brokers) on a cluster that already has existing
// partitions, on the in-memory ZooKeeper so that what the controller and
// the brokers do per create is what is measured, not ZooKeeper's fsyncs.
// Kafka's controller creates a topic in time proportional to its own
// partitions (processTopicChange reads only the new topics, and
// onNewPartitionCreation pushes only their partitions), so ns/partition
// must stay flat across the sub-benchmarks. Each iteration ends when
// every broker's cache shows every new partition with a leader. Reported
// besides wall time: cpu-ns/partition, the CPU time (user + system) the
// whole process (controller and brokers) spent per created partition,
// which the machine's load disturbs far less than wall time.
func BenchmarkCreateTopicWithExisting(b *testing.B) {
	for _, existing := range []int{1000, 10000, 30000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			benchCreateTopic(b, existing, 100)
		})
	}
}

func benchCreateTopic(b *testing.B, existing, partitions int) {
	srv := NewMemServer()
	c := &cluster{t: b, brokers: map[int32]*Broker{}, dial: memDial(srv), mem: srv, admin: srv.Connect()}
	b.Cleanup(func() { c.admin.Close() })
	seedTopics(b, c.admin, existing/1000, 1000, []int32{1, 2, 3})
	for _, id := range []int32{1, 2, 3} {
		c.start(id)
	}
	waitCaches := func(topic string, n int) {
		waitFor(b, 5*time.Minute, "caches to show "+topic, func() (bool, string) {
			for _, br := range c.liveBrokers() {
				if !hasLeaders(br.Image(), topic, n) {
					return false, fmt.Sprintf("broker %d", br.ID())
				}
			}
			return true, ""
		})
	}
	waitCaches(fmt.Sprintf("t%04d", existing/1000-1), 1000)
	ctrl := c.controller()
	// The failover's pushes (every partition to every broker) are all
	// answered before the timing starts.
	waitFor(b, 5*time.Minute, "the failover's pushes", func() (bool, string) {
		var queued int64
		if err := ctrl.ctrl.call(context.Background(), func() {
			for _, n := range ctrl.ctrl.chans.queueSizes() {
				queued += n
			}
		}); err != nil {
			return false, err.Error()
		}
		return queued == 0, fmt.Sprintf("%d queued", queued)
	})
	ctx := context.Background()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		topic := fmt.Sprintf("new%06d", i)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 0
		resp, err := ctrl.CreateTopics(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			b.Fatalf("create %s: error %d", topic, code)
		}
		waitCaches(topic, partitions)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*partitions), "ns/partition")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N*partitions), "cpu-ns/partition")
}

// processCPU is the user + system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
