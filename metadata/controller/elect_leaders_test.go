package controller

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestElectLeadersHostileCounts: an ElectLeaders naming a million
// partition entries (one partition, repeated; 4 MB on the wire, well
// within a request frame) is refused at the top level before anything
// proportional to it is built: no per-partition results, no records, and
// far less allocated than the request itself. A body claiming more
// entries than it has bytes for does not decode at all.
func TestElectLeadersHostileCounts(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 3)
	run(t, c, fl, createTopic("t", 3, 2))
	const n = 1_000_000
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: make([]int32, n)}}
	wire := req.AppendTo(nil)
	dec := kmsg.NewPtrElectLeadersRequest()
	dec.Version = 2
	if err := dec.ReadFrom(wire); err != nil {
		t.Fatal(err)
	}
	before := len(fl.batches)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	resp := run(t, c, fl, dec).(*kmsg.ElectLeadersResponse)
	runtime.ReadMemStats(&ms1)
	if resp.ErrorCode != kerr.PolicyViolation.Code || len(resp.Topics) != 0 {
		t.Fatalf("answer: error %d, %d topics; want POLICY_VIOLATION and none", resp.ErrorCode, len(resp.Topics))
	}
	if len(fl.batches) != before {
		t.Fatalf("%d batches written", len(fl.batches)-before)
	}
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("handling allocated %d bytes for a %d-byte request", alloc, len(wire))
	}

	// 2^31-1 partitions claimed in a few bytes: the decoder refuses.
	short := kmsg.NewPtrElectLeadersRequest()
	short.Version = 1
	body := []byte{0}                             // election type
	body = binary.BigEndian.AppendUint32(body, 1) // one topic
	body = append(body, 0, 1, 't')
	body = binary.BigEndian.AppendUint32(body, 1<<31-1)
	if err := short.ReadFrom(body); err == nil {
		t.Fatal("a body claiming 2^31-1 partitions decoded")
	}
}

// TestElectLeadersErrorAnswerBounded: the answer to an ElectLeaders the
// controller does not handle (NOT_CONTROLLER on a standby) lists each
// named partition as Kafka's getErrorResponse does, but past
// maxElectErrorEntries only the top-level error.
func TestElectLeadersErrorAnswerBounded(t *testing.T) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	r := notController(req).(*kmsg.ElectLeadersResponse)
	if r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 ||
		r.Topics[0].Partitions[1].ErrorCode != kerr.NotController.Code {
		t.Fatalf("small request: %+v", r)
	}
	req.Topics[0].Partitions = make([]int32, maxElectErrorEntries)
	r = notController(req).(*kmsg.ElectLeadersResponse)
	if r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 0 {
		t.Fatalf("large request: error %d, %d topics", r.ErrorCode, len(r.Topics))
	}
}
