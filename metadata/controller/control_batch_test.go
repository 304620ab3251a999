package controller

import (
	"strings"
	"testing"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// TestControlBatchBetweenInflightAppends: the quorum writes a control batch
// of its own (here kraft.version's KRaftVersionRecord, as a leader does when
// it writes the voter set, KIP-853) between two of the active controller's
// uncommitted appends. When all three commit, the control batch changes
// nothing and the in-flight bookkeeping still matches each append: both
// registrations are in the committed image and nothing is left in flight.
// Before commit 0918fc3 the control batch was matched against the in-flight
// appends and the controller panicked ("committed batch 5-5 does not end
// where an appended batch ends").
func TestControlBatchBetweenInflightAppends(t *testing.T) {
	e := newEnv(t, &testCase{})
	e.run(&testCase{cmd: "lead"})
	e.hold = true
	e.request(e.buildRequest(&testCase{cmd: "register", args: map[string]string{"id": "1"}}))
	ctl := raftlog.EncodeBatch(e.log.endOffset(), e.log.leaderEpoch, 1, true, quorum.KRaftControlRecords(quorum.KRaftVersionDynamic, quorum.VoterSet{}))
	e.log.batches = append(e.log.batches, ctl)
	e.printed = len(e.log.batches)
	e.request(e.buildRequest(&testCase{cmd: "register", args: map[string]string{"id": "2"}}))
	if n := len(e.c.inflight); n != 2 {
		t.Fatalf("%d appends in flight, want 2", n)
	}
	end := e.log.endOffset() - 1
	if first, last := e.c.inflight[0].lastOffset, e.c.inflight[1].lastOffset; !(first < ctl.BaseOffset && ctl.LastOffset < last) {
		t.Fatalf("control batch %d-%d is not between the appends ending at %d and %d", ctl.BaseOffset, ctl.LastOffset, first, last)
	}
	e.out.Reset()
	e.commit()
	if strings.Contains(e.out.String(), "commit error") {
		t.Fatal(e.out.String())
	}
	if n := len(e.c.inflight); n != 0 {
		t.Fatalf("%d appends still in flight after everything committed", n)
	}
	if e.c.committedOffset != end {
		t.Fatalf("committed offset %d, want %d", e.c.committedOffset, end)
	}
	img := e.c.committed.visible()
	for _, id := range []int32{1, 2} {
		if _, ok := img.Broker(id); !ok {
			t.Fatalf("broker %d not registered in the committed image", id)
		}
	}
	e.check()
}
