package image

import (
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

func rec(m records.Message) records.Record { return records.Record{Message: m} }

func TestSmoke(t *testing.T) {
	d := NewDelta(nil)
	id := records.UUID{1}
	rs := []records.Record{
		rec(&records.FeatureLevelRecord{Name: MetadataVersionFeature, FeatureLevel: 14}),
		rec(&records.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1, Fenced: true}),
		rec(&records.TopicRecord{Name: "foo", TopicID: id}),
		rec(&records.PartitionRecord{PartitionID: 0, TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
	}
	for i, r := range rs {
		if err := d.Replay(int64(i), 1, r); err != nil {
			t.Fatal(err)
		}
	}
	img := d.Apply()
	t.Log("\n" + img.Dump())
	if err := img.Check(); err != nil {
		t.Fatal(err)
	}
}
