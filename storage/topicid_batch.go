package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FlushTopicIDs makes partition.metadata durable in every log of logs whose
// topic id SetTopicID recorded and no flush wrote yet, as FlushTopicID does
// for one, with two file system syncs (syncfs(2)) for the whole batch
// instead of two fsyncs per log: every temporary file is written, the file
// systems holding them are synced (their contents are durable before any
// rename, as PartitionMetadataFile.maybeFlush fsyncs the file before its
// move), each is renamed into place, and the file systems are synced again
// (the renames, and each new log's first segment entry, are durable, as
// the directory fsync of Utils.atomicMoveWithFallback makes them). It is
// for a broker's shutdown, when many new logs are pending: a syncfs also
// writes every other dirty page of the file system, which a running
// broker's metadata log fsyncs would wait behind.
//
// Where syncfs cannot be trusted to report write-back errors (not Linux, or
// a kernel before 5.8) or fails, each log is flushed alone (FlushTopicID).
// It returns how many logs it went through and the errors of those that
// failed (each such log refuses writes from then on, as after FlushTopicID).
func FlushTopicIDs(logs []*Log) (int, []error) {
	if !syncfsReportsErrors() {
		return flushEach(logs)
	}
	type item struct {
		l  *Log
		id [16]byte
		// dirSynced: at the write, the log had only its first, empty
		// segment and no index file, so the syncs cover every entry
		// of its directory unless that changed since (checked after).
		dirSynced bool
		seg       *logSegment
		err       error
	}
	items := make([]item, 0, len(logs))
	// One open directory per file system, kept open across the batch: a
	// syncfs reports the write-back errors since the descriptor was
	// opened, so it is opened before anything is written.
	filesystems := map[uint64]*os.File{}
	defer func() {
		for _, d := range filesystems {
			_ = d.Close()
		}
	}()
	var fallback []*Log
	for _, l := range logs {
		l.mu.Lock()
		if l.failed != nil || !l.topicUnflushed {
			l.mu.Unlock()
			continue
		}
		dev, err := deviceOf(l.dir)
		if err == nil && filesystems[dev] == nil {
			filesystems[dev], err = os.Open(l.dir)
		}
		if err != nil {
			l.mu.Unlock()
			fallback = append(fallback, l)
			continue
		}
		it := item{l: l, id: l.topicID}
		sg := l.active()
		it.dirSynced = len(l.segments) == 1 && sg.size == 0 && !sg.idxFile.opened && !sg.tidxFile.opened
		it.seg = sg
		tmp := filepath.Join(l.dir, PartitionMetadataFile+".tmp")
		it.err = os.WriteFile(tmp, EncodePartitionMetadata(it.id), 0o644)
		l.mu.Unlock()
		items = append(items, it)
	}
	syncAll := func() error {
		var errs []error
		for _, d := range filesystems {
			fsyncs.Add(1)
			errs = append(errs, syncfs(d))
		}
		return errors.Join(errs...)
	}
	if err := syncAll(); err != nil {
		// Which file failed is unknown: each log alone, with its own fsyncs.
		for _, it := range items {
			fallback = append(fallback, it.l)
		}
		n, errs := flushEach(fallback)
		return n, errs
	}
	for i := range items {
		it := &items[i]
		if it.err != nil {
			continue
		}
		it.l.mu.Lock()
		// A flush of the log since (an append's) wrote and renamed its own
		// file; a SetTopicID of another id awaits its own flush.
		if it.l.failed == nil && it.l.topicUnflushed && it.l.topicID == it.id {
			it.err = os.Rename(filepath.Join(it.l.dir, PartitionMetadataFile+".tmp"), filepath.Join(it.l.dir, PartitionMetadataFile))
		}
		it.l.mu.Unlock()
	}
	if err := syncAll(); err != nil {
		for _, it := range items {
			fallback = append(fallback, it.l)
		}
		n, errs := flushEach(fallback)
		return n, errs
	}
	var errs []error
	for _, it := range items {
		l := it.l
		l.mu.Lock()
		switch {
		case it.err != nil:
			errs = append(errs, l.fail(it.err))
		case l.failed == nil && l.topicUnflushed && l.topicID == it.id:
			l.topicUnflushed = false
			if it.dirSynced && len(l.segments) == 1 && l.active() == it.seg && !it.seg.idxFile.opened && !it.seg.tidxFile.opened {
				l.dirUnsynced = false
			}
		}
		l.mu.Unlock()
	}
	n, ferrs := flushEach(fallback)
	return len(items) + n, append(errs, ferrs...)
}

// flushEach flushes each log's topic id alone (FlushTopicID).
func flushEach(logs []*Log) (int, []error) {
	var errs []error
	for _, l := range logs {
		if err := l.FlushTopicID(); err != nil {
			errs = append(errs, err)
		}
	}
	return len(logs), errs
}

// kernelVersion parses "6.18.44-fc-v1045" as 6, 18.
func kernelVersion(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	end := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		parts[1] = parts[1][:end]
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}
