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

// controller.max.records.per.user.op defaults to Kafka's
// MAX_RECORDS_PER_USER_OP (10000) for the KRaft controller. A zk-legacy
// broker takes the key only when it is set: ZooKeeper-era Kafka had no cap,
// so unset it keeps legacyzk's own bound.
func TestMaxRecordsPerUserOpDefault(t *testing.T) {
	c := DefaultConfig()
	if got := c.ControllerMaxRecordsPerUserOp; got != controller.DefaultMaxRecordsPerUserOp {
		t.Fatalf("controller.max.records.per.user.op default %d, the controller's %d", got, controller.DefaultMaxRecordsPerUserOp)
	}
	if controller.DefaultMaxRecordsPerUserOp != 10_000 {
		t.Fatalf("the controller's default cap %d, Kafka's MAX_RECORDS_PER_USER_OP is 10000", controller.DefaultMaxRecordsPerUserOp)
	}
	if got := c.legacyMaxRecordsPerUserOp(); got != 0 {
		t.Fatalf("zk-legacy cap %d with the key unset, want 0 (legacyzk's default %d)", got, legacyzk.DefaultMaxRecordsPerUserOp)
	}
	set, err := LoadConfig([]Setting{{"controller.max.records.per.user.op", "6"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.legacyMaxRecordsPerUserOp(); got != 6 {
		t.Fatalf("zk-legacy cap %d with the key set to 6", got)
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
	// Kafka catches the record list's overflow per topic in
	// CreatePartitions: UNKNOWN_SERVER_ERROR, no message.
	if rt := resp.(*kmsg.CreatePartitionsResponse).Topics[0]; rt.ErrorCode != kerr.UnknownServerError.Code || rt.ErrorMessage != nil {
		t.Errorf("CreatePartitions to 2147483647: error %d %v, want UNKNOWN_SERVER_ERROR and no message", rt.ErrorCode, rt.ErrorMessage)
	}
	// The controller is still there and still creates topics.
	if rt := create("after", 1); rt.ErrorCode != 0 {
		t.Errorf("after: error %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
}

// With controller.max.records.per.user.op unset, a CreateTopics forwarded
// by a broker meets Kafka's answers at Kafka's boundary (validate-only, so
// nothing is created): one topic of 9,999 partitions is 10,000 records and
// passes, 10,000 partitions are refused with "Unable to perform
// excessively large batch operation.", 10,001 with "Excessively large
// number of partitions per request.". Before, the default (200,000) let
// 10,000 through.
func TestDefaultCapThroughBroker(t *testing.T) {
	a, err := New(ephemeralConfig(t,
		Setting{"controller.quorum.voters", "1@127.0.0.1:0"},
		Setting{"broker.heartbeat.interval.ms", "100"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v", err)
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "limits-test"})
	defer cl.Close()
	addr := a.Addr("PLAINTEXT").String()
	for n, want := range map[int32]*string{
		9_999:  nil,
		10_000: kmsg.StringPtr("Unable to perform excessively large batch operation."),
		10_001: kmsg.StringPtr("Excessively large number of partitions per request."),
	} {
		req := createTopicsReq("edge", n)
		req.ValidateOnly = true
		resp, err := cl.Request(ctx, addr, req)
		if err != nil {
			t.Fatal(err)
		}
		rt := resp.(*kmsg.CreateTopicsResponse).Topics[0]
		switch {
		case want == nil && rt.ErrorCode != 0:
			t.Errorf("%d partitions: error %d %v, want none", n, rt.ErrorCode, rt.ErrorMessage)
		case want != nil && (rt.ErrorCode != kerr.PolicyViolation.Code || rt.ErrorMessage == nil || *rt.ErrorMessage != *want):
			t.Errorf("%d partitions: error %d %v, want POLICY_VIOLATION %q", n, rt.ErrorCode, rt.ErrorMessage, *want)
		}
	}
}
