package main

// The node logs of a bench run: every node's output goes, a whole line at
// a time, to --out/logs/<mode>-<partitions>.log, kept for every run, failed
// or not. At the bench's default level (info) a broker logs one "hosting
// partition" line per replica it creates or opens: at 1M partitions
// millions of lines that say nothing about the timings, so the sink counts
// them instead of writing them (--log-partition-lines keeps them). It also
// reads each broker's "metadata image visible late" lines (an image visible
// more than 5 ms after its leader's append, with each stage's time) and
// the run's note summarizes them (p50 and p99 of each stage; a restarted or
// new broker's catch-up shows as images visible late too, so the maximum
// would say how long it was down).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// benchLogSink is a run's node log file behind devCluster's line writer
// (each Write is one whole line).
type benchLogSink struct {
	w              io.Writer
	partitionLines bool

	mu      sync.Mutex
	dropped int
	late    []lateImage
}

// lateImage is one "metadata image visible late" line's stage times.
type lateImage struct {
	Visible   float64 `json:"append_to_visible_ms"`
	Delivered float64 `json:"append_to_delivered_ms"`
	Queued    float64 `json:"queued_ms"`
	Apply     float64 `json:"apply_ms"`
}

var (
	hostingPartition = []byte("\thosting partition\t")
	visibleLate      = []byte("\tmetadata image visible late\t")
)

func (s *benchLogSink) Write(line []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.partitionLines && bytes.Contains(line, hostingPartition) {
		s.dropped++
		return len(line), nil
	}
	if i := bytes.Index(line, visibleLate); i >= 0 {
		var l lateImage
		if err := json.Unmarshal(bytes.TrimSpace(line[i+len(visibleLate):]), &l); err == nil {
			s.late = append(s.late, l)
		}
	}
	return s.w.Write(line)
}

// summary is the note a run gets about its logs ("" when there is nothing
// to say).
func (s *benchLogSink) summary(file string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	if len(s.late) > 0 {
		stage := func(f func(lateImage) float64) string {
			vs := make([]float64, len(s.late))
			for i, l := range s.late {
				vs[i] = f(l)
			}
			slices.Sort(vs)
			return fmt.Sprintf("p50 %.1f, p99 %.1f ms", quantile(vs, 0.5), quantile(vs, 0.99))
		}
		parts = append(parts, fmt.Sprintf("brokers logged %d metadata images visible late (over 5 ms after the leader's append, a restarted or new broker's catch-up included; %s): append to visible %s; to the delivery of the commit %s; queued behind the previous publish %s; decoding and applying %s",
			len(s.late), file, stage(func(l lateImage) float64 { return l.Visible }), stage(func(l lateImage) float64 { return l.Delivered }),
			stage(func(l lateImage) float64 { return l.Queued }), stage(func(l lateImage) float64 { return l.Apply })))
	}
	if s.dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d per-replica \"hosting partition\" lines counted, not written (--log-partition-lines keeps them)", s.dropped))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ". "
}
