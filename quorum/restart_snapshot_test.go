package quorum_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestRestartAtSnapshotNotContinuedByLog (issue 14, section 2): voter 3 took part in
// epoch 3, whose leader wrote entries at offsets 2..3 that never committed, then
// downloaded the committed snapshot (6,1) from a later leader and crashed after
// committing it but before resetting its log. At restart the core set hw = applied =
// min(snapshot end, log end) = 4: it claimed epoch 3's entries as committed, and
// every leader's DivergingEpoch (epoch 1 ends at 6, so truncate to 2) fell below that
// high watermark, at every restart. Now FileStorage restarts the log at the
// snapshot, the high watermark is the snapshot's end, and the follower fetches from
// there.
func TestRestartAtSnapshotNotContinuedByLog(t *testing.T) {
	dir := t.TempDir()
	s, err := raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(v string) []raftlog.Record { return []raftlog.Record{{Value: []byte(v)}, {Value: []byte(v)}} }
	if err := s.Append([]raftlog.Batch{
		raftlog.EncodeBatch(0, 1, 1, false, rec("committed")),
		raftlog.EncodeBatch(2, 3, 2, false, rec("never committed")),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveQuorumState(raftlog.QuorumState{LeaderID: 1, LeaderEpoch: 5, VotedID: -1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	snap := raftlog.SnapshotID{EndOffset: 6, Epoch: 1}
	w, err := s.CreateSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(raftlog.EncodeBatch(0, 1, 1, false, rec("snapshot"))); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the crash: ResetLog never ran
		t.Fatal(err)
	}

	s, err = raftlog.OpenFileStorage(dir, raftlog.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loaded, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := quorum.NewRaft(quorum.Config{NodeID: 3, Voters: []int32{1, 2, 3}, ClusterID: "c", Logger: zap.NewNop()}, loaded, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if st.HighWatermark != 6 || st.AppliedOffset != 6 || st.LogEndOffset != 6 {
		t.Fatalf("restarted with hw %d, applied %d, log end %d; want all at the snapshot's end 6",
			st.HighWatermark, st.AppliedOffset, st.LogEndOffset)
	}
	r.Tick(1)
	rd := r.Ready()
	var fetch *quorum.FetchRequest
	for _, m := range append(rd.Messages, rd.MessagesAfterPersist...) {
		if m.Fetch != nil {
			fetch = m.Fetch
		}
	}
	if fetch == nil || fetch.FetchOffset != 6 || fetch.LastFetchedEpoch != 1 {
		t.Fatalf("first Fetch %+v; want offset 6 in epoch 1", fetch)
	}

	// A core handed such a log by another Storage refuses to start instead.
	bad := raftlog.Loaded{State: raftlog.EmptyQuorumState(), Snapshot: &snap,
		Batches: []raftlog.Batch{raftlog.EncodeBatch(0, 1, 1, false, rec("a")), raftlog.EncodeBatch(2, 3, 2, false, rec("b"))}}
	if _, err := quorum.NewRaft(quorum.Config{NodeID: 3, Voters: []int32{1, 2, 3}, ClusterID: "c", Logger: zap.NewNop()}, bad, 0); err == nil {
		t.Fatal("NewRaft accepted a log that does not continue its snapshot")
	}
}
