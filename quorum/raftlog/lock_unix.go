//go:build unix

package raftlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockFile takes an exclusive POSIX record lock (fcntl F_SETLK) on path, creating
// the file if missing: the lock Kafka takes on a log directory's .lock file (Java's
// FileChannel.tryLock is an fcntl lock on Linux), so that neither a second kraftd nor
// a Kafka process opens the directory while this one has it. The lock belongs to the
// process and goes away with it, however it dies. Within one process a second lock
// succeeds, and closing any descriptor of the file drops it (POSIX semantics): it
// guards against other processes only.
func lockFile(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, ioErr(err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
	if err == nil {
		return f, nil
	}
	defer f.Close()
	if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) {
		return nil, ioErr(fmt.Errorf("locking %s: %w", path, err))
	}
	holder := "another process"
	probe := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &probe) == nil && probe.Type != syscall.F_UNLCK {
		holder = fmt.Sprintf("process %d", probe.Pid)
	}
	return nil, fmt.Errorf("%w: %s is locked by %s (a kraftd or Kafka node using the same metadata log "+
		"directory): stop it first", ErrDirLocked, path, holder)
}
