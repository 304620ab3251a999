//go:build !mutant_sendfirst && !mutant_nostate && !mutant_fig8 && !mutant_norecovery

package quorum

// Mutation switches: each is false here and true in exactly one build-tagged file
// (mutant_*.go), which `make mutants` builds to check that the simulation catches
// that broken driver or core. They are constants, so a normal build carries no trace.
const (
	// mutSendFirst: the driver sends MessagesAfterPersist (vote grants, epoch acks,
	// a follower's Fetch acknowledging its log) before persisting.
	mutSendFirst = false
	// mutSkipStateSave: the driver never writes the quorum-state file.
	mutSkipStateSave = false
	// mutFigure8: a leader counts entries of earlier epochs toward the high
	// watermark before an entry of its own epoch is on a majority (Raft's Figure 8).
	mutFigure8 = false
	// mutNoRecovery: the node ignores the recovery marker `kraftd storage recover`
	// left and removes it at start, as --unsafe-accept-data-loss does: it votes at
	// once, though it may have forgotten records it acknowledged and votes it granted.
	mutNoRecovery = false
)
