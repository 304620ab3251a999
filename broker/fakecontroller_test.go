package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// fakeController plays Kafka's active controller (or a standby that says
// NOT_CONTROLLER) on a real protocol.Server, and plays the quorum for one
// broker: every record it "commits" is handed to the broker's Listener,
// unless hold is set, in which case batches wait for release. It
// implements just enough of BrokerHeartbeatManager's state machine (§6.2
// of the spec) to drive a broker through its lifecycle.
type fakeController struct {
	t    *testing.T
	srv  *protocol.Server
	addr string

	mu         sync.Mutex
	active     bool
	listener   quorum.Listener
	next       int64
	hold       bool
	held       []raftlog.Batch
	regOffset  map[int32]int64
	fenced     map[int32]bool
	heartbeats []kmsg.BrokerHeartbeatRequest
	regs       int                             // registrations received
	requests   map[int16]int                   // requests received per key
	maxVers    map[int16]int16                 // override of served max versions
	onCreate   func(*kmsg.CreateTopicsRequest) // observes CreateTopics
	// producerIDBlock is the AllocateProducerIds block size; 0 refuses
	// (STALE_BROKER_EPOCH). nextProducerID is the next block's start.
	producerIDBlock, nextProducerID int64
	// holdShutdown answers WantShutdown without ShouldShutdown (a
	// controller still waiting for the other brokers) while set.
	holdShutdown bool
	changed      chan struct{} // closed and replaced on every request
}

func newFakeController(t *testing.T, active bool, maxVers map[int16]int16) *fakeController {
	t.Helper()
	f := &fakeController{t: t, active: active, regOffset: map[int32]int64{}, fenced: map[int32]bool{},
		requests: map[int16]int{}, maxVers: maxVers, changed: make(chan struct{})}
	reg := protocol.NewRegistry()
	serve := func(key, maxV int16, h protocol.Handler) {
		if v, ok := f.maxVers[key]; ok {
			maxV = v
		}
		reg.Register(key, 0, maxV, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.requests[key]++
			close(f.changed)
			f.changed = make(chan struct{})
			return h(ctx, req)
		})
	}
	serve(62, 4, f.handleRegistration)
	serve(63, 1, f.handleHeartbeat)
	serve(19, 7, f.handleCreateTopics)
	serve(55, 2, f.handleDescribeQuorum)
	serve(67, 0, f.handleAllocateProducerIDs)
	srv, err := protocol.NewServer(protocol.ServerConfig{
		Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: "127.0.0.1:0", Registry: reg}},
		Logger:    zaptest.NewLogger(t).Named("fake-controller"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	f.srv, f.addr = srv, srv.Addr("CONTROLLER").String()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// attach makes f the quorum of the broker behind l, starting at offset next.
func (f *fakeController) attach(l quorum.Listener, next int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listener, f.next = l, next
}

func (f *fakeController) setHold(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = hold
	if !hold && len(f.held) > 0 {
		commitTo(f.listener, f.held)
		f.held = nil
	}
}

// commitLocked appends msgs as one batch and returns its last offset.
func (f *fakeController) commitLocked(msgs ...records.Message) int64 {
	b := encodeBatch(f.t, f.next, msgs...)
	f.next = b.NextOffset()
	if f.hold || f.listener == nil {
		f.held = append(f.held, b)
	} else {
		commitTo(f.listener, []raftlog.Batch{b})
	}
	return b.LastOffset
}

// waitFor blocks until cond (called with f.mu held) is true.
func (f *fakeController) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *fakeController) handleRegistration(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.BrokerRegistrationRequest)
	resp := body.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	f.regs++
	switch {
	case !f.active:
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	case body.ClusterID != testCluster:
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp, nil
	}
	r := records.NewRegisterBrokerRecord()
	r.BrokerID, r.BrokerEpoch, r.IncarnationID, r.Rack = body.BrokerID, f.next, body.IncarnationID, body.Rack
	for _, l := range body.Listeners {
		r.EndPoints = append(r.EndPoints, records.BrokerEndpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	off := f.commitLocked(r)
	f.regOffset[body.BrokerID], f.fenced[body.BrokerID] = off, true
	resp.BrokerEpoch = off
	return resp, nil
}

func (f *fakeController) handleHeartbeat(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.BrokerHeartbeatRequest)
	resp := body.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	f.heartbeats = append(f.heartbeats, *body)
	reg, ok := f.regOffset[body.BrokerID]
	switch {
	case !f.active:
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	case !ok || reg != body.BrokerEpoch:
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp, nil
	}
	resp.IsCaughtUp = body.CurrentMetadataOffset >= reg
	fenced := f.fenced[body.BrokerID]
	switch {
	case body.WantShutdown && f.holdShutdown:
	case body.WantShutdown:
		if !fenced {
			f.commitLocked(&records.BrokerRegistrationChangeRecord{BrokerID: body.BrokerID, BrokerEpoch: reg, Fenced: records.FenceChangeFence})
		}
		fenced, resp.ShouldShutdown = true, true
	case fenced && !body.WantFence && resp.IsCaughtUp:
		f.commitLocked(&records.BrokerRegistrationChangeRecord{BrokerID: body.BrokerID, BrokerEpoch: reg, Fenced: records.FenceChangeUnfence})
		fenced = false
	}
	f.fenced[body.BrokerID] = fenced
	resp.IsFenced = fenced
	return resp, nil
}

func (f *fakeController) handleCreateTopics(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.CreateTopicsRequest)
	resp := body.ResponseKind().(*kmsg.CreateTopicsResponse)
	if f.onCreate != nil {
		f.onCreate(body)
	}
	for i, t := range body.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if !f.active {
			rt.ErrorCode = kerr.NotController.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		id := uuid(byte(200 + i))
		msgs := []records.Message{topicRecord(t.Topic, id)}
		for p := range max(t.NumPartitions, 1) {
			msgs = append(msgs, partitionRecord(id, p, 1, []int32{1}, []int32{1}))
		}
		f.commitLocked(msgs...)
		rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = id, max(t.NumPartitions, 1), 1
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (f *fakeController) handleDescribeQuorum(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeQuorumRequest)
	resp := body.ResponseKind().(*kmsg.DescribeQuorumResponse)
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	if f.active {
		rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = 3000, 7, f.next
	} else {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp, nil
}

func (f *fakeController) handleAllocateProducerIDs(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.AllocateProducerIDsRequest)
	resp := body.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	if f.producerIDBlock == 0 || body.BrokerEpoch < 0 {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp, nil
	}
	resp.ProducerIDStart, resp.ProducerIDLen = f.nextProducerID, int32(f.producerIDBlock)
	f.nextProducerID += f.producerIDBlock
	return resp, nil
}
