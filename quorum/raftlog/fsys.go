package raftlog

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is the file system a FileStorage runs on: exactly the calls it and its helpers
// make, no more. The zero FileOptions.FS is the operating system's; the simulation
// runs FileStorage on a deterministic in-memory one that can crash at any call
// (quorum/raftlog/crashfs), so that what it tests is this package's code and not a
// model of it.
//
// The durability contract an implementation must honour (the one FileStorage is
// written against): bytes written to a file survive a crash only once the file was
// Synced or Datasynced after the write; a created, renamed or removed directory entry
// survives a crash only once its directory was SyncDir'ed; a failed Sync, Datasync
// or SyncDir leaves the state of the data unknown (FileStorage then stops for good).
// Errors for a missing file satisfy errors.Is(err, fs.ErrNotExist).
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_RDWR, O_WRONLY,
	// O_CREATE, O_EXCL, O_TRUNC; no O_APPEND).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// CreateTemp creates a new file in dir whose name is pattern with its last "*"
	// replaced by a unique string, open for reading and writing (os.CreateTemp).
	CreateTemp(dir, pattern string) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	// ReadDir returns the names of dir's entries, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat reports whether name exists and its size.
	Stat(name string) (size int64, err error)
	// MkdirAll creates dir and any missing parents (os.MkdirAll).
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes dir's entries (files created, renamed or removed in it) durable.
	SyncDir(dir string) error
	// Lock takes the exclusive lock of the lock file name (creating it), held until
	// the returned Closer is closed or the process ends; it fails with ErrDirLocked
	// while another process holds it.
	Lock(name string) (io.Closer, error)
}

// File is an open file of an FS.
type File interface {
	Name() string
	io.ReaderAt
	io.WriterAt
	// Write writes at the file's write position (after the last Write), for files
	// written front to back (snapshots, tmp files).
	io.Writer
	Truncate(size int64) error
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data durable (fdatasync): enough for a file only
	// ever overwritten in place.
	Datasync() error
	// StartWriteback starts writing [off, off+n) to the device without waiting
	// (sync_file_range WRITE on Linux). It promises nothing about durability.
	StartWriteback(off, n int64) error
	Size() (int64, error)
	Close() error
}

// osFS is the operating system's file system.
type osFS struct{}

// OSFS returns the operating system's file system (what a nil FileOptions.FS means).
func OSFS() FS { return osFS{} }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (int64, error) {
	st, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) Lock(name string) (io.Closer, error) { return lockFile(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile is an *os.File as a File.
type osFile struct{ *os.File }

func (f osFile) Datasync() error                   { return fdatasync(f.File) }
func (f osFile) StartWriteback(off, n int64) error { return startWriteback(f.File, off, n) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// readFile reads all of name.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return data, nil
}

// writeFileAtomicFS replaces dir/name with data: written to dir/name.tmp, fsynced,
// renamed over dir/name (storage.WriteFileAtomic's steps); the caller fsyncs dir.
func writeFileAtomicFS(fsys FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return ioErr(err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = fsys.Rename(tmp, path)
	}
	if werr != nil {
		_ = fsys.Remove(tmp) // best effort: a leftover .tmp is removed at the next open
		return ioErr(werr)
	}
	return nil
}

// existsFS reports whether name exists.
func existsFS(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, ioErr(err)
	}
}
