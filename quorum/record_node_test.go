package quorum

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// recordGatedStorage holds the durable-end record writes the driver hands to its
// host (PrepareRecord's work) until the gate opens, as a slow recorder would. The
// storage's own wait for a write in flight (the next Sync's) is not held: it does the
// write itself when the host has not started it.
type recordGatedStorage struct {
	*raftlog.FileStorage
	gate   chan struct{}
	handed atomic.Int32
}

func (g *recordGatedStorage) PrepareRecord() (func() error, func() error) {
	work, finish := g.FileStorage.PrepareRecord()
	if work == nil {
		return nil, nil
	}
	g.handed.Add(1)
	return func() error { <-g.gate; return work() }, finish
}

// TestCommitDoesNotWaitForTheDurableEndRecord: the durable-end record is written off
// the acknowledgement path. With every record write the driver hands out held, a
// 3-voter quorum keeps committing (followers acknowledge after their data fsync, the
// leader counts its flush at once); once released, every voter's record reaches its
// log end with no further Sync, because the driver hands out the write after each
// acknowledgement (startRecord), not only when the next Sync needs it.
func TestCommitDoesNotWaitForTheDurableEndRecord(t *testing.T) {
	defer goleak.VerifyNone(t)
	gate := make(chan struct{})
	var mu sync.Mutex
	stores := map[int32]*recordGatedStorage{}
	c := newTestClusterWrapped(t, 3, func(id int32, s *raftlog.FileStorage) raftlog.Storage {
		g := &recordGatedStorage{FileStorage: s, gate: gate}
		mu.Lock()
		stores[id] = g
		mu.Unlock()
		return g
	})
	defer c.closeAll()
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release() // before closeAll: the held writes' goroutines must end
	var lead *testNode
	waitFor(t, "a leader that committed", 5*time.Second, func() bool { lead = c.leader(); return lead != nil })
	st, err := lead.node.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		off, err := lead.node.Propose(context.Background(), st.Epoch, []raftlog.Record{{Value: []byte{byte(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a proposal to commit while the record writes are held", 5*time.Second, func() bool {
			return lead.rec.committedBatch(off, off)
		})
	}
	mu.Lock()
	for id, g := range stores {
		if g.handed.Load() == 0 {
			t.Errorf("voter %d's driver handed out no record write", id)
		}
	}
	mu.Unlock()
	release()
	waitFor(t, "every voter's durable-end record to reach its log end", 10*time.Second, func() bool {
		for id, tn := range c.nodes {
			s, err := tn.node.Status(context.Background())
			data, _ := os.ReadFile(filepath.Join(c.dirs[id], raftlog.SyncedEndFile))
			end, ok := raftlog.DecodeSyncedEnd(data)
			if err != nil || !ok || end != s.LogEndOffset {
				return false
			}
		}
		return true
	})
}
