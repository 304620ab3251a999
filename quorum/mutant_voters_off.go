//go:build !mutant_twochanges && !mutant_diskack

package quorum

// Mutation switches of the voter changes (KIP-853), as those of mutant_off.go: false
// here, true in exactly one build-tagged file (mutant_twochanges.go,
// mutant_diskack.go) that `make mutants` builds to check that the simulation of the
// production Node, in its dynamic-quorum seeds, catches it.
const (
	// mutTwoChanges: the leader accepts a voter change while the last VotersRecord
	// is uncommitted (two changes in flight: old and new majorities may not overlap).
	mutTwoChanges = false
	// mutDiskAck: a Fetch from a voter's id with another directory id (a replaced
	// disk) counts toward the high watermark as that voter.
	mutDiskAck = false
)
