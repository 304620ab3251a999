//go:build !mutant_syncedlag

package raftlog

// mutSyncedLag: a Sync records, in SyncedEndFile, the end of the Sync before it
// instead of its own (the record lags one Sync), so a crash leaves the last
// acknowledged batches unprotected: damaged, they are cut as a torn tail. False here
// and true in mutant_syncedlag.go, which `make mutants` builds to check that the
// simulation catches it. A constant, so a normal build carries no trace.
const mutSyncedLag = false
