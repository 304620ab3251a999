package raftlog

// Mutant names the mutation this build carries (mutant_off.go), "" in a normal
// build: the simulation's replay command names its build tag.
func Mutant() string {
	switch {
	case mutSyncedLag:
		return "syncedlag"
	case mutFreshState:
		return "freshstate"
	}
	return ""
}
