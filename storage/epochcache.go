package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LeaderEpochCheckpointFile is the epoch cache's file name in the partition directory.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// ErrCorruptEpochCheckpoint is returned by DecodeEpochCheckpoint.
var ErrCorruptEpochCheckpoint = errors.New("storage: corrupt leader-epoch-checkpoint")

// EpochEntry says that leader epoch Epoch's batches start at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochCache maps leader epochs to the offset where each starts, as Kafka's
// LeaderEpochFileCache does. The leader answers divergence checks from it (KIP-595
// DivergingEpoch) and a restarted node learns its last epoch from it.
//
// INVARIANTS: entries are strictly increasing in both Epoch and StartOffset.
type EpochCache struct {
	entries []EpochEntry
}

// Entries returns a copy of the cache's entries, oldest first.
func (c *EpochCache) Entries() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}

// LatestEpoch is the newest epoch in the cache, or -1 when it is empty.
func (c *EpochCache) LatestEpoch() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Assign records that epoch starts at startOffset. It is a no-op unless epoch is
// newer than every cached epoch, which is what the log calls it with: the epoch of
// each appended batch. It reports whether the cache changed.
func (c *EpochCache) Assign(epoch int32, startOffset int64) bool {
	if epoch < 0 || epoch <= c.LatestEpoch() {
		return false
	}
	// Entries at or past startOffset came from a truncated suffix; they cannot
	// survive a newer epoch starting before them.
	c.TruncateFromEnd(startOffset)
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return true
}

// TruncateFromEnd drops the entries whose epochs start at or after endOffset, after
// the log was truncated to endOffset. It reports whether the cache changed.
func (c *EpochCache) TruncateFromEnd(endOffset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// TruncateFromStart forgets offsets below startOffset, after the log start moved
// up: entries wholly below it go, and the entry covering it now starts there.
func (c *EpochCache) TruncateFromStart(startOffset int64) bool {
	if len(c.entries) == 0 || c.entries[0].StartOffset >= startOffset {
		return false
	}
	i := 0 // the newest entry starting at or below startOffset
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= startOffset {
		i++
	}
	c.entries = append(c.entries[:0], c.entries[i:]...)
	c.entries[0].StartOffset = startOffset
	return true
}

// Clear empties the cache, for a log reset to a snapshot.
func (c *EpochCache) Clear() bool {
	changed := len(c.entries) > 0
	c.entries = nil
	return changed
}

// EndOffsetFor answers "where does epoch end?" as Kafka's
// LeaderEpochFileCache.endOffsetFor does, given the log end offset:
//
//   - epoch is the latest cached epoch: (epoch, logEndOffset);
//   - otherwise, with H the first entry of a newer epoch and F the newest entry with
//     an epoch <= epoch: (F.Epoch, H.StartOffset), or (epoch, H.StartOffset) when
//     epoch is older than every entry;
//   - epoch < 0 or newer than every entry: (-1, -1).
func (c *EpochCache) EndOffsetFor(epoch int32, logEndOffset int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.LatestEpoch() {
		return epoch, logEndOffset
	}
	hi := 0
	for hi < len(c.entries) && c.entries[hi].Epoch <= epoch {
		hi++
	}
	if hi == len(c.entries) {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// EncodeEpochCheckpoint renders entries in Kafka's CheckpointFile text format as
// LeaderEpochCheckpointFile uses it: a version line "0", a count line, then one
// "epoch startOffset" line per entry, every line ending in '\n'.
func EncodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	b.WriteString("0\n")
	b.WriteString(strconv.Itoa(len(entries)))
	b.WriteByte('\n')
	for _, e := range entries {
		b.WriteString(strconv.FormatInt(int64(e.Epoch), 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(e.StartOffset, 10))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// DecodeEpochCheckpoint parses a leader-epoch-checkpoint file. Like Kafka's reader
// it insists on version 0 and on the count line matching the entries.
func DecodeEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	next := func(what string) (string, error) {
		if !sc.Scan() {
			return "", fmt.Errorf("%w: missing %s", ErrCorruptEpochCheckpoint, what)
		}
		return sc.Text(), nil
	}
	version, err := next("version")
	if err != nil {
		return nil, err
	}
	if version != "0" {
		return nil, fmt.Errorf("%w: version %q", ErrCorruptEpochCheckpoint, version)
	}
	countLine, err := next("count")
	if err != nil {
		return nil, err
	}
	count, err := strconv.Atoi(countLine)
	if err != nil || count < 0 {
		return nil, fmt.Errorf("%w: count %q", ErrCorruptEpochCheckpoint, countLine)
	}
	var out []EpochEntry
	for i := 0; i < count; i++ {
		line, err := next("entry")
		if err != nil {
			return nil, err
		}
		e, err := parseEpochLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if sc.Scan() {
		return nil, fmt.Errorf("%w: more entries than the count %d", ErrCorruptEpochCheckpoint, count)
	}
	return out, nil
}

func parseEpochLine(line string) (EpochEntry, error) {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return EpochEntry{}, fmt.Errorf("%w: line %q", ErrCorruptEpochCheckpoint, line)
	}
	epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
	offset, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return EpochEntry{}, fmt.Errorf("%w: line %q", ErrCorruptEpochCheckpoint, line)
	}
	return EpochEntry{Epoch: int32(epoch), StartOffset: offset}, nil
}
