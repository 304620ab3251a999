package controller

import (
	"testing"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// batchRecords decodes the data batches in bs.
func batchRecords(t *testing.T, bs []raftlog.Batch) [][]records.Record {
	var out [][]records.Record
	for _, b := range bs {
		if b.Control {
			continue
		}
		var recs []records.Record
		for r, err := range decodeBatch(nil, b) {
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r.rec)
		}
		out = append(out, recs)
	}
	return out
}

// TestControlledShutdownOver10kIsNotAtomic: a controlled shutdown moving
// 12,000 partitions at the default limits (10,000 records a batch) goes
// out as plain batches, no transaction markers (Kafka's
// ControllerResult.of). When only the first batch commits before the
// quorum leader changes, its moves stay in the committed image, and the
// next active controller's heartbeat moves exactly the partitions left,
// none twice. Before this change the moves were one metadata transaction:
// the committed first batch was held back, aborted by the next leader, and
// every move redone (issue 17: a 333k-partition shutdown never finished).
func TestControlledShutdownOver10kIsNotAtomic(t *testing.T) {
	e := newEnv(t, &testCase{})
	e.run(&testCase{cmd: "lead"})
	for _, id := range []string{"1", "2"} {
		e.request(e.buildRequest(&testCase{cmd: "register", args: map[string]string{"id": id}}))
		e.request(e.buildRequest(&testCase{cmd: "heartbeat", args: map[string]string{"id": id}}))
	}
	const perTopic = 6000
	for _, name := range []string{"a", "b"} {
		e.request(e.buildRequest(&testCase{cmd: "create-topics", input: []string{name + " partitions=6000 rf=2"}}))
	}
	if n := e.c.committed.visible().NumPartitions(); n != 2*perTopic {
		t.Fatalf("%d partitions created, want %d", n, 2*perTopic)
	}
	e.hold = true
	from := len(e.log.batches)
	e.out.Reset()
	e.request(e.buildRequest(&testCase{cmd: "heartbeat", args: map[string]string{"id": "1", "shutdown": ""}}))
	appended := batchRecords(t, e.log.batches[from:])
	if len(appended) < 2 {
		t.Fatalf("controlled shutdown appended %d batches, want several", len(appended))
	}
	total := 0
	for k, recs := range appended {
		if len(recs) > e.cfg.MaxRecordsPerBatch {
			t.Fatalf("batch %d has %d records, over %d", k, len(recs), e.cfg.MaxRecordsPerBatch)
		}
		for _, r := range recs {
			switch r.Message.(type) {
			case *records.BeginTransactionRecord, *records.EndTransactionRecord:
				t.Fatalf("batch %d holds a %s: the moves were written as a transaction", k, r.Message.Type())
			}
		}
		total += len(recs)
	}
	if total != 2*perTopic+1 { // InControlledShutdown, then one move per partition
		t.Fatalf("%d records appended, want %d", total, 2*perTopic+1)
	}

	// The first batch commits, the rest is lost with the leadership.
	e.commitN(1)
	e.run(&testCase{cmd: "leader", args: map[string]string{"node": "2", "epoch": "2"}})
	img := e.c.committed.visible()
	if b, _ := img.Broker(1); !b.InControlledShutdown {
		t.Fatal("broker 1 not in controlled shutdown in the committed image")
	}
	left := img.PartitionsWithISRMember(1)
	if want := 2*perTopic - (len(appended[0]) - 1); len(left) != want {
		t.Fatalf("%d partitions still have broker 1 in their ISR, want %d: the committed batch was not applied", len(left), want)
	}
	moved := map[image.TopicPartition]bool{}
	for _, r := range appended[0][1:] {
		pc := r.Message.(*records.PartitionChangeRecord)
		moved[image.TopicPartition{TopicID: pc.TopicID, Partition: pc.PartitionID}] = true
	}

	// Active again: the heartbeat moves only what is left.
	e.run(&testCase{cmd: "lead", args: map[string]string{"epoch": "3"}})
	from = len(e.log.batches)
	e.request(e.buildRequest(&testCase{cmd: "heartbeat", args: map[string]string{"id": "1", "shutdown": ""}}))
	n := 0
	for _, recs := range batchRecords(t, e.log.batches[from:]) {
		for _, r := range recs {
			pc, ok := r.Message.(*records.PartitionChangeRecord)
			if !ok {
				t.Fatalf("resumed shutdown wrote a %s", r.Message.Type())
			}
			if moved[image.TopicPartition{TopicID: pc.TopicID, Partition: pc.PartitionID}] {
				t.Fatalf("partition %d of a committed move moved again", pc.PartitionID)
			}
			n++
		}
	}
	if n != len(left) {
		t.Fatalf("resumed shutdown moved %d partitions, want %d", n, len(left))
	}
	if got := e.c.committed.visible().PartitionsWithISRMember(1); len(got) != 0 {
		t.Fatalf("%d partitions still have broker 1 in their ISR", len(got))
	}
	e.check()
}
