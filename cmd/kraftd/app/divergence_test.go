package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// meta builds a Metadata answer: brokers 1-3 and topic t with one
// partition per leader given.
func meta(t string, leaders ...int32) *kmsg.MetadataResponse {
	m := kmsg.NewPtrMetadataResponse()
	for id := int32(1); id <= 3; id++ {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "127.0.0.1", 9000+id
		m.Brokers = append(m.Brokers, b)
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t)
	for p, l := range leaders {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.Replicas, mp.ISR = int32(p), l, []int32{l}, []int32{l}
		mt.Partitions = append(mt.Partitions, mp)
	}
	m.Topics = append(m.Topics, mt)
	return m
}

func TestKRaftVerdicts(t *testing.T) {
	brokers := []brokerAddr{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}}
	views := map[int32]*kraftView{
		1: {id: 1, offset: 41, meta: meta("foo", 1, 2), stable: true},
		2: {id: 2, offset: 41, meta: meta("foo", 1, 3), stable: true}, // same offset, other leader
		3: {id: 3, offset: 17, meta: meta("bar", 3), stable: true},    // behind: different, but never compared
	}
	diffs := compareSameOffset(views)
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], "broker 2: partition foo-1: leader 3") ||
		!strings.Contains(diffs[0], "broker 1 at the same offset 41 has leader 2") {
		t.Fatalf("differences %q", diffs)
	}
	got := kraftVerdicts(brokers, views, 42, diffs)
	want := []string{"in sync", "divergent", "behind at offset 17", "unreachable"}
	for i, bc := range got {
		if bc.Status != want[i] {
			t.Errorf("broker %d: %q, want %q", bc.ID, bc.Status, want[i])
		}
	}
	rep := DivergenceReport{Brokers: got}
	if !rep.Divergent() || len(got[1].Differences) != 1 || len(got[2].Differences) != 0 {
		t.Fatalf("report %+v", got)
	}
	// A broker that moved while read is not compared at all.
	views[2].stable = false
	if d := compareSameOffset(views); len(d) != 0 {
		t.Fatalf("unstable view compared: %q", d)
	}
}

func TestPrepareLegacyStorage(t *testing.T) {
	const zkID = "Hst7qMjoIUNf_KhrLDG1HQ"
	dir := t.TempDir()
	cfg := Config{NodeID: 2, LogDirs: []string{dir}}
	if err := prepareLegacyStorage(&cfg, zkID); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMetaProperties(dir)
	if err != nil || m.Version != 0 || m.ClusterID != zkID || m.NodeID != 2 {
		t.Fatalf("meta.properties %+v %v", m, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, MetaPropertiesFile))
	if !strings.Contains(string(raw), "broker.id=2\n") || strings.Contains(string(raw), "node.id") {
		t.Fatalf("not a ZooKeeper-era meta.properties:\n%s", raw)
	}
	// Same cluster again: fine. Another cluster in ZooKeeper, or a
	// configured cluster.id ZooKeeper does not have: refused.
	if err := prepareLegacyStorage(&cfg, zkID); err != nil {
		t.Fatal(err)
	}
	if err := prepareLegacyStorage(&cfg, "AAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("other cluster in ZooKeeper: %v", err)
	}
	cfg.ClusterID = "AAAAAAAAAAAAAAAAAAAAAA"
	if err := prepareLegacyStorage(&cfg, zkID); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("cluster.id not ZooKeeper's: %v", err)
	}
}
