//go:build mutant_syncedahead

package raftlog

// The syncedahead mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSyncedAhead = true
	mutFreshState  = false
)
