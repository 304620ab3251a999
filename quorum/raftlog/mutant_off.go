//go:build !mutant_syncedahead && !mutant_freshstate

package raftlog

// Mutation switches: each is false here and true in exactly one build-tagged file
// (mutant_*.go), which `make mutants` builds to check that the simulation catches
// that broken storage. They are constants, so a normal build carries no trace.
const (
	// mutSyncedAhead: a Sync (and PrepareSync) records its end in SyncedEndFile
	// before the data's fsync instead of after it, so the record may claim bytes that
	// are not durable: a power loss between the two leaves a record above the log,
	// and the open refuses an undamaged disk as if acknowledged data were lost.
	mutSyncedAhead = false
	// mutFreshState: the first open of a fresh directory creates SyncedEndFile before
	// it writes the initial quorum-state, so a crash between the two leaves a
	// directory that looks as if its quorum-state was lost, and the node refuses to
	// start (only a crash inside the open reaches it).
	mutFreshState = false
)
