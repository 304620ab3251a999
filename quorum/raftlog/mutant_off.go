//go:build !mutant_syncedlag && !mutant_freshstate

package raftlog

// Mutation switches: each is false here and true in exactly one build-tagged file
// (mutant_*.go), which `make mutants` builds to check that the simulation catches
// that broken storage. They are constants, so a normal build carries no trace.
const (
	// mutSyncedLag: a Sync records, in SyncedEndFile, the end of the Sync before it
	// instead of its own (the record lags one Sync), so a crash leaves the last
	// acknowledged batches unprotected: damaged, they are cut as a torn tail.
	mutSyncedLag = false
	// mutFreshState: the first open of a fresh directory creates SyncedEndFile before
	// it writes the initial quorum-state, so a crash between the two leaves a
	// directory that looks as if its quorum-state was lost, and the node refuses to
	// start (only a crash inside the open reaches it).
	mutFreshState = false
)
