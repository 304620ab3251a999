package broker

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// startQuorumNode runs a quorum Node whose only voter is node 1 (serving the
// controller listener at addr), on its own file storage, with l registered.
func startQuorumNode(t *testing.T, id int32, addr string, fetchMaxBytes int32, l quorum.Listener) *quorum.Node {
	t.Helper()
	store, err := raftlog.OpenFileStorage(t.TempDir(), raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := quorum.NewNode(quorum.NodeConfig{
		Raft: quorum.Config{
			NodeID: id, ClusterID: "test-cluster-id-AAAAAA", Voters: []int32{1},
			ElectionTimeoutMs: 150, FetchTimeoutMs: 1000, ElectionBackoffMaxMs: 100, AppendLingerMs: quorum.AppendLingerMsNone,
			RequestTimeoutMs: 1000, FetchMaxBytes: fetchMaxBytes,
		},
		Storage: store, VoterAddrs: map[int32]string{1: addr}, ListenerName: "CONTROLLER",
	})
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		n.Register(l)
	}
	if id == 1 {
		reg := protocol.NewRegistry()
		n.RegisterHandlers(reg)
		srv, err := protocol.NewServer(protocol.ServerConfig{Listeners: []protocol.ListenerConfig{{Name: "CONTROLLER", Addr: addr, Registry: reg}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
	}
	n.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// TestPublisherHoldsInitialCatchUp: a broker's publisher on a real observer
// Node that starts 40 batches behind the leader, fetching one batch per Fetch
// (the leader's quorum FetchMaxBytes of 1: it sends one batch), publishes one image,
// at the leader's high watermark, and the replica manager (onPublish) follows
// it once from the empty image, as Kafka's MetadataLoader publishes nothing
// before it caught up with the high watermark. Before, each Fetch's batch
// became an image of its own (a partial image and a diff per Fetch). Later
// commits publish as before.
func TestPublisherHoldsInitialCatchUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	leader := startQuorumNode(t, 1, addr, 1, nil) // one batch per Fetch answer
	waitForCond(t, func() bool { m := leader.Metrics(); return m.Role == quorum.Leader && m.HighWatermark > 0 })
	epoch := leader.Metrics().Epoch
	const batches = 40
	propose := func(name string, i int) int64 {
		t.Helper()
		msgs := []records.Message{topicRecord(name, uuid(byte(i+1)))}
		if i == 0 {
			msgs = append([]records.Message{mvRecord(14)}, msgs...)
		}
		var recs []raftlog.Record
		for _, m := range msgs {
			v, err := records.Record{Version: versionFor(m), Message: m}.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, raftlog.Record{Value: v})
		}
		last, err := leader.Propose(context.Background(), epoch, recs)
		if err != nil {
			t.Fatal(err)
		}
		return last
	}
	var last int64
	for i := range batches {
		last = propose(fmt.Sprint("t", i), i)
	}
	waitForCond(t, func() bool { return leader.Metrics().HighWatermark > last })

	p := newPublisher(zaptest.NewLogger(t), nil, nil)
	var mu sync.Mutex
	var synced []int64 // prev and next offsets of every replica-manager step
	p.onPublish = func(prev, next *image.Image) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, prev.Provenance().Offset, next.Provenance().Offset)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	startQuorumNode(t, 9, addr, 1, p)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := p.waitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	got := append([]int64(nil), synced...)
	mu.Unlock()
	if len(got) != 2 || got[0] != -1 || got[1] < last {
		t.Fatalf("replica manager steps (prev, next offset pairs) %v: want one, from -1 to >= %d", got, last)
	}
	if n := p.publishes.Load(); n != 1 {
		t.Fatalf("%d images published during the catch-up, want 1", n)
	}
	if nt := p.image().NumTopics(); nt != batches {
		t.Fatalf("caught-up image has %d topics, want %d", nt, batches)
	}

	// After the catch-up every commit publishes as before.
	last = propose("after", batches)
	waitOffset(t, p, last)
	if _, ok := p.image().TopicByName("after"); !ok || p.publishes.Load() < 2 {
		t.Fatalf("a commit after the catch-up: published %d images, topic visible %t", p.publishes.Load(), ok)
	}
}
