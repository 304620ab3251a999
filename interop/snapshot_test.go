package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// snapshotOpts make every node snapshot after each commit and keep no log below
// its latest snapshot, so the log start moves past anything a stopped node holds.
func snapshotSettings() []app.Setting {
	return []app.Setting{
		{Key: "metadata.log.max.record.bytes.between.snapshots", Value: "1"},
		{Key: "metadata.max.retention.bytes", Value: "0"},
	}
}

func snapshotOpts() []Opt {
	var out []Opt
	for _, s := range snapshotSettings() {
		out = append(out, Override(s.Key, s.Value))
	}
	return out
}

func status(t *testing.T, a *app.App) quorum.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := a.Quorum().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func createTopics(t *testing.T, c *cluster, partitions int32, rf int16, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, rf, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
}

// leaderApp is the controller that leads the quorum.
func leaderApp(t *testing.T, c *cluster) (int32, *app.App) {
	var id int32
	waitFor(t, "a quorum leader", 10*time.Second, func() bool {
		for _, nid := range c.controllers {
			if a := c.nodes[nid]; a != nil && status(t, a).Role == quorum.Leader {
				id = nid
				return true
			}
		}
		return false
	})
	return id, c.nodes[id]
}

// wipedBrokerCluster starts controllers plus two brokers that snapshot after every
// commit, creates topics (replication factor rf), stops the last broker and wipes its
// disk, creates more, and waits until every controller's log starts past 0: the
// stopped broker can come back only through a snapshot. The cluster is returned with
// that broker stopped.
func wipedBrokerCluster(t *testing.T, controllers int, rf int16) *cluster {
	t.Helper()
	c := newCluster(t, append(snapshotOpts(), Controllers(controllers), Brokers(2))...)
	waitRunning(t, c)
	createTopics(t, c, 6, rf, "before")
	last := int32(controllers + 2)
	c.stop(last)
	c.wipe(last)
	createTopics(t, c, 3, 1, "while-away")
	waitLogCleanedPast(t, c, 0)
	return c
}

// waitLogCleanedPast waits until every running controller's log starts above offset.
func waitLogCleanedPast(t *testing.T, c *cluster, offset int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("every controller's log to start above %d", offset), 15*time.Second, func() bool {
		for _, nid := range c.controllers {
			if a := c.nodes[nid]; a != nil && status(t, a).LogStartOffset <= offset {
				return false
			}
		}
		return true
	})
}

// wipe gives a stopped node an empty data directory.
func (c *cluster) wipe(nid int32) {
	if err := os.RemoveAll(c.dirs[nid]); err != nil {
		c.t.Fatal(err)
	}
	c.dirs[nid] = c.t.TempDir()
}

func waitSameImage(t *testing.T, what string, a, b func() string) {
	t.Helper()
	waitFor(t, what, 15*time.Second, func() bool { return a() == b() })
}

// TestKRaftWipedBrokerRejoinsThroughSnapshot: a broker whose disk was wiped while
// the controllers snapshotted and cleaned their logs gets a snapshot id for its
// Fetch at offset 0, downloads it with FetchSnapshot, loads it, replays the tail,
// is unfenced, and ends with exactly the image of the broker that never stopped.
func TestKRaftWipedBrokerRejoinsThroughSnapshot(t *testing.T) {
	c := wipedBrokerCluster(t, 3, 2)
	_, lead := leaderApp(t, c)
	if lead.SnapshotsWritten() == 0 {
		t.Fatal("the leader wrote no snapshot")
	}

	fresh := c.start(5, snapshotSettings())
	waitRunningBroker(t, fresh.Broker())
	createTopics(t, c, 2, 2, "after")
	waitFor(t, "both brokers to apply the topic created after the rejoin", 15*time.Second, func() bool {
		_, ok4 := c.nodes[4].Broker().Image().TopicByName("after")
		_, ok5 := fresh.Broker().Image().TopicByName("after")
		return ok4 && ok5
	})
	waitSameImage(t, "the wiped broker's image to equal broker 4's",
		func() string { return c.nodes[4].Broker().Image().Dump() },
		func() string { return fresh.Broker().Image().Dump() })
	if st := status(t, fresh); st.LogStartOffset == 0 {
		t.Fatalf("wiped broker's log starts at 0: it replayed instead of loading a snapshot (%+v)", st)
	}
	for _, topic := range []string{"before", "while-away", "after"} {
		if _, ok := fresh.Broker().Image().TopicByName(topic); !ok {
			t.Fatalf("topic %s missing on the rejoined broker", topic)
		}
	}
}

func waitRunningBroker(t *testing.T, b *broker.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v (state %v)", err, b.State())
	}
}

// TestKRaftStaleControllerCatchesUpThroughSnapshot: a follower controller that was
// down while the others cleaned their logs past its end comes back through
// FetchSnapshot and ends with the leader's committed image.
func TestKRaftStaleControllerCatchesUpThroughSnapshot(t *testing.T) {
	c := newCluster(t, append(snapshotOpts(), Controllers(3), Brokers(1))...)
	waitRunning(t, c)
	createTopics(t, c, 4, 1, "one")
	leadID, _ := leaderApp(t, c)
	stale := c.controllers[0]
	if stale == leadID {
		stale = c.controllers[1]
	}
	end := status(t, c.nodes[stale]).LogEndOffset
	c.stop(stale)
	createTopics(t, c, 4, 1, "two", "three")
	waitLogCleanedPast(t, c, end)

	back := c.start(stale, snapshotSettings())
	_, lead := leaderApp(t, c)
	waitSameImage(t, "the stale controller's committed image to equal the leader's",
		func() string { img, _ := lead.Controller().CommittedImage(); return img.Dump() },
		func() string { img, _ := back.Controller().CommittedImage(); return img.Dump() })
	if st := status(t, back); st.LogStartOffset <= end {
		t.Fatalf("stale controller's log starts at %d, not past its old end %d: no snapshot loaded", st.LogStartOffset, end)
	}
}

// TestKRaftSnapshotTransferCutMidway: the leader answers the first FetchSnapshot
// with half the snapshot and then cuts the connection on the next chunk. The
// fetcher retries at the same position and completes with a valid snapshot.
func TestKRaftSnapshotTransferCutMidway(t *testing.T) {
	c := wipedBrokerCluster(t, 1, 1)

	var halves, cuts atomic.Int32
	dir := filepath.Join(c.dirs[1], "__cluster_metadata-0")
	c.nodes[1].Server().ControlKey(59, func(req *protocol.Request) (kmsg.Response, error, bool) {
		in := req.Body.(*kmsg.FetchSnapshotRequest)
		p := in.Topics[0].Partitions[0]
		switch {
		case p.Position == 0 && halves.Load() == 0:
			resp, ok := halfChunk(dir, 1, in, p)
			if !ok {
				// A newer snapshot replaced this one (and retention removed it) between
				// the Fetch answer and this request: let the real handler answer
				// SNAPSHOT_NOT_FOUND and cut the next download instead.
				return nil, nil, false
			}
			halves.Add(1)
			return resp, nil, true
		case p.Position > 0 && cuts.Load() == 0:
			cuts.Add(1)
			return nil, errors.New("cut midway"), true
		}
		return nil, nil, false
	})
	fresh := c.start(3, snapshotSettings())
	waitRunningBroker(t, fresh.Broker())
	waitSameImage(t, "the broker to load the snapshot and catch up",
		func() string { return c.nodes[2].Broker().Image().Dump() },
		func() string { return fresh.Broker().Image().Dump() })
	if halves.Load() != 1 || cuts.Load() != 1 {
		t.Fatalf("faults injected: %d half chunks, %d cuts; want 1 and 1", halves.Load(), cuts.Load())
	}
}

// halfChunk answers a FetchSnapshot at position 0 with the first half of the file,
// as leader would whose answer the network then loses the rest of.
// It reports false when the leader no longer holds that snapshot.
func halfChunk(dir string, leader int32, in *kmsg.FetchSnapshotRequest, p kmsg.FetchSnapshotRequestTopicPartition) (kmsg.Response, bool) {
	id := raftlog.SnapshotID{EndOffset: p.SnapshotID.EndOffset, Epoch: p.SnapshotID.Epoch}
	data, err := os.ReadFile(filepath.Join(dir, raftlog.SnapshotFileName(id)))
	if err != nil {
		return nil, false
	}
	resp := kmsg.NewPtrFetchSnapshotResponse()
	resp.Version = in.Version
	rp := kmsg.NewFetchSnapshotResponseTopicPartition()
	rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = id.EndOffset, id.Epoch
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, p.CurrentLeaderEpoch
	rp.Size, rp.Position, rp.Bytes = int64(len(data)), 0, data[:len(data)/2]
	rt := kmsg.NewFetchSnapshotResponseTopic()
	rt.Topic = in.Topics[0].Topic
	rt.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{rp}
	resp.Topics = []kmsg.FetchSnapshotResponseTopic{rt}
	return resp, true
}

// TestKRaftSnapshotTransferResumesFromNewLeader: a wiped broker's snapshot download
// is cut midway by the leader (half a file, then every later chunk fails) and the
// leader then stops. The broker finds the new leader, downloads the snapshot from it
// and ends with the same image as the broker that never stopped.
func TestKRaftSnapshotTransferResumesFromNewLeader(t *testing.T) {
	c := wipedBrokerCluster(t, 3, 2)

	old, lead := leaderApp(t, c)
	dir := filepath.Join(c.dirs[old], "__cluster_metadata-0")
	var halves, cuts atomic.Int32
	cut := make(chan struct{})
	lead.Server().ControlKey(59, func(req *protocol.Request) (kmsg.Response, error, bool) {
		in := req.Body.(*kmsg.FetchSnapshotRequest)
		p := in.Topics[0].Partitions[0]
		if p.Position == 0 && halves.Load() == 0 {
			if resp, ok := halfChunk(dir, old, in, p); ok {
				halves.Add(1)
				return resp, nil, true
			}
			return nil, nil, false // a newer snapshot replaced it: let the handler say so
		}
		if halves.Load() == 0 {
			return nil, nil, false
		}
		if cuts.Add(1) == 1 {
			close(cut)
		}
		return nil, errors.New("cut midway"), true
	})
	fresh := c.start(5, snapshotSettings())
	select {
	case <-cut:
	case <-time.After(15 * time.Second):
		t.Fatalf("the download never reached its second chunk (%d half chunks)", halves.Load())
	}
	c.stop(old)
	waitRunningBroker(t, fresh.Broker())
	waitSameImage(t, "the broker to load the new leader's snapshot and catch up",
		func() string { return c.nodes[4].Broker().Image().Dump() },
		func() string { return fresh.Broker().Image().Dump() })
	if now, _ := leaderApp(t, c); now == old {
		t.Fatalf("controller %d still leads after it stopped", old)
	}
	if halves.Load() != 1 || cuts.Load() < 1 {
		t.Fatalf("faults injected: %d half chunks, %d cuts; want 1 and at least 1", halves.Load(), cuts.Load())
	}
}
