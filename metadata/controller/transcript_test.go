package controller

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// TestTranscripts runs testdata/*.txt. Commands:
//
//	init [controllers=N] [mv=N] [max-records=N] [max-user-op=N] [partitions=N] [rf=N] [idle]
//	                          fresh controllers 1..N (default 1) over an empty log
//	lead [node=N] [epoch=N] [keep]  node (default 1) becomes quorum leader: LeaderChange is
//	                          written and committed; requests go to it from now on
//	leader node=N epoch=N     a node that is not one of ours leads: ours renounce
//	leader ... keep           the new leader has our uncommitted batches (they commit later)
//	hold / commit [n=N]       stop auto-committing / commit everything appended (or N batches)
//	register id=N [inc=N] [rack=R] [cluster=ID] [mv=MIN-MAX] [v=N]
//	heartbeat id=N [epoch=N] [offset=N] [fence] [shutdown]
//	unregister id=N
//	create-topics [validate-only] [v=N]   input: NAME [partitions=N] [rf=N] [assign=1,2/2,3] [config=k=v]
//	delete-topics [v=N]                   input: NAME, or id=<uuid> (v6)
//	create-partitions [validate-only]     input: NAME COUNT [assign=1,2/2,3]
//	incremental-alter-configs, alter-configs: see transcript_configs_test.go
//	allocate-pids id=N [epoch=N]
//	describe-cluster [type=N] [v=N]
//	elect-leaders [type=N] [v=N] [all]   input: NAME P,P,... (all: a null topic list)
//	advance ms=N             move the clock and run the periodic duties
//	clock ms=N               move the clock only
//	image                    the committed image, as a broker replaying the log would publish it
//	check                    replay the committed log from scratch and compare with the controller
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			var e *env
			runTranscript(t, f, func(tc *testCase) string {
				if tc.cmd == "init" {
					e = newEnv(t, tc)
					return ""
				}
				if e == nil {
					t.Fatalf("%s: init first", tc.pos)
				}
				e.out.Reset()
				e.run(tc)
				return e.out.String()
			})
		})
	}
}

func (e *env) run(tc *testCase) {
	switch tc.cmd {
	case "lead":
		epoch := int32(atoi(e.t, tc.arg("epoch", "1")))
		node := int32(atoi(e.t, tc.arg("node", "1")))
		e.log.leaderEpoch, e.hold = epoch, false
		if !tc.has("keep") {
			// Batches the new leader lacked are truncated.
			e.log.batches = e.log.batches[:e.log.delivered]
			e.printed = min(e.printed, len(e.log.batches))
		}
		e.leaderChange(node, epoch, e.log.appendLeaderChange(node, epoch))
		e.settle()
	case "leader":
		epoch := int32(atoi(e.t, tc.arg("epoch", "2")))
		e.log.leaderEpoch, e.hold = -1, false
		e.leaderChange(int32(atoi(e.t, tc.arg("node", "9"))), epoch, -1)
		if !tc.has("keep") {
			// The new leader lacked our uncommitted batches: they are truncated.
			e.log.batches = e.log.batches[:e.log.delivered]
			e.printed = min(e.printed, len(e.log.batches))
		}
	case "hold":
		e.hold = true
	case "commit":
		if n := tc.arg("n", ""); n != "" {
			e.commitN(atoi(e.t, n))
			return
		}
		e.hold = false
		e.commit()
	case "clock":
		e.nowMs += int64(atoi(e.t, tc.arg("ms", "0")))
	case "advance":
		e.nowMs += int64(atoi(e.t, tc.arg("ms", "0")))
		e.c.tick(e.nowMs)
		e.settle()
	case "image":
		e.out.WriteString(e.c.committed.visible().Dump())
	case "check":
		e.check()
	case "load-snapshot":
		e.loadSnapshot(tc)
	default:
		e.request(e.buildRequest(tc))
	}
}

func (e *env) buildRequest(tc *testCase) kmsg.Request {
	switch tc.cmd {
	case "register":
		return e.registerRequest(tc)
	case "heartbeat":
		return e.heartbeatRequest(tc)
	case "unregister":
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = int32(atoi(e.t, tc.arg("id", "1")))
		return req
	case "create-topics":
		return e.createTopicsRequest(tc)
	case "delete-topics":
		return e.deleteTopicsRequest(tc)
	case "create-partitions":
		return e.createPartitionsRequest(tc)
	case "incremental-alter-configs":
		return e.incrementalAlterConfigsRequest(tc)
	case "alter-configs":
		return e.alterConfigsRequest(tc)
	case "allocate-pids":
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = int32(atoi(e.t, tc.arg("id", "1")))
		req.BrokerEpoch = e.brokerEpoch(tc, req.BrokerID)
		return req
	case "alter-partition":
		return e.alterPartitionRequest(tc)
	case "elect-leaders":
		return e.electLeadersRequest(tc)
	case "describe-cluster":
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = int16(atoi(e.t, tc.arg("v", "1")))
		req.EndpointType = int8(atoi(e.t, tc.arg("type", "2")))
		return req
	}
	e.t.Fatalf("%s: unknown command %q", tc.pos, tc.cmd)
	return nil
}

func (e *env) brokerEpoch(tc *testCase, id int32) int64 {
	if v := tc.arg("epoch", ""); v != "" {
		return int64(atoi(e.t, v))
	}
	b, _ := e.c.pending.img.Broker(id)
	return b.Epoch
}

func (e *env) registerRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = int16(atoi(e.t, tc.arg("v", "4")))
	req.BrokerID = int32(atoi(e.t, tc.arg("id", "1")))
	req.ClusterID = tc.arg("cluster", testClusterID)
	req.IncarnationID[0] = byte(req.BrokerID)
	req.IncarnationID[15] = byte(atoi(e.t, tc.arg("inc", "1")))
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "localhost", uint16(9100+req.BrokerID)
	req.Listeners = append(req.Listeners, l)
	minV, maxV, _ := strings.Cut(tc.arg("mv", "1-14"), "-")
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", int16(atoi(e.t, minV)), int16(atoi(e.t, maxV))
	req.Features = append(req.Features, f)
	if r := tc.arg("rack", ""); r != "" {
		req.Rack = kmsg.StringPtr(r)
	}
	return req
}

func (e *env) heartbeatRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = 1
	req.BrokerID = int32(atoi(e.t, tc.arg("id", "1")))
	req.BrokerEpoch = e.brokerEpoch(tc, req.BrokerID)
	req.CurrentMetadataOffset = e.log.endOffset() - 1
	if v := tc.arg("offset", ""); v != "" {
		req.CurrentMetadataOffset = int64(atoi(e.t, v))
	}
	req.WantFence, req.WantShutdown = tc.has("fence"), tc.has("shutdown")
	return req
}

func parseAssign(e *env, s string) [][]int32 {
	var out [][]int32
	for _, p := range strings.Split(s, "/") {
		out = append(out, int32s(e.t, p))
	}
	return out
}

func (e *env) createTopicsRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = int16(atoi(e.t, tc.arg("v", "7")))
	req.ValidateOnly = tc.has("validate-only")
	for _, line := range tc.input {
		fields := strings.Fields(line)
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = fields[0], -1, -1
		if fields[0] == `""` {
			t.Topic = ""
		}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "partitions":
				t.NumPartitions = int32(atoi(e.t, v))
			case "rf":
				t.ReplicationFactor = int16(atoi(e.t, v))
			case "assign":
				for i, r := range parseAssign(e, v) {
					a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
					a.Partition, a.Replicas = int32(i), r
					t.ReplicaAssignment = append(t.ReplicaAssignment, a)
				}
			case "config":
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				name, val, ok := strings.Cut(v, "=")
				c.Name = name
				if ok {
					c.Value = kmsg.StringPtr(val)
				}
				t.Configs = append(t.Configs, c)
			}
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

func (e *env) deleteTopicsRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = int16(atoi(e.t, tc.arg("v", "6")))
	for _, line := range tc.input {
		if req.Version < 6 {
			req.TopicNames = append(req.TopicNames, line)
			continue
		}
		t := kmsg.NewDeleteTopicsRequestTopic()
		if id, ok := strings.CutPrefix(line, "id="); ok {
			t.TopicID = e.topicID(id)
		} else {
			t.Topic = kmsg.StringPtr(line)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

// topicID resolves "name" (an existing topic's id) or a literal uuid.
func (e *env) topicID(s string) [16]byte {
	if t, ok := e.c.pending.img.TopicByName(s); ok {
		return t.ID()
	}
	var id [16]byte
	id[15] = 0x42
	return id
}

func (e *env) createPartitionsRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	req.ValidateOnly = tc.has("validate-only")
	for _, line := range tc.input {
		fields := strings.Fields(line)
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = fields[0], int32(atoi(e.t, fields[1]))
		if len(fields) > 2 {
			_, v, _ := strings.Cut(fields[2], "=")
			for _, r := range parseAssign(e, v) {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = r
				t.Assignment = append(t.Assignment, a)
			}
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

// formatResponse prints a response in one or a few stable lines.
func formatResponse(r kmsg.Response) string {
	var b strings.Builder
	switch r := r.(type) {
	case *kmsg.BrokerRegistrationResponse:
		fmt.Fprintf(&b, "BrokerRegistration: error=%s brokerEpoch=%d\n", errName(r.ErrorCode), r.BrokerEpoch)
	case *kmsg.BrokerHeartbeatResponse:
		fmt.Fprintf(&b, "BrokerHeartbeat: error=%s caughtUp=%t fenced=%t shouldShutdown=%t\n",
			errName(r.ErrorCode), r.IsCaughtUp, r.IsFenced, r.ShouldShutdown)
	case *kmsg.UnregisterBrokerResponse:
		fmt.Fprintf(&b, "UnregisterBroker: error=%s%s\n", errName(r.ErrorCode), msg(r.ErrorMessage))
	case *kmsg.CreateTopicsResponse:
		b.WriteString("CreateTopics:\n")
		for _, t := range r.Topics {
			fmt.Fprintf(&b, "  %s: error=%s%s", t.Topic, errName(t.ErrorCode), msg(t.ErrorMessage))
			if t.ErrorCode == 0 {
				fmt.Fprintf(&b, " id=%s partitions=%d rf=%d", records.UUID(t.TopicID), t.NumPartitions, t.ReplicationFactor)
				for _, c := range t.Configs {
					fmt.Fprintf(&b, " config:%s=%s", c.Name, *c.Value)
				}
			}
			b.WriteString("\n")
		}
	case *kmsg.DeleteTopicsResponse:
		b.WriteString("DeleteTopics:\n")
		for _, t := range r.Topics {
			name := "null"
			if t.Topic != nil {
				name = *t.Topic
			}
			fmt.Fprintf(&b, "  %s id=%s: error=%s%s\n", name, records.UUID(t.TopicID), errName(t.ErrorCode), msg(t.ErrorMessage))
		}
	case *kmsg.CreatePartitionsResponse:
		b.WriteString("CreatePartitions:\n")
		for _, t := range r.Topics {
			fmt.Fprintf(&b, "  %s: error=%s%s\n", t.Topic, errName(t.ErrorCode), msg(t.ErrorMessage))
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		b.WriteString("IncrementalAlterConfigs:\n")
		for _, res := range r.Resources {
			formatConfigResource(&b, res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage)
		}
	case *kmsg.AlterConfigsResponse:
		b.WriteString("AlterConfigs:\n")
		for _, res := range r.Resources {
			formatConfigResource(&b, res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage)
		}
	case *kmsg.AllocateProducerIDsResponse:
		fmt.Fprintf(&b, "AllocateProducerIds: error=%s start=%d len=%d\n", errName(r.ErrorCode), r.ProducerIDStart, r.ProducerIDLen)
	case *kmsg.AlterPartitionResponse:
		fmt.Fprintf(&b, "AlterPartition: error=%s\n", errName(r.ErrorCode))
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, "  %s%s-%d: error=%s", t.Topic, idIfSet(t.TopidID), p.Partition, errName(p.ErrorCode))
				if p.ErrorCode == 0 {
					fmt.Fprintf(&b, " leader=%d leaderEpoch=%d isr=%v partitionEpoch=%d", p.LeaderID, p.LeaderEpoch, p.ISR, p.PartitionEpoch)
				}
				b.WriteString("\n")
			}
		}
	case *kmsg.ElectLeadersResponse:
		fmt.Fprintf(&b, "ElectLeaders: error=%s\n", errName(r.ErrorCode))
		for _, t := range r.Topics {
			fmt.Fprintf(&b, "  %s:", t.Topic)
			if len(t.Partitions) == 0 {
				b.WriteString(" (none)")
			}
			b.WriteString("\n")
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, "    %d: error=%s%s\n", p.Partition, errName(p.ErrorCode), msg(p.ErrorMessage))
			}
		}
	case *kmsg.DescribeClusterResponse:
		fmt.Fprintf(&b, "DescribeCluster: error=%s%s cluster=%s controller=%d type=%d\n",
			errName(r.ErrorCode), msg(r.ErrorMessage), r.ClusterID, r.ControllerID, r.EndpointType)
		for _, n := range r.Brokers {
			fmt.Fprintf(&b, "  node %d %s:%d\n", n.NodeID, n.Host, n.Port)
		}
	default:
		fmt.Fprintf(&b, "%T\n", r)
	}
	return b.String()
}

// check replays the committed log from scratch, as a broker would, and
// compares it with the controller's own committed image; it also checks
// partition sanity (leader in ISR, leaders active).
func (e *env) check() {
	want := replayLog(e.t, e.log.batches[:e.log.delivered])
	for _, c := range e.cores {
		if got := c.committed.visible(); !got.Equal(want) {
			e.t.Fatalf("node %d image differs from replay:\n%s\n--- replay:\n%s", c.cfg.NodeID, got.Dump(), want.Dump())
		}
	}
	got := e.c.committed.visible()
	if err := got.Check(); err != nil {
		e.t.Fatal(err)
	}
	if err := got.CheckLeaders(); err != nil {
		e.t.Fatal(err)
	}
	checkBrokerIndexByScan(e.t, got)
	fmt.Fprintf(&e.out, "ok: %d topics, %d partitions, %d brokers\n", got.NumTopics(), got.NumPartitions(), len(got.Brokers()))
}

// checkBrokerIndexByScan compares the controller image's per-broker index
// (PartitionsLedBy, PartitionsWithISRMember: every writer, AlterPartition's
// ISR changes too, must keep it by replay) with a scan of every partition.
func checkBrokerIndexByScan(t *testing.T, img *image.Image) {
	t.Helper()
	led, inISR := map[int32][]image.TopicPartition{}, map[int32][]image.TopicPartition{}
	for tp := range img.Topics() {
		for id, p := range tp.Partitions() {
			k := image.TopicPartition{TopicID: tp.ID(), Partition: id}
			led[p.Leader] = append(led[p.Leader], k)
			for _, b := range p.ISR() {
				inISR[b] = append(inISR[b], k)
			}
		}
	}
	for _, b := range img.Brokers() {
		for _, c := range []struct {
			name      string
			got, want []image.TopicPartition
		}{{"led by", img.PartitionsLedBy(b.ID), led[b.ID]}, {"with ISR member", img.PartitionsWithISRMember(b.ID), inISR[b.ID]}} {
			if !sameTopicPartitions(c.got, c.want) {
				t.Fatalf("broker index: partitions %s %d: %v, scan %v", c.name, b.ID, c.got, c.want)
			}
		}
	}
}

func sameTopicPartitions(a, b []image.TopicPartition) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[image.TopicPartition]bool{}
	for _, k := range a {
		set[k] = true
	}
	for _, k := range b {
		if !set[k] {
			return false
		}
	}
	return true
}

// alterPartitionRequest: alter-partition id=<leader> [epoch=<broker epoch>]
// [v=3] topic=<name> [unknown-id] partition=0 leader-epoch=0
// partition-epoch=0 isr=1,2 [isr-epochs=4,-1] [recovery=1] (v3 takes the
// members' broker epochs from the image unless isr-epochs says otherwise;
// recovery is the leader recovery state, 0 RECOVERED by default).
func (e *env) alterPartitionRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = int16(atoi(e.t, tc.arg("v", "3")))
	req.BrokerID = int32(atoi(e.t, tc.arg("id", "1")))
	req.BrokerEpoch = e.brokerEpoch(tc, req.BrokerID)
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic = tc.arg("topic", "a")
	if t, ok := e.c.pending.img.TopicByName(rt.Topic); ok && !tc.has("unknown-id") {
		rt.TopicID = [16]byte(t.ID())
	}
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition = int32(atoi(e.t, tc.arg("partition", "0")))
	rp.LeaderEpoch = int32(atoi(e.t, tc.arg("leader-epoch", "0")))
	rp.PartitionEpoch = int32(atoi(e.t, tc.arg("partition-epoch", "0")))
	rp.NewISR = int32s(e.t, tc.arg("isr", "1"))
	rp.LeaderRecoveryState = int8(atoi(e.t, tc.arg("recovery", "0")))
	var epochs []int32
	if v := tc.arg("isr-epochs", ""); v != "" {
		epochs = int32s(e.t, v)
	}
	for i, id := range rp.NewISR {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID = id
		b, _ := e.c.pending.img.Broker(id)
		m.BrokerEpoch = b.Epoch
		if i < len(epochs) {
			m.BrokerEpoch = int64(epochs[i])
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func idIfSet(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return "(" + records.UUID(id).String() + ")"
}

// electLeadersRequest: elect-leaders [type=N] [v=N] [all]; input lines
// NAME P,P,... name the partitions (all sends a null topic list).
func (e *env) electLeadersRequest(tc *testCase) kmsg.Request {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = int16(atoi(e.t, tc.arg("v", "2")))
	req.ElectionType = int8(atoi(e.t, tc.arg("type", "0")))
	if tc.has("all") {
		return req
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{}
	for _, line := range tc.input {
		name, parts, _ := strings.Cut(strings.TrimSpace(line), " ")
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, int32s(e.t, parts)
		req.Topics = append(req.Topics, rt)
	}
	return req
}
