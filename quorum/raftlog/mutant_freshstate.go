//go:build mutant_freshstate

package raftlog

// The freshstate mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSyncedAhead = false
	mutFreshState  = true
)
