package group

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// fuzzKeys are the group APIs FuzzGroupRequests feeds the coordinator.
var fuzzKeys = []int16{8, 11, 12, 13, 14, 15, 16, 42, 47}

// FuzzGroupRequests decodes arbitrary bytes as a group API request
// (OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) at any version
// and hands it to one coordinator that lives across the inputs, so member
// ids, generations and instance ids from earlier inputs can meet; byte 0
// picks the API, byte 1 the version, byte 2 how far the clock moves first.
// Parked joins and syncs give up after a millisecond. Invariants: no panic,
// and the group INVARIANTS hold after every input.
func FuzzGroupRequests(f *testing.F) {
	add := func(req kmsg.Request, v int16) {
		i := 0
		for fuzzKeys[i] != req.Key() {
			i++
		}
		req.SetVersion(v)
		f.Add(append([]byte{byte(i), byte(v), 1}, req.AppendTo(nil)...))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 0}}}
	add(join, 5)
	inst := "i"
	join.InstanceID = &inst
	add(join, 9)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation = "g", 1
	add(sync, 5)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g"
	add(hb, 4)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.Members = "g", []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}}
	add(leave, 5)
	commit := commitReq("g", "", -1, 3)
	add(commit, 8)
	add(kmsg.NewPtrListGroupsRequest(), 4)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	add(del, 2)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group, od.Topics = "g", []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	add(od, 0)

	rm, err := replica.New(replica.Config{Dir: f.TempDir(), BrokerID: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = rm.Close() })
	if err := rm.Apply(replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: Topic, Partition: 0},
		TopicID: [16]byte{1}, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		f.Fatal(err)
	}
	var nowMs atomic.Int64
	nowMs.Store(1_000_000)
	c, err := New(Config{BrokerID: 1, Replicas: rm, NumPartitions: 1, InitialRebalanceDelayMs: -1, CommitTimeoutMs: 100, NowMs: nowMs.Load})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.Close)
	lastGen := map[*group]int32{}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		key := fuzzKeys[int(data[0])%len(fuzzKeys)]
		req := kmsg.RequestForKey(key)
		req.SetVersion(int16(data[1]) % (req.MaxVersion() + 1))
		if err := req.ReadFrom(data[3:]); err != nil {
			return
		}
		c.Tick(nowMs.Add(int64(data[2]) * 100))
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		switch r := req.(type) {
		case *kmsg.OffsetCommitRequest:
			c.OffsetCommit(r)
		case *kmsg.JoinGroupRequest:
			c.JoinGroup(ctx, r, "fuzz", "/127.0.0.1")
		case *kmsg.HeartbeatRequest:
			c.Heartbeat(r)
		case *kmsg.LeaveGroupRequest:
			c.LeaveGroup(r)
		case *kmsg.SyncGroupRequest:
			c.SyncGroup(ctx, r)
		case *kmsg.DescribeGroupsRequest:
			for _, g := range r.Groups {
				c.DescribeGroup(g)
			}
		case *kmsg.ListGroupsRequest:
			c.ListGroups(r)
		case *kmsg.DeleteGroupsRequest:
			for _, g := range r.Groups {
				c.DeleteGroup(g)
			}
		case *kmsg.OffsetDeleteRequest:
			c.OffsetDelete(r)
		}
		checkInvariants(t, c, lastGen)
	})
}

// FuzzReplay loads arbitrary key/value pairs as __consumer_offsets records
// (as a partition load does): unreadable ones are refused, readable ones
// replay; no panic, and the loaded groups keep their INVARIANTS.
func FuzzReplay(f *testing.F) {
	g := newGroup("g", 0, 5)
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 4, "m1"
	inst := "i"
	g.members["m1"] = &member{id: "m1", instanceID: &inst, sessionTimeoutMs: 6000, protocols: []protocol{{"range", []byte{9}}}}
	g.static[inst] = "m1"
	for _, r := range []storage.Record{groupMetadataRecord(g), groupTombstone("g"),
		offsetCommitRecord("g", TopicPartition{"t", 1}, &committedOffset{offset: 5}), offsetCommitRecord("g", TopicPartition{"t", 1}, nil)} {
		f.Add(r.Key, r.Value, r.Value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		lr, err := decodeRecord(storage.Record{Key: key, Value: value})
		if err != nil {
			return
		}
		groups := map[string]*group{}
		replay(groups, 0, lr)
		activate(groups, 0)
		c := &Coordinator{shards: map[int32]*shard{0: {groups: groups, loaded: true}}}
		checkInvariants(t, c, map[*group]int32{})
	})
}
