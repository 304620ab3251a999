package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw kmsg fetches through kgo against a real broker: a full fetch at epoch
// 0 opens a KIP-227 session, the next epoch is incremental (no news: no
// partitions), a replayed epoch is INVALID_FETCH_SESSION_EPOCH, an unknown
// session FETCH_SESSION_ID_NOT_FOUND. franz-go's own consumers (the
// produce/consume tests) fetch in sessions by default.
func TestFetchSessionErrors(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Controllers(1), Brokers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := newFranzAdmin(t, c).(*franzAdmin)
	if _, err := adm.adm.CreateTopic(ctx, 1, 1, nil, "sess"); err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, c.bootstrap(), "sess", 10)
	var leader int32 = -1
	var topicID [16]byte
	for leader < 0 {
		md, err := adm.adm.Metadata(ctx, "sess")
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := md.Topics["sess"].Partitions[0]; ok {
			leader, topicID = p.Leader, md.Topics["sess"].ID
		}
	}
	br := adm.cl.Broker(int(leader))
	fetch := func(id, epoch int32, offset int64) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		// kgo sends at the highest version both sides have (v16 here):
		// the topic goes by id, and by name for older versions.
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if offset >= 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "sess", topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := br.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	full := fetch(0, 0, 0)
	if full.ErrorCode != 0 || full.SessionID == 0 || len(full.Topics) != 1 || len(full.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("full fetch: error %d session %d topics %+v", full.ErrorCode, full.SessionID, full.Topics)
	}
	if inc := fetch(full.SessionID, 1, 10); inc.ErrorCode != 0 || inc.SessionID != full.SessionID || len(inc.Topics) != 0 {
		t.Fatalf("incremental at the end: error %d session %d topics %+v", inc.ErrorCode, inc.SessionID, inc.Topics)
	}
	if stale := fetch(full.SessionID, 1, -1); stale.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("replayed epoch: error %d", stale.ErrorCode)
	}
	if unknown := fetch(full.SessionID+1, 1, -1); unknown.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d", unknown.ErrorCode)
	}
}
