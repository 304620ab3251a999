// Package controller is kraftd's KRaft quorum controller (KIP-631): the
// state machine that turns controller-bound requests (BrokerRegistration,
// BrokerHeartbeat, CreateTopics, ...) into metadata records, appends them
// to the __cluster_metadata log through the quorum, and answers once they
// are committed.
//
// # Shape
//
// The logic lives in core (core.go and the numbered handler files, one per
// Kafka API key as in kfake). Handlers are pure functions of the latest
// APPENDED state returning a Result{Records, Response}: two CreateTopics
// sent back to back see each other even before either commits. State only
// changes by replaying records, exactly as every standby controller and
// broker does, so the image the active controller decides on is the image
// everyone else will build.
//
// Three views of the log are kept, all immutable image.Image values that
// share structure:
//
//   - committed: everything the quorum has committed (what a standby has);
//   - pending:   committed plus the batches this controller appended but
//     has not seen committed yet (what handlers decide on);
//   - inflight:  the pending view at the end of each appended batch, so
//     that a commit simply adopts the matching view instead of replaying
//     the controller's own records twice.
//
// Losing leadership drops pending and inflight, reverts to committed, and
// answers every waiting request with NOT_CONTROLLER.
//
// # Offsets and epochs
//
// A broker's epoch is the offset of its RegisterBrokerRecord, which is
// inside the record itself, so the controller must know where its next
// record lands before it appends. It learns the log end when the LeaderChange
// batch of its own epoch (at EpochStartOffset) commits, activates, and from
// then on tracks nextOffset itself; every Propose result is checked against
// it (Kafka's OffsetControlManager does the same).
//
// # Large operations
//
// One Propose is one batch. An operation whose records exceed
// Config.MaxRecordsPerBatch (10000, Kafka's MAX_RECORDS_PER_BATCH) or
// Config.MaxBatchBytes is split over several batches wrapped in
// BeginTransactionRecord/EndTransactionRecord (KIP-868, metadata.version
// 3.6-IV1+), proposed back to back from the event loop. Readers (brokers,
// standbys) hold an open transaction back until its end marker; a new
// leader that finds one open writes AbortTransactionRecord on activation.
// That is for atomic operations (Kafka's ControllerResult.atomicOf). The
// non-atomic ones (ControllerResult.of: what a BrokerHeartbeat writes,
// controlled-shutdown moves and fencing included, the stale-session
// fencing, UnregisterBroker, AlterPartition, ElectLeaders) are cut into plain batches
// with no markers, any metadata.version; each applies on its own once
// committed, the response waits for the last. A leader change midway keeps
// the committed part: the next active controller's heartbeat handling
// computes from the committed image and moves only what is left.
// Kafka refuses user operations over 10000 records
// (MAX_RECORDS_PER_USER_OP); kraftd does so over Config.MaxRecordsPerUserOp,
// whose default is Kafka's 10000, with Kafka's answers (POLICY_VIOLATION for
// CreateTopics and the config requests, UNKNOWN_SERVER_ERROR per topic that
// does not fit for CreatePartitions and DeleteTopics), or over one batch
// when the metadata.version has no transactions. Only a raised cap lets an
// operation take more than one batch. A CreateTopics asking for more
// than 10,000 partitions is refused as in Kafka (MAX_PARTITIONS_PER_BATCH),
// whatever the record cap: a 100,000-partition create in one request had
// the quorum leader append 100,000 records in one burst (issue 17). The cap is checked from the
// request's counts before anything of their size is allocated, so
// NumPartitions 2147483647 costs nothing.
//
// The event loop proposes such an operation one batch per step and only
// then replays its batches into the pending view, one per step, so the
// quorum replicates the whole operation while the controller replays it (an
// inflight entry has no view until then; a commit that reaches it replays
// it first). Between steps it
// adopts commits and answers the requests that write nothing (steady
// BrokerHeartbeats, DescribeCluster); anything that would write waits until
// the last batch is replayed, so no record lands inside the operation's
// transaction that the operation did not plan for, and every handler
// decides on a view that includes the whole operation.
//
// # Where kraftd differs from Kafka (on purpose)
//
//   - Config.MaxRecordsPerUserOp (Kafka's fixed 10000 by default) can be
//     raised: operations over 10000 records then use a transaction.
//   - A CreatePartitions topic whose new partitions overflow the cap
//     writes none of them (Kafka writes those that fit, and answers the
//     topic UNKNOWN_SERVER_ERROR as kraftd does).
//   - No ZkMigrationStateRecord in the bootstrap records (no migration,
//     and the records package has no codec for it).
//   - A new broker incarnation replacing one whose session expired before
//     the periodic check fenced it first fences the old one, so leaders
//     never sit on a fenced broker (Kafka before KIP-966 leaves them).
//   - DescribeCluster(EndpointType 2) is answered below metadata.version
//     3.7-IV0, from Config.Voters.
//   - A BrokerHeartbeat that writes nothing is answered at once when the
//     broker's registration is the same in the committed and the pending
//     view (it reveals nothing uncommitted); Kafka answers every heartbeat
//     only once the log end commits, so one large create delays them all.
//   - Topic configs are not checked against Kafka's config schema, and the
//     CreateTopics response lists only the configs given.
//   - metadata.version 3.7-IV2 and later (log directories, ELR) are not
//     supported: Config.Validate refuses them, and UpdateFeatures refuses to
//     raise metadata.version past 3.7-IV1 (SupportedFeatures).
//   - Controllers do not register themselves (no ControllerRegistration,
//     KIP-919), so UpdateFeatures asks the other controllers which levels they
//     support with ApiVersions on their controller listener
//     (Config.OtherControllers), as Kafka did before 3.7, at every
//     metadata.version; a controller that does not answer refuses the update.
//
// # Goroutines
//
// One: the Controller's event loop (controller.go). It owns core, runs
// handlers, calls Quorum.Propose, adopts commits queued by HandleCommit and
// HandleLeaderChange (which never block the quorum driver), and runs the
// periodic duties (session expiry fencing, NoOpRecord) on one timer.
// Request handlers registered with protocol.Registry run on connection
// goroutines and only exchange messages with the loop. Close stops the loop
// and answers waiting requests with NOT_CONTROLLER.
//
// core itself never reads the clock: time is passed in as nowMs, which is
// what lets the transcript tests in testdata/ replay any scenario exactly.
package controller
