//go:build !race

package quorum_test

// damageSeeds is TestDamagedVoterNeverForgetsCommits' seed count.
const damageSeeds = 80
