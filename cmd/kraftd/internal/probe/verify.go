package probe

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Verification is what reading the topic back found.
type Verification struct {
	Read        int // this run's records read
	Foreign     int // records of other runs or producers
	AckedFound  int // acknowledged records read where they were acknowledged
	UnackedRead int // unacknowledged records read (allowed once)
	// Problems lists each broken guarantee (at most maxProblems lines, then
	// a count); empty means the run passed.
	Problems []string
}

func (v Verification) String() string {
	s := fmt.Sprintf("read %d (%d acked, %d unacked, %d foreign)", v.Read, v.AckedFound, v.UnackedRead, v.Foreign)
	if len(v.Problems) == 0 {
		return s + ": every acked record once, in order"
	}
	return fmt.Sprintf("%s: %d problems, first: %s", s, len(v.Problems), v.Problems[0])
}

const maxProblems = 20

// readRecord is one record as the verifier read it; seq is -1 for a record
// that is not this run's.
type readRecord struct {
	partition int32
	offset    int64
	seq       int
}

// Verify reads every partition of the topic from its log start offset up to
// its last stable offset (read_committed), and further up to the highest
// offset acknowledged to this probe (a new leader's high watermark may lag
// for a moment), then checks the run's records: every acknowledged one read
// exactly once, at the partition and offset it was acknowledged at; every
// unacknowledged one at most once; each partition's offsets contiguous and
// this run's records in the order they were sent. Call it after Stop. An
// error means the topic could not be read; a partition that never reaches
// its acknowledged end by ctx's deadline is a problem (lost records), not an
// error.
func (p *Probe) Verify(ctx context.Context) (Verification, error) {
	p.mu.Lock()
	outcomes := slices.Clone(p.outcomes)
	p.mu.Unlock()
	ends := map[int32]int64{}
	for _, o := range outcomes {
		if o.done && o.err == nil {
			ends[o.partition] = max(ends[o.partition], o.offset+1)
		}
	}
	recs, err := readAll(ctx, p.cfg.Bootstrap, p.cfg.Topic, ends, func(value []byte) int { return seqOf(p.run, value) })
	var v Verification
	if err != nil {
		if ctx.Err() == nil {
			return v, err
		}
		v.Problems = append(v.Problems, err.Error())
	}
	v = check(outcomes, recs, v.Problems)
	return v, nil
}

// seqOf parses the sequence number of one of run's record values, or -1.
func seqOf(run string, value []byte) int {
	rest, ok := bytes.CutPrefix(value, []byte("kraftd-probe "+run+" "))
	if !ok {
		return -1
	}
	i := bytes.IndexByte(rest, ' ')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(string(rest[:i]))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// readAll consumes topic's partitions from their start to their end: the
// larger of the last stable offset and atLeast[partition]. It returns what it
// read by the time ctx ended, with an error naming the partitions short of
// their end.
func readAll(ctx context.Context, bootstrap []string, topic string, atLeast map[int32]int64, seq func([]byte) int) ([]readRecord, error) {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(admCl)
	defer adm.Close()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("probe: list start offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("probe: list last stable offsets: %w", err)
	}
	from := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	end := map[int32]int64{}
	for part, o := range starts[topic] {
		from[part] = kgo.NewOffset().At(o.Offset)
		next[part] = o.Offset
		end[part] = max(stable[topic][part].Offset, atLeast[part])
	}
	for part := range atLeast {
		if _, ok := end[part]; !ok {
			return nil, fmt.Errorf("probe: acknowledged records in partition %d, which the topic does not list", part)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	short := func() []int32 {
		var s []int32
		for _, part := range slices.Sorted(maps.Keys(end)) {
			if next[part] < end[part] {
				s = append(s, part)
			}
		}
		return s
	}
	var out []readRecord
	var lastErr error // the latest fetch error (franz-go retries them)
	for len(short()) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var where []string
			for _, part := range short() {
				where = append(where, fmt.Sprintf("partition %d at %d of %d", part, next[part], end[part]))
			}
			return out, fmt.Errorf("probe: reading stopped short (%v, last fetch error %v): %v", ctx.Err(), lastErr, where)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, readRecord{partition: r.Partition, offset: r.Offset, seq: seq(r.Value)})
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
	return out, nil
}

// check holds the read records against the producer's outcomes; problems
// carries any found before.
func check(outcomes []outcome, recs []readRecord, problems []string) Verification {
	v := Verification{Problems: problems}
	bad := func(format string, args ...any) {
		if len(v.Problems) < maxProblems {
			v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
		} else if len(v.Problems) == maxProblems {
			v.Problems = append(v.Problems, "(more problems not listed)")
		}
	}
	seen := make([]int, len(outcomes))
	lastOffset := map[int32]int64{}
	lastSeq := map[int32]int{}
	for _, r := range recs {
		if prev, ok := lastOffset[r.partition]; ok && r.offset != prev+1 {
			bad("partition %d: offset %d read after %d", r.partition, r.offset, prev)
		}
		lastOffset[r.partition] = r.offset
		if r.seq < 0 {
			v.Foreign++
			continue
		}
		if r.seq >= len(outcomes) {
			bad("partition %d offset %d: record %d was never sent", r.partition, r.offset, r.seq)
			continue
		}
		v.Read++
		seen[r.seq]++
		if seen[r.seq] == 2 {
			bad("record %d read twice (again at partition %d offset %d)", r.seq, r.partition, r.offset)
		}
		if prev, ok := lastSeq[r.partition]; ok && r.seq < prev {
			bad("partition %d: record %d at offset %d after record %d: out of order", r.partition, r.seq, r.offset, prev)
		}
		lastSeq[r.partition] = r.seq
		o := outcomes[r.seq]
		switch {
		case o.done && o.err == nil:
			if o.partition != r.partition || o.offset != r.offset {
				bad("record %d acknowledged at partition %d offset %d, read at partition %d offset %d", r.seq, o.partition, o.offset, r.partition, r.offset)
			} else if seen[r.seq] == 1 {
				v.AckedFound++
			}
		case seen[r.seq] == 1:
			v.UnackedRead++
		}
	}
	for seq, o := range outcomes {
		if o.done && o.err == nil && seen[seq] == 0 {
			bad("acknowledged record %d (partition %d offset %d) lost", seq, o.partition, o.offset)
		}
	}
	return v
}
