// Package replica is the data plane's replica manager: the partitions a broker
// hosts, each a storage.Log plus its role (leader or follower at a leader epoch,
// with an ISR), its high watermark and its idempotent producers' sequence state.
// It serves both modes and knows neither: the KRaft image publisher (package
// broker) or, later, the zk-legacy LeaderAndIsr/StopReplica handlers tell it
// what to host through Apply and Remove.
//
// What works: leaders validate and append producer batches (one RecordBatch v2
// per partition, CRC, record count and offset deltas, max.message.bytes;
// compressed batches are stored as sent unless the topic's compression.type
// names another codec, then recompressed; keys required on compacted
// topics), assign offsets and the leader epoch, check idempotent sequences
// (Kafka's five-batch window, duplicates answered with the original offsets,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, wrap-around), advance
// the high watermark to the smallest log end offset in the ISR, and serve
// reads and ListOffsets below it. Log management follows the topic's configs
// (TopicConfig, updated in place): segment roll by size and time, retention by
// time and size (whole segments below the high watermark), the broker-level
// checkpoint files and clean-shutdown marker, and deleted logs renamed and
// removed in the background.
//
// Not yet (issue 13): followers do not fetch from their leader, so a partition
// with a follower in its ISR never advances its high watermark; no
// AlterPartition (ISR shrink/expand); producer state is rebuilt at open from
// the active segment only, with no producer-state snapshots (a producer whose
// last batches are in older segments is unknown after a restart, and an
// unknown producer may start at any sequence, as in Kafka), and producer ids
// never expire (producer.id.expiration.ms); a roll fsyncs the old segment on
// the appending goroutine; no OFFSET_NOT_AVAILABLE after an election (KIP-207).
//
// # Goroutines
//
// One, started by Manager.Start and stopped by Manager.Close (which waits for
// it): the log manager's background work, as Kafka's LogManager scheduler
// runs it, never on the metadata publisher's goroutine: retention every
// log.retention.check.interval.ms (CleanupLogs), the three checkpoint files at
// their intervals (WriteCheckpoints), and the removal of deleted logs'
// directories. Partitions are safe for
// concurrent use: appends and role changes are serialized by the partition's
// mutex, reads run beside them, and waiters (long-polling fetches, acks=-1
// produces) wait on Partition.Changed.
package replica
