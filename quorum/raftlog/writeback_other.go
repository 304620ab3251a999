//go:build !linux

package raftlog

import "os"

// startWriteback is a no-op where sync_file_range does not exist: the final fsync
// does all the work.
func startWriteback(*os.File, int64, int64) error { return nil }

// fdatasync is a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }
