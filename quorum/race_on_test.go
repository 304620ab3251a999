//go:build race

package quorum_test

const raceEnabled = true
