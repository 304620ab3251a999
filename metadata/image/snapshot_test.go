package image

import (
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

// TestFromSnapshotEqualsReplay: SnapshotEqualsReplay at the image level. The image
// rebuilt from Records() of a replayed image equals it, at every prefix of random
// logs, and reports the snapshot's position.
func TestFromSnapshotEqualsReplay(t *testing.T) {
	for seed := range uint64(5) {
		_, imgs := genLog(t, seed, 200)
		for i, img := range imgs {
			if i%10 != 0 && i != len(imgs)-1 {
				continue
			}
			prov := Provenance{Offset: int64(i) + 41, Epoch: 3, TimestampMs: 1234}
			got, err := FromSnapshot(img.Records(), prov)
			if err != nil {
				t.Fatalf("seed %d prefix %d: %v", seed, i, err)
			}
			if got.Provenance() != prov {
				t.Fatalf("seed %d prefix %d: provenance %+v, want %+v", seed, i, got.Provenance(), prov)
			}
			if stateDump(got) != stateDump(img) {
				t.Fatalf("seed %d prefix %d: snapshot image differs from replay:\n%s\nvs\n%s", seed, i, stateDump(got), stateDump(img))
			}
		}
	}
}

func TestFromSnapshotRejectsInvalid(t *testing.T) {
	// A partition of a topic the snapshot never created cannot be loaded.
	recs := []records.Record{{Message: &records.PartitionRecord{PartitionID: 0, TopicID: records.UUID{1}}}}
	if _, err := FromSnapshot(recs, Provenance{Offset: 9, Epoch: 1}); err == nil {
		t.Fatal("loaded a partition without its topic")
	}
}

// TestEachRecordEncodesAsRecords: streaming an image's records (one reused
// PartitionRecord) encodes to the same bytes, in the same order, as Records().
func TestEachRecordEncodesAsRecords(t *testing.T) {
	for seed := range uint64(5) {
		_, imgs := genLog(t, seed, 200)
		img := imgs[len(imgs)-1]
		var want [][]byte
		for _, r := range img.Records() {
			b, err := r.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, b)
		}
		i := 0
		for r := range img.EachRecord() {
			b, err := r.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(want) || string(b) != string(want[i]) {
				t.Fatalf("seed %d: record %d of EachRecord differs from Records()", seed, i)
			}
			i++
		}
		if i != len(want) {
			t.Fatalf("seed %d: EachRecord yielded %d records, Records() %d", seed, i, len(want))
		}
	}
}
