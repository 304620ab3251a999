//go:build mutant_nostate

package quorum

// The nostate mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSendFirst     = false
	mutSkipStateSave = true
	mutFigure8       = false
	mutNoRecovery    = false
)
