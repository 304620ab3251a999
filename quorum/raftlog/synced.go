package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// SyncedEndFile records how far the log was durable (fsynced): the one thing that
// tells a torn tail from bit rot at recovery. After a crash only bytes written since
// the last completed Sync can be damaged by the crash; any damage at or below the
// recorded end is a disk fault in records this node may have acknowledged, and
// silently truncating them would let it vote as if it had never held them. The
// record trails the log by at most one Sync: a Sync makes the log durable and is
// acknowledged at once; the end it made durable is recorded afterwards (EndRecorder,
// off the acknowledgement path), and the next Sync waits for that record before it
// counts as done. So the record never claims more than the durable log, and the
// acknowledged bytes it does not yet cover are at most one Sync's (see FileStorage).
// Kafka keeps no such record (kraftd's own file; Kafka ignores it).
const SyncedEndFile = "kraftd-synced-end"

// The file holds two slots, each a record written in place: magic, sequence, end
// offset, the base of the segment holding the end and the end's byte position in it,
// and a CRC-32C of the preceding bytes. Slots alternate by sequence, so a write torn
// by a crash leaves the other slot valid; the valid slot with the higher sequence
// wins. Each slot has a page of its own, so that the device write of one record
// never rewrites the other. The file is created full size once and only ever
// overwritten in place (no size change), so fdatasync makes a slot durable without
// a journal commit.
const (
	syncedSlotSize  = 4096
	syncedRecordLen = 4 + 8 + 8 + 8 + 8 + 4
	syncedMagic     = 0x6b534531 // "kSE1"
)

// syncedEnd is a durable end of the log: every batch below End, which lies at
// byte Pos of segment Base, was fsynced.
type syncedEnd struct {
	Seq  uint64
	End  int64
	Base int64
	Pos  int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (m syncedEnd) encode() []byte {
	b := make([]byte, syncedRecordLen)
	binary.BigEndian.PutUint32(b[0:], syncedMagic)
	binary.BigEndian.PutUint64(b[4:], m.Seq)
	binary.BigEndian.PutUint64(b[12:], uint64(m.End))
	binary.BigEndian.PutUint64(b[20:], uint64(m.Base))
	binary.BigEndian.PutUint64(b[28:], uint64(m.Pos))
	binary.BigEndian.PutUint32(b[36:], crc32.Checksum(b[:36], castagnoli))
	return b
}

func decodeSyncedEnd(b []byte) (syncedEnd, bool) {
	if len(b) < syncedRecordLen || binary.BigEndian.Uint32(b) != syncedMagic ||
		binary.BigEndian.Uint32(b[36:]) != crc32.Checksum(b[:36], castagnoli) {
		return syncedEnd{}, false
	}
	m := syncedEnd{Seq: binary.BigEndian.Uint64(b[4:]), End: int64(binary.BigEndian.Uint64(b[12:])),
		Base: int64(binary.BigEndian.Uint64(b[20:])), Pos: int64(binary.BigEndian.Uint64(b[28:]))}
	if m.End < 0 || m.Base < 0 || m.Pos < 0 || m.Base > m.End {
		return syncedEnd{}, false
	}
	return m, true
}

// DecodeSyncedEnd reads the durable end a SyncedEndFile's content records (the
// newest valid slot); ok is false if no slot is valid. The simulation uses it to
// tell damage below the durable end from a torn tail.
func DecodeSyncedEnd(data []byte) (end int64, ok bool) {
	var best syncedEnd
	for slot := 0; (slot+1)*syncedSlotSize <= len(data) && slot < 2; slot++ {
		if m, valid := decodeSyncedEnd(data[slot*syncedSlotSize:]); valid && (!ok || m.Seq > best.Seq) {
			best, ok = m, true
		}
	}
	return best.End, ok
}

// syncedEndFile is the open SyncedEndFile.
type syncedEndFile struct {
	f    File
	last syncedEnd // the newest slot written (durably) or read
}

// ErrCorrupt reports damage to data this node made durable: the node must not start
// on it (it may have acknowledged the lost records or votes).
var ErrCorrupt = errors.New("raftlog: corrupt metadata log")

// openSyncedEnd opens (creating if missing) dir's SyncedEndFile and reads the newest
// valid slot. present is false for a new file or one with no valid slot.
func openSyncedEnd(fsys FS, dir string) (_ *syncedEndFile, present bool, err error) {
	path := filepath.Join(dir, SyncedEndFile)
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// Create it full size once, so later slot writes never change its size.
		if err := writeFileAtomicFS(fsys, dir, SyncedEndFile, make([]byte, 2*syncedSlotSize)); err != nil {
			return nil, false, err
		}
		if err := fsys.SyncDir(dir); err != nil {
			return nil, false, ioErr(err)
		}
		f, err = fsys.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, false, ioErr(err)
	}
	buf := make([]byte, 2*syncedSlotSize)
	n, _ := f.ReadAt(buf, 0)
	s := &syncedEndFile{f: f}
	for slot := 0; slot < 2; slot++ {
		if (slot+1)*syncedSlotSize > n {
			break
		}
		if m, ok := decodeSyncedEnd(buf[slot*syncedSlotSize:]); ok && (!present || m.Seq > s.last.Seq) {
			s.last, present = m, true
		}
	}
	return s, present, nil
}

// next numbers m as the record after the last one written.
func (s *syncedEndFile) next(m syncedEnd) syncedEnd {
	m.Seq = s.last.Seq + 1
	return m
}

// put writes m (numbered by next) into its slot and fdatasyncs it. It touches only
// the file, so a PrepareSync's work may call it on another goroutine; the caller
// then sets last. A crash inside it leaves the other slot, the previous record,
// valid: a torn slot fails its CRC.
func (s *syncedEndFile) put(m syncedEnd) error {
	if _, err := s.f.WriteAt(m.encode(), int64(m.Seq%2)*syncedSlotSize); err != nil {
		return ioErr(err)
	}
	if err := s.f.Datasync(); err != nil {
		return ioErr(err)
	}
	return nil
}

// recordJob is one write of the record in flight (FileStorage.PrepareRecord): its
// work may run on another goroutine while the owner waits for it (run) from its own,
// and whichever comes first does the write; the other finds it done. The slot it
// writes is the one the last durable record does not occupy, so a crash inside it
// leaves the previous record valid.
type recordJob struct {
	once sync.Once
	sf   *syncedEndFile
	m    syncedEnd // numbered (next)
	err  error
}

// run writes the record, or waits for the write another goroutine started, and
// returns its outcome.
func (j *recordJob) run() error {
	j.once.Do(func() { j.err = j.sf.put(j.m) })
	return j.err
}

// write makes m durable in the slot after the last one written.
func (s *syncedEndFile) write(m syncedEnd) error {
	m = s.next(m)
	if err := s.put(m); err != nil {
		return err
	}
	s.last = m
	return nil
}

func (s *syncedEndFile) close() error {
	if s == nil || s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// corruptErr names the damaged file and offset and the ways out.
func corruptErr(path string, offset, position int64, what string, reason error) error {
	return fmt.Errorf("%w: %s: %s at offset %d (byte %d), at or below the durable end %s recorded: "+
		"this node may have acknowledged the records lost there. Ways out: restore the __cluster_metadata-0 "+
		"directory from a copy; or, while a majority of the other voters is healthy, move this directory aside "+
		"and let the node fetch the log again from the leader (it then forgets its votes too, so do it only "+
		"for one voter at a time): %v", ErrCorrupt, path, what, offset, position, SyncedEndFile, reason)
}
