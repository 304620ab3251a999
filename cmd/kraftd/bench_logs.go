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
// would say how long it was down). And it notes when each node last logged
// that it may exit a controlled shutdown (mayExitAt), the controlled
// shutdown scenario's "until it may exit".

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchLogSink is a run's node log file behind devCluster's line writer
// (each Write is one whole line).
type benchLogSink struct {
	w              io.Writer
	partitionLines bool

	mu      sync.Mutex
	dropped int
	late    []lateImage
	// mayExit is, by node id, the time in the node's last line saying it
	// may exit a controlled shutdown (isMayExit).
	mayExit map[int]time.Time
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
	if isMayExit(line) {
		if id, at, ok := nodeLineTime(line); ok {
			if s.mayExit == nil {
				s.mayExit = map[int]time.Time{}
			}
			s.mayExit[id] = at
		}
	}
	if i := bytes.Index(line, visibleLate); i >= 0 {
		var l lateImage
		if err := json.Unmarshal(bytes.TrimSpace(line[i+len(visibleLate):]), &l); err == nil {
			s.late = append(s.late, l)
		}
	}
	return s.w.Write(line)
}

// The lines that say a broker may exit its controlled shutdown. kraft: the
// lifecycle's move PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN, taken on
// the heartbeat answer with ShouldShutdown (the controller's SHUTDOWN_NOW,
// KIP-631). zk-legacy: the ControlledShutdown answer that lists no partition
// remaining (Kafka's KafkaServer.controlledShutdown returns there and the
// broker goes on to close). What follows either is the broker's own close.
var (
	brokerStateChanged = []byte("\tbroker state changed\t")
	toShuttingDown     = []byte(`"to": "SHUTTING_DOWN"`)
	zkShutdownOK       = []byte("\tcontrolled shutdown succeeded")
)

func isMayExit(line []byte) bool {
	return bytes.Contains(line, brokerStateChanged) && bytes.Contains(line, toShuttingDown) ||
		bytes.Contains(line, zkShutdownOK)
}

// nodeLineTime reads the node id and the time of a node's log line as the
// bench writes it: "[node-<id>] <ISO 8601 time, ms>\t...".
func nodeLineTime(line []byte) (int, time.Time, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("[node-"))
	if !ok {
		return 0, time.Time{}, false
	}
	idText, rest, ok := bytes.Cut(rest, []byte("] "))
	if !ok {
		return 0, time.Time{}, false
	}
	id, err := strconv.Atoi(string(idText))
	if err != nil {
		return 0, time.Time{}, false
	}
	ts, _, ok := bytes.Cut(rest, []byte("\t"))
	if !ok {
		return 0, time.Time{}, false
	}
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", string(ts))
	if err != nil {
		return 0, time.Time{}, false
	}
	return id, at, true
}

// mayExitAt is when node id last logged that it may exit a controlled
// shutdown, if that was not before since (ms resolution: the line's time
// is truncated to the millisecond, so one in since's millisecond counts).
func (s *benchLogSink) mayExitAt(id int, since time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.mayExit[id]
	if !ok || at.Before(since.Truncate(time.Millisecond)) {
		return time.Time{}, false
	}
	return at, true
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
