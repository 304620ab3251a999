//go:build mutant_sendfirst

package quorum

// The sendfirst mutant (see mutant_off.go): make mutants expects the simulation to fail.
const (
	mutSendFirst     = true
	mutSkipStateSave = false
	mutFigure8       = false
	mutNoRecovery    = false
)
