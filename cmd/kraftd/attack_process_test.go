package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// TestProcessAttacksLeaveQuorumUp is issue 12's reproduction, run against 3 controller
// processes and 1 broker process on 127.0.0.1: an unauthenticated peer sends a Vote from
// a non-voter at epoch 2^31-1, a BeginQuorumEpoch naming a non-voter as leader (at the
// current epoch and the next), an EndQuorumEpoch at 2^31-1, a CreateTopics for 2^31-1
// partitions, opens 40 connections to every node that each announce a 100 MB frame and
// send 8 bytes of it, and fills the broker's client listener up to max.connections.
// Afterwards every process still runs, the quorum has the same leader in the same epoch,
// no process grew its Go heap by anything like the announced frames, and the cluster
// still creates topics.
func TestProcessAttacksLeaveQuorumUp(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	// Quorum timeouts well above the test cluster's 300/600 ms, so a loaded machine
	// does not re-elect on its own while the test checks that the attacks did not
	// (an epoch change at load 16 made this test fail once).
	c := newProcCluster(t, buildBinary(t), 3, 1, "--override", "max.connections=64",
		"--override", "controller.quorum.election.timeout.ms=1000",
		"--override", "controller.quorum.fetch.timeout.ms=5000")
	broker := c.procs[4]
	eventually(t, "the broker to list itself", 20*time.Second, func() bool {
		v, err := metadataView(broker.addr())
		return err == nil && fmt.Sprint(v.brokers) == "[4]"
	})
	leader, epoch := describeLeader(t, broker.addr())
	follower := c.procs[1+int(leader)%3] // a voter other than the leader
	heapBefore := map[int]float64{}
	for id, p := range c.procs {
		heapBefore[id], _ = scrapeMetric(p.metricsPort, "go_memstats_heap_alloc_bytes")
	}

	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "attacker"})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Quorum RPCs from outside the voter set.
	vote := forgedVote(99, math.MaxInt32)
	if code := partitionCode(t, mustRequest(ctx, t, cl, follower.addr(), vote)); code != kerr.InconsistentVoterSet.Code {
		t.Errorf("non-voter Vote at 2^31-1: error %d, want INCONSISTENT_VOTER_SET", code)
	}
	for _, e := range []int32{epoch, epoch + 1} {
		bqe := forgedBeginQuorumEpoch(99, e)
		if code := partitionCode(t, mustRequest(ctx, t, cl, follower.addr(), bqe)); code != kerr.InconsistentVoterSet.Code {
			t.Errorf("BeginQuorumEpoch naming leader 99 at epoch %d: error %d, want INCONSISTENT_VOTER_SET", e, code)
		}
	}
	eqe := forgedEndQuorumEpoch(leader, math.MaxInt32)
	if code := partitionCode(t, mustRequest(ctx, t, cl, follower.addr(), eqe)); code == 0 {
		t.Errorf("EndQuorumEpoch at 2^31-1 was accepted")
	}

	// An admin request for 2^31-1 partitions.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", math.MaxInt32, 1
	ct.Topics = append(ct.Topics, rt)
	ctResp := mustRequest(ctx, t, cl, broker.addr(), ct).(*kmsg.CreateTopicsResponse)
	if len(ctResp.Topics) != 1 || ctResp.Topics[0].ErrorCode == 0 {
		t.Errorf("CreateTopics with 2^31-1 partitions was not refused: %+v", ctResp.Topics)
	}

	// Frames that announce 100 MB and never finish, on every node.
	for _, p := range c.procs {
		announceFrames(t, p.addr(), 40, 100_000_000)
	}
	// Client connections up to the broker's max.connections: a new connection is
	// held unanswered (Kafka's ConnectionQuotas), the attacker's earlier one still
	// works, and so do the broker's own connections to the controllers (checked
	// below through its heartbeats: it stays unfenced).
	release := fillConnections(t, broker.addr(), 64)
	if err := tryApiVersions(broker.addr()); err == nil {
		t.Errorf("a connection past max.connections=64 was served")
	}
	if v, err := metadataView(broker.addr()); err == nil {
		t.Errorf("a connection past max.connections=64 was served: %v", v)
	}

	// Let the nodes read what was sent; an election would need a few election timeouts.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for id, p := range c.procs {
			if !p.running() {
				t.Fatalf("node %d exited: %s", id, tail(p.out.String(), 20))
			}
		}
		<-time.After(100 * time.Millisecond)
	}
	for id, p := range c.procs {
		after, ok := scrapeMetric(p.metricsPort, "go_memstats_heap_alloc_bytes")
		if !ok {
			t.Errorf("node %d: no heap metric", id)
			continue
		}
		t.Logf("node %d: Go heap %.1f MB before, %.1f MB after", id, heapBefore[id]/1e6, after/1e6)
		if grew := after - heapBefore[id]; grew > 256e6 {
			t.Errorf("node %d: Go heap grew by %.0f MB under the attack", id, grew/1e6)
		}
	}
	for _, p := range c.procs {
		l, okL := scrapeMetric(p.metricsPort, "kraftd_raft_current_leader")
		e, okE := scrapeMetric(p.metricsPort, "kraftd_raft_current_epoch")
		if !okL || !okE || int32(l) != leader || int32(e) != epoch {
			t.Errorf("node %d reports leader %v epoch %v, want leader %d epoch %d", p.id, l, e, leader, epoch)
		}
	}
	if fenced, ok := c.activeControllerMetric("kraftd_controller_fenced_brokers"); !ok || fenced != 0 {
		t.Errorf("fenced brokers %v (ok %v) after the attack, want 0", fenced, ok)
	}
	release()
	if l, e := describeLeader(t, broker.addr()); l != leader || e != epoch {
		t.Errorf("DescribeQuorum through the broker: leader %d epoch %d, want %d %d", l, e, leader, epoch)
	}
	// The cluster still does its work: a topic of ordinary size is created.
	ct = kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 10000
	rt = kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "after-attack", 3, 1
	ct.Topics = append(ct.Topics, rt)
	if r := mustRequest(ctx, t, cl, broker.addr(), ct).(*kmsg.CreateTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Errorf("CreateTopics after the attack: %+v", r.Topics)
	}
}

func describeLeader(t *testing.T, addr string) (leader, epoch int32) {
	t.Helper()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "process-test"})
	defer cl.Close()
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("last DescribeQuorum to %s: %v", addr, err)
		}
	}()
	eventually(t, "DescribeQuorum to name a leader", 10*time.Second, func() bool {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var resp kmsg.Response
		if resp, err = cl.Request(ctx, addr, req); err != nil {
			return false
		}
		dq := resp.(*kmsg.DescribeQuorumResponse)
		if dq.ErrorCode != 0 || len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
			return false
		}
		p := dq.Topics[0].Partitions[0]
		leader, epoch = p.LeaderID, p.LeaderEpoch
		err = fmt.Errorf("partition error %d, leader %d", p.ErrorCode, leader)
		return p.ErrorCode == 0 && leader >= 0
	})
	return leader, epoch
}

func mustRequest(ctx context.Context, t *testing.T, cl *protocol.Client, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Request(ctx, addr, req)
	if err != nil {
		t.Fatalf("%s to %s: %v", kmsg.NameForKey(req.Key()), addr, err)
	}
	return resp
}

func partitionCode(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	switch r := resp.(type) {
	case *kmsg.VoteResponse:
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return r.ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.BeginQuorumEpochResponse:
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return r.ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.EndQuorumEpochResponse:
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return r.ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	t.Fatalf("unexpected response %T", resp)
	return 0
}

func forgedVote(candidate, epoch int32) kmsg.Request {
	req := kmsg.NewPtrVoteRequest()
	req.ClusterID = kmsg.StringPtr(testClusterID)
	p := kmsg.NewVoteRequestTopicPartition()
	p.CandidateID, p.CandidateEpoch, p.LastOffset, p.LastOffsetEpoch = candidate, epoch, math.MaxInt32, math.MaxInt32-1
	rt := kmsg.NewVoteRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.VoteRequestTopicPartition{p}
	req.Topics = []kmsg.VoteRequestTopic{rt}
	return req
}

func forgedBeginQuorumEpoch(leader, epoch int32) kmsg.Request {
	req := kmsg.NewPtrBeginQuorumEpochRequest()
	req.ClusterID = kmsg.StringPtr(testClusterID)
	p := kmsg.NewBeginQuorumEpochRequestTopicPartition()
	p.LeaderID, p.LeaderEpoch = leader, epoch
	rt := kmsg.NewBeginQuorumEpochRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.BeginQuorumEpochRequestTopicPartition{p}
	req.Topics = []kmsg.BeginQuorumEpochRequestTopic{rt}
	return req
}

func forgedEndQuorumEpoch(leader, epoch int32) kmsg.Request {
	req := kmsg.NewPtrEndQuorumEpochRequest()
	req.ClusterID = kmsg.StringPtr(testClusterID)
	p := kmsg.NewEndQuorumEpochRequestTopicPartition()
	p.LeaderID, p.LeaderEpoch = leader, epoch
	rt := kmsg.NewEndQuorumEpochRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.EndQuorumEpochRequestTopicPartition{p}
	req.Topics = []kmsg.EndQuorumEpochRequestTopic{rt}
	return req
}

// announceFrames opens n connections that each send a size prefix of size bytes and
// the first 8 bytes of the body, then nothing; they stay open until the test ends.
func announceFrames(t *testing.T, addr string, n int, size uint32) {
	t.Helper()
	for range n {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { conn.Close() })
		head := binary.BigEndian.AppendUint32(nil, size)
		head = append(head, 0, 3, 0, 12, 0, 0, 0, 1) // Metadata v12, correlation id 1
		if _, err := conn.Write(head); err != nil {
			t.Fatalf("write to %s: %v", addr, err)
		}
	}
}

// fillConnections opens idle client connections to addr until n are open; they
// stay open until release is called or the test ends.
func fillConnections(t *testing.T, addr string, n int) (release func()) {
	t.Helper()
	var conns []net.Conn
	release = func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	t.Cleanup(release)
	for range n {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conns = append(conns, conn)
	}
	return release
}
