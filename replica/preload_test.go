package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kraftd/kraftd/storage"
)

// LoadLogs (a ZooKeeper-era broker's LogManager.startup, before it
// registers) opens and recovers every partition log of the directory; the
// first Apply adopts the loaded log instead of opening it again, Remove
// with deleteLog deletes one never adopted, and Close closes the rest and
// still writes the clean-shutdown marker.
func TestLoadLogsBeforeApply(t *testing.T) {
	dir := t.TempDir()
	state := func(topic string, p int32) PartitionState {
		return PartitionState{TopicPartition: TopicPartition{topic, p}, TopicID: topicID, Leader: 1,
			LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	}
	states := []PartitionState{state("demo", 0), state("demo", 1), state("demo", 2), state("gone", 0), state("idle", 0)}
	m, err := New(Config{Dir: dir, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		part, _ := m.Partition(TopicPartition{"demo", p})
		if _, err := part.AppendAsLeader(batch(int(p)+1, -1, 0, 0), acksLeader); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash after demo-2's last append was torn: no clean-shutdown
	// marker, half a batch at the end of its segment.
	if err := os.Remove(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "demo-2", storage.SegmentFileName(0, storage.LogSuffix))
	good, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(batch(3, -1, 0, 0)[:40]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.MkdirAll(filepath.Join(dir, "not a partition"), 0o755); err != nil {
		t.Fatal(err)
	}

	m = newManager(t, dir)
	n, err := m.LoadLogs()
	if err != nil || n != len(states) {
		t.Fatalf("LoadLogs: %d logs, %v; want %d", n, err, len(states))
	}
	// Recovered at load, before anything names the partition.
	if st, err := os.Stat(seg); err != nil || st.Size() != good.Size() {
		t.Fatalf("demo-2's segment after LoadLogs: %v %v, want the torn tail cut to %d bytes", st.Size(), err, good.Size())
	}
	m.mu.RLock()
	loaded := m.loadedLogs[TopicPartition{"demo", 1}]
	unrecovered := len(m.unrecovered)
	m.mu.RUnlock()
	if loaded == nil || unrecovered != 0 {
		t.Fatalf("demo-1 loaded %v, %d logs unrecovered", loaded != nil, unrecovered)
	}
	if err := m.ApplyAll(states[:3]); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		part, ok := m.Partition(TopicPartition{"demo", p})
		if !ok || part.Log().EndOffset() != int64(p)+1 {
			t.Fatalf("demo-%d hosted %v", p, ok)
		}
	}
	if part, _ := m.Partition(TopicPartition{"demo", 1}); part.Log() != loaded {
		t.Fatal("demo-1's Apply opened its log again instead of adopting the loaded one")
	}
	if err := m.Remove(TopicPartition{"gone", 0}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("gone-0 after Remove with deleteLog: %v", err)
	}
	m.mu.RLock()
	left := len(m.loadedLogs)
	m.mu.RUnlock()
	if left != 1 {
		t.Fatalf("%d loaded logs not adopted, want 1 (idle-0)", left)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after every loaded log was recovered and closed: %v", err)
	}
	// idle-0 was closed by Close: it opens again, with its topic id.
	m = newManager(t, dir)
	if err := m.Apply(states[4]); err != nil {
		t.Fatal(err)
	}
	if part, _ := m.Partition(TopicPartition{"idle", 0}); part == nil {
		t.Fatal("idle-0 not hosted")
	} else if id, _ := part.Log().TopicID(); id != topicID {
		t.Fatalf("idle-0 topic id %x", id)
	}
}
