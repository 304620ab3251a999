//go:build !unix

package raftlog

import (
	"io"
	"os"
)

// lockFile only creates path where POSIX record locks do not exist: the directory
// is not protected against a second process there.
func lockFile(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, ioErr(err)
	}
	return f, nil
}
