package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm.DeleteRecords trims a replicated topic on its leaders: the answer
// waits until the followers dropped the records too (low watermark), a
// consumer from the start begins at the new log start, and an offset above
// the high watermark is OFFSET_OUT_OF_RANGE; DescribeAllLogDirs lists every
// broker's log directory with its partitions and volume sizes.
func TestDeleteRecordsAndDescribeLogDirs(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(2))
	// A create with replication factor 2 needs both brokers unfenced; a
	// client may reach the first broker to serve an image with itself
	// unfenced before the second is.
	c.waitBrokersListed(t)
	checkDeleteRecordsAndLogDirs(t, c, func(adm *kadm.Client) {})
}

// The same on zk-legacy brokers, which serve the same handlers.
func TestLegacyDeleteRecordsAndDescribeLogDirs(t *testing.T) {
	t.Parallel()
	c, _ := newLegacyCluster(t, 2)
	checkDeleteRecordsAndLogDirs(t, c, func(*kadm.Client) { waitLegacyTopicEverywhere(t, c, "trim") })
}

func checkDeleteRecordsAndLogDirs(t *testing.T, c *cluster, created func(*kadm.Client)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 2, 2, nil, "trim"); err != nil {
		t.Fatal(err)
	}
	created(adm)
	const n = 200
	produceN(t, ctx, c.bootstrap(), "trim", n)
	waitFullISR(t, ctx, adm, "trim", 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, "trim")
	if err != nil {
		t.Fatal(err)
	}
	end0, _ := ends.Lookup("trim", 0)
	end1, _ := ends.Lookup("trim", 1)
	if end0.Offset < 2 {
		t.Fatalf("partition 0 has %d records", end0.Offset)
	}
	var trim kadm.Offsets
	trim.Add(kadm.Offset{Topic: "trim", Partition: 0, At: end0.Offset / 2})
	trim.Add(kadm.Offset{Topic: "trim", Partition: 1, At: -1}) // up to the high watermark
	resps, err := adm.DeleteRecords(ctx, trim)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: end0.Offset / 2, 1: end1.Offset} {
		r, ok := resps.Lookup("trim", p)
		if !ok || r.Err != nil || r.LowWatermark != want {
			t.Fatalf("DeleteRecords trim[%d]: %+v, want low watermark %d", p, r, want)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, "trim")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("trim", 0); s.Offset != end0.Offset/2 {
		t.Fatalf("log start of trim[0] is %d, want %d", s.Offset, end0.Offset/2)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"trim": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 || len(fs.Records()) == 0 || fs.Records()[0].Offset != end0.Offset/2 {
		t.Fatalf("consumed from the start: errors %v, first record %+v, want offset %d", errs, fs.Records(), end0.Offset/2)
	}

	var tooFar kadm.Offsets
	tooFar.Add(kadm.Offset{Topic: "trim", Partition: 0, At: end0.Offset + 10})
	resps, err = adm.DeleteRecords(ctx, tooFar)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.Lookup("trim", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords above the high watermark: %+v", r)
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 2 {
		t.Fatalf("log dirs of %d brokers", len(dirs))
	}
	for broker, ds := range dirs {
		if len(ds) != 1 {
			t.Fatalf("broker %d: %d log dirs", broker, len(ds))
		}
		for _, d := range ds {
			if d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
				t.Fatalf("broker %d dir %s: err %v total %d usable %d", broker, d.Dir, d.Err, d.TotalBytes, d.UsableBytes)
			}
			for p := range int32(2) {
				dp, ok := d.Topics.Lookup("trim", p)
				if !ok || dp.Size <= 0 || dp.OffsetLag != 0 || dp.IsFuture {
					t.Fatalf("broker %d trim[%d]: %+v (found %v)", broker, p, dp, ok)
				}
			}
		}
	}
}

// sweepDeleteRecords trims partition 0 of the sweep topic to its high
// watermark (the records the Produce sweep appended, which the Fetch
// sweep has read) and asks for an offset past it on partition 1.
func sweepDeleteRecords(ctx context.Context, e *sweepEnv, v int16) error {
	// The high watermark: the Produce sweep's batches and whatever markers
	// the WriteTxnMarkers sweep appended after them (ListOffsets v1 is
	// read_uncommitted, so latest is the high watermark).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = e.topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -1
	lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{lp}
	lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	lr, err := request[*kmsg.ListOffsetsResponse](ctx, e, lo, 1)
	if err != nil {
		return err
	}
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 || lr.Topics[0].Partitions[0].ErrorCode != 0 {
		return errors.New("ListOffsets latest of partition 0 failed")
	}
	hw := lr.Topics[0].Partitions[0].Offset
	if hw < e.produced {
		return fmt.Errorf("high watermark %d below the %d produced batches", hw, e.produced)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = e.topic
	for _, at := range []struct {
		p      int32
		offset int64
	}{{0, -1}, {1, 5}} {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = at.p, at.offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
	resp, err := request[*kmsg.DeleteRecordsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		return errors.New("answer lacks the partitions asked")
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.ErrorCode != 0 || p0.LowWatermark != hw {
		return codeOr(p0.ErrorCode, fmt.Errorf("trim to the high watermark %d: low watermark %d", hw, p0.LowWatermark))
	}
	if p1.ErrorCode != kerr.OffsetOutOfRange.Code || p1.LowWatermark != -1 {
		return codeOr(p1.ErrorCode, errors.New("offset 5 of an empty partition: want OFFSET_OUT_OF_RANGE"))
	}
	return nil
}

// sweepDescribeLogDirs asks for the sweep topic's partitions: one log
// directory with both, partition 0 holding the Produce sweep's batches.
func sweepDescribeLogDirs(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = e.topic, []int32{0, 1}
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{rt}
	resp, err := request[*kmsg.DescribeLogDirsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
		return codeOr(resp.ErrorCode, errors.New("want one log directory"))
	}
	d := resp.Dirs[0]
	if d.ErrorCode != 0 || d.Dir == "" || len(d.Topics) != 1 || d.Topics[0].Topic != e.topic || len(d.Topics[0].Partitions) != 2 {
		return codeOr(d.ErrorCode, errors.New("directory lacks the sweep topic's partitions"))
	}
	if d.Topics[0].Partitions[0].Size <= 0 {
		return errors.New("partition 0 is empty")
	}
	if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0) {
		return errors.New("v4 without volume sizes")
	}
	return nil
}

// codeOr is err with code's Kafka error when there is one.
func codeOr(code int16, err error) error {
	if code != 0 {
		return kafkaError(code, err)
	}
	return err
}
