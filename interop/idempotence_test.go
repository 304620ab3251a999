package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/storage"
)

// idempotentBatch is a producer's batch of n records with producer id,
// epoch and base sequence set, as a client builds it.
func idempotentBatch(n int, pid int64, epoch int16, seq int32, tag string) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	raw := storage.EncodeBatch(0, -1, time.Now().UnixMilli(), false, recs).Raw
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func produceTo(ctx context.Context, t *testing.T, cl *protocol.Client, addr, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// TestIdempotentRetryAcrossLeaderChange: an idempotent producer's batch is
// acknowledged by the leader of a RF 3 partition; the leader shuts down; the
// producer's retry of that batch, sent to the new leader, is answered with
// the original offset and not appended again, and the next sequence goes
// on. The new leader knows the producer only from the batches it
// replicated as a follower.
func TestIdempotentRetryAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test")
	}
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin).adm
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	waitTopicEverywhere(t, c, "idem")
	waitFullISR(t, ctx, adm, "idem", 10*time.Second)
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "interop-idempotence"})
	defer cl.Close()
	leader := leaderOf(t, ctx, adm, "idem")
	ip, err := cl.Request(ctx, c.brokerAddr(leader), kmsg.NewPtrInitProducerIDRequest())
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch := ip.(*kmsg.InitProducerIDResponse).ProducerID, ip.(*kmsg.InitProducerIDResponse).ProducerEpoch
	first := idempotentBatch(3, pid, epoch, 0, "a")
	if sp := produceTo(ctx, t, cl, c.brokerAddr(leader), "idem", first); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("first batch: error %d offset %d", sp.ErrorCode, sp.BaseOffset)
	}
	if sp := produceTo(ctx, t, cl, c.brokerAddr(leader), "idem", idempotentBatch(2, pid, epoch, 3, "b")); sp.ErrorCode != 0 || sp.BaseOffset != 3 {
		t.Fatalf("second batch: error %d offset %d", sp.ErrorCode, sp.BaseOffset)
	}
	c.stop(leader)
	var next int32
	waitFor(t, "a new leader", 30*time.Second, func() bool {
		parts, err := partitionISR(ctx, adm, "idem")
		next = parts[0].Leader
		return err == nil && next >= 0 && next != leader
	})
	// The producer did not see the second batch's answer and retries it, then
	// the first (an older in-flight request), at the new leader.
	var sp kmsg.ProduceResponseTopicPartition
	waitFor(t, "the new leader takes the retry", 10*time.Second, func() bool {
		sp = produceTo(ctx, t, cl, c.brokerAddr(next), "idem", idempotentBatch(2, pid, epoch, 3, "b"))
		return sp.ErrorCode == 0
	})
	if sp.BaseOffset != 3 {
		t.Fatalf("retry of the second batch at the new leader: offset %d, want the original 3", sp.BaseOffset)
	}
	if sp = produceTo(ctx, t, cl, c.brokerAddr(next), "idem", first); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("retry of the first batch: error %d offset %d, want the original 0", sp.ErrorCode, sp.BaseOffset)
	}
	if sp = produceTo(ctx, t, cl, c.brokerAddr(next), "idem", idempotentBatch(1, pid, epoch, 5, "c")); sp.ErrorCode != 0 || sp.BaseOffset != 5 {
		t.Fatalf("next batch: error %d offset %d, want 5 (no duplicate before it)", sp.ErrorCode, sp.BaseOffset)
	}
}
