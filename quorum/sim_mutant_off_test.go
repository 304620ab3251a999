//go:build !mutant_syncedlag

package quorum_test

// simSyncedLag: the sim disk's durable end record lags one Sync (see simDisk.rec), as
// raftlog's mutant_syncedlag build makes FileStorage write it. False here, true in
// sim_mutant_syncedlag_test.go; make mutants builds that and expects the simulation
// to catch it.
const simSyncedLag = false
