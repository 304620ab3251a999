package app

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/metadata/controller"
	"github.com/kraftd/kraftd/protocol"
)

func TestMaxRecordsPerUserOpDefault(t *testing.T) {
	if got := DefaultConfig().ControllerMaxRecordsPerUserOp; got != controller.DefaultMaxRecordsPerUserOp {
		t.Fatalf("controller.max.records.per.user.op default %d, controller's %d", got, controller.DefaultMaxRecordsPerUserOp)
	}
	if legacyzk.DefaultMaxRecordsPerUserOp != controller.DefaultMaxRecordsPerUserOp {
		t.Fatalf("zk-legacy brokers' default cap %d, the controller's %d", legacyzk.DefaultMaxRecordsPerUserOp, controller.DefaultMaxRecordsPerUserOp)
	}
}

func createTopicsReq(name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return req
}

// Issue 12: CreateTopics with NumPartitions 2147483647 sent to a broker is
// forwarded over the wire to the active controller, which answers
// POLICY_VIOLATION instead of allocating 51 GB; the cap is the
// controller.max.records.per.user.op key.
func TestHugeCreateThroughBrokerIsPolicyViolation(t *testing.T) {
	a, err := New(ephemeralConfig(t,
		Setting{"controller.quorum.voters", "1@127.0.0.1:0"},
		Setting{"broker.heartbeat.interval.ms", "100"},
		Setting{"controller.max.records.per.user.op", "10"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "limits-test"})
	defer cl.Close()
	addr := a.Addr("PLAINTEXT").String()
	create := func(name string, partitions int32) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		resp, err := cl.Request(ctx, addr, createTopicsReq(name, partitions))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	// The broker must be registered and unfenced before a topic with one
	// replica can be placed.
	if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v", err)
	}
	if rt := create("ready", 9); rt.ErrorCode != 0 {
		t.Fatalf("9 partitions (10 records, the cap): error %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
	// Over 10,000 partitions Kafka's partition cap answers first; under it,
	// the record cap.
	for n, want := range map[int32]string{
		math.MaxInt32: "Excessively large number of partitions per request.",
		10:            "Unable to perform excessively large batch operation.",
	} {
		rt := create("huge", n)
		if rt.ErrorCode != kerr.PolicyViolation.Code || rt.ErrorMessage == nil || *rt.ErrorMessage != want {
			t.Errorf("%d partitions: error %d %v, want POLICY_VIOLATION %q", n, rt.ErrorCode, rt.ErrorMessage, want)
		}
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 5000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "ready", math.MaxInt32
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{cpt}
	resp, err := cl.Request(ctx, addr, cp)
	if err != nil {
		t.Fatal(err)
	}
	if rt := resp.(*kmsg.CreatePartitionsResponse).Topics[0]; rt.ErrorCode != kerr.PolicyViolation.Code {
		t.Errorf("CreatePartitions to 2147483647: error %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
	// The controller is still there and still creates topics.
	if rt := create("after", 1); rt.ErrorCode != 0 {
		t.Errorf("after: error %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
}
