//go:build race

package quorum_test

// damageSeeds is TestDamagedVoterNeverForgetsCommits' seed count: a slice under the
// race detector, which runs the core about ten times slower.
const damageSeeds = 20
