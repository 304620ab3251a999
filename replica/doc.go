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
// the high watermark to the smallest log end offset in the ISR (not while the
// ISR is below min.insync.replicas, KAFKA-15583), and serve
// reads and ListOffsets below it. Log management follows the topic's configs
// (TopicConfig: one per topic, shared by its partitions, replaced whole on
// an update that the open logs follow): segment roll by size and time, retention by
// time and size (whole segments below the high watermark), the broker-level
// checkpoint files and clean-shutdown marker, and deleted logs renamed and
// removed in the background.
//
// Replication (KRaft's division of labour, Kafka's ReplicaManager, Partition
// and ReplicaFetcherThread): followers fetch from their leader (fetcher.go,
// one goroutine per leader broker) and append its batches as they are; the
// leader serves them up to its log end, tracks each follower's log end and
// last caught-up time, and moves the high watermark to the smallest log end
// over the maximal ISR (isr.go). A follower whose log diverges from the
// leader's (it led an epoch the new leader never saw) is answered with
// DivergingEpoch and truncates (follower.go), durably before it fetches on;
// one whose fetch is out of range asks the leader's log end and start
// (ListOffsets as a replica) and cuts back to the end or starts over at the
// start, as Kafka's fetchOffsetAndTruncate. Followers take the leader's log
// start offset from fetch answers. Followers that have not caught up within
// replica.lag.time.max.ms leave the ISR, caught-up eligible ones rejoin it,
// through AlterPartition to the controller, one change in flight per
// partition (alter.go).
//
// Producer state (producer_state.go, Kafka's ProducerStateManager) is
// updated by leaders and followers alike from every batch they append, so a
// new leader answers retries as duplicates; it is snapshotted in Kafka's
// <offset>.snapshot format at every segment roll and at shutdown, reloaded
// at open (and after a truncation) from the latest readable snapshot plus
// the batches after it, and producers idle for producer.id.expiration.ms
// are forgotten.
//
// Transactions, partition side (txn.go): transactional batches are admitted
// only when AppendOptions.VerifyTxn vouches for them; a producer's first
// one opens its transaction, its COMMIT/ABORT marker (AppendTxnMarker, for
// WriteTxnMarkers; fenced by producer and coordinator epoch) closes it, an
// abort enters the log's .txnindex. The last stable offset is the high
// watermark, or the first offset of the earliest transaction still open or
// whose marker is not yet committed; read_committed reads stop there and
// carry the aborted transactions of the range.
//
// A follower's fetch round costs O(partitions whose fetch state changed)
// once its transport keeps an incremental session (IncrementalFetchTransport,
// the broker's): the fetcher marks what its answers, put/drop, backoffs and
// retention moved, and hands the transport only that (fetcher.go; issue 17:
// at 100k partitions, ~33k per leader, perf of idle brokers had put the
// per-round read of every partition's log end, start and latest epoch at
// 21-30% of their samples). Only a full request (a session starting or
// starting over) reads them all.
//
// Not yet (issue 13): a roll fsyncs the old segment on the appending
// goroutine.
//
// # Goroutines
//
// The log manager's background goroutine, started by Manager.Start and
// stopped by Manager.Close (which waits for it), as Kafka's LogManager
// scheduler runs it, never on the metadata publisher's goroutine: retention
// every log.retention.check.interval.ms (CleanupLogs), the three checkpoint
// files at their intervals (WriteCheckpoints), and the removal of deleted
// logs' directories. A second one, started and stopped with it, writes new
// logs' partition.metadata files (up to background.threads at once,
// Config.BackgroundThreads, each on a goroutine of its own that ends with
// the batch), as Kafka's UnifiedLog schedules that
// flush; Close writes those it did not reach (storage.FlushTopicIDs, on
// its own goroutine), as Kafka's shutdown lets the scheduler's due
// flush-metadata-file tasks run before LogManager closes the logs. Between Manager.StartReplication and StopReplication (or
// Close): num.replica.fetchers fetchers per leader broker followed (one
// stops when it has no partition left), and one ISR goroutine
// (shrink checks every replica.lag.time.max.ms / 2, AlterPartition sends);
// the Manager owns and stops them. Partitions are safe for concurrent use:
// appends and role changes are serialized by the partition's mutex, reads
// run beside them, and waiters wait on Partition.Changed (high watermark
// moves: consumers, acks=-1 produces) or Partition.Appended (appends:
// follower fetches), or register a Waiter for either (WakeOnChange,
// WakeOnAppend; with a key, the Waiter records which partitions fired: a
// fetch session reads only those again, plus those where ReadForFollower
// said the follower is outside the ISR or an ISR change is in flight:
// FollowerRead.OutOfISR). Retention and DeleteRecords
// moving the log start fire both.
package replica
