//go:build mutant_fig8

package quorum

// The fig8 mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSendFirst     = false
	mutSkipStateSave = false
	mutFigure8       = true
	mutNoRecovery    = false
)
