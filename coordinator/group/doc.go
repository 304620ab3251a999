// Package group is the classic group coordinator (Kafka's GroupCoordinator
// and GroupMetadataManager, the pre-KIP-848 protocol): consumer groups join,
// sync, heartbeat and leave, and commit offsets, on the broker that leads the
// group's __consumer_offsets partition.
//
// # Where a group lives
//
// Group g belongs to partition Utils.abs(javaHashCode(g)) % 50 of
// __consumer_offsets (PartitionFor); the partition's leader is its
// coordinator, which FindCoordinator names. The coordinator keeps the group
// in memory and writes to the partition, through the replica manager as its
// leader, every change that must survive a move: the group's membership and
// assignment (GroupMetadataKey v2 / GroupMetadataValue v3, once a rebalance
// completes and when the group empties) and committed offsets
// (OffsetCommitKey v1 / OffsetCommitValue v3); tombstones delete them. A
// write is answered once the high watermark passes it, so an acknowledged
// commit is on every in-sync replica.
//
// When this broker comes to lead a partition (in a new leader epoch) it
// loads it: it waits until the high watermark reaches the log end, reads
// the log from its start and replays it, the last record of each key
// winning; requests for its groups meanwhile answer
// COORDINATOR_LOAD_IN_PROGRESS. Members come back as they were (same member
// ids, generation and assignment, the group Stable), so a coordinator move
// costs no rebalance. When it stops leading the partition its groups are
// dropped, parked requests answered NOT_COORDINATOR, and later requests get
// NOT_COORDINATOR too.
//
// # The state machine
//
//	Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
//	CompletingRebalance --leader's SyncGroup committed--> Stable
//	Stable, CompletingRebalance --join, leave, expiry--> PreparingRebalance
//	PreparingRebalance --nobody rejoined--> Empty
//	Empty --DeleteGroups, retention--> Dead
//
// JoinGroup parks until the join phase ends: every member has rejoined, or
// the rebalance timeout passed (members that did not rejoin are dropped);
// the first rebalance of an Empty group waits group.initial.rebalance.delay.ms,
// again for every newcomer, up to the rebalance timeout. From v4 a new
// member first gets MEMBER_ID_REQUIRED and its id (KIP-394). Static members
// (group.instance.id, KIP-345) rejoin under a new id without a rebalance
// and fence their old id (FENCED_INSTANCE_ID). Sessions end
// session.timeout.ms after the last heartbeat, commit or join; a member that
// joined but does not sync within the rebalance timeout is dropped.
// Assignors run on the clients; the coordinator passes member metadata to
// the leader and the leader's assignment to each member.
//
// # Time, goroutines, locking
//
// Time is Config.NowMs (tests fake it and call Tick). Goroutines: the driver
// started by Start (Tick every TickIntervalMs: leadership changes, timers,
// offsets retention) and one loader per partition being loaded; Close stops
// them and waits. Request handlers call in from their connections'
// goroutines; one mutex guards all state and is released while a write
// waits for the high watermark.
//
// Transactional offset commits (TxnOffsetCommit) are written as a
// transactional batch of the producer (sequence -1) and kept pending per
// producer id until the transaction's marker (CompleteTxn, from the
// broker's marker paths; a load replays batches and markers alike);
// OffsetFetch RequireStable answers UNSTABLE_OFFSET_COMMIT meanwhile.
//
// Not here yet: the KIP-848 consumer protocol, and log
// compaction of __consumer_offsets (it is created with cleanup.policy
// compact, which the storage layer does not carry out yet).
package group
