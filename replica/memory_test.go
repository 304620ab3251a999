package replica

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestApplyAllAllocation pins the bytes ApplyAll allocates to host a new
// partition, garbage included: a broker catching up on a large create is
// handed every partition in one publish, and what ApplyAll allocated on
// top of the partitions it keeps (a copy of the states to put leader moves
// first, an item of some 300 bytes per partition) was live at once, so the
// heap, and with it the garbage collector's goal, grew by that much per
// partition. It was 3,064 bytes per partition (2,048 partitions); 2,671
// now (2,736 with -race), the states applied applyChunk at a time from
// reused buffers.
func TestApplyAllAllocation(t *testing.T) {
	const n = 2048
	m, err := New(Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	states := make([]PartitionState, n)
	for p := range int32(n) {
		states[p] = PartitionState{TopicPartition: TopicPartition{"demo", p}, TopicID: topicID, Leader: 1 + p%2,
			Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := m.ApplyAll(states); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	perPartition := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("ApplyAll allocated %.0f bytes per new partition", perPartition)
	if perPartition > 2900 {
		t.Errorf("ApplyAll allocated %.0f bytes per new partition, want at most 2900", perPartition)
	}
	if got := len(m.Hosted()); got != n {
		t.Fatalf("%d partitions hosted, want %d", got, n)
	}

	// The three checkpoint files of the hosted partitions (the high
	// watermarks' are written every 5 s): each file was built whole, its
	// entries, a sorted copy and its text, 357 bytes per partition for
	// the three; 74 now, the rows taken once and the files streamed.
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := m.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	perPartition = float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("WriteCheckpoints allocated %.0f bytes per partition", perPartition)
	if perPartition > 150 {
		t.Errorf("WriteCheckpoints allocated %.0f bytes per partition, want at most 150", perPartition)
	}
}

// TestPartitionSize pins the Partition struct in the 256-byte size class:
// a broker hosts one per replica, a million on each broker of issue 17's
// largest cluster, so each size class it climbs costs tens of megabytes
// there. It was 368 bytes (the 384-byte class; 376 with the fetcher's
// entry pointer): what few partitions use, their waiters and
// transactions, now hangs off pointers made at first use.
func TestPartitionSize(t *testing.T) {
	if size := unsafe.Sizeof(Partition{}); size > 256 {
		t.Errorf("Partition is %d bytes, want at most 256 (its size class)", size)
	}
}

// TestFetchEntrySize pins a follower's fetch entry in the 80-byte size
// class: one per followed replica (two thirds of a broker's at RF 3). In
// the order its fields came it was 88 bytes (in 96), padded around its
// int32 and flags.
func TestFetchEntrySize(t *testing.T) {
	if size := unsafe.Sizeof(fetchEntry{}); size > 80 {
		t.Errorf("fetchEntry is %d bytes, want at most 80 (its size class)", size)
	}
}
