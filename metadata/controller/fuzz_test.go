package controller

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz/<Target>/seed-* from the fuzz targets' seeds")

// fuzzCap is the per-request record cap in FuzzControllerRequest: small, so
// that an iteration stays cheap while requests over it are still easy to find.
const fuzzCap = 2000

// fuzzInput is how a fuzz input names a request: byte 0 picks one of
// servedAPIs, byte 1 the version within its range, the rest is the body.
func fuzzInput(req kmsg.Request) []byte {
	i := slices.IndexFunc(servedAPIs, func(a apiRange) bool { return a.key == req.Key() })
	return append([]byte{byte(i), byte(req.GetVersion() - servedAPIs[i].min)}, req.AppendTo(nil)...)
}

func decodeFuzzInput(data []byte) kmsg.Request {
	if len(data) < 2 {
		return nil
	}
	a := servedAPIs[int(data[0])%len(servedAPIs)]
	req := kmsg.RequestForKey(a.key)
	req.SetVersion(a.min + int16(int(data[1])%int(a.max-a.min+1)))
	if err := req.ReadFrom(data[2:]); err != nil {
		return nil
	}
	return req
}

// saveSeeds writes seeds as Go fuzz corpus files when -write-corpus is set.
func saveSeeds(tb testing.TB, target string, seeds [][]byte) {
	if !*writeCorpus {
		return
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// fuzzCore is an active controller with brokers 1-3 registered and
// unfenced and topic "t" (3 partitions, replication factor 2), all committed.
func fuzzCore(tb testing.TB) (*core, *fakeLog) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(tb, fl, 3, func(cfg *Config) { cfg.MaxRecordsPerUserOp = fuzzCap })
	if r := run(tb, c, fl, createTopic("t", 3, 2)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		tb.Fatalf("setup: error %d", r.Topics[0].ErrorCode)
	}
	return c, fl
}

func controllerSeeds(tb testing.TB) [][]byte {
	c, _ := fuzzCore(tb)
	var seeds [][]byte
	add := func(r kmsg.Request) { seeds = append(seeds, fuzzInput(r)) }
	// Issue 12's crashes: 2^31-1 partitions, validate-only too, and
	// CreatePartitions to 2^31-1.
	huge := createTopic("huge", math.MaxInt32, 3)
	add(huge)
	hv := createTopic("huge", math.MaxInt32, 1)
	hv.ValidateOnly = true
	add(hv)
	cp := createPartitions("t", math.MaxInt32)
	add(cp)
	cpv := createPartitions("t", 5)
	cpv.Version = 1
	add(cpv)
	manual := createTopic("m", -1, -1)
	for i := range 3 {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), []int32{int32(i%3 + 1), 9, -1, int32(i%3 + 1)}
		manual.Topics[0].ReplicaAssignment = append(manual.Topics[0].ReplicaAssignment, a)
	}
	add(manual)
	small := createTopic("a.b", 4, 2)
	small.Topics[0].Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1")}}
	small.Version = 4
	add(small)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TopicNames = 3, []string{"t", "t", "nope"}
	add(del)
	add(registration(4))
	add(heartbeat(1, c.pending.regOffsets[1], 1<<40))
	shut := heartbeat(2, c.pending.regOffsets[2], 1<<40)
	shut.WantShutdown = true
	add(shut)
	fence := heartbeat(3, c.pending.regOffsets[3], 0)
	fence.WantFence = true
	add(fence)
	un := kmsg.NewPtrUnregisterBrokerRequest()
	un.BrokerID = 2
	add(un)
	pids := kmsg.NewPtrAllocateProducerIDsRequest()
	pids.BrokerID, pids.BrokerEpoch = 1, c.pending.regOffsets[1]
	add(pids)
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.EndpointType = 1, 2
	add(dc)
	// ElectLeaders: every partition (null), unclean with unknown and
	// repeated names, an unknown election type, v0.
	all := kmsg.NewPtrElectLeadersRequest()
	all.Version = 2
	add(all)
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version, el.ElectionType = 2, 1
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 1, 7, -1}}, {Topic: "nope", Partitions: []int32{0}}}
	add(el)
	bad := kmsg.NewPtrElectLeadersRequest()
	bad.Version, bad.ElectionType = 1, 9
	bad.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{2}}}
	add(bad)
	v0 := kmsg.NewPtrElectLeadersRequest()
	v0.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	add(v0)
	return seeds
}

// FuzzControllerRequest decodes arbitrary bytes as any request the
// controller serves, at any version it accepts, and runs it through the
// production handler on an active controller (core.handle, then commit).
// Invariants: no panic; an answer of the request's own kind; the committed
// log replays from scratch into the controller's own image, which passes
// the image checks; a CreateTopics or CreatePartitions answer names exactly
// the requested topics; a user operation writes at most the cap and a
// validate-only one nothing.
func FuzzControllerRequest(f *testing.F) {
	seeds := controllerSeeds(f)
	saveSeeds(f, "FuzzControllerRequest", seeds)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := decodeFuzzInput(data)
		if req == nil {
			return
		}
		c, fl := fuzzCore(t)
		before := len(fl.batches)
		var resp kmsg.Response
		c.handle(req, 0, func(r kmsg.Response) { resp = r })
		commitAll(t, c, fl)
		if resp == nil || resp.Key() != req.Key() {
			t.Fatalf("%T answered with %T", req, resp)
		}
		written := userRecords(t, fl.batches[before:])
		checkWritten(t, req, written)
		want := replayLog(t, fl.batches)
		got := c.committed.visible()
		if !got.Equal(want) {
			t.Fatalf("image differs from replay:\n%s\n--- replay:\n%s", got.Dump(), want.Dump())
		}
		if err := got.Check(); err != nil {
			t.Fatal(err)
		}
		if err := got.CheckLeaders(); err != nil {
			t.Fatal(err)
		}
		checkTopicsAnswered(t, req, resp)
	})
}

// userRecords counts the records in batches, transaction markers aside.
func userRecords(t *testing.T, batches []raftlog.Batch) int {
	n := 0
	for _, b := range batches {
		if b.Control {
			continue
		}
		for r, err := range decodeBatch(nil, b) {
			if err != nil {
				t.Fatal(err)
			}
			switch r.rec.Message.(type) {
			case *records.BeginTransactionRecord, *records.EndTransactionRecord:
			default:
				n++
			}
		}
	}
	return n
}

func checkWritten(t *testing.T, req kmsg.Request, written int) {
	validateOnly := false
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		validateOnly = r.ValidateOnly
	case *kmsg.CreatePartitionsRequest:
		validateOnly = r.ValidateOnly
	case *kmsg.DeleteTopicsRequest, *kmsg.ElectLeadersRequest:
	default:
		return
	}
	if written > fuzzCap {
		t.Fatalf("%d records written, cap %d", written, fuzzCap)
	}
	if validateOnly && written > 0 {
		t.Fatalf("validate-only request wrote %d records", written)
	}
}

func checkTopicsAnswered(t *testing.T, req kmsg.Request, resp kmsg.Response) {
	var asked, answered []string
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, x := range r.Topics {
			asked = append(asked, x.Topic)
		}
		for _, x := range resp.(*kmsg.CreateTopicsResponse).Topics {
			answered = append(answered, x.Topic)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, x := range r.Topics {
			asked = append(asked, x.Topic)
		}
		for _, x := range resp.(*kmsg.CreatePartitionsResponse).Topics {
			answered = append(answered, x.Topic)
		}
	case *kmsg.ElectLeadersRequest:
		er := resp.(*kmsg.ElectLeadersResponse)
		if r.Topics == nil || er.ErrorCode == kerr.PolicyViolation.Code {
			return // every topic, or refused before looking (top-level error only)
		}
		for _, x := range r.Topics {
			asked = append(asked, x.Topic)
		}
		for _, x := range er.Topics {
			answered = append(answered, x.Topic)
		}
	default:
		return
	}
	asked, answered = slices.Compact(slices.Sorted(slices.Values(asked))), slices.Compact(slices.Sorted(slices.Values(answered)))
	if !slices.Equal(asked, answered) {
		t.Fatalf("asked for %q, answered %q", asked, answered)
	}
}
