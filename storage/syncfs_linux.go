package storage

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// syncfs is syncfs(2) on the file system holding d.
func syncfs(d *os.File) error {
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: d.Name(), Err: err}
	}
	return nil
}

// syncfsReportsErrors: since Linux 5.8 syncfs(2) returns the write-back
// errors of the file system since the descriptor was opened; before, it
// returned 0 whatever happened, so a lost write would go unnoticed.
var syncfsReportsErrors = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return false
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	major, minor, ok := kernelVersion(b.String())
	return ok && (major > 5 || major == 5 && minor >= 8)
})

// deviceOf is the id of the file system holding path.
func deviceOf(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return uint64(st.Dev), nil //nolint:unconvert // Dev is uint32 on some platforms
}
