// Package quorum implements Kafka's KRaft metadata quorum (KIP-595, with KIP-996
// pre-vote) for the __cluster_metadata log.
//
// # The core
//
// Raft is a deterministic state machine in the style of etcd's raft: no I/O, no clock,
// no goroutines. Time is an argument (nowMs), randomness is Config.Rand. The driver
// feeds it inbound requests and the responses to its own requests through Step, fires
// timers through Tick (at NextDeadlineMs), proposes records with Propose, and drains the
// work through Ready/Advance:
//
//	for {
//		select {
//		case <-timer.C:            r.Tick(now())
//		case m := <-inbound:       if err := r.Step(now(), m); err != nil { stop(err) }
//		case recs := <-proposals:  r.Propose(now(), recs)
//		}
//		for r.HasReady() {
//			rd := r.Ready()
//			send(rd.Messages)
//			if rd.QuorumState != nil { storage.SaveQuorumState(*rd.QuorumState) } // tmp+fsync+rename
//			if rd.TruncateTo >= 0 { storage.TruncateTo(rd.TruncateTo) }
//			storage.Append(rd.Append); storage.Sync()
//			send(rd.MessagesAfterPersist)
//			apply(rd.Committed)
//			r.Advance(rd)
//		}
//		timer.Reset(until(r.NextDeadlineMs()))
//	}
//
// "Persist before you answer": vote grants, epoch changes and a follower's next Fetch
// (whose FetchOffset is its durability ack, on which the leader's high watermark is
// built) are only in MessagesAfterPersist. A leader's Fetch answers may go out before its
// own fsync; the leader counts only its flushed end offset toward the high watermark.
//
// A failed outbound request is stepped back as its response type with Message.Err set.
// Request ids pair requests and responses in both directions (see Message).
//
// # The durable-end record and what recovery can detect
//
// FileStorage keeps a record of the log's durable end (raftlog.SyncedEndFile): damage
// found at open below it is disk damage to batches this node may have acknowledged,
// and stops the node (ErrCorrupt, then `kraftd storage recover`); damage above it is
// a torn tail and is cut. The record is written off the acknowledgement path
// (raftlog.EndRecorder): a follower's Sync, or a leader's flush, makes its batches
// durable and the follower acknowledges them (its next Fetch) or the leader counts
// them toward the high watermark at once; the driver then hands the record of that
// end to the host (startRecord, after the Fetch left, or after the flush completed),
// which writes it while the next flush runs. The storage makes each Sync and flush
// wait for the record write before it (or do it, if nobody started it) before it
// counts, and TruncateTo and ResetLog wait for it and lower the record before they
// cut. Invariants: the record is never above the durable end (it records only ends a
// completed Sync made durable, and is lowered before any cut below it), and the
// acknowledged batches it does not cover are at most those of one Sync or flush.
// What that leaves recovery: after a crash, damage to the batches of that last Sync
// (from the record to the durable end) is cut as a torn tail, like damage to bytes
// that were never fsynced; recovery cannot tell it from crash damage, and a voter
// whose acknowledged batches were cut so could vote as if it never held them. Damage
// anywhere below the record is still detected, and a crash alone (with or without a
// power loss, inside the record write included: its two slots alternate, so the
// previous record stays valid) never makes the open refuse. Kafka keeps no such
// record and detects none of this.
//
// # Roles
//
// Unattached (optionally Voted), Prospective (pre-vote at the current epoch), Candidate,
// Leader, Follower, Resigned. Observers (NodeID not in Config.Voters) are only
// Unattached (discovering the leader by fetching from random voters) or Follower.
// Transitions are the becomeX methods; illegal ones panic with the invariant's name.
//
// # Recovery after disk damage
//
// A voter restarted with a recovery marker (raftlog.Recovery, left by `kraftd storage
// recover` after it cut damaged records) behaves like an observer that fetches as a
// voter: it grants no Vote or PreVote, never campaigns, and asks the other voters who
// leads when its timers run out. It clears the marker (Ready.RecoveryDone) once it
// holds a high watermark sent by a leader of epoch >= E, the highest epoch it may have
// voted in, and then votes only above E (recovery.go). A voter whose quorum-state is
// missing while its log shows epoch > 0 is refused at NewRaft.
//
// # Untrusted peers
//
// Everything a peer sends is checked before anything is adopted or persisted
// (validate.go). With the static voter set of kraft.version 0, Vote, BeginQuorumEpoch
// and EndQuorumEpoch whose candidate or leader is not a voter, or that reach an
// observer, get INCONSISTENT_VOTER_SET (Kafka 3.7). Epoch 2147483647 is never adopted
// (INVALID_REQUEST) nor created: a node at 2147483646 does not campaign. A request or
// response naming another leader for an epoch whose leader is known is rejected
// (INVALID_REQUEST), logged at ERROR and counted; Kafka stops the process there. A
// follower that fetched from its leader within the fetch timeout, and a leader
// fetched from by a majority, neither grant nor adopt a Vote at a higher epoch
// (leader stickiness, Raft thesis 4.2.3) until the leader resigns, nor a pre-vote at a
// higher epoch (KIP-996's rule, at every epoch). A persisted quorum-state no election
// could follow stops NewRaft with what to do.
//
// Answers are untrusted too: nothing a peer answers stops the node. An INVALID_REQUEST
// answer (fatal in Kafka), a divergence below the high watermark, a snapshot id below
// it or after the leader's epoch, a snapshot chunk that does not continue the
// download or announces a snapshot above Config.MaxSnapshotBytes (1 GiB; the driver
// holds a download in memory), or a downloaded file that is not a valid snapshot is refused (refuseResponse: ERROR, Counters.RefusedResponse) and handled as
// a failed request; Step returns an error only for local storage. Counts a peer
// controls are capped before anything is kept: observers tracked by a leader
// (Config.MaxTrackedObservers), the buffer reserved for a snapshot download and its
// total size (Config.MaxSnapshotBytes), the leader addresses an observer remembers. The ids themselves are not authenticated:
// on a PLAINTEXT listener anyone who can reach it can claim a voter's id. FuzzStep
// checks that no message panics the core or makes Step fail.
//
// # The driver
//
// Node (node.go) drives a Raft, and is itself a single-threaded step machine: each
// event (an inbound request, the answer to an outbound one, a timer, the flusher's or
// the snapshot writer's completion) is one call, followed by settle, which handles
// Ready until the core has none. Its clock, network and slow work go through a
// NodeHost. In production that is the goroutine shell of node_shell.go (liveHost and
// the run loop); the seeded simulation (sim_*_test.go) is another host that delivers
// the same events from one queue on a simulated clock, so it runs this very code and
// one seed replays one run. Its disk (sim_disk_test.go) crashes inside any persist
// step and fails fsyncs; make mutants checks that its end-to-end invariants catch the
// broken drivers of mutant_*.go.
//
// # Goroutines
//
// The core has none. The driver loop (node_shell.go run) is the only goroutine that
// touches a Raft.
// Node.WriteSnapshot starts one writer goroutine per snapshot (at most one at a time),
// owned by the Node and stopped with it: it encodes and fsyncs the file, then hands
// the rename and the log cleaning back to the driver. On a leader with FileStorage,
// a flusher goroutine (at most one at a time, started by the driver and awaited by it
// before any other storage work and at stop) fsyncs the batches the driver has just
// written, so that the driver keeps serving followers meanwhile; the leader's own
// offset counts toward the high watermark only once that fsync returned. A recorder
// goroutine (at most one at a time, started by the driver; the storage's Sync, cuts
// and Close wait for it) writes the log's durable-end record after an
// acknowledgement, overlapping the next flush.
//
// # Snapshots (KIP-630)
//
// A leader answers a Fetch below its log start (or at offset 0, or with an epoch older
// than the log start) with its latest SnapshotID; the follower switches to
// FetchSnapshot, handing each chunk to the driver (Ready.SnapshotChunks), and when the
// last one arrives asks the driver to load it (Ready.LoadSnapshot): the driver
// validates and commits the .part file, truncates the log fully (ResetLog) and gives
// the snapshot to every SnapshotListener before any later commit; the core resets its
// log to the snapshot's end at Advance. A file that is not a valid snapshot is
// discarded and refused at Advance, and the follower fetches again. The download belongs to the follower's epoch: a new leader restarts
// it. A leader never loads a snapshot. The log start moves only to the latest
// snapshot (CompactLog), when the log kept below it passes the retention limits.
//
// # Dynamic voters (KIP-853)
//
// A node configured without Config.Voters (controller.quorum.bootstrap.servers only)
// belongs to a dynamic quorum: its voter set is the last VotersRecord in its log or
// latest snapshot, committed or not (kraftHistory, kraft_history.go), starting from
// the bootstrap snapshot 0-0 that `kraftd storage format --standalone` or
// `--initial-controllers` writes; truncation and snapshot loading roll it back. A
// voter is a replica key, the node id plus Config.DirectoryID: a request for this id
// with another directory id gets INVALID_VOTER_KEY, and a controller whose disk was
// replaced is not the voter it replaced. From kraft.version 1 on votes are granted
// without the static membership check. The first leader writes the bootstrap voter
// set into its LeaderChange batch; snapshots carry KRaftVersion and Voters records
// in their header batch. AddVoter and RemoveVoter (voter_change.go; AddRaftVoter and
// RemoveRaftVoter on the wire) change the set one voter at a time, once the
// leader's high watermark is established in its epoch and the previous change
// committed; a leader that removed itself resigns once the removal commits and never
// campaigns again.
//
// # Not yet
//
// UpdateRaftVoter (82), the kraft.version 0 -> 1 upgrade of a static quorum, the
// leader rewriting its own endpoints into the voter set, checking a new voter's
// kraft.version range with ApiVersions, quorum-state data_version 1, and voter
// changes in the simulation.
package quorum
