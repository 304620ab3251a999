package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Bounded descriptors. A Kafka broker keeps every segment's .log file open
// (and its indexes memory-mapped), so it needs a descriptor limit above its
// replica count: 100k replicas on a broker take 100k descriptors before a
// single record is written. kraftd keeps a segment's files closed until
// they are read or written, and the open ones in a FileCache: a
// least-recently-used set of at most Max open files, shared by every log of
// the process (RLIMIT_NOFILE is per process). A file past the bound is
// closed and reopened by path at its next use.
//
// A file in use is pinned and never closed by the cache: a Log pins the
// segment file for the length of one operation (a read, an append, a fsync,
// a truncation), and a Region read by ReadRegion pins it until Release, so
// that a Fetch answered with sendfile(2) sends from the descriptor it was
// read from even when the segment is deleted, compacted or the log closed
// meanwhile (an unlinked file keeps its bytes while open). Pinned files
// count towards Max, so the bound is exceeded only while more files than
// Max are in use at once.
//
// Closing a written file before its fsync loses nothing: the written pages
// stay in the page cache, and a fsync through a descriptor opened later
// writes them (Linux fsync is per inode) and reports a writeback error no
// descriptor saw yet (errseq, Linux 4.14+).

// FileCache bounds the partition-log files a process holds open. Safe for
// concurrent use.
//
// INVARIANTS: the list holds exactly the files with an open descriptor
// (cachedFile.f != nil), most recently used first; open is its length; a
// file leaves it only with its descriptor closed or being closed by the
// remover.
type FileCache struct {
	max int

	mu         sync.Mutex
	head, tail *cachedFile
	open       int

	opens, evictions atomic.Uint64
}

// NewFileCache makes a cache of at most max open files; max <= 0 is no
// bound.
func NewFileCache(max int) *FileCache { return &FileCache{max: max} }

// Max is the bound on open files (0: none).
func (c *FileCache) Max() int { return max(c.max, 0) }

// Open is the number of files open now.
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// Opens counts the files opened (created or reopened) through the cache;
// Evictions the ones it closed to stay within Max.
func (c *FileCache) Opens() uint64     { return c.opens.Load() }
func (c *FileCache) Evictions() uint64 { return c.evictions.Load() }

// DefaultFileCacheSize is the bound derived from the process's
// RLIMIT_NOFILE (whose soft limit the Go runtime raises to the hard one at
// start): the limit less a quarter of it, at least 1024, kept for
// connections, the metadata log, checkpoints and the files opened for a
// moment (partition.metadata, scans, compaction); at least 64.
func DefaultFileCacheSize() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return FileCacheSizeFor(int(min(rl.Cur, 1<<30)))
}

// FileCacheSizeFor is DefaultFileCacheSize for a descriptor limit.
func FileCacheSizeFor(limit int) int { return max(64, limit-max(limit/4, 1024)) }

var (
	defaultFilesOnce sync.Once
	defaultFiles     *FileCache
)

// DefaultFileCache is the process's cache, sized by DefaultFileCacheSize
// when first used: the one a LogConfig without Files uses.
func DefaultFileCache() *FileCache {
	defaultFilesOnce.Do(func() { defaultFiles = NewFileCache(DefaultFileCacheSize()) })
	return defaultFiles
}

// segFileKind is which of a segment's files a segName names.
type segFileKind uint8

const (
	segLogFile segFileKind = iota
	segIndexFile
	segTimeIndexFile
)

var segFileSuffixes = [...]string{segLogFile: LogSuffix, segIndexFile: IndexSuffix, segTimeIndexFile: TimeIndexSuffix}

// segName names one file of a segment without holding its path: dir is the
// log's directory string (shared by every file of the log) and the file
// name is derived from the segment's base when the path is wanted (an open,
// a reopen by the cache, an error). A path string per file was about 100
// heap bytes per hosted partition, for files most partitions never reopen.
type segName struct {
	dir  string
	base int64
	kind segFileKind
}

func (n segName) path() string {
	return filepath.Join(n.dir, SegmentFileName(n.base, segFileSuffixes[n.kind]))
}

// cachedFile is one file of a log (a segment's .log, an index) whose
// descriptor the cache may close while nobody uses it. Its fields are
// ordered to pack it into 80 bytes: there is one per hosted partition.
//
// INVARIANTS: pins >= 0; f != nil exactly while the file is in the cache's
// list; once dead, f is closed with the last unpin and never reopened.
type cachedFile struct {
	c    *FileCache
	name segName // name.kind shares its word with the small fields below

	mu         sync.Mutex
	f          *os.File
	prev, next *cachedFile // c.mu
	pins       int32
	flag       int32 // how a reopen opens it
	dead       bool
	listed     bool // c.mu
}

// adopt makes a cachedFile of name around f, freshly opened (or nil: opened
// at first use with flag).
func (c *FileCache) adopt(name segName, flag int, f *os.File) *cachedFile {
	cf := &cachedFile{}
	c.adoptInto(cf, name, flag, f)
	return cf
}

// adoptInto is adopt into a cachedFile the caller allocated (a segment's
// .log file, inside its segmentFile: one allocation instead of two).
func (c *FileCache) adoptInto(cf *cachedFile, name segName, flag int, f *os.File) {
	cf.c, cf.name, cf.flag = c, name, int32(flag)
	if f != nil {
		c.opens.Add(1)
		cf.mu.Lock()
		cf.f = f
		victims := c.touch(cf)
		cf.mu.Unlock()
		closeFiles(victims)
	}
}

// use pins the file, opening it if the cache closed it, and returns its
// descriptor; unuse releases the pin.
func (cf *cachedFile) use() (*os.File, error) {
	cf.mu.Lock()
	if cf.dead {
		cf.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrLogClosed, cf.name.path())
	}
	if cf.f == nil {
		f, err := os.OpenFile(cf.name.path(), int(cf.flag), 0o644)
		if err != nil {
			cf.mu.Unlock()
			return nil, err
		}
		cf.f = f
		cf.c.opens.Add(1)
	}
	cf.pins++
	f := cf.f
	victims := cf.c.touch(cf)
	cf.mu.Unlock()
	closeFiles(victims)
	return f, nil
}

func (cf *cachedFile) unuse() error {
	cf.mu.Lock()
	cf.pins--
	if cf.pins < 0 {
		cf.mu.Unlock()
		panic(fmt.Sprintf("storage: file %s unpinned more often than pinned", cf.name.path()))
	}
	f := cf.dropIfDone()
	cf.mu.Unlock()
	if f != nil {
		return f.Close()
	}
	return nil
}

// release is the log's end of the file (segment deleted, replaced, the log
// closed): the descriptor closes now, or with the last pin.
func (cf *cachedFile) release() error {
	cf.mu.Lock()
	cf.dead = true
	f := cf.dropIfDone()
	cf.mu.Unlock()
	if f != nil {
		return f.Close()
	}
	return nil
}

// dropIfDone takes the descriptor of a dead, unpinned file out of the
// cache for the caller to close; cf.mu held.
func (cf *cachedFile) dropIfDone() *os.File {
	if !cf.dead || cf.pins > 0 || cf.f == nil {
		return nil
	}
	f := cf.f
	cf.f = nil
	cf.c.mu.Lock()
	cf.c.unlink(cf)
	cf.c.mu.Unlock()
	return f
}

// touch puts cf (open; cf.mu held) first in the list and takes out, for the
// caller to close once it has let go of cf.mu, the least recently used
// unpinned files past the bound. A file whose lock is held elsewhere is
// being used and is skipped (TryLock, so the order cf.mu before c.mu holds).
func (c *FileCache) touch(cf *cachedFile) []*os.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cf.listed {
		if c.head == cf {
			return nil
		}
		c.unlink(cf)
	}
	cf.prev, cf.next, cf.listed = nil, c.head, true
	if c.head != nil {
		c.head.prev = cf
	}
	c.head = cf
	if c.tail == nil {
		c.tail = cf
	}
	c.open++
	if c.max <= 0 || c.open <= c.max {
		return nil
	}
	var victims []*os.File
	for v := c.tail; v != nil && c.open > c.max; {
		prev := v.prev
		if v != cf && v.mu.TryLock() {
			if v.pins == 0 && v.f != nil {
				victims = append(victims, v.f)
				v.f = nil
				c.unlink(v)
			}
			v.mu.Unlock()
		}
		v = prev
	}
	c.evictions.Add(uint64(len(victims)))
	return victims
}

// unlink takes cf out of the list; c.mu held.
func (c *FileCache) unlink(cf *cachedFile) {
	if !cf.listed {
		return
	}
	if cf.prev != nil {
		cf.prev.next = cf.next
	} else {
		c.head = cf.next
	}
	if cf.next != nil {
		cf.next.prev = cf.prev
	} else {
		c.tail = cf.prev
	}
	cf.prev, cf.next, cf.listed = nil, nil, false
	c.open--
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close() // an unpinned file has no write in flight; its pages stay cached for a later fsync
	}
}
