package raftlog

// Mutant names the mutation this build carries (mutant_off.go), "" in a normal
// build: the simulation's replay command names its build tag.
func Mutant() string {
	switch {
	case mutSyncedAhead:
		return "syncedahead"
	case mutFreshState:
		return "freshstate"
	}
	return ""
}
