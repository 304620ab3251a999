//go:build mutant_syncedlag

package raftlog

// The syncedlag mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSyncedLag  = true
	mutFreshState = false
)
