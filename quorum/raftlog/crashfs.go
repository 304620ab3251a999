package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ErrCrashed is returned by every call inside and after a crash, until Restart.
var ErrCrashed = errors.New("raftlog: crashfs: the process crashed")

// ErrCrashIO is what a failed fsync returns (FailNextSync).
var ErrCrashIO = errors.New("raftlog: crashfs: fsync: input/output error")

// CrashFS is a deterministic in-memory file system (an FS) that can crash, for
// the quorum simulation and for crash tests of FileStorage. Every file keeps its
// durable content and the writes made since its last fsync; every directory keeps the entries that survive a crash and the ones the
// process sees. PowerLoss keeps, of each file's unsynced writes, a seeded prefix (the
// last one possibly torn: a prefix of its bytes), and of each directory only what its
// last SyncDir made durable; ProcessCrash keeps everything (the page cache survives).
// CrashAfter arms a crash inside the Nth mutating call from now (a write, truncate,
// fsync, create, rename or remove), so that a test can reach every crash point of a
// persist step; FailNextSync makes the next fsync return an I/O error.
//
// It is single-threaded by contract except that calls may come from several
// goroutines in turn; a mutex serializes them. Nothing in it reads the clock or a
// global random source: a seed replays a run exactly.
//
// Its zero value is not usable; call NewCrashFS.
//
// INVARIANTS: every path in files and dirs is clean and absolute; a file's parent
// is in dirs (as the process sees it); durable entries name inodes whose durable
// content is what a power loss keeps.
type CrashFS struct {
	mu  sync.Mutex
	rng *rand.Rand
	// dirs: directories as the process sees them (value: survives a crash, that is,
	// its parent was SyncDir'ed since it was created).
	dirs map[string]bool
	// cur: file entries as the process sees them; durable: as a crash leaves them.
	cur, durable map[string]*crashInode
	// gen counts restarts: handles of an earlier life fail.
	gen int
	// crashIn counts mutating calls down to a crash (0: none armed).
	crashIn int
	// crashPower: the armed crash is a power loss (else the process alone dies).
	crashPower bool
	crashed    bool
	failSync   bool
	// failSyncIn counts mutating calls down to arming failSync (0: none).
	failSyncIn int
	tmpSeq     int
	// locks: lock file name -> the life that holds it (a lock dies with its life).
	locks map[string]int
	// Ops counts mutating calls since NewCrashFS.
	Ops int
}

// crashInode is one file's content.
type crashInode struct {
	durable []byte
	cur     []byte
	pending []crashOp // unsynced changes, in order: cur = durable + pending
}

// crashOp is an unsynced write (data at off) or truncate (data nil, size off).
type crashOp struct {
	off   int64
	data  []byte
	trunc bool
}

// NewCrashFS returns an empty file system (only "/" exists) whose crashes draw from seed.
func NewCrashFS(seed uint64) *CrashFS {
	return &CrashFS{rng: rand.New(rand.NewPCG(seed, 0x63726173)), dirs: map[string]bool{"/": true},
		cur: map[string]*crashInode{}, durable: map[string]*crashInode{}}
}

// isDir reports whether dir exists (as the process sees it).
func (f *CrashFS) isDir(dir string) bool {
	_, ok := f.dirs[dir]
	return ok
}

func crashClean(name string) string { return filepath.Clean("/" + name) }

func crashPathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// step counts one mutating call and reports whether the armed crash lands in it.
func (f *CrashFS) step() (crash bool, err error) {
	if f.crashed {
		return false, ErrCrashed
	}
	f.Ops++
	if f.failSyncIn > 0 {
		f.failSyncIn--
		f.failSync = f.failSync || f.failSyncIn == 0
	}
	if f.crashIn > 0 {
		f.crashIn--
		if f.crashIn == 0 {
			return true, nil
		}
	}
	return false, nil
}

// CrashAfter arms a crash inside the n-th mutating call from now (n >= 1): that call
// may take partial effect, then the process dies, and with powerLoss the machine
// loses what was not durable (PowerLoss). n <= 0 disarms.
func (f *CrashFS) CrashAfter(n int, powerLoss bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashIn, f.crashPower = max(n, 0), powerLoss
}

// FailNextSync makes the next Sync, Datasync or SyncDir return ErrCrashIO.
func (f *CrashFS) FailNextSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSync = true
}

// ClearFailSync disarms FailNextSync and FailSyncAfter if they have not fired.
func (f *CrashFS) ClearFailSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSync, f.failSyncIn = false, 0
}

// FailSyncAfter makes the first fsync at or after the n-th mutating call from now
// fail with ErrCrashIO (n <= 0 disarms).
func (f *CrashFS) FailSyncAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSyncIn = max(n, 0)
}

// Crashed reports whether the process crashed (an armed crash fired).
func (f *CrashFS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// PowerLoss crashes the process and the machine now: each file keeps its durable
// content plus a seeded prefix of its unsynced changes (the last one possibly torn),
// and each directory only the entries its last SyncDir made durable. Open handles
// die; Restart starts the next life.
func (f *CrashFS) PowerLoss() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.powerLoss()
}

// ProcessCrash kills the process only: the page cache, and so every write, survives.
func (f *CrashFS) ProcessCrash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
}

// Restart begins a new life after a crash (or a clean stop): handles of the last one
// are dead, and calls work again.
func (f *CrashFS) Restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed, f.crashIn, f.failSync, f.failSyncIn = false, 0, false, 0
	f.gen++
}

func (f *CrashFS) powerLoss() {
	f.crashed = true
	// Inodes first: each keeps a prefix of its unsynced changes, whatever names it.
	seen := map[*crashInode]bool{}
	for _, m := range []map[string]*crashInode{f.cur, f.durable} {
		for _, name := range crashSortedKeys(m) {
			if in := m[name]; !seen[in] {
				seen[in] = true
				f.settle(in)
			}
		}
	}
	f.cur = crashClone(f.durable)
	// A directory survives if its own entry and every ancestor's did.
	for _, d := range crashSortedKeys(f.dirs) { // parents before their children
		if !f.dirs[d] || d != "/" && !f.isDir(filepath.Dir(d)) {
			delete(f.dirs, d)
		}
	}
	for name := range f.cur {
		if !f.isDir(filepath.Dir(name)) {
			delete(f.cur, name)
			delete(f.durable, name)
		}
	}
}

// settle applies a seeded prefix of in's pending changes to its durable content.
func (f *CrashFS) settle(in *crashInode) {
	k := f.rng.IntN(len(in.pending) + 1)
	data := slices.Clone(in.durable)
	for i, op := range in.pending[:k] {
		if i == k-1 && !op.trunc && len(op.data) > 1 && f.rng.IntN(3) == 0 {
			op.data = op.data[:f.rng.IntN(len(op.data))] // torn: a prefix reached the disk
		}
		data = crashApply(data, op)
	}
	in.durable, in.cur, in.pending = data, slices.Clone(data), nil
}

func crashApply(data []byte, op crashOp) []byte {
	if op.trunc {
		if op.off <= int64(len(data)) {
			return data[:op.off]
		}
		return append(data, make([]byte, op.off-int64(len(data)))...)
	}
	if end := op.off + int64(len(op.data)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[op.off:], op.data)
	return data
}

func crashSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func crashClone(m map[string]*crashInode) map[string]*crashInode {
	out := make(map[string]*crashInode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// crashInside ends the call an armed crash landed in.
func (f *CrashFS) crashInside() error {
	f.crashed = true
	if f.crashPower {
		f.powerLoss()
	}
	return ErrCrashed
}

// OpenFile implements raftlog.FS.
func (f *CrashFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = crashClean(name)
	in, ok := f.cur[name]
	mutating := !ok && flag&os.O_CREATE != 0 || ok && flag&os.O_TRUNC != 0
	if f.crashed {
		return nil, ErrCrashed
	}
	if mutating {
		crash, err := f.step()
		if err != nil {
			return nil, err
		}
		if crash {
			return nil, f.crashInside()
		}
	}
	switch {
	case !f.isDir(filepath.Dir(name)) || f.isDir(name):
		return nil, crashPathErr("open", name, fs.ErrNotExist)
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, crashPathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, crashPathErr("open", name, fs.ErrNotExist)
	case !ok:
		in = &crashInode{}
		f.cur[name] = in
	case flag&os.O_TRUNC != 0:
		in.truncate(0)
	}
	return &crashFile{fs: f, in: in, name: name, gen: f.gen, write: flag&(os.O_RDWR|os.O_WRONLY) != 0}, nil
}

// CreateTemp implements raftlog.FS: names are numbered, so runs are deterministic.
func (f *CrashFS) CreateTemp(dir, pattern string) (File, error) {
	f.mu.Lock()
	f.tmpSeq++
	seq := f.tmpSeq
	f.mu.Unlock()
	i := strings.LastIndex(pattern, "*")
	name := pattern + fmt.Sprint(seq)
	if i >= 0 {
		name = pattern[:i] + fmt.Sprint(seq) + pattern[i+1:]
	}
	return f.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// Remove implements raftlog.FS (files only).
func (f *CrashFS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = crashClean(name)
	crash, err := f.step()
	if err != nil {
		return err
	}
	if crash {
		return f.crashInside()
	}
	if _, ok := f.cur[name]; !ok {
		return crashPathErr("remove", name, fs.ErrNotExist)
	}
	delete(f.cur, name)
	return nil
}

// Rename implements raftlog.FS (files only, within or across directories).
func (f *CrashFS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	oldpath, newpath = crashClean(oldpath), crashClean(newpath)
	crash, err := f.step()
	if err != nil {
		return err
	}
	if crash {
		return f.crashInside()
	}
	in, ok := f.cur[oldpath]
	if !ok {
		return crashPathErr("rename", oldpath, fs.ErrNotExist)
	}
	if !f.isDir(filepath.Dir(newpath)) {
		return crashPathErr("rename", newpath, fs.ErrNotExist)
	}
	delete(f.cur, oldpath)
	f.cur[newpath] = in
	return nil
}

// ReadDir implements raftlog.FS: file and directory names, sorted.
func (f *CrashFS) ReadDir(dir string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir = crashClean(dir)
	if f.crashed {
		return nil, ErrCrashed
	}
	if _, ok := f.dirs[dir]; !ok {
		return nil, crashPathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for name := range f.cur {
		if filepath.Dir(name) == dir {
			names = append(names, filepath.Base(name))
		}
	}
	for d := range f.dirs {
		if d != "/" && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	slices.Sort(names)
	return names, nil
}

// Stat implements raftlog.FS.
func (f *CrashFS) Stat(name string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = crashClean(name)
	if f.crashed {
		return 0, ErrCrashed
	}
	if in, ok := f.cur[name]; ok {
		return int64(len(in.cur)), nil
	}
	if _, ok := f.dirs[name]; ok {
		return 0, nil
	}
	return 0, crashPathErr("stat", name, fs.ErrNotExist)
}

// MkdirAll implements raftlog.FS. A new directory survives a crash once its parent
// is SyncDir'ed.
func (f *CrashFS) MkdirAll(dir string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir = crashClean(dir)
	if f.crashed {
		return ErrCrashed
	}
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, ok := f.dirs[d]; ok {
			break
		}
		if _, ok := f.cur[d]; ok {
			return crashPathErr("mkdir", d, fs.ErrExist)
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		crash, err := f.step()
		if err != nil {
			return err
		}
		if crash {
			return f.crashInside()
		}
		f.dirs[missing[i]] = false
	}
	return nil
}

// SyncDir implements raftlog.FS: dir's entries as the process sees them become the
// ones a crash leaves, and so does the existence of its subdirectories.
func (f *CrashFS) SyncDir(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir = crashClean(dir)
	crash, err := f.step()
	if err != nil {
		return err
	}
	if crash {
		if f.rng.IntN(2) == 0 {
			f.syncDir(dir) // the sync completed; the process died before it returned
		}
		return f.crashInside()
	}
	if f.failSync {
		f.failSync = false
		return crashPathErr("sync", dir, ErrCrashIO)
	}
	if _, ok := f.dirs[dir]; !ok {
		return crashPathErr("sync", dir, fs.ErrNotExist)
	}
	f.syncDir(dir)
	return nil
}

func (f *CrashFS) syncDir(dir string) {
	for name := range f.durable {
		if filepath.Dir(name) == dir {
			if _, ok := f.cur[name]; !ok {
				delete(f.durable, name)
			}
		}
	}
	for name, in := range f.cur {
		if filepath.Dir(name) == dir {
			f.durable[name] = in
		}
	}
	for d := range f.dirs {
		if d != "/" && filepath.Dir(d) == dir {
			f.dirs[d] = true
		}
	}
}

// Lock implements raftlog.FS: one holder per name until it closes the lock or the
// process crashes (a second Lock fails with ErrDirLocked: two storages opened the
// same directory).
func (f *CrashFS) Lock(name string) (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = crashClean(name)
	if f.crashed {
		return nil, ErrCrashed
	}
	if f.locks == nil {
		f.locks = map[string]int{}
	}
	if gen, ok := f.locks[name]; ok && gen == f.gen {
		return nil, fmt.Errorf("%w: %s is locked by this process's other storage", ErrDirLocked, name)
	}
	if _, ok := f.cur[name]; !ok {
		f.cur[name] = &crashInode{}
	}
	f.locks[name] = f.gen
	return crashLock{f, name, f.gen}, nil
}

type crashLock struct {
	f    *CrashFS
	name string
	gen  int
}

func (l crashLock) Close() error {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if gen, ok := l.f.locks[l.name]; ok && gen == l.gen {
		delete(l.f.locks, l.name)
	}
	return nil
}

// ReadFile returns name's content as the process sees it (for tests and damage).
func (f *CrashFS) ReadFile(name string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.cur[crashClean(name)]
	if !ok {
		return nil, false
	}
	return slices.Clone(in.cur), true
}

// Damage applies fn to name's durable (and current) content: bit rot or a lost
// file on a machine that is down. fn may return a shorter or longer slice. It
// reports whether the file exists.
func (f *CrashFS) Damage(name string, fn func([]byte) []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.cur[crashClean(name)]
	if !ok {
		return false
	}
	in.durable = fn(slices.Clone(in.cur))
	in.cur, in.pending = slices.Clone(in.durable), nil
	return true
}

// Delete removes name durably (a file lost while the machine is down).
func (f *CrashFS) Delete(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cur, crashClean(name))
	delete(f.durable, crashClean(name))
}

func (in *crashInode) write(p []byte, off int64) {
	op := crashOp{off: off, data: slices.Clone(p)}
	in.cur = crashApply(in.cur, op)
	in.pending = append(in.pending, op)
}

func (in *crashInode) truncate(size int64) {
	op := crashOp{off: size, trunc: true}
	in.cur = crashApply(in.cur, op)
	in.pending = append(in.pending, op)
}

func (in *crashInode) sync() {
	in.durable, in.pending = slices.Clone(in.cur), nil
}

// crashFile is an open file of a CrashFS.
type crashFile struct {
	fs     *CrashFS
	in     *crashInode
	name   string
	gen    int
	pos    int64
	write  bool
	closed bool
}

func (h *crashFile) Name() string { return h.name }

// live checks the handle under the lock: not closed, not from an earlier life.
func (h *crashFile) live(op string) error {
	switch {
	case h.fs.crashed:
		return ErrCrashed
	case h.closed || h.gen != h.fs.gen:
		return crashPathErr(op, h.name, os.ErrClosed)
	}
	return nil
}

// mutate runs one mutating call: crash if armed (after partial, a torn prefix of it
// applied by the power loss), else fn.
func (h *crashFile) mutate(op string, fn func() error) error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.live(op); err != nil {
		return err
	}
	if !h.write && op != "sync" {
		return crashPathErr(op, h.name, os.ErrPermission)
	}
	crash, err := f.step()
	if err != nil {
		return err
	}
	if crash {
		if op != "sync" {
			_ = fn() // the change is pending: the power loss keeps a prefix of it
		} else if f.rng.IntN(2) == 0 {
			h.in.sync()
		}
		return f.crashInside()
	}
	return fn()
}

func (h *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.live("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(h.in.cur)) {
		return 0, io.EOF
	}
	n := copy(p, h.in.cur[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *crashFile) WriteAt(p []byte, off int64) (int, error) {
	err := h.mutate("write", func() error { h.in.write(p, off); return nil })
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *crashFile) Write(p []byte) (int, error) {
	err := h.mutate("write", func() error { h.in.write(p, h.pos); h.pos += int64(len(p)); return nil })
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *crashFile) Truncate(size int64) error {
	return h.mutate("truncate", func() error { h.in.truncate(size); return nil })
}

// Sync makes the file's content durable (its name needs SyncDir).
func (h *crashFile) Sync() error {
	return h.mutate("sync", func() error {
		if h.fs.failSync {
			h.fs.failSync = false
			return crashPathErr("sync", h.name, ErrCrashIO)
		}
		h.in.sync()
		return nil
	})
}

// Datasync is Sync: the model keeps no metadata apart from the content.
func (h *crashFile) Datasync() error { return h.Sync() }

// StartWriteback promises nothing, so it does nothing.
func (h *crashFile) StartWriteback(off, n int64) error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.live("writeback")
}

func (h *crashFile) Size() (int64, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.live("stat"); err != nil {
		return 0, err
	}
	return int64(len(h.in.cur)), nil
}

func (h *crashFile) Close() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.closed {
		return crashPathErr("close", h.name, os.ErrClosed)
	}
	h.closed = true
	return nil
}
