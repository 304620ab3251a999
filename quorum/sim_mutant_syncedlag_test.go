//go:build mutant_syncedlag

package quorum_test

// The syncedlag mutant (see sim_mutant_off_test.go).
const simSyncedLag = true
