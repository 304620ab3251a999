package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"testing"
)

func mustWrite(t *testing.T, f File, p []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashFSKeepsOnlyWhatWasSynced: a power loss keeps synced bytes, a prefix of the
// unsynced ones (the last write possibly torn), and only the directory entries a
// SyncDir made durable; a process crash keeps everything.
func TestCrashFSKeepsOnlyWhatWasSynced(t *testing.T) {
	torn, whole, none := 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		c := NewCrashFS(seed)
		mustOK(t, c.MkdirAll("/d", 0o755))
		mustOK(t, c.SyncDir("/"))
		f, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
		mustOK(t, err)
		mustWrite(t, f, []byte("synced"), 0)
		mustOK(t, f.Sync())
		mustOK(t, c.SyncDir("/d"))
		mustWrite(t, f, []byte("-unsynced"), 6)
		g, err := c.OpenFile("/d/b", os.O_RDWR|os.O_CREATE, 0o644)
		mustOK(t, err)
		mustWrite(t, g, []byte("new file"), 0)
		mustOK(t, g.Sync()) // content durable, name not (no SyncDir)
		c.PowerLoss()
		if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
			t.Fatalf("write after the crash: %v", err)
		}
		c.Restart()
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("a handle of the last life still reads: %v", err)
		}
		got, ok := c.ReadFile("/d/a")
		if !ok || !bytes.HasPrefix(got, []byte("synced")) || !bytes.HasPrefix([]byte("synced-unsynced"), got) {
			t.Fatalf("seed %d: /d/a holds %q, want a prefix of %q at least %q", seed, got, "synced-unsynced", "synced")
		}
		switch len(got) {
		case 6:
			none++
		case 15:
			whole++
		default:
			torn++
		}
		if _, err := c.Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("seed %d: a file whose directory was never synced survived: %v", seed, err)
		}
	}
	if torn == 0 || whole == 0 || none == 0 {
		t.Fatalf("over 200 seeds: %d torn, %d whole, %d lost unsynced writes; want each", torn, whole, none)
	}

	c := NewCrashFS(1)
	mustOK(t, c.MkdirAll("/d", 0o755))
	f, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	mustOK(t, err)
	mustWrite(t, f, []byte("cached"), 0)
	c.ProcessCrash()
	c.Restart()
	if got, ok := c.ReadFile("/d/a"); !ok || string(got) != "cached" {
		t.Fatalf("after a process crash: %q %t, want the page cache kept", got, ok)
	}
}

// TestCrashFSRenameNeedsDirSync: a rename over an old name survives only once the
// directory is synced; before, the old file comes back.
func TestCrashFSRenameNeedsDirSync(t *testing.T) {
	for _, sync := range []bool{false, true} {
		c := NewCrashFS(7)
		mustOK(t, c.MkdirAll("/d", 0o755))
		mustOK(t, c.SyncDir("/"))
		mustOK(t, writeFileAtomicFS(c, "/d", "state", []byte("old")))
		mustOK(t, c.SyncDir("/d"))
		mustOK(t, writeFileAtomicFS(c, "/d", "state", []byte("new")))
		if sync {
			mustOK(t, c.SyncDir("/d"))
		}
		c.PowerLoss()
		c.Restart()
		got, _ := c.ReadFile("/d/state")
		want := map[bool]string{false: "old", true: "new"}[sync]
		if string(got) != want {
			t.Fatalf("dir synced %t: state %q, want %q", sync, got, want)
		}
		names, err := c.ReadDir("/d")
		mustOK(t, err)
		if len(names) != 1 && !sync {
			// state.tmp's name was never synced either
			t.Fatalf("dir synced %t: entries %v", sync, names)
		}
	}
}

// TestCrashFSArmedCrashAndFailedSync: CrashAfter(n) crashes inside the n-th mutating
// call, and every call fails after it until Restart; FailNextSync fails one fsync.
func TestCrashFSArmedCrashAndFailedSync(t *testing.T) {
	c := NewCrashFS(3)
	mustOK(t, c.MkdirAll("/d", 0o755))
	mustOK(t, c.SyncDir("/"))
	f, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	mustOK(t, err)
	mustOK(t, c.SyncDir("/d"))
	c.CrashAfter(2, true)
	mustWrite(t, f, []byte("one"), 0)
	if _, err := f.WriteAt([]byte("two"), 3); !errors.Is(err, ErrCrashed) {
		t.Fatalf("second write: %v, want the armed crash", err)
	}
	if !c.Crashed() {
		t.Fatal("not crashed")
	}
	if _, err := c.OpenFile("/d/a", os.O_RDONLY, 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("open after the crash: %v", err)
	}
	c.Restart()
	g, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	mustOK(t, err)
	c.FailNextSync()
	if err := g.Sync(); !errors.Is(err, ErrCrashIO) {
		t.Fatalf("failed sync: %v", err)
	}
	mustOK(t, g.Sync())
}

// crashWorkload drives a FileStorage the way a voter does (quorum-state saves,
// appends across segment rolls, Syncs and PrepareSyncs, the durable-end record
// written after the acknowledgement, a truncation) and records what was
// acknowledged: batches a completed sync covered and the last saved state. The
// record writes (PrepareRecord) run at once after a sync (a follower after its
// ack), after the next append (a leader's recorder while the driver goes on), or
// never, left to the next Sync, or to the TruncateTo and ResetLog that must wait
// for them. It stops at the first error (the crash).
type crashWorkload struct {
	acked    []Batch
	state    QuorumState
	inFlight *QuorumState
	// snaps are the snapshots whose Commit returned, with their bytes.
	snaps     map[SnapshotID][]byte
	completed bool
	// violation: the record was found above the durable end, or trailing the
	// acknowledged end by more than one sync.
	violation string
}

// newFormattedFS is a CrashFS holding the metadata log directory /data, durably, as
// `kraftd storage format` leaves it (formatOps file system calls); FileStorage
// creates the partition directory inside.
func newFormattedFS(seed uint64) *CrashFS {
	c := NewCrashFS(seed)
	if c.MkdirAll("/data", 0o755) != nil || c.SyncDir("/") != nil {
		panic("crashfs: format")
	}
	return c
}

const formatOps = 2

func (w *crashWorkload) run(c *CrashFS) {
	s, err := OpenFileStorage("/data/__cluster_metadata-0", FileOptions{FS: c, SegmentBytes: 400})
	if err != nil {
		return
	}
	defer s.closeFiles()
	save := func(st QuorumState) bool {
		w.inFlight = &st
		if s.SaveQuorumState(st) != nil {
			return false
		}
		w.state, w.inFlight = st, nil
		return true
	}
	var written []Batch
	var recWork, recFinish func() error
	record := func() bool { // the record write handed out after the last sync, if any
		work, finish := recWork, recFinish
		recWork, recFinish = nil, nil
		if work == nil {
			return true
		}
		err := work()
		return finish() == nil && err == nil
	}
	prevAcked := int64(-1) // the end the sync before the last one acknowledged
	sync := func(i int) bool {
		n := len(written)
		if i%2 == 0 {
			if s.Sync() != nil {
				return false
			}
		} else {
			work, finish := s.PrepareSync()
			if finish(work()) != nil {
				return false
			}
		}
		w.acked = append(w.acked[:0], written[:n]...)
		acked := s.EndOffset()
		if data, ok := c.ReadFile(s.dir + "/" + SyncedEndFile); ok && w.violation == "" {
			if rec, ok := DecodeSyncedEnd(data); !ok || rec > acked || rec < prevAcked {
				w.violation = fmt.Sprintf("after the sync of end %d (the one before: %d) the record is at %d (valid %t)",
					acked, prevAcked, rec, ok)
			}
		}
		prevAcked = acked
		recWork, recFinish = s.PrepareRecord()
		switch {
		case i == 9:
			recWork, recFinish = nil, nil // never started: the next Sync writes it itself
		case i%4 == 1:
			return record() // at once, after the ack
		}
		return true // in flight until the next append, or the cut
	}
	w.snaps = map[SnapshotID][]byte{}
	snapshot := func(id SnapshotID) bool {
		sw, err := s.CreateSnapshot(id)
		if err != nil {
			return false
		}
		data := crashSnapshotData(id)
		// In three chunks, as a FetchSnapshot download writes it.
		for _, chunk := range [][]byte{data[:100], data[100:300], data[300:]} {
			if _, err := sw.Write(chunk); err != nil {
				return false
			}
		}
		if sw.Sync() != nil || sw.Commit() != nil {
			return false
		}
		w.snaps[id] = data
		return true
	}
	if !save(QuorumState{LeaderID: 1, LeaderEpoch: 1, VotedID: 1}) {
		return
	}
	next, epoch := int64(0), int32(1)
	for i := 0; i < 12; i++ {
		if i == 6 {
			epoch = 2
			if !save(QuorumState{LeaderID: 2, LeaderEpoch: 2, VotedID: 2}) {
				return
			}
		}
		b := mkBatch(next, epoch, 1+i%3)
		if s.Append([]Batch{b}) != nil {
			return
		}
		written = append(written, b)
		next = b.NextOffset()
		if i != 8 && !record() {
			return
		}
		if i%2 == 1 && !sync(i) {
			return
		}
		if i == 8 {
			// A new leader's log diverged: cut the last two batches (acknowledged or
			// not, they were never committed; from the call on they may be gone).
			cut := written[len(written)-2].BaseOffset
			written = written[:len(written)-2]
			if len(w.acked) > len(written) {
				w.acked = w.acked[:len(written)]
			}
			if s.TruncateTo(cut) != nil || !record() {
				return
			}
			next = cut
			prevAcked = min(prevAcked, cut)
		}
	}
	// A snapshot of the first acknowledged batches, and log cleaning below it.
	last := w.acked[len(w.acked)-1]
	if !snapshot(SnapshotID{EndOffset: last.NextOffset(), Epoch: last.Epoch}) ||
		s.SetLogStart(last.NextOffset()) != nil || s.DeleteSnapshotsBefore(last.NextOffset()) != nil {
		return
	}
	// A follower far behind: a downloaded snapshot, the log restarted at its end.
	far := SnapshotID{EndOffset: next + 100, Epoch: epoch + 1}
	if !snapshot(far) {
		return
	}
	w.acked, written = nil, nil
	if s.ResetLog(far.EndOffset) != nil || !record() {
		return
	}
	b := mkBatch(far.EndOffset, far.Epoch, 2)
	if s.Append([]Batch{b}) != nil {
		return
	}
	written = append(written, b)
	if !sync(0) {
		return
	}
	w.completed = true
}

// TestFileStorageCrashAnywhere runs the workload on a CrashFS, crashes it inside
// each of its file system calls in turn (a power loss; or a process crash, a
// restart that opens the storage, and a power loss right after), and reopens: the
// open must succeed (a crash alone never looks like bit rot), and the log must hold
// every acknowledged batch, the quorum-state the last saved one (or the one being
// saved). The second schedule fails if the open records the recovered end without
// fsyncing what the crashed process left in the page cache.
func TestFileStorageCrashAnywhere(t *testing.T) {
	var total int
	{
		c := newFormattedFS(1)
		var w crashWorkload
		w.run(c)
		if !w.completed || w.violation != "" {
			t.Fatalf("the workload fails without a crash (%s)", w.violation)
		}
		total = c.Ops - formatOps
	}
	points := 0
	for _, schedule := range []string{"power loss", "process crash, open, power loss", "fsync fails, power loss"} {
		for n := 1; n <= total; n++ {
			for seed := uint64(1); seed <= 2; seed++ {
				c := newFormattedFS(seed*1000 + uint64(n))
				var w crashWorkload
				if schedule == "fsync fails, power loss" {
					c.FailSyncAfter(n)
					w.run(c)
					if w.completed {
						continue // no fsync after call n
					}
					c.PowerLoss()
				} else {
					c.CrashAfter(n, schedule == "power loss")
					w.run(c)
					if !c.Crashed() {
						t.Fatalf("%s at call %d of %d: no crash", schedule, n, total)
					}
				}
				c.Restart()
				if schedule == "process crash, open, power loss" {
					s, err := OpenFileStorage("/data/__cluster_metadata-0", FileOptions{FS: c})
					if err != nil {
						t.Fatalf("%s at call %d (seed %d): first open: %v", schedule, n, seed, err)
					}
					_ = s.closeFiles()
					c.PowerLoss()
					c.Restart()
				}
				checkCrashRecovery(t, fmt.Sprintf("%s at call %d of %d (seed %d)", schedule, n, total, seed), c, &w)
				points++
			}
		}
	}
	t.Logf("%d crash points over %d file system calls", points, total)
}

// TestFileStorageCrashInsideOpen: the open after a crash repairs what the crash
// left (a torn tail cut, segments past it dropped, leftovers of interrupted writes
// removed, the log fsynced, leader-epoch-checkpoint rewritten, the durable end
// recorded), and a crash inside that repair must leave a disk the next open still
// recovers. For every crash point of the workload (a power loss or a process crash,
// the first open's calls included), the open after it crashes at each of its own file
// system calls in turn (a power loss or a process crash); the open after that must
// succeed, take a new batch and a quorum-state save, and after a final power loss
// the last open must find every acknowledged batch, the new one, and the new state.
func TestFileStorageCrashInsideOpen(t *testing.T) {
	const dir = "/data/__cluster_metadata-0"
	var total int
	{
		c := newFormattedFS(1)
		var w crashWorkload
		w.run(c)
		total = c.Ops - formatOps
	}
	points := 0
	for n := 1; n <= total; n++ {
		for i, first := range []bool{n%2 == 0, n%2 != 0} { // the workload's crash: power loss, or the process alone
			if n > 6 && i == 1 {
				continue // both kinds for the first open's calls, one kind (alternating) for the rest
			}
			c := newFormattedFS(uint64(n))
			var w crashWorkload
			c.CrashAfter(n, first)
			w.run(c)
			c.Restart()
			for m := 1; ; m++ {
				power := (n+m)%2 == 0 // the open's crash
				cl := c.clone(uint64(n)<<16 | uint64(m))
				w := w.clone()
				cl.CrashAfter(m, power)
				s, err := OpenFileStorage(dir, FileOptions{FS: cl, SegmentBytes: 400})
				if !cl.Crashed() {
					if err != nil {
						t.Fatalf("crash at call %d: the open failed without a crash: %v", n, err)
					}
					_ = s.closeFiles()
					break // the open makes fewer than m calls
				}
				cl.Restart()
				what := fmt.Sprintf("crash at call %d of %d (power loss %t), then at call %d of the open (power loss %t)",
					n, total, first, m, power)
				continueAfterOpen(t, what, cl, w)
				points++
			}
		}
	}
	t.Logf("%d crash points inside the open after %d crash points of the workload", points, total)
}

// continueAfterOpen opens the storage, appends and syncs one batch and saves a new
// quorum-state, loses power, and checks the recovery and the continuation.
func continueAfterOpen(t *testing.T, what string, c *CrashFS, w *crashWorkload) {
	t.Helper()
	s, err := OpenFileStorage("/data/__cluster_metadata-0", FileOptions{FS: c, SegmentBytes: 400})
	if err != nil {
		t.Fatalf("%s: the next open: %v", what, err)
	}
	epoch := int32(3)
	if es := s.EpochEntries(); len(es) > 0 {
		epoch = max(epoch, es[len(es)-1].Epoch)
	}
	b := mkBatch(s.EndOffset(), epoch, 1)
	st := QuorumState{LeaderID: 3, LeaderEpoch: max(epoch, w.state.LeaderEpoch, 3), VotedID: 3}
	if err := s.Append([]Batch{b}); err != nil || s.Sync() != nil || s.SaveQuorumState(st) != nil {
		t.Fatalf("%s: the storage refuses work after the open: %v", what, err)
	}
	_ = s.closeFiles()
	w.state, w.inFlight = st, nil
	c.PowerLoss()
	c.Restart()
	l := checkCrashRecovery(t, what+", continued, power loss", c, w)
	if len(l.Batches) == 0 || !bytes.Equal(l.Batches[len(l.Batches)-1].Raw, b.Raw) {
		t.Fatalf("%s: the batch appended and synced after the open is lost (log from %d, %d batches)",
			what, l.StartOffset, len(l.Batches))
	}
}

// crashSnapshotData is the content the workload writes for snapshot id.
func crashSnapshotData(id SnapshotID) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "snapshot %d ", id.EndOffset), 40)
}

// clone copies the file system (a power loss of the copy draws from seed): each
// crash point inside an open starts from the same disk without rerunning the workload.
func (f *CrashFS) clone(seed uint64) *CrashFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := NewCrashFS(seed)
	c.dirs, c.gen, c.crashed, c.tmpSeq, c.Ops = maps.Clone(f.dirs), f.gen, f.crashed, f.tmpSeq, f.Ops
	c.locks = maps.Clone(f.locks)
	inodes := map[*crashInode]*crashInode{} // cur and durable share inodes
	copyOf := func(m map[string]*crashInode) map[string]*crashInode {
		out := make(map[string]*crashInode, len(m))
		for name, in := range m {
			if inodes[in] == nil {
				inodes[in] = &crashInode{durable: slices.Clone(in.durable), cur: slices.Clone(in.cur), pending: slices.Clone(in.pending)}
			}
			out[name] = inodes[in]
		}
		return out
	}
	c.cur, c.durable = copyOf(f.cur), copyOf(f.durable)
	return c
}

// clone copies what the workload acknowledged.
func (w *crashWorkload) clone() *crashWorkload {
	c := *w
	c.acked = slices.Clone(w.acked)
	c.snaps = maps.Clone(w.snaps)
	return &c
}

func checkCrashRecovery(t *testing.T, what string, c *CrashFS, w *crashWorkload) Loaded {
	t.Helper()
	if w.violation != "" {
		t.Fatalf("%s: before the crash, %s", what, w.violation)
	}
	s, err := OpenFileStorage("/data/__cluster_metadata-0", FileOptions{FS: c})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer s.closeFiles()
	l, err := s.Load()
	if err != nil {
		t.Fatalf("%s: load: %v", what, err)
	}
	// Every acknowledged batch at or after the log start is there; below it, a
	// committed snapshot covers the log start.
	var got []Batch
	for _, b := range l.Batches {
		got = append(got, b)
	}
	i := 0
	for _, b := range w.acked {
		if b.BaseOffset < l.StartOffset {
			continue
		}
		if i >= len(got) || !bytes.Equal(got[i].Raw, b.Raw) {
			t.Fatalf("%s: acknowledged batch at offset %d lost or changed (log [%d, ...), %d batches)",
				what, b.BaseOffset, l.StartOffset, len(got))
		}
		i++
	}
	if l.StartOffset > 0 && (l.Snapshot == nil || l.Snapshot.EndOffset < l.StartOffset) {
		t.Fatalf("%s: the log starts at %d with no snapshot covering it (%v)", what, l.StartOffset, l.Snapshot)
	}
	for id, data := range w.snaps {
		if _, ok := slices.BinarySearchFunc(s.Snapshots(), id, compareSnapshotIDs); !ok && (l.Snapshot == nil || l.Snapshot.EndOffset < id.EndOffset) {
			t.Fatalf("%s: committed snapshot %+v lost (latest %v)", what, id, l.Snapshot)
		}
		if got, size, err := s.ReadSnapshot(id, 0, 1<<20); err == nil && (!bytes.Equal(got, data) || size != int64(len(data))) {
			t.Fatalf("%s: committed snapshot %+v reads %d bytes, wrote %d", what, id, len(got), len(data))
		}
	}
	for _, id := range s.Snapshots() {
		// Committed or not (a Commit the crash cut short may have renamed it), a
		// snapshot the open lists holds every byte: never a partial write.
		if got, _, err := s.ReadSnapshot(id, 0, 1<<20); err != nil || !bytes.Equal(got, crashSnapshotData(id)) {
			t.Fatalf("%s: snapshot %+v is listed with %d of its %d bytes (%v)", what, id, len(got), len(crashSnapshotData(id)), err)
		}
	}
	if l.StateMissing && l.RanBefore {
		// What a lost quorum-state looks like; the core refuses to start on it.
		t.Fatalf("%s: quorum-state missing in a directory the node ran in: a crash must never leave that", what)
	}
	if l.State.LeaderEpoch != w.state.LeaderEpoch && (w.inFlight == nil || l.State.LeaderEpoch != w.inFlight.LeaderEpoch) {
		if !(l.StateMissing && w.state.LeaderEpoch == 0) {
			t.Fatalf("%s: quorum-state epoch %d, saved %d (in flight %v)", what, l.State.LeaderEpoch, w.state.LeaderEpoch, w.inFlight)
		}
	}
	return l
}
