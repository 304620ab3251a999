package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The broker-level checkpoint files of a Kafka log directory, one line per
// partition (Kafka's OffsetCheckpointFile), and the clean-shutdown marker.
const (
	// RecoveryPointCheckpointFile: per partition, the offset below which the
	// log was flushed; recovery after a crash scans only from there.
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	// ReplicationOffsetCheckpointFile: per partition, the high watermark.
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"
	// LogStartOffsetCheckpointFile: per partition whose log start offset is
	// above its first segment's base, the log start offset.
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// CleanShutdownFile marks a log directory whose logs were all flushed and
	// checkpointed at shutdown (Kafka's LogLoader.CleanShutdownFileName):
	// the next start needs no recovery scan.
	CleanShutdownFile = ".kafka_cleanshutdown"
)

// ErrCorruptCheckpoint is returned by DecodeOffsetCheckpoint.
var ErrCorruptCheckpoint = errors.New("storage: corrupt offset checkpoint")

// PartitionOffset is one line of an offset checkpoint file.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// EncodeOffsetCheckpoint renders entries in Kafka's CheckpointFile text
// format as OffsetCheckpointFile uses it: "0\n<count>\n" then one
// "<topic> <partition> <offset>\n" line per entry, sorted here so the file
// is deterministic.
func EncodeOffsetCheckpoint(entries []PartitionOffset) []byte {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b PartitionOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	var b bytes.Buffer
	b.WriteString("0\n" + strconv.Itoa(len(sorted)) + "\n")
	for _, e := range sorted {
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	return b.Bytes()
}

// DecodeOffsetCheckpoint parses an offset checkpoint file. As Kafka's
// reader it insists on version 0, three fields per line and the count
// matching the lines; offsets must not be negative.
func DecodeOffsetCheckpoint(data []byte) ([]PartitionOffset, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func(what string) (string, error) {
		if !sc.Scan() {
			return "", fmt.Errorf("%w: missing %s", ErrCorruptCheckpoint, what)
		}
		return sc.Text(), nil
	}
	if v, err := line("version"); err != nil || v != "0" {
		return nil, fmt.Errorf("%w: version %q (%v)", ErrCorruptCheckpoint, v, err)
	}
	countLine, err := line("count")
	if err != nil {
		return nil, err
	}
	count, err := strconv.Atoi(countLine)
	if err != nil || count < 0 || count > len(data) {
		return nil, fmt.Errorf("%w: count %q", ErrCorruptCheckpoint, countLine)
	}
	out := make([]PartitionOffset, 0, count)
	for range count {
		l, err := line("entry")
		if err != nil {
			return nil, err
		}
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %q", ErrCorruptCheckpoint, l)
		}
		p, perr := strconv.ParseInt(f[1], 10, 32)
		o, oerr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%w: line %q", ErrCorruptCheckpoint, l)
		}
		out = append(out, PartitionOffset{Topic: f[0], Partition: int32(p), Offset: o})
	}
	if sc.Scan() && strings.TrimSpace(sc.Text()) != "" {
		return nil, fmt.Errorf("%w: more lines than the count %d", ErrCorruptCheckpoint, count)
	}
	return out, nil
}

// WriteOffsetCheckpoint replaces dir/name durably: a temporary file written
// and fsynced, renamed over the old one, and the directory fsynced, as
// Kafka's CheckpointFile writes it. The entries are sorted as by
// EncodeOffsetCheckpoint.
func WriteOffsetCheckpoint(dir, name string, entries []PartitionOffset) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b PartitionOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return WriteOffsetCheckpointSeq(dir, name, len(sorted), slices.Values(sorted))
}

// WriteOffsetCheckpointSeq is WriteOffsetCheckpoint for the n entries that
// entries yields, written in the order given and streamed through a small
// buffer, not encoded whole first: a broker writes its high watermarks
// every replica.high.watermark.checkpoint.interval.ms (5 s), one line per
// hosted partition, and the entries, their sorted copy and the file's text
// were about 200 bytes per partition of garbage each time. Any other count
// than n is an error, and the file is not replaced.
func WriteOffsetCheckpointSeq(dir, name string, n int, entries iter.Seq[PartitionOffset]) error {
	err := writeFileAtomicFunc(dir, name, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 16<<10)
		line := strconv.AppendInt([]byte("0\n"), int64(n), 10)
		line = append(line, '\n')
		_, _ = bw.Write(line) // bw's error is sticky: Flush reports it
		count := 0
		for e := range entries {
			count++
			line = append(append(line[:0], e.Topic...), ' ')
			line = append(strconv.AppendInt(line, int64(e.Partition), 10), ' ')
			line = append(strconv.AppendInt(line, e.Offset, 10), '\n')
			_, _ = bw.Write(line)
		}
		if count != n {
			return fmt.Errorf("storage: checkpoint %s: %d entries, announced %d", name, count, n)
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	return SyncDir(dir)
}

// ReadOffsetCheckpoint reads dir/name; a missing file is no entries.
func ReadOffsetCheckpoint(dir, name string) ([]PartitionOffset, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out, err := DecodeOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
