package controller

import (
	"fmt"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// loadSnapshot (transcript "load-snapshot node=N"): node N replaces its state with a
// snapshot of the current controller's committed image, encoded and parsed the way
// the quorum writes and reads snapshot files. It prints whether the loaded image
// equals the one a replay of the whole log gives (SnapshotEqualsReplay).
func (e *env) loadSnapshot(tc *testCase) {
	src := e.c
	img := src.committed.visible()
	var recs []raftlog.Record
	for _, r := range img.Records() {
		v, err := r.AppendTo(nil)
		if err != nil {
			e.t.Fatal(err)
		}
		recs = append(recs, raftlog.Record{Value: v})
	}
	prov := img.Provenance()
	id := raftlog.SnapshotID{EndOffset: prov.Offset + 1, Epoch: prov.Epoch}
	var file []byte
	if err := quorum.EncodeSnapshot(id, prov.TimestampMs, quorum.SnapshotRecords(recs), 512, func(b raftlog.Batch) error {
		file = append(file, b.Raw...)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	snap, err := quorum.ParseSnapshot(id, file)
	if err != nil {
		e.t.Fatal(err)
	}
	node := atoi(e.t, tc.arg("node", "2"))
	dst := e.cores[node-1]
	dst.loadSnapshot(snap, e.nowMs)
	replayed := replayLog(e.t, e.log.batches[:e.log.delivered])
	fmt.Fprintf(&e.out, "node %d loaded snapshot (%d,%d): %d batches, %d bytes, equals replay: %t, failed: %v\n",
		node, id.EndOffset, id.Epoch, len(snap.Batches), len(file),
		dst.committed.visible().Dump() == replayed.Dump(), dst.failed)
}
