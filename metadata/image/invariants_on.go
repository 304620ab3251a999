//go:build invariants

package image

// invariantsEnabled turns on the structural self-check in Delta.Apply
// (go test -tags invariants).
const invariantsEnabled = true
