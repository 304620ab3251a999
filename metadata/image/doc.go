// Package image holds kraftd's view of the cluster metadata: an immutable
// Image of everything the __cluster_metadata log says (features, brokers,
// controllers, topics and partitions, dynamic configs, producer ids) and a
// Delta that replays records on top of an image to produce the next one.
// It follows the shape of Kafka's org.apache.kafka.image package
// (MetadataImage/MetadataDelta) with Go types of its own.
//
// # Why immutable
//
// The broker publisher applies each committed batch to a Delta, calls
// Apply, and stores the new *Image in an atomic.Pointer; request handlers
// load the pointer and read without locks, and a reader holding an old
// image keeps a consistent (if stale) view. The controller uses the same
// types for its committed state.
//
// # Cost model
//
// Topics are indexed by id in a persistent hash trie (hamt.go) and by name
// in a persistent AVL tree (ptree.go), which also holds brokers,
// controllers and configs; partitions live in a persistent 16-way radix
// vector per topic (pvec.go). Apply after a change to one partition
// allocates the new partition and copies one leaf of at most 16 pointers
// plus a handful of trie nodes (about 2 KB and 19 allocations on a
// 1M-partition image), so its cost barely grows with the number of
// partitions. Inside an open Delta,
// nodes the delta created are written in place, so replaying a snapshot
// costs O(records). Each partition keeps its six replica lists in one
// []int32: about 120 heap bytes per RF-3 partition, 170 with KIP-858
// directories (BenchmarkImageMemory).
// "Which partitions does broker B lead" is a scan (see PartitionsLedBy).
//
// # Replay semantics
//
// Delta.Replay follows Kafka's replay rules (PartitionChangeRecord bumps
// partitionEpoch always and leaderEpoch whenever Leader is not -2; nil
// fields mean unchanged; RemoveTopicRecord also removes the topic's
// configs; ...). A record that cannot apply (a partition of an unknown
// topic, a change to an unregistered broker or with a stale broker epoch)
// is an error naming its offset, never skipped.
//
// # Goroutines
//
// None. An Image is safe for concurrent readers; a Delta belongs to the one
// goroutine replaying into it. The package never reads the clock.
package image
