//go:build mutant_diskack

package quorum

// The diskack mutant (see mutant_voters_off.go): make mutants expects the simulation
// to fail.
const (
	mutTwoChanges = false
	mutDiskAck    = true
)
