//go:build mutant_twochanges

package quorum

// The twochanges mutant (see mutant_voters_off.go): make mutants expects the
// simulation to fail.
const (
	mutTwoChanges = true
	mutDiskAck    = false
)
