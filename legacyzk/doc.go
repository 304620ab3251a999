// Package legacyzk emulates the ZooKeeper-era Kafka controller (Kafka 3.3,
// the last line before the KRaft migration code) faithfully enough that
// kraftd's side-by-side runs compare KRaft with the real thing: same znode
// layout and JSON, same election and fencing, same push protocol over the
// Kafka wire, same costs (one getData per znode, pipelined at most
// zookeeper.max.in.flight.requests deep) and the same divergence cases.
//
// # Pieces
//
//	store.go, store_zk.go, store_mem.go   Store: one ZooKeeper session
//	    (go-zookeeper/zk, or an in-memory server for unit tests only)
//	zkdata.go        znode paths and JSON exactly as Kafka's ZkData
//	elect.go         /controller + /controller_epoch election, resignation
//	failover.go      read everything back, then push full state
//	statemachine.go  fenced conditional per-partition writes, elections
//	election.go      pure leader-election rules
//	events.go        broker / topic / partition / deletion watch handlers
//	translate.go     pure: (batch, view, controller id, epoch) -> requests
//	sender.go        channel manager: one FIFO + one sender per broker
//	broker.go        the legacy broker: registration, cache, accessors
//	04_..07_*.go     push handlers (broker side) and ControlledShutdown
//	56_*.go          AlterPartition on the controller
//	43_*.go          ElectLeaders: the broker's side and the controller's
//	data_plane.go    the broker's data plane: replica manager, topic
//	                 configs, producer id blocks, replication transports
//	admin.go         CreateTopics / DeleteTopics / CreatePartitions via ZK
//	divergence.go    compare a broker's cache, or the controller's view,
//	                 with ZooKeeper
//	faults.go        crash-after-write, dropped UpdateMetadata, zombie,
//	                 a ZooKeeper write lost or its answer lost
//
// # What is emulated
//
// Every broker registers the ephemeral /brokers/ids/<id> (the znode's czxid
// is its broker epoch, KIP-380) and competes for /controller with one Multi
// {create ephemeral /controller, CAS /controller_epoch}. The winner keeps
// the new version of /controller_epoch and prefixes every ZooKeeper write
// with a check of it (KAFKA-6082), so a fenced controller's write fails and
// it resigns. On failover it reads every broker, topic and partition state
// (P + T + 2B + a few reads), then queues UpdateMetadata (brokers only),
// LeaderAndIsr for every hosted replica and UpdateMetadata for every
// partition to every live broker, before handling any other event. A dead
// broker (its ephemeral gone) makes the controller elect new leaders with a
// re-read plus a fenced conditional write per partition, then push; a
// state znode whose controller_epoch is newer than the controller's aborts
// that partition's change. New partitions' znodes are created as Kafka's
// createTopicPartitionStatesRaw does: /partitions per topic, then
// /partitions/<p> and the state znode per partition, each a fenced create,
// each step pipelined; a partition the controller holds no state for
// (Kafka's NewPartition) has its state znode created without reading it
// first. A new topic, or partitions added to one, goes
// through onNewPartitionCreation: only its partitions are written and
// pushed (UpdateMetadata carries only them), so a create costs what it
// creates, not what exists. Controlled shutdown runs through the
// ControlledShutdown RPC (key 7). A broker names (and sends
// ControlledShutdown and AlterPartition to) the controller of the last
// UpdateMetadata it accepted, not the one its /controller watch saw.
//
// A ZooKeeper request whose connection dropped in flight is sent again
// once the session has reconnected (Kafka's retryRequestsUntilConnected);
// an expired session makes the broker resign, open a new session and
// register again with a new broker epoch.
//
// Brokers accept a push only if its broker epoch is not older than their
// registration (STALE_BROKER_EPOCH) and its controller epoch is not older
// than the highest seen (STALE_CONTROLLER_EPOCH); LeaderAndIsr applies a
// partition only with a strictly greater leader epoch; UpdateMetadata
// overwrites the cache (last writer wins). The cache is an *image.Image
// built by replaying records translated from each accepted push.
//
// # Untrusted pushes and admin requests (kraftd's additions)
//
// Anyone who reaches a broker's listener can send it LeaderAndIsr,
// UpdateMetadata, StopReplica or ControlledShutdown; ZooKeeper-era Kafka
// authenticates nothing on PLAINTEXT either. Kafka's rules alone let one
// forged UpdateMetadata at controller epoch 2147483647 fence the real
// controller for good (the highest epoch seen wins) and let broker epoch -1
// ("unknown", for pre-2.2 controllers) or any later one through. kraftd
// checks what the broker cannot vouch for against ZooKeeper before
// adopting it (Broker.verifyPush): a controller epoch above what
// /controller_epoch holds (read after a sync) is STALE_CONTROLLER_EPOCH and
// not adopted; broker epoch -1 is STALE_BROKER_EPOCH (the versions served
// always carry the real one), and one above the broker's must be the czxid
// of its registration. ControlledShutdown must carry the broker's current
// epoch exactly. Request sizes are bounded by socket.request.max.bytes
// (Config.Server), and admin requests by Config.MaxRecordsPerUserOp.
//
// What a forged push can still do on PLAINTEXT: a sender that knows (or
// guesses) the broker's epoch, the czxid of /brokers/ids/<id>, readable by
// anyone with ZooKeeper access, and the current controller epoch is
// indistinguishable from the controller. It can rewrite the broker's
// metadata cache (misdirect clients until the next real push covers the
// same partitions), raise leader epochs with LeaderAndIsr so the real
// controller's next LeaderAndIsr for those partitions is refused as stale,
// make the broker forget replicas with StopReplica, and move leadership off
// a broker with ControlledShutdown. Every accepted push is bounded by the
// frame size but its effect persists. Only network isolation of the
// listeners (and, later, authentication) stops that.
//
// # Wire versions
//
// As a Kafka 3.3 controller with inter.broker.protocol.version 3.3 sends
// them: LeaderAndIsr v6, UpdateMetadata v7, StopReplica v3,
// ControlledShutdown v3 (v8/v7/v4 only add KRaft-migration fields).
// Brokers serve exactly these versions, and the controller AlterPartition
// v0-v2 (v2 brought topic ids in 3.3; v3's per-member broker epochs are
// 3.5+).
//
// # Fault switches (faults.go)
//
// Broker.Faults() returns the node's switches. They act only on a broker
// started with Config.FaultInjection (otherwise Apply returns
// ErrFaultInjectionDisabled). Faults.Apply takes them by name for an admin
// endpoint: crash-after-zk-write (the controller writes
// ZooKeeper, then the node dies before pushing; its session lingers
// CrashSessionLingerMs), drop-update-metadata-to=<id>, pause-before-push
// (a zombie: frozen with pushes queued; after Resume its pushes leave with
// the old controller epoch and brokers that saw the new one reject them),
// lose-zk-write-ack and lose-zk-write (ZooKeeper and the controller's
// in-memory state disagree: Broker.ControllerView and
// Truth.CompareController show it), resume, clear. Broker.LoseSession
// closes the session as an expiry would.
//
// # For the broker package and the app
//
// Broker.Image() is the cache to serve clients from (brokers unfenced,
// provenance offset = accepted UpdateMetadata count, epoch = controller
// epoch). CreateTopics, DeleteTopics and CreatePartitions take and return
// kmsg bodies with KRaft mode's error codes. ReadTruth + Truth.Compare /
// Truth.CompareMetadata back `kraftd check-divergence`. Stats() has the
// failover split (ZooKeeper reads, elections, pushes) and the mean cost
// of one fenced partition-state write.
//
// # What is not emulated
//
// Partition reassignment, auto leader rebalance and the
// /admin/preferred_replica_election znode (preferred and unclean election
// are served through ElectLeaders, 43_elect_leaders.go),
// /isr_change_notification (pre-2.7 ISR propagation; AlterPartition is
// served), log-dir events, broker-level dynamic configs and AlterConfigs
// (topic configs are read from /config/topics and /config/changes, which
// only tools write), ACLs,
// feature versioning in /feature, and stray-log deletion. Topic deletion
// does not wait for StopReplica responses before deleting the znodes.
//
// # Data plane (Config.DataPlane, OpenDataPlane)
//
// With a replica manager the broker is Kafka 3.3's ReplicaManager side:
// LeaderAndIsr hosts each replica as leader or follower at the pushed
// leader epoch, ISR and partition epoch (the state znode's zkVersion),
// the request's partitions together (one replica-manager batch, so the
// followers reach their fetchers at once);
// StopReplica closes it, or deletes its log with the delete flag;
// followers fetch (v13) from leaders found in the metadata cache; a
// leader's ISR change goes to the controller as AlterPartition v2, which
// makes one fenced conditional write of the state znode expecting the
// partition epoch the leader sent (BADVERSION: INVALID_UPDATE_VERSION and
// an UpdateMetadata push of what ZooKeeper holds); producer ids come in
// blocks of 1000 claimed with conditional writes of
// /latest_producer_id_block. Pushes that touch replicas wait for
// OpenDataPlane, which the app calls with the replica manager once the log
// directories match /cluster/id.
//
// # Goroutines
//
//	controller.run   one per broker: owns the ZooKeeper session and all
//	                 controller state (Kafka's controller-event thread)
//	sender.run       one per live target broker while active; stopped on
//	                 broker removal and on resignation (queue dropped)
//	eventQueue.pump  one per Store: forwards watch events in order
//	getAll/multiAll  short-lived workers bounding in-flight ZooKeeper
//	                 requests; joined before the call returns
//	protocol.Server / protocol.Client goroutines (see package protocol)
//
// Broker.Close stops them all.
package legacyzk
