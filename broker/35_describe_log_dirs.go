package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// DescribeLogDirs: v0-v4 (v1 ThrottleMillis semantics, v2 flexible
// KIP-482, v3 top-level ErrorCode, v4 TotalBytes and UsableBytes KIP-827),
// as Kafka's ReplicaManager.describeLogDirs.
//
// kraftd has one log directory (the first of log.dirs): it is listed with
// the hosted partitions the request names (Topics null: all of them), each
// with its log's size in bytes, OffsetLag max(high watermark - log end, 0)
// (Kafka's getLogEndOffsetLag for a current replica; there are no future
// replicas) and IsFuture false; v4 adds the volume's total and usable bytes
// (-1 when unknown). The log directory is never offline here, so no error.
// As Kafka's (which lists every log its LogManager holds), the logs loaded
// at startup that no partition hosts yet are listed too (a zk-legacy
// broker's before the controller's LeaderAndIsr names them, or a deleted
// topic's), with OffsetLag -1 (INVALID_OFFSET_LAG: no replica).
func (c *ClientAPI) handleDescribeLogDirs(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := body.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var wanted map[replica.TopicPartition]bool
	if body.Topics != nil {
		wanted = map[replica.TopicPartition]bool{}
		for _, t := range body.Topics {
			for _, p := range t.Partitions {
				wanted[replica.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	ld := c.cfg.Replicas.Dir()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = ld.Path, ld.TotalBytes, ld.UsableBytes
	// Loaded before Hosted: a log adopted in between is then in both (and
	// listed once, as hosted), never in neither.
	loaded := c.cfg.Replicas.Loaded()
	var entries []replica.LoadedLog
	lags := map[replica.TopicPartition]int64{}
	for _, tp := range c.cfg.Replicas.Hosted() {
		p, ok := c.cfg.Replicas.Partition(tp)
		if !ok || wanted != nil && !wanted[tp] {
			continue
		}
		entries = append(entries, replica.LoadedLog{TopicPartition: tp, Size: p.Log().Size()})
		lags[tp] = max(p.HighWatermark()-p.Log().EndOffset(), 0)
	}
	for _, l := range loaded {
		if _, hosted := lags[l.TopicPartition]; !hosted && (wanted == nil || wanted[l.TopicPartition]) {
			entries = append(entries, l)
		}
	}
	slices.SortFunc(entries, func(a, b replica.LoadedLog) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for _, e := range entries {
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != e.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = e.Topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size, dp.OffsetLag = e.Partition, e.Size, -1
		if lag, hosted := lags[e.TopicPartition]; hosted {
			dp.OffsetLag = lag
		}
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, dp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
