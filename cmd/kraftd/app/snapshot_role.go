package app

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// snapshotRole writes this node's metadata snapshots, as Kafka's SnapshotGenerator:
// once metadata.log.max.record.bytes.between.snapshots bytes were committed since
// the last snapshot, or metadata.log.max.snapshot.interval.ms passed with anything
// new, it snapshots the node's committed image (the controller's on a controller,
// the broker's published one otherwise). The image is immutable, so the records
// are encoded on the quorum node's writer goroutine and neither the controller's
// loop nor the quorum driver waits for the write.
//
// It is a quorum listener only to count committed bytes; it owns one goroutine,
// started by Start and stopped by Stop.
type snapshotRole struct {
	a        *App
	maxBytes int64
	interval time.Duration
	image    func() *image.Image

	pending   atomic.Int64 // committed bytes since the last snapshot
	written   atomic.Int64 // snapshots written, for tests, logs and metrics
	busy      atomic.Bool  // a snapshot is being written
	lastBytes atomic.Int64 // size of the latest snapshot written
	lastAtMs  atomic.Int64 // when it was written (Unix ms); the start before the first
	wake      chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func newSnapshotRole(a *App) *snapshotRole {
	s := &snapshotRole{
		a:        a,
		maxBytes: a.cfg.MetadataLogMaxRecordBytesBetweenSnapshots,
		interval: time.Duration(a.cfg.MetadataLogMaxSnapshotIntervalMs) * time.Millisecond,
		wake:     make(chan struct{}, 1),
	}
	s.lastAtMs.Store(time.Now().UnixMilli())
	return s
}

// HandleCommit implements quorum.Listener: it counts and, when due, wakes the loop.
func (s *snapshotRole) HandleCommit(batches []raftlog.Batch) {
	n := int64(0)
	for _, b := range batches {
		n += int64(b.Size())
	}
	if s.pending.Add(n) >= s.maxBytes {
		s.poke()
	}
}

// HandleLeaderChange implements quorum.Listener.
func (s *snapshotRole) HandleLeaderChange(quorum.LeaderAndEpoch) {}

// HandleLoadSnapshot implements quorum.SnapshotListener: a loaded snapshot is
// already on disk, so nothing before it needs another one.
func (s *snapshotRole) HandleLoadSnapshot(quorum.Snapshot) { s.pending.Store(0) }

func (s *snapshotRole) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start picks the image to snapshot (roles are built by now) and runs the loop.
func (s *snapshotRole) Start(context.Context) error {
	switch {
	case s.a.controller != nil:
		ctl := s.a.controller.Controller()
		s.image = func() *image.Image { img, _ := ctl.CommittedImage(); return img }
	case s.a.broker != nil:
		b := s.a.broker.Broker()
		s.image = b.Image
	default:
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { s.run(ctx) })
	return nil
}

// Stop ends the loop; a snapshot being written is finished or abandoned by the
// quorum node, which owns the writer.
func (s *snapshotRole) Stop(context.Context) error {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	return nil
}

func (s *snapshotRole) run(ctx context.Context) {
	tick := time.Hour
	if s.interval > 0 {
		tick = min(s.interval, time.Second)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		pending := s.pending.Load()
		byTime := s.interval > 0 && pending > 0 && time.Since(last) >= s.interval
		if pending < s.maxBytes && !byTime {
			continue
		}
		if s.snapshot(ctx) {
			s.pending.Add(-pending)
			last = time.Now()
		}
	}
}

// snapshot writes one snapshot of the current committed image and waits for it.
// It reports whether the bytes counted so far are covered by a snapshot.
func (s *snapshotRole) snapshot(ctx context.Context) bool {
	s.busy.Store(true)
	defer s.busy.Store(false)
	node := s.a.quorum.Node()
	img := s.image()
	prov := img.Provenance()
	if node == nil || prov.Offset < 0 {
		return false
	}
	id := raftlog.SnapshotID{EndOffset: prov.Offset + 1, Epoch: prov.Epoch}
	log := s.a.log.With(zap.Int64("endOffset", id.EndOffset), zap.Int32("epoch", id.Epoch))
	start := time.Now()
	done, err := node.WriteSnapshot(ctx, id, prov.TimestampMs, imageRecords(img))
	switch {
	case errors.Is(err, quorum.ErrSnapshotNotNewer):
		return true // nothing new since the latest snapshot
	case err != nil:
		// The image may not be batch aligned yet (an open metadata transaction) or
		// another snapshot is being written: try again at the next wake-up.
		log.Debug("snapshot deferred", zap.Error(err))
		return false
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		return false
	}
	if err != nil {
		log.Warn("snapshot failed", zap.Error(err))
		return false
	}
	s.written.Add(1)
	s.lastAtMs.Store(time.Now().UnixMilli())
	if fi, err := os.Stat(filepath.Join(s.a.cfg.MetadataDir(), "__cluster_metadata-0", raftlog.SnapshotFileName(id))); err == nil {
		s.lastBytes.Store(fi.Size())
	}
	log.Info("metadata snapshot written", zap.Duration("took", time.Since(start)),
		zap.Int("partitions", img.NumPartitions()))
	return true
}

// imageRecords streams an image's records encoded as metadata log records. The
// records are never collected (Image.EachRecord reuses one PartitionRecord) and
// the values are carved out of 1 MiB arenas rather than allocated one by one: a
// million-partition snapshot would otherwise be millions of allocations for the
// garbage collector to chase while the node serves commits.
func imageRecords(img *image.Image) iter.Seq2[raftlog.Record, error] {
	const arenaBytes = 1 << 20
	return func(yield func(raftlog.Record, error) bool) {
		arena := make([]byte, 0, arenaBytes)
		for r := range img.EachRecord() {
			if cap(arena)-len(arena) < 4096 {
				arena = make([]byte, 0, arenaBytes) // the old one lives on in the records
			}
			start := len(arena)
			out, err := r.AppendTo(arena)
			if err != nil {
				yield(raftlog.Record{}, err)
				return
			}
			v := out[start:len(out):len(out)]
			if cap(out) == cap(arena) {
				arena = out
			}
			if !yield(raftlog.Record{Value: v}, nil) {
				return
			}
		}
	}
}
