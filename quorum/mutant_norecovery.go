//go:build mutant_norecovery

package quorum

// The norecovery mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSendFirst     = false
	mutSkipStateSave = false
	mutFigure8       = false
	mutNoRecovery    = true
)
