//go:build !invariants

package image

// invariantsEnabled is off in normal builds: the structural self-check in
// Delta.Apply walks the whole image.
const invariantsEnabled = false
