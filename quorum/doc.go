// Package quorum implements Kafka's KRaft metadata quorum (KIP-595, with KIP-996
// pre-vote): a deterministic core (Raft) driven by Step/Tick and drained through
// Ready/Advance, plus the driver that gives it a clock, a disk and a network.
package quorum
