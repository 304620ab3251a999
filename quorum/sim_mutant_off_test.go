//go:build !mutant_syncedlag

package quorum_test

// simSyncedLag: this is raftlog's mutant_syncedlag build, in which FileStorage's
// durable end record lags one Sync; the simulation runs that FileStorage, and the
// constant names the build tag in the replay command. False here, true in
// sim_mutant_syncedlag_test.go; make mutants builds that and expects the simulation
// to catch it.
const simSyncedLag = false
