// Package broker is kraftd's KRaft broker (KIP-500, KIP-631): it follows
// the __cluster_metadata log as a quorum observer, turns committed records
// into immutable metadata images, keeps a session with the active
// controller, and answers clients from the last published image.
//
// # Parts
//
//   - publisher (publisher.go): a quorum.Listener. Committed batches are
//     queued by the quorum driver and applied on the publisher's goroutine:
//     each record is decoded (records.Decode) and replayed into an
//     image.Delta; the next image is published through an atomic pointer at
//     a batch boundary outside any metadata transaction; during the initial
//     catch-up (below the first high watermark the quorum reports,
//     quorum.HighWatermarkListener) nothing is published, then one image. A record that
//     cannot be decoded or applied stops the publisher (OnFatal): serving
//     metadata that silently skipped a record would be worse than stopping.
//   - lifecycle (lifecycle.go): BrokerRegistration with a random
//     incarnation id, then BrokerHeartbeat carrying the applied offset;
//     STARTING -> RECOVERY -> RUNNING as the controller reports IsCaughtUp
//     and unfences the broker; Stop performs a controlled shutdown
//     (WantShutDown until ShouldShutdown).
//   - controller channel (controller_channel.go): finds the active
//     controller (the quorum leader, else round-robin over the voters after
//     NOT_CONTROLLER) over a protocol.Client of its own.
//   - client API handlers, one file per API key: Produce (0), Fetch (1, data
//     partitions, consumers and follower replicas), ListOffsets (2),
//     Metadata (3), CreateTopics (19, forwarded), DeleteTopics (20,
//     forwarded), InitProducerId (22), OffsetForLeaderEpoch (23),
//     WriteTxnMarkers (27, from transaction coordinators), DescribeConfigs
//     (32), CreatePartitions (37, forwarded), ElectLeaders (43,
//     forwarded), DescribeQuorum (55,
//     forwarded), DescribeCluster (60), DescribeProducers (61), and
//     ApiVersions decoration (18); with a replica manager the group APIs
//     too: OffsetCommit (8), OffsetFetch (9), FindCoordinator (10), JoinGroup
//     (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups
//     (15), ListGroups (16), DeleteGroups (42) and OffsetDelete (47),
//     answered by the group coordinator (package coordinator/group,
//     groups.go), which keeps its state in __consumer_offsets; and the
//     transaction APIs: FindCoordinator (10, transactional ids),
//     AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
//     TxnOffsetCommit (28, with the group coordinator too),
//     DescribeTransactions (65) and
//     ListTransactions (66), answered by the transaction coordinator
//     (package coordinator/txn, txns.go), which keeps its state in
//     __transaction_state; FindCoordinator creates either topic through the
//     controller on first use.
//   - data plane (data_plane.go): with Config.Replicas set, the publisher
//     calls SyncReplicas after publishes (on its replica goroutine, from the
//     last synced image to the newest), so the replica manager hosts,
//     leads and follows exactly what the image assigns to this broker and
//     deletes the logs of deleted topics; Produce, Fetch and ListOffsets go
//     to its partitions; InitProducerId hands out ids from blocks the active
//     controller allocates (AllocateProducerIds).
//   - replication (replication.go): Start hands the replica manager its
//     transports: follower fetches (and a follower's ListOffsets when its
//     fetch is out of range) to leaders' inter-broker listeners over a
//     protocol.Client per fetcher (leader, num.replica.fetchers index),
//     replaced when the fetcher abandons a parked fetch, AlterPartition to the active
//     controller through the controller channel, and the image's broker
//     registrations for ISR eligibility; Stop (after the controlled
//     shutdown) and Kill stop them first.
//   - ClientAPI (client_api.go): the handlers of keys 3, 19, 20, 32, 37, 43
//     and 60 as a value of their own, built from two small interfaces
//     (MetadataSource: an image; Admin: CreateTopics/DeleteTopics/
//     CreatePartitions/ElectLeaders) and a ControllerID policy. A KRaft Broker is both
//     interfaces itself (its admin calls forward to the controller); the
//     ZooKeeper-era broker of package legacyzk is too (its admin calls write
//     ZooKeeper), so both modes answer clients with the same code without
//     broker and legacyzk importing each other.
//
// # Goroutine map
//
//	Broker
//	  publisher.run   applies queued batches, publishes images
//	    syncReplicas  has the replica manager follow the published images, then
//	                  advances the applied offset; owned and waited for by run
//	  lifecycle.run   registration, heartbeats, controlled shutdown
//	  ClientAPI
//	    (handlers)    Fetch long-polls and acks=-1 Produce waits run on the
//	                  connection's goroutine, parked on replica.Partition.Changed
//	                  (replica fetches: Partition.Appended)
//	  replica.Manager fetchers and the ISR goroutine (package replica), between
//	                  Start and Stop/Kill
//	    auto-create   one per Metadata request that auto-creates topics
//	                  (only with auto.create.topics.enable), and one
//	                  CreateTopics of __consumer_offsets and one of
//	                  __transaction_state at a time; ClientAPI.Close
//	                  (called by Stop) cancels and waits
//	    txn driver    the transaction coordinator's Tick (timeouts, marker
//	                  retries, __transaction_state leadership), started by
//	                  Register, stopped by ClientAPI.Close
//	    group.Coordinator  its driver (timers, following leadership of
//	                  __consumer_offsets) and partition loaders, started by
//	                  Broker.Start, stopped by ClientAPI.Close; JoinGroup and
//	                  SyncGroup park on the connection's goroutine
//
// All are started by Start (publisher, lifecycle) or by a handler while
// the broker runs, are counted in one WaitGroup, and end when Stop cancels
// the broker context; Stop waits for them. The quorum Node calls the
// publisher's Listener methods on its own goroutine; they only queue.
//
// # Consistency
//
// Handlers load the image pointer once per request, so one answer never
// mixes two images. An image is always a committed prefix of the log: a
// lagging broker serves old but consistent metadata; clients are protected
// by leader epochs, not by freshness (Kafka behaves the same).
package broker
