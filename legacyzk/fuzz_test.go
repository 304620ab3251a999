package legacyzk

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz/<Target>/seed-* from the fuzz targets' seeds")

// pushKeys are the controller-to-broker APIs, in the order byte 0 of a
// FuzzLegacyControllerRPC input picks them.
var pushKeys = []int16{4, 5, 6, 7}

// fuzzRPC flags (byte 1 of an input).
const (
	fuzzToOther   = 1 << 0 // send to the broker that is not the controller
	fuzzRealEpoch = 1 << 1 // replace the epochs with the target's current ones
)

// FuzzLegacyControllerRPC decodes arbitrary bytes as a LeaderAndIsr,
// StopReplica, UpdateMetadata or ControlledShutdown request at the version
// a legacy broker serves and hands it to the handler that broker
// registered, on a running two-broker cluster over an in-memory ZooKeeper
// (topic t, 2 partitions, 2 replicas). Byte 0 picks the API; byte 1 bit 0
// the target (controller or not), bit 1 whether the request's broker and
// controller epochs are replaced with the target's real ones, so that the
// body reaches the code past the epoch checks; the rest is the body.
// Invariants: no panic; an answer of the request's kind and no error (the
// in-memory ZooKeeper never fails); no broker adopts a controller epoch
// ZooKeeper has not reached, and none goes back; the controller keeps
// answering.
func FuzzLegacyControllerRPC(f *testing.F) {
	seeds := legacyRPCSeeds()
	if *writeCorpus {
		dir := filepath.Join("testdata", "fuzz", "FuzzLegacyControllerRPC")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				f.Fatal(err)
			}
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	srv := NewMemServer()
	admin := srv.Connect()
	f.Cleanup(func() { admin.Close() })
	regs := map[int32]*protocol.Registry{}
	brokers := map[int32]*Broker{}
	for _, id := range []int32{1, 2} {
		regs[id] = protocol.NewRegistry()
		b, err := NewBroker(context.Background(), Config{NodeID: id, Dial: memDial(srv), Registry: regs[id],
			Logger: testLoggerNop(), RetryBackoffMs: 20})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { b.Close() })
		brokers[id] = b
	}
	var ctrl, other *Broker
	waitFor(f, 10*time.Second, "a controller that pushed to both brokers", func() (bool, string) {
		ctrl, other = nil, nil
		for _, b := range brokers {
			if b.IsController() {
				ctrl = b
			} else {
				other = b
			}
		}
		if ctrl == nil || other == nil {
			return false, "no controller"
		}
		return len(other.Image().Brokers()) == 2 && len(ctrl.Image().Brokers()) == 2, "brokers not pushed yet"
	})
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 5000
	create.Topics = []kmsg.CreateTopicsRequestTopic{newTopic("t", 2, 2)}
	if resp, err := ctrl.CreateTopics(ctx, create); err != nil || resp.Topics[0].ErrorCode != 0 {
		f.Fatalf("create t: %v %+v", err, resp)
	}
	zkEpoch := func(t *testing.T) int32 {
		data, _, err := admin.Get(ctx, ControllerEpochPath, false)
		if err != nil {
			t.Fatal(err)
		}
		e, err := DecodeControllerEpoch(data)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	seen := map[int32]int32{}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := pushKeys[int(data[0])%len(pushKeys)]
		target := ctrl
		if data[1]&fuzzToOther != 0 {
			target = other
		}
		reg := regs[target.ID()]
		minV, maxV, h, ok := reg.Lookup(key)
		if !ok || minV != maxV {
			t.Fatalf("key %d: registered %v, versions %d-%d", key, ok, minV, maxV)
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(minV)
		if err := req.ReadFrom(data[2:]); err != nil {
			return
		}
		if data[1]&fuzzRealEpoch != 0 {
			setEpochs(req, target.BrokerEpoch(), zkEpoch(t))
		}
		resp, err := h(ctx, &protocol.Request{Key: key, Version: minV, Body: req, Listener: "PLAINTEXT"})
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if resp == nil || resp.Key() != key {
			t.Fatalf("%T answered with %T", req, resp)
		}
		for _, b := range []*Broker{ctrl, other} {
			got, zk := b.SeenControllerEpoch(), zkEpoch(t)
			if got > zk || got < seen[b.ID()] {
				t.Fatalf("broker %d at controller epoch %d: ZooKeeper holds %d, it saw %d before", b.ID(), got, zk, seen[b.ID()])
			}
			seen[b.ID()] = got
		}
		// The controller loop still runs (a ControlledShutdown goes through it).
		if err := ctrl.ctrl.call(ctx, func() {}); err != nil {
			t.Fatalf("controller loop: %v", err)
		}
	})
}

// setEpochs gives a push the target's broker epoch and the current
// controller epoch, and a ControlledShutdown the epoch the controller holds
// for the broker it names (when it is live).
func setEpochs(req kmsg.Request, brokerEpoch int64, controllerEpoch int32) {
	switch r := req.(type) {
	case *kmsg.LeaderAndISRRequest:
		r.BrokerEpoch, r.ControllerEpoch = brokerEpoch, controllerEpoch
	case *kmsg.StopReplicaRequest:
		r.BrokerEpoch, r.ControllerEpoch = brokerEpoch, controllerEpoch
	case *kmsg.UpdateMetadataRequest:
		r.BrokerEpoch, r.ControllerEpoch = brokerEpoch, controllerEpoch
	case *kmsg.ControlledShutdownRequest:
		r.BrokerEpoch = brokerEpoch
	}
}

// legacyRPCSeeds are the pushes a controller sends (from the translator),
// a ControlledShutdown, and issue 12's forged ones: controller epoch
// 2147483647, broker epoch -1, leader epoch and partition 2147483647,
// negative partitions, a port past 65535, huge replica lists.
func legacyRPCSeeds() [][]byte {
	in := func(req kmsg.Request, flags byte) []byte {
		i := 0
		for pushKeys[i] != req.Key() {
			i++
		}
		return append([]byte{byte(i), flags}, req.AppendTo(nil)...)
	}
	v := testView()
	v.Topics["t"] = TopicAssignment{ID: [16]byte{9}, Partitions: map[int32][]int32{0: {1, 2}, 1: {2, 1}}}
	v.States[TopicPartition{"t", 0}] = LeaderIsr{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, ControllerEpoch: 1}
	v.States[TopicPartition{"t", 1}] = LeaderIsr{Leader: 2, LeaderEpoch: 3, ISR: []int32{2, 1}, ControllerEpoch: 1}
	batch := NewBatch()
	for _, tp := range sortedTPs(v.States) {
		batch.AddLeaderAndIsr(v, v.Topics[tp.Topic].Partitions[tp.Partition], tp, false)
	}
	batch.AddStopReplica(v, 2, TopicPartition{"a", 0}, false)
	batch.AddStopReplica(v, 2, TopicPartition{"b", 0}, true)
	var out [][]byte
	var lai *kmsg.LeaderAndISRRequest
	var um *kmsg.UpdateMetadataRequest
	for _, p := range Translate(v, batch, 1, 1) {
		if p.Broker != 2 {
			continue
		}
		out = append(out, in(p.Req, fuzzToOther|fuzzRealEpoch), in(p.Req, 0))
		switch r := p.Req.(type) {
		case *kmsg.LeaderAndISRRequest:
			lai = r
		case *kmsg.UpdateMetadataRequest:
			um = r
		}
	}
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version, cs.BrokerID, cs.BrokerEpoch = ControlledShutdownVersion, 2, -1
	out = append(out, in(cs, 0), in(cs, fuzzRealEpoch))
	forgedUm := *um
	forgedUm.ControllerEpoch = math.MaxInt32
	out = append(out, in(&forgedUm, fuzzToOther))
	forgedUm.BrokerEpoch = -1
	out = append(out, in(&forgedUm, 0))
	hugeLai := *lai
	hugeLai.TopicStates = append([]kmsg.LeaderAndISRRequestTopicState(nil), lai.TopicStates...)
	ts := hugeLai.TopicStates[0]
	ts.PartitionStates = append([]kmsg.LeaderAndISRRequestTopicPartition(nil), ts.PartitionStates...)
	ts.PartitionStates[0].LeaderEpoch, ts.PartitionStates[0].Partition = math.MaxInt32, math.MaxInt32
	ts.PartitionStates[0].Replicas = make([]int32, 4096)
	hugeLai.TopicStates[0] = ts
	out = append(out, in(&hugeLai, fuzzToOther|fuzzRealEpoch))
	oddUm := *um
	oddUm.LiveBrokers = append([]kmsg.UpdateMetadataRequestLiveBroker(nil), um.LiveBrokers...)
	lb := oddUm.LiveBrokers[0]
	lb.Endpoints = append([]kmsg.UpdateMetadataRequestLiveBrokerEndpoint(nil), lb.Endpoints...)
	lb.Endpoints[0].Port = 70000
	oddUm.LiveBrokers[0] = lb
	oddUm.TopicStates = append([]kmsg.UpdateMetadataRequestTopicState(nil), um.TopicStates...)
	uts := oddUm.TopicStates[0]
	uts.PartitionStates = append([]kmsg.UpdateMetadataRequestTopicPartition(nil), uts.PartitionStates...)
	uts.PartitionStates[0].Partition = -1
	uts.PartitionStates = append(uts.PartitionStates, kmsg.UpdateMetadataRequestTopicPartition{Topic: uts.Topic,
		Partition: math.MaxInt32, Leader: 7, LeaderEpoch: math.MaxInt32, Replicas: []int32{7}, ISR: []int32{7}})
	oddUm.TopicStates[0] = uts
	out = append(out, in(&oddUm, fuzzToOther|fuzzRealEpoch))
	return out
}
