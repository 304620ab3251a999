// Package raftlog holds the on-disk and on-wire representation of the
// __cluster_metadata log: RecordBatch v2 encoding with CRC-32C and control records,
// the Storage interface the quorum driver persists through, an in-memory Storage for
// tests and a file Storage laid out as Kafka lays out a partition directory
// (segments, leader-epoch-checkpoint, quorum-state, snapshots).
//
// It has no goroutines. It imports nothing from the project.
package raftlog
