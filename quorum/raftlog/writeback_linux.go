package raftlog

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback of the dirty pages
// in the range without waiting for it and without a journal commit.
const syncFileRangeWrite = 2

// startWriteback asks the kernel to begin writing [off, off+n) of f to disk.
func startWriteback(f *os.File, off, n int64) error {
	return syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}

// fdatasync flushes f's data (and the metadata needed to read it) without the
// journal commit an fsync of unchanged metadata would add.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
